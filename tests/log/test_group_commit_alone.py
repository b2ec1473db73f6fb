"""Group commit when no sync is under way: a commit alone syncs its own segment; one
that finds another committer active syncs the file system for every writer.

The path a commit takes when the host's leader lock is free (``HostSync._lead_at_once``:
its arrival and its look at the others in one update of the counters) must keep the
rules of ``docs/log.md``: a commit that another committer's activity makes lead runs a
``syncfs`` that covers every writer of the process; a commit alone covers its own
records only.
"""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path

from sharedq.log import RecordType
from sharedq.log.groupsync import host_sync

from .helpers import MakeStream


def _slot(ident: int | None) -> int:
    """The counters slot of a thread of this process (as ``HostSync.sync`` hashes it)."""
    return hash((os.getpid(), ident)) % 64


def test_a_commit_that_finds_another_committer_active_covers_every_writer(
    make_stream: MakeStream,
) -> None:
    stream = make_stream()
    first, second, idle = (stream.writer(name) for name in ("QM1", "QM2", "QM3"))
    assert host_sync(stream.root) is not None
    try:
        # Given a commit by another thread just before (its slot says it is active),
        # from a thread whose slot is not this one's
        mine = _slot(threading.get_ident())
        while True:
            first.log_event(RecordType.STATISTICS, payload="first")
            other = threading.Thread(target=first.commit)
            other.start()
            other.join()
            if _slot(other.ident) != mine:
                break
        assert first.durable_lsn == first.last_lsn
        # and a record of a third writer, written and never committed
        idle.log_event(RecordType.STATISTICS, payload="written, not committed")
        assert idle.durable_lsn == 0
        # When this thread commits its own writer's record
        second.log_event(RecordType.STATISTICS, payload="second")
        second.commit()
        # Then the sync it led (or another process's, started after it) covered the
        # third writer's record too
        assert second.durable_lsn == 1
        assert idle.durable_lsn == 1
    finally:
        for w in (first, second, idle):
            w.close()


def test_a_commit_alone_makes_its_own_records_durable(make_stream: MakeStream) -> None:
    stream = make_stream()
    with stream.writer("QM1") as w:
        for n in range(1, 6):
            w.log_event(RecordType.STATISTICS, payload={"n": n})
            w.commit()
            assert w.durable_lsn == n
    assert [r.lsn for r in stream.records()] == [1, 2, 3, 4, 5]


def test_a_committer_alone_stays_marked_active_for_the_others(make_stream: MakeStream) -> None:
    # A commit alone whose slot already holds its arrival does not write the counters
    # again (it only looks at them): the mark the others read must still be there.
    stream = make_stream()
    group = host_sync(stream.root)
    assert group is not None
    counters = Path(str(group.lock_path).removesuffix(".lock") + ".counters")
    mine = _slot(threading.get_ident())
    with stream.writer("QM1") as w:
        for n in range(1, 6):
            # Given commits alone, one after another
            w.log_event(RecordType.STATISTICS, payload={"n": n})
            w.commit()
            assert w.durable_lsn == n
            # Then after each the host's counters mark this committer as waiting for
            # the next sync, which another committer arriving takes for active (other
            # processes of this user may have numbered a sync or two since: a ticket
            # for one of the last two is active)
            # (the counters are the file's first bytes; its futex words follow them)
            started, _done, *slots = struct.unpack_from("<66Q", counters.read_bytes())
            assert started - 1 <= slots[mine] <= started + 1
