"""Group commit: commits that come together share a sync, and lose nothing for it.

The guarantees of ``docs/log.md`` hold per setting whatever the sharing: a commit
returns only after its records are on stable storage (a sync that started after they
were written has completed), and every writer's records stay numbered without gaps.
A machine failure cannot be staged here; a killed process can: every commit that
returned is read back after ``SIGKILL``, with each writer's lsns whole.
"""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import signal
import struct
import sys
import threading
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from sharedq.clock import retry_until
from sharedq.log import (
    GroupCommit,
    InvalidLogRequest,
    LogConfig,
    LogStream,
    RecordType,
    groupsync,
    sync_statistics,
)
from sharedq.log.groupsync import HostSync, host_files

from . import procs
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


def _waiting_for_the_syncer(thread: threading.Thread) -> bool:
    """Whether ``thread`` sleeps in ``HostSync._await``."""
    frame = sys._current_frames().get(thread.ident or 0)
    return frame is not None and frame.f_code.co_name == "_await"


def test_group_commit_is_a_checked_setting() -> None:
    assert LogConfig().group_commit is GroupCommit.HOST
    assert LogConfig(group_commit=GroupCommit.WRITER).group_commit is GroupCommit.WRITER
    with pytest.raises(InvalidLogRequest):
        LogConfig(group_commit="host")  # type: ignore[arg-type]
    assert LogConfig(group_commit_window_us=0).group_commit_window_us == 0
    for bad in (-1, 100_001, 0.5):
        with pytest.raises(InvalidLogRequest):
            LogConfig(group_commit_window_us=bad)  # type: ignore[arg-type]


def test_host_files_that_are_not_this_users_own_are_refused(host: Path, tmp_path: Path) -> None:
    # Given the host file of a file system that someone opened to others (mode 0644)
    device = 0x5E000000 + os.getpid()  # a device number no file system here has
    probe = HostSync(tmp_path, device)
    probe.close()
    probe.counters_path.chmod(0o644)
    # Then a group commit on it is refused, rather than trusted
    with pytest.raises(PermissionError):
        HostSync(tmp_path, device)


def test_commits_of_four_writers_waiting_together_share_one_sync(
    host: Path, make_stream: MakeStream
) -> None:
    stream = make_stream()
    # Given the host's syncer role held by another process (this test), which syncs
    # nothing
    lock_path, counters = host_files(os.stat(stream.root).st_dev)
    held = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        # and four writers of one stream (four servers of this process) on the file system
        writers = [stream.writer(f"QM{n}") for n in range(1, 5)]
        # and a fifth that wrote a record and asks for no sync
        idle = stream.writer("QM5")
        idle.log_event(RecordType.STATISTICS, payload="written, not committed")
        # and another process's committer active (its slot marked for the next sync)
        started, _ = struct.unpack_from("<2Q", counters.read_bytes())
        with open(counters, "r+b") as f:
            f.seek(576 + 8 * 62)
            f.write(struct.pack("<Q", started + 1))
        before = sync_statistics()
        threads = []
        for w in writers:
            w.log_event(RecordType.STATISTICS, payload="one commit")
            threads.append(threading.Thread(target=w.commit))
        for thread in threads:
            thread.start()
        # When all four commits wait for a sync
        assert retry_until(
            lambda: all(_waiting_for_the_syncer(t) for t in threads),
            timeout_s=30,
            first_pause_s=0.001,
        )
        # Then none has returned: their records are not known durable yet
        assert all(t.is_alive() for t in threads)
        assert [w.durable_lsn for w in writers] == [0, 0, 0, 0]
        assert idle.durable_lsn == 0
    finally:
        os.close(held)  # the role is free: this process's thread takes it
    for thread in threads:
        thread.join()
    # and once the role passed to this process, one sync made them all durable
    after = sync_statistics()
    assert after.commits - before.commits == 4
    assert after.syncs - before.syncs == 1
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


def test_writers_opened_and_closed_while_another_process_serves_keep_one_thread_waiting(
    host: Path, make_stream: MakeStream
) -> None:
    stream = make_stream()
    # Given the host's syncer role held by another process (this test)
    lock_path, _ = host_files(os.stat(stream.root).st_dev)
    held = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(held, fcntl.LOCK_EX)
    before = set(threading.enumerate())  # (threads of earlier tests' groups, ending)
    try:
        # When writers of this process open and close, again and again (the last to
        # close each time takes the process out of the role, the next puts it back in)
        for n in range(5):
            with stream.writer(f"QM{n}") as w:
                w.log_event(RecordType.STATISTICS, payload=n)
        # Then one thread of the process waits for the role, not one per writer
        waiting = [
            t for t in set(threading.enumerate()) - before if t.name.startswith("sharedq-syncer-")
        ]
        assert len(waiting) <= 1
    finally:
        os.close(held)
    # and once the role is free and a writer opens, this process serves
    with stream.writer("QM9") as w:
        group = groupsync.host_sync(stream.root)
        assert group is not None
        assert retry_until(lambda: group.serving, timeout_s=30, first_pause_s=0.001)
        w.log_event(RecordType.STATISTICS, payload="last")
        w.commit()
