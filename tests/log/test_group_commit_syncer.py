"""Group commit across processes: one syncer per host, and what happens when it stops.

Every process that logs keeps a thread waiting for the host's syncer lock; the one
that holds it syncs for every committer of the host.  These tests run real processes
on a host directory of their own (``groupsync.HOST_DIR``, so no other process of the
machine takes part) and count what the log holds afterwards with its reader: a commit
that returned is on disk whatever happened to the syncer.

The counter file's layout (version 6), as a test reads it: little-endian 8-byte cells,
``started`` at byte 0, ``done`` at 8, the syncer's process id at 24, each slot's
wanted sync at 64 + 8 * slot.
"""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import signal
import struct
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from sharedq.clock import retry_until
from sharedq.log import Durability, LogConfig, LogStream, RecordType, groupsync, sync_statistics

_CTX = multiprocessing.get_context("spawn")


def _stream(root: str, host: str, stall_s: float) -> LogStream:
    """The stream as a child opens it, on the test's own host directory."""
    groupsync.HOST_DIR = Path(host)
    groupsync.STALL_S = stall_s
    config = LogConfig(durability=Durability.every_commit(), segment_bytes=16384)
    return LogStream(root, name="S1.LOG", structure="S1", config=config)


def serve_until_killed(root: str, host: str, conn: Connection) -> None:
    """Open a writer (the process takes the syncer role, the host's first), say so, and
    stay: its thread syncs for the others."""
    stream = _stream(root, host, 600.0)
    writer = stream.writer("QS")
    group = groupsync.host_sync(Path(root))
    assert group is not None
    while not group.serving:
        time.sleep(0.001)
    conn.send(("serving", os.getpid(), writer.name))
    while True:
        time.sleep(1)


def commit_until_killed(root: str, host: str, name: str, stall_s: float, conn: Connection) -> None:
    """Commit forever; report this process's slot, then each commit that returned."""
    stream = _stream(root, host, stall_s)
    writer = stream.writer(name)
    group = groupsync.host_sync(Path(root))
    assert group is not None
    conn.send(("slot", group.thread_slot()))
    n = 0
    while True:
        n += 1
        position = writer.log_event(RecordType.STATISTICS, payload=n)
        writer.commit()
        conn.send(("acked", position.lsn))


def commit_until_told(
    root: str, host: str, name: str, start: Any, stop: Any, total: Any, conn: Connection
) -> None:
    """Commit from ``start`` until ``stop``; report the commits and syncs meanwhile."""
    stream = _stream(root, host, 600.0)
    writer = stream.writer(name)
    conn.send(("ready",))
    start.wait()
    before = sync_statistics()
    while not stop.is_set():
        writer.log_event(RecordType.STATISTICS, payload=name)
        writer.commit()
        with total.get_lock():
            total.value += 1
    after = sync_statistics()
    conn.send((after.commits - before.commits, after.syncs - before.syncs))
    writer.close()
    stream.close()


class _Child:
    """A child process and what it sent, taken by a thread as it comes."""

    def __init__(self, target: Any, *args: Any) -> None:
        receive, send = _CTX.Pipe(duplex=False)
        self.process = _CTX.Process(target=target, args=(*args, send))
        self.process.start()
        send.close()
        self.messages: list[tuple[Any, ...]] = []
        self._taker = threading.Thread(target=self._take, args=(receive,), daemon=True)
        self._taker.start()

    def _take(self, receive: Connection) -> None:
        while True:
            try:
                self.messages.append(receive.recv())
            except (EOFError, OSError):
                return

    @property
    def pid(self) -> int:
        assert self.process.pid is not None
        return self.process.pid

    def acked(self) -> list[int]:
        return [m[1] for m in list(self.messages) if m[0] == "acked"]

    def first(self, kind: str) -> tuple[Any, ...]:
        assert retry_until(
            lambda: any(m[0] == kind for m in self.messages), timeout_s=60, first_pause_s=0.01
        ), f"no {kind} from the child"
        return next(m for m in self.messages if m[0] == kind)

    def wait(self) -> None:
        self.process.join(60)
        self._taker.join(10)

    def kill(self) -> None:
        if self.process.is_alive():
            os.kill(self.pid, signal.SIGKILL)
        self.process.join()
        self._taker.join(10)


@pytest.fixture
def dirs(tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """The stream's root, the host directory, and the counter file of the root's disk."""
    root, host = tmp_path / "log", tmp_path / "host"
    host.mkdir()
    LogStream(root, name="S1.LOG", structure="S1").close()
    device = os.stat(root).st_dev
    counters = host / f"sharedq-sync-v6-{os.getuid()}-{device:x}.counters"
    yield str(root), str(host), counters


def _cells(counters: Path) -> tuple[int, ...]:
    return struct.unpack_from("<136Q", counters.read_bytes())


def _more_acks(children: list[_Child], than: dict[int, int], more: int) -> bool:
    return all(len(c.acked()) >= than[c.pid] + more for c in children)


def _records_of(root: str) -> dict[str, set[int]]:
    found: dict[str, set[int]] = defaultdict(set)
    stream = LogStream(root, name="S1.LOG", structure="S1")
    try:
        for record in stream.records():
            if record.type == RecordType.STATISTICS:
                found[record.writer].add(record.lsn)
        assert stream.check().gaps == []
    finally:
        stream.close()
    return found


def test_commits_waiting_for_a_syncer_killed_complete_through_the_next(
    dirs: tuple[str, str, Path],
) -> None:
    root, host, counters = dirs
    # Given a process serving as the host's syncer
    syncer = _Child(serve_until_killed, root, host)
    children = [syncer]
    try:
        syncer.first("serving")
        # and three processes committing through it
        committers = [_Child(commit_until_killed, root, host, f"QM{n}", 600.0) for n in (1, 2, 3)]
        children += committers
        slots = [c.first("slot")[1] for c in committers]
        assert retry_until(
            lambda: _more_acks(committers, defaultdict(int), 20), timeout_s=60, first_pause_s=0.01
        )
        # When the syncer stops, so that every committer waits for it
        os.kill(syncer.pid, signal.SIGSTOP)
        assert retry_until(
            lambda: all(_cells(counters)[8 + s] > _cells(counters)[1] for s in slots),
            timeout_s=60,
            first_pause_s=0.01,
        )
        waiting = {c.pid: len(c.acked()) for c in committers}
        # and is killed while they wait
        syncer.kill()
        # Then they complete, through a syncer of their own processes
        assert retry_until(
            lambda: _more_acks(committers, waiting, 20), timeout_s=60, first_pause_s=0.01
        )
        assert _cells(counters)[3] in {c.pid for c in committers}
    finally:
        for child in children:
            child.kill()
    # and every commit that returned is in the log
    found = _records_of(root)
    for child in committers:
        name = f"QM{committers.index(child) + 1}"
        assert set(child.acked()) <= found[name], name


def test_committers_sync_for_themselves_while_the_syncer_is_stopped(
    dirs: tuple[str, str, Path],
) -> None:
    root, host, counters = dirs
    # Given a process serving as the host's syncer, and three committing through it
    # (each waiting at most a fifth of a second for a sync that makes no progress)
    syncer = _Child(serve_until_killed, root, host)
    children = [syncer]
    try:
        syncer.first("serving")
        committers = [_Child(commit_until_killed, root, host, f"QM{n}", 0.2) for n in (1, 2, 3)]
        children += committers
        assert retry_until(
            lambda: _more_acks(committers, defaultdict(int), 20), timeout_s=60, first_pause_s=0.01
        )
        # When the syncer is stopped (it keeps the role: its lock is still held)
        os.kill(syncer.pid, signal.SIGSTOP)
        stopped = {c.pid: len(c.acked()) for c in committers}
        done_at_stop = _cells(counters)[1]
        # Then the committers go on, syncing for themselves
        assert retry_until(
            lambda: _more_acks(committers, stopped, 20), timeout_s=60, first_pause_s=0.01
        )
        assert _cells(counters)[3] == syncer.pid
        # and once it runs again, it syncs for them again
        os.kill(syncer.pid, signal.SIGCONT)
        assert retry_until(
            lambda: _cells(counters)[1] > done_at_stop + 5, timeout_s=60, first_pause_s=0.01
        )
    finally:
        for child in children:
            child.kill()
    # and every commit that returned is in the log
    found = _records_of(root)
    for n, child in enumerate(committers, start=1):
        assert set(child.acked()) <= found[f"QM{n}"]


def test_four_committing_processes_share_syncs(dirs: tuple[str, str, Path]) -> None:
    root, host, _ = dirs
    # Given four processes committing at once, each a commit at a time
    start, stop, total = _CTX.Event(), _CTX.Event(), _CTX.Value("q", 0)
    children = [
        _Child(commit_until_told, root, host, f"QM{n}", start, stop, total) for n in range(1, 5)
    ]
    try:
        for child in children:
            child.first("ready")
        start.set()
        assert retry_until(lambda: total.value >= 800, timeout_s=120, first_pause_s=0.01)
        stop.set()
        for child in children:
            child.wait()
        reports = [child.messages[1] for child in children]
    finally:
        for child in children:
            child.kill()
    # Then at most one sync was made for every two commits
    commits = sum(r[0] for r in reports)
    syncs = sum(r[1] for r in reports)
    assert commits >= 800
    assert syncs <= commits / 2, (syncs, commits)


def test_a_forked_child_does_not_keep_its_parents_syncer_role(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(groupsync, "HOST_DIR", tmp_path)
    monkeypatch.setattr(groupsync, "_groups", {})
    # Given this process serving as the host's syncer
    group = groupsync.host_sync(tmp_path)
    assert group is not None
    assert retry_until(lambda: group.serving, timeout_s=30, first_pause_s=0.001)
    # and a child forked from it, still running
    read_end, write_end = os.pipe()
    started_read, started_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: says it runs, waits until told, leaves without cleaning up
        os.close(write_end)
        os.write(started_write, b"!")
        os.read(read_end, 1)
        os._exit(0)
    os.close(read_end)
    os.close(started_write)
    try:
        assert os.read(started_read, 1) == b"!"
        os.close(started_read)
        # When the parent gives up the role
        group.stop(10.0)
        assert not group.serving
        # Then the lock is free: the child let go of its copy of the parent's descriptor
        lock = os.open(group.lock_path, os.O_RDWR)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(lock)
    finally:
        os.close(write_end)
        os.waitpid(pid, 0)
        group.close()
