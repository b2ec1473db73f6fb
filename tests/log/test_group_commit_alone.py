"""Group commit of a committer alone: a commit that finds no other committer active
on the host (no other process's slot marked, no other thread of its process) syncs its
own segment; one that finds another active waits for the host's syncer, whose
``syncfs`` covers every writer of the process.

The rules of ``docs/log.md`` hold either way: a commit that waits for the syncer is
covered for every writer of the process; a commit alone covers its own records only.
The host directory is each test's own (``groupsync.HOST_DIR``): no other process of
the machine takes part.  The counter file's layout (version 6): little-endian 8-byte
cells, ``started`` at byte 0, each slot's activity mark at 576 + 8 * slot.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sharedq.log import RecordType, groupsync, sync_statistics
from sharedq.log.groupsync import HostSync, host_files, host_sync

from .helpers import MakeStream


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A host directory of the test's own; the groups made meanwhile are closed after."""
    directory = tmp_path / "host"
    directory.mkdir()
    groups: dict[int, HostSync] = {}
    monkeypatch.setattr(groupsync, "HOST_DIR", directory)
    monkeypatch.setattr(groupsync, "STALL_S", 600.0)
    monkeypatch.setattr(groupsync, "_groups", groups)
    yield directory
    for group in groups.values():
        group.close()


def _mark(counters: Path, slot: int) -> int:
    started, *_ = struct.unpack_from("<Q", counters.read_bytes())
    (mark,) = struct.unpack_from("<Q", counters.read_bytes(), 576 + 8 * slot)
    return int(mark - started)


def test_a_commit_that_finds_another_committer_active_covers_every_writer(
    host: Path, make_stream: MakeStream
) -> None:
    stream = make_stream()
    first, second, idle = (stream.writer(name) for name in ("QM1", "QM2", "QM3"))
    assert host_sync(stream.root) is not None
    committed, go_on = threading.Event(), threading.Event()

    def commit_and_stay() -> None:
        first.commit()
        committed.set()
        go_on.wait()

    # Given a commit by another thread of the process just before (a thread that goes
    # on: one that ended leaves its slot to the next)
    first.log_event(RecordType.STATISTICS, payload="first")
    other = threading.Thread(target=commit_and_stay)
    other.start()
    try:
        committed.wait()
        assert first.durable_lsn == first.last_lsn
        # and a record of a third writer, written and never committed
        idle.log_event(RecordType.STATISTICS, payload="written, not committed")
        assert idle.durable_lsn == 0
        before = sync_statistics()
        # When this thread commits its own writer's record
        second.log_event(RecordType.STATISTICS, payload="second")
        second.commit()
        # Then it waited for the host's syncer (this process's thread), whose syncfs
        # covered the third writer's record too
        assert sync_statistics().syncs - before.syncs == 1
        assert second.durable_lsn == 1
        assert idle.durable_lsn == 1
    finally:
        go_on.set()
        other.join()
        for w in (first, second, idle):
            w.close()


def test_a_commit_that_finds_another_process_active_waits_for_the_syncer(
    host: Path, make_stream: MakeStream
) -> None:
    stream = make_stream()
    writer, idle = stream.writer("QM1"), stream.writer("QM2")
    group = host_sync(stream.root)
    assert group is not None
    _, counters = host_files(group.device)
    try:
        idle.log_event(RecordType.STATISTICS, payload="written, not committed")
        # Given another process's committer active (its slot marked for the next sync)
        started, *_ = struct.unpack_from("<Q", counters.read_bytes())
        with open(counters, "r+b") as f:
            f.seek(576 + 8 * 62)
            f.write(struct.pack("<Q", started + 1))
        # When this process commits
        writer.log_event(RecordType.STATISTICS, payload="mine")
        writer.commit()
        # Then a syncfs covered every writer of the process
        assert writer.durable_lsn == 1
        assert idle.durable_lsn == 1
        assert struct.unpack_from("<2Q", counters.read_bytes()) == (started + 1, started + 1)
    finally:
        for w in (writer, idle):
            w.close()


def test_a_commit_alone_makes_its_own_records_durable(host: Path, make_stream: MakeStream) -> None:
    stream = make_stream()
    idle = stream.writer("QM2")
    idle.log_event(RecordType.STATISTICS, payload="written, not committed")
    with stream.writer("QM1") as w:
        for n in range(1, 6):
            w.log_event(RecordType.STATISTICS, payload={"n": n})
            w.commit()
            assert w.durable_lsn == n
    # (its own segment synced, not the file system: the other writer's record is not
    # counted as durable)
    assert idle.durable_lsn == 0
    idle.close()
    assert [r.lsn for r in stream.records(writers={"QM1"})] == [1, 2, 3, 4, 5]


def test_a_committer_alone_stays_marked_active_for_the_others(
    host: Path, make_stream: MakeStream
) -> None:
    stream = make_stream()
    group = host_sync(stream.root)
    assert group is not None
    _, counters = host_files(group.device)
    with stream.writer("QM1") as w:
        for n in range(1, 6):
            # Given commits alone, one after another
            w.log_event(RecordType.STATISTICS, payload={"n": n})
            w.commit()
            assert w.durable_lsn == n
            # Then after each the host's counters mark this process's slot as active:
            # the sync after the last one numbered, which another committer takes for
            # active
            assert _mark(counters, group.thread_slot()) == 1
