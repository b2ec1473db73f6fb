"""Group commit, waiting: a commit that waits for the host's syncer is covered only by
a sync numbered after it read ``started``; it never waits forever, and a failure the
syncer counts breaks the group.

The syncer is this test: it holds the host's syncer lock (an ``flock`` of its own open
file, which conflicts with the group's standby thread as another process's does), and
numbers and completes syncs in the host's counter file as a syncer does.  A device
number no file system here has keeps the files this test's own.  The layout (version
6): little-endian 8-byte cells, ``started`` at byte 0, ``done`` at 8, ``failures`` at
16, each slot's wanted sync at 64 + 8 * slot, and each slot's owner (a process id, 4
bytes) at 3072 + 4 * slot.
"""

from __future__ import annotations

import fcntl
import os
import struct
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sharedq.clock import retry_until
from sharedq.log import groupsync, sync_statistics
from sharedq.log.groupsync import HostSync, host_files

_CELL = struct.Struct("<Q")


class _OtherProcess:
    """The host files of a group, used as another process's syncer would."""

    def __init__(self, device: int) -> None:
        lock_path, self.counters = host_files(device)
        self.lock = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        self.lock_path = lock_path

    def take_role(self) -> None:
        fcntl.flock(self.lock, fcntl.LOCK_EX)

    def let_go(self) -> None:
        fcntl.flock(self.lock, fcntl.LOCK_UN)

    def cell(self, offset: int) -> int:
        value: int = _CELL.unpack_from(self.counters.read_bytes(), offset)[0]
        return value

    def set_cell(self, offset: int, value: int) -> None:
        with open(self.counters, "r+b") as f:
            f.seek(offset)
            f.write(_CELL.pack(value))

    def slot_of(self, pid: int) -> int:
        """The one slot process ``pid`` claimed (each slot's owner: 4 bytes at 3072)."""
        owners = struct.unpack_from("<64I", self.counters.read_bytes(), 3072)
        (slot,) = (n for n, owner in enumerate(owners) if owner == pid)
        return slot

    def started_done(self) -> tuple[int, int]:
        return self.cell(0), self.cell(8)

    def record(self, *, started: int | None = None, done: int | None = None) -> None:
        if started is not None:
            self.set_cell(0, started)
        if done is not None:
            self.set_cell(8, done)


@pytest.fixture
def group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[HostSync, _OtherProcess]]:
    monkeypatch.setattr(groupsync, "HOST_DIR", tmp_path)
    monkeypatch.setattr(groupsync, "STALL_S", 600.0)
    device = 0x5F000000 + os.getpid()
    # Given another process serving as the host's syncer (before this one's thread)
    other = _OtherProcess(device)
    other.take_role()
    group = HostSync(tmp_path, device)
    try:
        yield group, other
    finally:
        group.close()
        os.close(other.lock)


def _waiting(thread: threading.Thread) -> bool:
    """Whether ``thread`` sleeps for the syncer (in ``HostSync._await``)."""
    frame = sys._current_frames().get(thread.ident or 0)
    return frame is not None and frame.f_code.co_name == "_await"


def _commit_in_thread(group: HostSync) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def commit() -> None:
        try:
            group.sync(0.0)
        except BaseException as error:  # reported by the test
            errors.append(error)

    thread = threading.Thread(target=commit)
    thread.start()
    return thread, errors


@pytest.mark.parametrize("arrives", ["before the sync is numbered", "after"])
def test_a_waiting_commit_is_covered_only_by_a_sync_numbered_after_it_came(
    group: tuple[HostSync, _OtherProcess], arrives: str
) -> None:
    ours, other = group
    started, _ = other.started_done()
    if arrives == "after":  # the syncer has numbered its sync already
        other.record(started=started + 1)
    before = sync_statistics()
    # When a commit comes in and waits
    thread, errors = _commit_in_thread(ours)
    assert retry_until(lambda: _waiting(thread), timeout_s=30, first_pause_s=0.001)
    # (it asked, in its slot, for the sync after the last one numbered)
    want = other.cell(64 + 8 * other.slot_of(os.getpid()))
    if arrives == "after":
        assert want == started + 2
    else:
        assert want == started + 1
        other.record(started=started + 1)
    # and the syncer completes that sync
    other.record(done=started + 1)
    if arrives == "after":
        # Then a commit that came after it was numbered still waits, for the next
        assert not errors
        assert thread.is_alive()
        # which this process's thread runs once the role is free
        other.let_go()
        thread.join()
        assert errors == []
        assert sync_statistics().syncs - before.syncs == 1
        assert other.started_done() == (started + 2, started + 2)
    else:
        # Then one that came before was covered, without a sync of its own
        thread.join()
        assert errors == []
        assert sync_statistics().syncs - before.syncs == 0
        assert other.started_done() == (started + 1, started + 1)


def test_the_syncer_role_passes_to_a_waiting_process_when_it_is_let_go(
    group: tuple[HostSync, _OtherProcess],
) -> None:
    ours, other = group
    started, _ = other.started_done()
    before = sync_statistics()
    thread, errors = _commit_in_thread(ours)
    assert retry_until(lambda: _waiting(thread), timeout_s=30, first_pause_s=0.001)
    # When the syncer lets go of its role with nothing synced (as when it is killed)
    other.let_go()
    thread.join()
    # Then this process's thread took the role and synced for the commit
    assert errors == []
    assert ours.serving
    assert other.cell(24) == os.getpid()
    assert sync_statistics().syncs - before.syncs == 1
    assert other.started_done() == (started + 1, started + 1)


def test_a_commit_whose_syncer_makes_no_progress_syncs_for_itself(
    group: tuple[HostSync, _OtherProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, other = group
    # Given a syncer that holds its role and syncs nothing (stopped, or wedged)
    monkeypatch.setattr(groupsync, "STALL_S", 0.05)
    started, done = other.started_done()
    before = sync_statistics()
    # When a commit waits for it
    ours.sync(0.0)
    # Then it gave up waiting and synced for itself
    assert sync_statistics().syncs - before.syncs == 1
    assert other.started_done() == (started, done)
    # and the next commits of the process, while nothing moves, do so at once
    monkeypatch.setattr(groupsync, "STALL_S", 600.0)
    ours.sync(0.0)
    assert sync_statistics().syncs - before.syncs == 2
    # until the syncer makes progress again: then they wait for it
    other.record(started=started + 1, done=started + 1)
    thread, errors = _commit_in_thread(ours)
    assert retry_until(lambda: _waiting(thread), timeout_s=30, first_pause_s=0.001)
    other.let_go()
    thread.join()
    assert errors == []
    assert other.started_done() == (started + 2, started + 2)


def test_a_failure_the_syncer_counts_breaks_the_group(
    group: tuple[HostSync, _OtherProcess],
) -> None:
    ours, other = group
    thread, errors = _commit_in_thread(ours)
    assert retry_until(lambda: _waiting(thread), timeout_s=30, first_pause_s=0.001)
    # When the syncer's syncfs fails (it counts the failure, never the sync as done)
    other.set_cell(16, other.cell(16) + 1)
    thread.join()
    # Then the waiting commit fails
    assert len(errors) == 1 and isinstance(errors[0], OSError)
    # and so does every later one of this process: nothing since is known durable
    with pytest.raises(OSError):
        ours.sync(0.0)
    assert ours.failure is not None
