"""Group commit, queued: a commit that waits for another process's sync is covered by
it only if it took its ticket before that sync was numbered; otherwise it leads the
next one itself.

The other process is this test: it holds the host's leader lock (an ``flock`` of its
own open file, which conflicts with the group's as another process's does) and
numbers and completes its sync in the host's counter file (little-endian 8-byte
``started`` and ``done`` at the file's start), as a leader does.  A device number no
file system here has keeps the files this test's own.
"""

from __future__ import annotations

import fcntl
import os
import platform
import struct
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sharedq.clock import retry_until
from sharedq.log import sync_statistics
from sharedq.log.groupsync import HostSync

_STARTED_DONE = struct.Struct("<2Q")


class _OtherProcess:
    """The host files of a group, used as another process's leader would."""

    def __init__(self, group: HostSync) -> None:
        self.lock = open(group.lock_path, "rb")  # noqa: SIM115 - closed by the fixture
        self.counters = group.lock_path.with_suffix(".counters")

    def take_lock(self) -> None:
        fcntl.flock(self.lock, fcntl.LOCK_EX)

    def let_go(self) -> None:
        fcntl.flock(self.lock, fcntl.LOCK_UN)

    def started_done(self) -> tuple[int, int]:
        started, done = _STARTED_DONE.unpack_from(self.counters.read_bytes())
        return started, done

    def record(self, *, started: int | None = None, done: int | None = None) -> None:
        now_started, now_done = self.started_done()
        with open(self.counters, "r+b") as f:
            f.write(_STARTED_DONE.pack(started or now_started, done or now_done))


@pytest.fixture
def group(tmp_path: Path) -> Iterator[tuple[HostSync, _OtherProcess]]:
    device = 0x5F000000 + os.getpid()
    group = HostSync(tmp_path, device)
    other = _OtherProcess(group)
    try:
        yield group, other
    finally:
        other.lock.close()
        group.close()
        group.lock_path.unlink()
        other.counters.unlink()


def _queued(thread: threading.Thread) -> bool:
    """Whether ``thread`` waits for the leader lock (in ``HostSync._lead``)."""
    frame = sys._current_frames().get(thread.ident or 0)
    return frame is not None and frame.f_code.co_name == "_lead"


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
def test_a_queued_commit_is_covered_only_by_a_sync_numbered_after_its_ticket(
    group: tuple[HostSync, _OtherProcess], arrives: str
) -> None:
    ours, other = group
    # Given another process holding the leader lock
    other.take_lock()
    started, _ = other.started_done()
    if arrives == "after":  # and, in one case, having numbered its sync already
        other.record(started=started + 1)
    before = sync_statistics()
    # When a commit comes in and queues
    thread, errors = _commit_in_thread(ours)
    assert retry_until(lambda: _queued(thread), timeout_s=30, first_pause_s=0.001)
    if arrives != "after":
        other.record(started=started + 1)
    # Then it waits while that sync runs
    assert thread.is_alive()
    # and once the sync is done and the lock let go
    other.record(done=started + 1)
    other.let_go()
    thread.join()
    assert errors == []
    syncs = sync_statistics().syncs - before.syncs
    if arrives == "after":
        # a commit that took its ticket after the sync was numbered ran one of its own
        assert syncs == 1
        assert other.started_done() == (started + 2, started + 2)
    else:
        # one that took it before was covered, without a sync of its own
        assert syncs == 0
        assert other.started_done() == (started + 1, started + 1)


def test_a_queued_commit_leads_once_the_lock_is_let_go_with_nothing_synced(
    group: tuple[HostSync, _OtherProcess],
) -> None:
    # Given the leader lock held by another process (that will sync nothing: killed)
    ours, other = group
    other.take_lock()
    started, _ = other.started_done()
    before = sync_statistics()
    thread, errors = _commit_in_thread(ours)
    assert retry_until(lambda: _queued(thread), timeout_s=30, first_pause_s=0.001)
    # When the lock is let go
    other.let_go()
    thread.join()
    # Then the commit found the lock free at its next look and synced itself
    assert errors == []
    assert sync_statistics().syncs - before.syncs == 1
    assert other.started_done() == (started + 1, started + 1)


#: Where the counter file keeps its committers' asleep marks, a byte each (after the
#: futex words at 1024): the file's layout, version 5.
_SLEEPER_MARKS = slice(1024 + 64, 1024 + 64 + 65)


@pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64", "aarch64", "arm64", "riscv64"),
    reason="committers sleep on futex words (and mark themselves asleep) only where "
    "the futex system call's number is known",
)
def test_a_mark_left_by_a_committer_killed_in_its_sleep_is_cleared_by_the_next_release(
    group: tuple[HostSync, _OtherProcess],
) -> None:
    ours, other = group
    # Given the mark of a committer killed while it slept queued for the leader lock
    with open(other.counters, "r+b") as f:
        f.seek(_SLEEPER_MARKS.start + 28)
        f.write(b"\x01")
    # When a commit leads a sync and lets go of the lock
    ours.sync(0.0)
    # Then no mark is left to make every later release on the host a wake-up call
    assert other.counters.read_bytes()[_SLEEPER_MARKS] == bytes(65)


def test_a_committer_queued_twice_marks_itself_again_and_is_woken(
    group: tuple[HostSync, _OtherProcess],
) -> None:
    ours, other = group
    # Given a commit queued behind another process's leader lock
    other.take_lock()
    thread, errors = _commit_in_thread(ours)
    assert retry_until(lambda: _queued(thread), timeout_s=30, first_pause_s=0.001)
    # (marked asleep while it waits)
    assert retry_until(
        lambda: other.counters.read_bytes()[_SLEEPER_MARKS] != bytes(65),
        timeout_s=30,
        first_pause_s=0.001,
    )
    # When the marks are cleared, as a release that woke the sleepers clears them
    with open(other.counters, "r+b") as f:
        f.seek(_SLEEPER_MARKS.start)
        f.write(bytes(65))
    # Then the committer, still queued, marks itself again at its next look
    assert retry_until(
        lambda: other.counters.read_bytes()[_SLEEPER_MARKS] != bytes(65),
        timeout_s=30,
        first_pause_s=0.001,
    )
    # and once the lock is let go it leads and finishes, leaving no mark
    other.let_go()
    thread.join()
    assert errors == []
    assert other.counters.read_bytes()[_SLEEPER_MARKS] == bytes(65)
