"""Duplex durability with a replicated logging structure: ``duplex_ms=N,replicas=R``.

A Redis replica is copied asynchronously.  A logging structure that fails over to a
replica which had not yet received the last pushes keeps ``@open`` and loses those
commits' records without a word, if a machine crash took the segment's unsynced tail
as well.  With ``replicas=R`` each push waits (``WAIT``) until ``R`` replicas hold it,
and a push they do not acknowledge makes the commit sync to disk instead.

These tests run a real primary and replica, stop the replica for real (``SIGSTOP``),
SIGKILL the writer, play the machine crash (``tests.log.test_duplex.crash_machine``),
SIGKILL the primary, and fail over: the replica is promoted and the logging
structure's address is given to a server that copied it (as a virtual address or a
DNS name would move).  Then they count what a reader finds.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from sharedq.log import (
    Durability,
    DurabilityMode,
    GroupCommit,
    InvalidLogRequest,
    LogConfig,
    LogStream,
    RecordType,
    logging_structure,
)
from sharedq.testing.redis_server import RedisServer
from tests.log.test_duplex import NAME, WRITER, crash_machine

#: A child that opens a duplex writer with the durability it is given, commits
#: ``count`` records, asking the test to stop the replica before record ``stop_at``,
#: prints its durable and last lsn, and SIGKILLs itself.
_CHILD = textwrap.dedent(
    """
    import json, os, signal, sys, time
    from pathlib import Path
    from sharedq.log import Durability, GroupCommit, LogConfig, LogStream, RecordType
    from sharedq.log import logging_structure
    root, url, boot, durability, count, stop_at, control = sys.argv[1:8]
    logging_structure.BOOT_ID_FILE = Path(boot)
    config = LogConfig(durability=Durability.parse(durability), group_commit=GroupCommit.WRITER)
    stream = LogStream(root, name="S1.LOG", config=config, logging_structure=url)
    writer = stream.writer("W1")
    for n in range(int(count)):
        if n == int(stop_at):
            asked = Path(control, "stop-replica")
            asked.write_text("")
            while asked.exists():
                time.sleep(0.01)
        writer.append(RecordType.PUT, op=1, seq=n + 1, entry_id=(n + 1).to_bytes(12, "big"),
                      list_number=0, key=b"k" * 16, data=b"m%06d" % n, commit=True)
    print(json.dumps({"durable": writer.durable_lsn, "last": writer.last_lsn}), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


#: A primary sends a replica its first copy at once (Redis waits 5 s by default, for
#: other replicas to share the transfer).
_NO_DELAY = ["--repl-diskless-sync-delay", "0"]


def _expected(count: int) -> list[bytes]:
    return [b"m%06d" % n for n in range(count)]


def _payloads(stream: LogStream) -> list[bytes]:
    return [r.data for r in stream.records() if r.record_type is RecordType.PUT and r.data]


def _info(server: RedisServer) -> dict[str, object]:
    info = server.command("INFO", "replication")
    assert isinstance(info, dict)
    return info


def _until(what: Callable[[], bool], why: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline, why
        time.sleep(0.02)


def _linked(replica: RedisServer) -> bool:
    info = _info(replica)
    return info.get("master_link_status") == "up" and not info.get("master_sync_in_progress")


def _acknowledged(primary: RedisServer) -> bool:
    """A write on the primary is acknowledged by its replica (it is online)."""
    client = redis.Redis.from_url(primary.url)
    try:
        client.set("sharedq:test:ping", 1)
        return bool(client.wait(1, 1000) == 1)
    finally:
        client.delete("sharedq:test:ping")
        client.close()


@pytest.fixture
def pair(redis_servers: Callable[..., RedisServer]) -> Iterator[tuple[RedisServer, RedisServer]]:
    """A primary and its replica, linked; the replica let go again if a test stopped it."""
    primary = redis_servers(_NO_DELAY)
    replica = redis_servers([*_NO_DELAY, "--replicaof", "127.0.0.1", str(primary.port)])
    _until(lambda: _linked(replica), "the replica never linked to its primary")
    _until(lambda: _acknowledged(primary), "the replica never acknowledged a write")
    yield primary, replica
    if replica.process is not None and replica.process.poll() is None:
        replica.process.send_signal(signal.SIGCONT)


def cut_off(primary: RedisServer, replica: RedisServer) -> None:
    """The replica receives nothing more from the primary: stopped (``SIGSTOP``), so
    that it cannot link again, and its link closed by the primary, so that nothing
    reaches even its socket's buffer."""
    assert replica.process is not None
    replica.process.send_signal(signal.SIGSTOP)
    primary.command("CLIENT", "KILL", "TYPE", "replica")


def run_child(
    root: Path, url: str, boot: Path, durability: str, count: int, stop_at: int,
    pair: tuple[RedisServer, RedisServer],
) -> dict[str, int]:  # fmt: skip
    """Run the child to its SIGKILL, cutting the replica off when it asks."""
    control = root.parent / "control"
    control.mkdir(exist_ok=True)
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(root), url, str(boot), durability, str(count),
         str(stop_at), str(control)],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while child.poll() is None and time.monotonic() < deadline:
        asked = control / "stop-replica"
        if asked.exists():
            cut_off(*pair)
            asked.unlink()
        time.sleep(0.01)
    out, _ = child.communicate(timeout=30)
    assert child.returncode == -9, "the child should have died by SIGKILL"
    return dict(json.loads(out.strip().splitlines()[-1]))


def fail_over(primary: RedisServer, replica: RedisServer) -> None:
    """The primary is gone for good (SIGKILLed, it kept nothing); the replica, let go
    if it was stopped, becomes the primary, and the logging structure's address moves
    to it: a new server there copies it whole and is promoted in its turn."""
    primary.kill()
    assert replica.process is not None
    replica.process.send_signal(signal.SIGCONT)
    replica.command("REPLICAOF", "NO", "ONE")
    primary.args = [*_NO_DELAY, "--replicaof", "127.0.0.1", str(replica.port)]
    primary.start()
    _until(lambda: _linked(primary), "the new server at the old address never copied")
    primary.command("REPLICAOF", "NO", "ONE")


def test_a_failover_to_a_replica_keeps_every_pushed_commit(
    tmp_path: Path, boot: Path, pair: tuple[RedisServer, RedisServer]
) -> None:
    """Every commit only pushed (nothing synced), then the machine crashes and the
    logging structure's primary dies with it: the replica has every record."""
    primary, replica = pair
    root = tmp_path / "log"
    seen = run_child(root, primary.url, boot, "duplex_ms=600000,replicas=1", 60, -1, pair)
    assert seen == {"durable": 0, "last": 60}  # every commit pushed, none synced
    assert crash_machine(root, seen["durable"], boot) == 0
    fail_over(primary, replica)
    with LogStream(root, name=NAME) as stream:  # a peer reading: copies back
        assert _payloads(stream) == _expected(60)
        assert stream.check().whole


def test_a_push_no_replica_acknowledges_syncs_to_disk_so_a_failover_loses_nothing(
    tmp_path: Path, boot: Path, pair: tuple[RedisServer, RedisServer]
) -> None:
    """The replica is cut off from the primary after 40 commits.  Under
    ``replicas=1`` the next commits are not acknowledged, so they sync to disk; the
    machine then crashes, the primary dies before the replica catches up, and the
    replica becomes the logging structure: it lacks the last 40 records, which the
    segment has.  (Without the wait, those commits would have returned on the
    primary's word alone: not on disk, not on the replica, lost without a gap.)"""
    primary, replica = pair
    root = tmp_path / "log"
    seen = run_child(root, primary.url, boot, "duplex_ms=600000,replicas=1", 80, 40, pair)
    assert seen == {"durable": 80, "last": 80}  # from the 41st on, each commit synced
    crash_machine(root, seen["durable"], boot)
    fail_over(primary, replica)
    (key,) = redis.Redis.from_url(primary.url).keys("sharedq:logging:*")
    assert redis.Redis.from_url(primary.url).zcard(key) == 41  # @open and the first 40
    with LogStream(root, name=NAME) as stream:
        assert _payloads(stream) == _expected(80)
        assert stream.check().whole


def test_pushes_resume_once_the_replica_acknowledges_again(
    tmp_path: Path, boot: Path, pair: tuple[RedisServer, RedisServer],
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    primary, replica = pair
    monkeypatch.setattr("sharedq.log.duplex.RETRY_S", 0.05)
    config = LogConfig(
        durability=Durability.duplex(600_000, replicas=1), group_commit=GroupCommit.WRITER
    )
    seen = redis.Redis.from_url(replica.url)
    with LogStream(tmp_path / "log", name=NAME, config=config,
                   logging_structure=primary.url) as stream:  # fmt: skip
        writer = stream.writer(WRITER)
        writer.append(RecordType.COMMIT, payload={"n": 1}, commit=True)
        assert writer.durable_lsn == 0  # pushed, and on the replica when commit returned
        (key,) = seen.keys("sharedq:logging:*")
        assert seen.zrangebyscore(key, 1, 1) != []
        cut_off(primary, replica)
        try:
            writer.append(RecordType.COMMIT, payload={"n": 2}, commit=True)
            assert writer.durable_lsn == 2  # not acknowledged: synced instead
        finally:
            replica.process.send_signal(signal.SIGCONT)
        assert any("0 of the 1 replica" in r.getMessage() for r in caplog.records)
        _until(lambda: _linked(replica), "the replica never came back")
        time.sleep(0.1)  # past the retry interval
        for n in range(3, 6):
            writer.append(RecordType.COMMIT, payload={"n": n}, commit=True)
        assert writer.durable_lsn < 5  # pushing again
        assert seen.zrangebyscore(key, 5, 5) != []  # and the replica had the last
        writer.close()


def test_replica_settings_and_warnings(
    tmp_path: Path, pair: tuple[RedisServer, RedisServer], caplog: pytest.LogCaptureFixture
) -> None:
    primary, _ = pair
    parsed = Durability.parse("duplex_ms=100, replicas=2")
    assert parsed == Durability.duplex(100, replicas=2) and parsed.replicas == 2
    assert str(parsed) == "duplex_ms=100,replicas=2"
    assert Durability.parse(str(parsed)) == parsed
    assert Durability.parse("duplex_ms=100").replicas == 0
    for bad in (-1, True, "1"):
        with pytest.raises(InvalidLogRequest, match="replicas"):
            Durability.duplex(100, replicas=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidLogRequest, match="only to duplex"):
        Durability(DurabilityMode.INTERVAL, 100, 1)
    with pytest.raises(InvalidLogRequest, match="duplex_ms=N,replicas=R"):
        Durability.parse("duplex_ms=100,replicas=many")
    caplog.set_level(logging.WARNING, logger="sharedq.log.duplex")
    for durability, warned in (
        (Durability.duplex(600_000), "do not wait for them"),
        (Durability.duplex(600_000, replicas=2), "1 replica(s) connected, 2 asked"),
    ):
        caplog.clear()
        config = LogConfig(durability=durability, group_commit=GroupCommit.WRITER)
        with LogStream(tmp_path / str(durability), name=NAME, config=config,
                       logging_structure=primary.url) as stream:  # fmt: skip
            stream.writer(WRITER).close()
        assert any(warned in r.getMessage() for r in caplog.records), durability
    assert logging_structure.REPLICA_WAIT_MS > 0
