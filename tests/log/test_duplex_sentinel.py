"""A logging structure that Redis Sentinel watches: ``redis+sentinel://host:port/service``.

The writer is a child process that commits under ``duplex_ms=N,replicas=1`` through a
sentinel; midway the test SIGKILLs the logging structure's primary, the sentinel
promotes the replica, and the old primary comes back empty as the new one's replica
(the sentinel tells it to).  The writer follows by itself: the commits that found the
primary gone synced, then pushes resumed on the promoted one.  Then the machine
crashes (the writer SIGKILLed, its segment cut after its last sync, a new boot id)
and a reader copies back through the sentinel: every committed record, once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from sharedq.log import InvalidLogRequest, LogStream, RecordType, logging_structure
from sharedq.testing.redis_server import RedisSentinel, RedisServer
from tests.log.test_duplex import NAME, crash_machine

_NO_DELAY = ["--repl-diskless-sync-delay", "0"]

#: Commits ``first`` records, asks the test for a failover and waits for it, then
#: commits ``then`` more, a little apart so that pushes resume; prints its lsns and
#: the pushes it made after the failover; SIGKILLs itself.
_CHILD = textwrap.dedent(
    """
    import json, os, signal, sys, time
    from pathlib import Path
    from sharedq.log import Durability, GroupCommit, LogConfig, LogStream, RecordType
    from sharedq.log import duplex, logging_structure
    root, url, boot, first, then, control = sys.argv[1:7]
    logging_structure.BOOT_ID_FILE = Path(boot)
    duplex.RETRY_S = 0.05
    config = LogConfig(durability=Durability.duplex(600_000, replicas=1),
                       group_commit=GroupCommit.WRITER)
    stream = LogStream(root, name="S1.LOG", config=config, logging_structure=url)
    writer = stream.writer("W1")
    def commit(n):
        writer.append(RecordType.PUT, op=1, seq=n + 1, entry_id=(n + 1).to_bytes(12, "big"),
                      list_number=0, key=b"k" * 16, data=b"m%06d" % n, commit=True)
    for n in range(int(first)):
        commit(n)
    before = writer.durable_lsn
    asked = Path(control, "fail-over")
    asked.write_text("")
    while asked.exists():
        time.sleep(0.01)
    synced = []
    for n in range(int(first), int(first) + int(then)):
        commit(n)
        synced.append(writer.durable_lsn)
        time.sleep(0.02)
    print(json.dumps({"before": before, "synced": synced, "last": writer.last_lsn}), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def _until(what: Callable[[], bool], why: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline, why
        time.sleep(0.05)


def _acknowledged(primary: RedisServer, count: int) -> bool:
    """A write on ``primary`` is acknowledged by ``count`` replicas (it is a primary)."""
    client = redis.Redis(port=primary.port)
    try:
        client.set("sharedq:test:ping", 1)
        return bool(client.wait(count, 1000) >= count)
    except redis.RedisError:  # still a replica: no writes, no WAIT
        return False
    finally:
        client.close()


def test_a_writer_follows_a_sentinel_failover_and_a_machine_crash_loses_nothing(
    tmp_path: Path, boot: Path, redis_servers: Callable[..., RedisServer]
) -> None:
    primary = redis_servers(_NO_DELAY)
    replicas = [
        redis_servers([*_NO_DELAY, "--replicaof", "127.0.0.1", str(primary.port)]) for _ in range(2)
    ]
    _until(lambda: _acknowledged(primary, 2), "the replicas never acknowledged a write")
    sentinel = RedisSentinel(primary, "logger")
    try:
        sentinel.start()
        root, control = tmp_path / "log", tmp_path / "control"
        control.mkdir()
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(root), sentinel.url, str(boot), "30", "40",
             str(control)],
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        asked = control / "fail-over"
        _until(lambda: asked.exists() or child.poll() is not None, "the child never asked")
        primary.kill()  # the logging structure's primary is gone, with what it held
        _until(lambda: (sentinel.settled() or ("", primary.port))[1] != primary.port, "no failover")
        (promoted,) = [r for r in replicas if r.port == sentinel.master()[1]]
        # The sentinel makes the other replica follow the promoted one.
        _until(lambda: _acknowledged(promoted, 1), "the other replica never followed")
        asked.unlink()
        out, _ = child.communicate(timeout=120)
        assert child.returncode == -9
        seen = json.loads(out.strip().splitlines()[-1])
        assert seen["before"] == 0 and seen["last"] == 70  # the first 30 only pushed
        # The first commit after the failover found the old primary gone and synced;
        # pushes then resumed on the promoted replica: the last commits did not sync.
        assert seen["synced"][0] == 31 and seen["synced"][-1] < 70, seen["synced"]
        crash_machine(root, seen["synced"][-1], boot)
        with LogStream(root, name=NAME) as stream:  # copies back through the sentinel
            payloads = [r.data for r in stream.records() if r.record_type is RecordType.PUT]
            assert payloads == [b"m%06d" % n for n in range(70)]
            assert stream.check().whole
    finally:
        sentinel.stop()


def test_sentinel_urls_are_checked_and_recorded_without_their_password(tmp_path: Path) -> None:
    parts = logging_structure.sentinel_parts("redis+sentinel://:pw@h1:26379,h2:26380/logger/2")
    assert parts == ([("h1", 26379), ("h2", 26380)], "logger", 2, None, "pw")
    strip = logging_structure.without_credentials
    assert strip("redis+sentinel://:pw@h1:26379/logger") == "redis+sentinel://h1:26379/logger"
    for bad in (
        "redis+sentinel://h1:26379",  # no service
        "redis+sentinel://h1/logger",  # no port
        "redis+sentinel://h1:x/logger",
        "redis+sentinel://h1:26379/logger/db",
    ):
        with pytest.raises(InvalidLogRequest, match="sentinel"):
            LogStream(tmp_path / "s", name=NAME, logging_structure=bad)
    assert redis.__version__  # the sentinel client is redis-py's
