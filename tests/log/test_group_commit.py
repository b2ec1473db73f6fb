"""Group commit: commits that come together share a sync, and lose nothing for it.

The guarantees of ``docs/log.md`` hold per setting whatever the sharing: a commit
returns only after its records are on stable storage (a sync that started after they
were written has completed), and every writer's records stay numbered without gaps.
A machine failure cannot be staged here; a killed process can: every commit that
returned is read back after ``SIGKILL``, with each writer's lsns whole.
"""

from __future__ import annotations

import inspect
import multiprocessing
import os
import signal
import sys
import threading
from collections import defaultdict
from pathlib import Path

import pytest

from sharedq.clock import retry_until
from sharedq.log import (
    GroupCommit,
    InvalidLogRequest,
    LogConfig,
    LogStream,
    RecordType,
    sync_statistics,
)
from sharedq.log.groupsync import HostSync, host_sync

from . import procs
from .helpers import MakeStream

#: The line of ``HostSync.sync`` that takes the ticket: a thread past it is queued.
_TICKET_LINE = next(
    HostSync.sync.__code__.co_firstlineno + offset
    for offset, line in enumerate(inspect.getsourcelines(HostSync.sync)[0])
    if "ticket = " in line
)


def _queued_for_a_sync(thread: threading.Thread) -> bool:
    """Whether ``thread`` has its ticket and waits for a lock in ``HostSync.sync``
    (the process's) or in the ``_lead`` it calls (the host's)."""
    frame = sys._current_frames().get(thread.ident or 0)
    if frame is None:
        return False
    if frame.f_code is HostSync.sync.__code__:
        return frame.f_lineno > _TICKET_LINE
    return frame.f_code.co_name == "_lead" and frame.f_back is not None


def test_group_commit_is_a_checked_setting() -> None:
    assert LogConfig().group_commit is GroupCommit.HOST
    assert LogConfig(group_commit=GroupCommit.WRITER).group_commit is GroupCommit.WRITER
    with pytest.raises(InvalidLogRequest):
        LogConfig(group_commit="host")  # type: ignore[arg-type]
    assert LogConfig(group_commit_window_us=0).group_commit_window_us == 0
    for bad in (-1, 100_001, 0.5):
        with pytest.raises(InvalidLogRequest):
            LogConfig(group_commit_window_us=bad)  # type: ignore[arg-type]


def test_host_files_that_are_not_this_users_own_are_refused(tmp_path: Path) -> None:
    # Given the host file of a file system that someone opened to others (mode 0644)
    device = 0x5E000000 + os.getpid()  # a device number no file system here has
    probe = HostSync(tmp_path, device)
    probe.close()
    counters = probe.lock_path.with_suffix(".counters")
    counters.chmod(0o644)
    try:
        # Then a group commit on it is refused, rather than trusted
        with pytest.raises(PermissionError):
            HostSync(tmp_path, device)
    finally:
        probe.lock_path.unlink()
        counters.unlink()


def test_commits_of_four_writers_waiting_together_share_one_sync(make_stream: MakeStream) -> None:
    # Given four writers of one stream (four servers of this process) on one file system
    stream = make_stream()
    writers = [stream.writer(f"QM{n}") for n in range(1, 5)]
    # and a fifth that wrote a record and asks for no sync
    idle = stream.writer("QM5")
    idle.log_event(RecordType.STATISTICS, payload="written, not committed")
    group = host_sync(stream.root)
    assert group is not None
    # and the host's sync leader lock held, as by a sync of another process under way
    with open(group.lock_path, "rb") as held:
        import fcntl

        fcntl.flock(held, fcntl.LOCK_EX)
        before = sync_statistics()
        threads = []
        for w in writers:
            w.log_event(RecordType.STATISTICS, payload="one commit")
            threads.append(threading.Thread(target=w.commit))
        for thread in threads:
            thread.start()
        # When all four commits wait for a sync
        assert retry_until(
            lambda: all(_queued_for_a_sync(t) for t in threads), timeout_s=30, first_pause_s=0.001
        )
        # Then none has returned: their records are not known durable yet
        assert all(t.is_alive() for t in threads)
        assert [w.durable_lsn for w in writers] == [0, 0, 0, 0]
        assert idle.durable_lsn == 0
        fcntl.flock(held, fcntl.LOCK_UN)
    for thread in threads:
        thread.join()
    # and once the lock is free, one sync made them all durable (none if another
    # process's sync, started after them, got there first)
    after = sync_statistics()
    assert after.commits - before.commits == 4
    assert after.syncs - before.syncs <= 1
    assert [w.durable_lsn for w in writers] == [1, 1, 1, 1]
    # and the sync, of the whole file system, counted for the fifth writer's record too
    assert idle.durable_lsn == 1
    for w in [*writers, idle]:
        w.close()


@pytest.mark.parametrize("group_commit", [GroupCommit.HOST, GroupCommit.WRITER])
def test_every_commit_that_returned_survives_sigkill_of_concurrent_committers(
    tmp_path: Path, group_commit: GroupCommit
) -> None:
    # Given two processes committing at once: one with two writers of two threads
    # each (two servers of a process), one with a writer of two threads
    root = str(tmp_path / "log")
    LogStream(root, name="S1.LOG", structure="S1").close()
    ctx = multiprocessing.get_context("spawn")
    plan = {"A": ["QM1", "QM2"], "B": ["QM3"]}
    children = {}
    pipes = {}
    for label, names in plan.items():
        receive, send = ctx.Pipe(duplex=False)
        child = ctx.Process(
            target=procs.commit_in_threads_until_killed,
            args=(root, names, 2, group_commit.value, send),
        )
        child.start()
        children[label], pipes[label] = child, receive
    acknowledged: dict[str, dict[int, tuple[str, int]]] = defaultdict(dict)

    def take(label: str) -> None:
        while pipes[label].poll():
            try:
                writer, lsn, thread, n = pipes[label].recv()
            except EOFError:  # the child is gone and everything it sent was taken
                return
            acknowledged[writer][lsn] = (thread, n)

    while min(len(acknowledged[w]) for names in plan.values() for w in names) < 150:
        for label in plan:
            assert pipes[label].poll(30), "a committer stopped"
            take(label)
    # When both are killed mid-stream
    for child in children.values():
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
    for label, child in children.items():
        child.join()
        take(label)
    # Then every commit that returned is in the log, as it was acknowledged
    stream = LogStream(root, name="S1.LOG", structure="S1")
    found: dict[str, dict[int, tuple[str, int]]] = defaultdict(dict)
    for record in stream.records():
        if record.type == RecordType.STATISTICS:
            thread, n = record.payload_value()
            found[record.writer][record.lsn] = (thread, n)
    for writer, commits in acknowledged.items():
        assert commits.items() <= found[writer].items(), writer
        # and each writer's records are numbered without gaps
        lsns = sorted(found[writer])
        assert lsns == list(range(1, len(lsns) + 1)), writer
        # and each thread's commits are all there, in order
        per_thread: dict[str, list[int]] = defaultdict(list)
        for lsn in lsns:
            thread, n = found[writer][lsn]
            per_thread[thread].append(n)
        for numbers in per_thread.values():
            assert numbers == list(range(1, len(numbers) + 1))
    assert stream.check().gaps == []
    # and a writer reopened goes on at the next lsn
    for writer in acknowledged:
        with stream.writer(writer) as w:
            assert w.last_lsn == len(found[writer])
            position = w.log_event(RecordType.STATISTICS, payload=["after", 1], commit=True)
            assert position.lsn == len(found[writer]) + 1
    stream.close()
