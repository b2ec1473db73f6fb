"""Group commit, queued: a commit that waits for another process's sync is covered by
it only if it took its ticket before that sync was numbered; otherwise it leads the
next one itself.

Two ``HostSync`` objects on the same host files stand for two processes (each opens
the files on its own, so their ``flock``s conflict as two processes' do).  A device
number no file system here has keeps the files this test's own.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sharedq.clock import retry_until
from sharedq.log import sync_statistics
from sharedq.log.groupsync import HostSync


@pytest.fixture
def two_processes(tmp_path: Path) -> Iterator[tuple[HostSync, HostSync]]:
    device = 0x5F000000 + os.getpid()
    first, second = HostSync(tmp_path, device), HostSync(tmp_path, device)
    try:
        yield first, second
    finally:
        first.close()
        second.close()
        first.lock_path.unlink()
        first.lock_path.with_suffix(".counters").unlink()


def _asleep_in_lead(thread: threading.Thread) -> bool:
    """Whether ``thread`` is queued for the leader lock (in ``HostSync._lead``)."""
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


def _lead_by_hand(leader: HostSync) -> int:
    """Take the leader lock as ``leader``'s process would; the counters' ``started``."""
    import fcntl

    fcntl.flock(leader._leader_fd, fcntl.LOCK_EX)
    return leader._peek(None).started


@pytest.mark.parametrize("arrives", ["before the sync is numbered", "after"])
def test_a_queued_commit_is_covered_only_by_a_sync_numbered_after_its_ticket(
    two_processes: tuple[HostSync, HostSync], arrives: str
) -> None:
    leader, committer = two_processes
    # Given another process holding the leader lock
    started = _lead_by_hand(leader)
    if arrives == "after":  # and, in one case, having numbered its sync already
        leader._counters(started=started + 1)
    before = sync_statistics()
    # When a commit comes in and queues
    thread, errors = _commit_in_thread(committer)
    assert retry_until(lambda: _asleep_in_lead(thread), timeout_s=30, first_pause_s=0.001)
    if arrives != "after":
        leader._counters(started=started + 1)
    # Then it waits while that sync runs
    assert thread.is_alive()
    # and when the sync is done and the lock let go (its sleepers woken)
    leader._counters(done=started + 1)
    leader._release()
    thread.join()
    assert errors == []
    syncs = sync_statistics().syncs - before.syncs
    if arrives == "after":
        # a commit that took its ticket after the sync was numbered ran one of its own
        assert syncs == 1
        assert committer._peek(None).done == started + 2
    else:
        # one that took it before was covered, without a sync of its own
        assert syncs == 0
        assert committer._peek(None).done == started + 1


def test_a_queued_commit_leads_once_the_lock_is_let_go_without_a_wake_up(
    two_processes: tuple[HostSync, HostSync],
) -> None:
    # Given the leader lock held by a process that will let it go without waking
    # anyone (killed, or of an older version)
    leader, committer = two_processes
    import fcntl

    started = _lead_by_hand(leader)
    before = sync_statistics()
    thread, errors = _commit_in_thread(committer)
    assert retry_until(lambda: _asleep_in_lead(thread), timeout_s=30, first_pause_s=0.001)
    # When the lock is let go, nothing synced
    fcntl.flock(leader._leader_fd, fcntl.LOCK_UN)
    thread.join()
    # Then the commit found the lock free at its next look and synced itself
    assert errors == []
    assert sync_statistics().syncs - before.syncs == 1
    assert committer._peek(None).done == started + 1
