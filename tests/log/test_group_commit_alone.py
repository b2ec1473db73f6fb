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
import subprocess
import sys
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


#: Run in a fresh interpreter whose host files are its own (``HOST_DIR``), so that no
#: other process's committers (the rest of the suite) are active beside it.
_LONE_COMMITTER = """
import fcntl, sys, threading
from pathlib import Path
import sharedq.log.groupsync as groupsync
from sharedq.log import LogStream, RecordType
root = Path(sys.argv[1])
groupsync.HOST_DIR = root / "host"
groupsync.HOST_DIR.mkdir()
with LogStream(root / "log", name="S1.LOG", structure="S1") as stream:
    group = groupsync.host_sync(stream.root)
    assert group is not None
    w = stream.writer("QM1")
    first_done, held, second_done = threading.Event(), threading.Event(), threading.Event()

    def commit_twice():  # one thread: one counters slot, marked by its first commit
        w.log_event(RecordType.STATISTICS, payload={"n": 1})
        w.commit()
        first_done.set()
        held.wait()
        w.log_event(RecordType.STATISTICS, payload={"n": 2})
        w.commit()
        second_done.set()

    committer = threading.Thread(target=commit_twice)
    # Given a committer whose first commit was alone (it marks it for the next sync)
    committer.start()
    first_done.wait()
    # and the leader lock held through another open file, as another process's is
    with open(group.lock_path, "rb") as other:
        fcntl.flock(other, fcntl.LOCK_EX)
        # When the committer commits a second record
        held.set()
        returned = second_done.wait(timeout=20)
        fcntl.flock(other, fcntl.LOCK_UN)
    committer.join()
    print(returned, w.durable_lsn)
    w.close()
"""


def test_a_committer_alone_does_not_queue_behind_another_process_holding_the_lock(
    tmp_path: Path,
) -> None:
    # A lone committer already marked for the next sync syncs its own segment at once
    # (its records durable whatever the others do), without the host's leader lock,
    # which another process may hold for a background sync of its own.
    done = subprocess.run(
        [sys.executable, "-c", _LONE_COMMITTER, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # Then it returned while the lock was still held, its record durable
    assert done.stdout.split() == ["True", "2"]
