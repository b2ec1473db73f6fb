"""Duplex durability (the seed's logging structure) on a real Redis, crashes for real.

A writer under ``Durability.duplex`` commits by pushing its records to the logging
structure, not by syncing.  These tests SIGKILL such a writer, then play the machine
crash that would follow: its segment loses every byte written after its last sync
(zeroed, as a preallocated segment's unwritten room reads after a power loss) and the
machine's boot id changes.  They then count what a reopened writer, and a reader
(a peer recovering), find: everything committed, copied back from the logging
structure; with that structure lost as well, a loss that is reported, never a clean
read; with only the process gone (same boot), the segment alone, Redis untouched.
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

from sharedq.log import (
    Durability,
    GroupCommit,
    InvalidLogRequest,
    LogConfig,
    LogIOError,
    LogReason,
    LogStream,
    RecordType,
    StreamMismatch,
    logging_structure,
)
from sharedq.log.codec import FRAME, FRAME_HEADER_BYTES, SEGMENT_HEADER_BYTES, decode_frames
from sharedq.log.layout import Layout
from sharedq.recovery import RecoverySettings
from sharedq.recovery.errors import RecoveryError
from sharedq.testing.redis_server import RedisServer

NAME = "S1.LOG"
WRITER = "W1"

#: A child that opens a duplex writer, commits ``count`` records (killing Redis after
#: ``kill_redis_at`` of them, restarting it empty after ``restart_at``), prints its
#: durable lsn and the pushes and fallbacks it made, and SIGKILLs itself.
_CHILD = textwrap.dedent(
    """
    import json, os, signal, sys, time
    from pathlib import Path
    from sharedq.log import Durability, GroupCommit, LogConfig, LogStream, RecordType
    from sharedq.log import logging_structure
    root, url, boot, count, interval, kill_at, restart_at, port_dir = sys.argv[1:9]
    logging_structure.BOOT_ID_FILE = Path(boot)
    config = LogConfig(
        durability=Durability.duplex(int(interval)), group_commit=GroupCommit.WRITER
    )
    stream = LogStream(root, name="S1.LOG", config=config, logging_structure=url)
    writer = stream.writer("W1")
    for n in range(int(count)):
        if n == int(kill_at):
            Path(port_dir, "kill").write_text("")
            while Path(port_dir, "kill").exists():
                time.sleep(0.01)
        if n == int(restart_at):
            Path(port_dir, "restart").write_text("")
            while Path(port_dir, "restart").exists():
                time.sleep(0.01)
        writer.append(RecordType.PUT, op=1, seq=n + 1, entry_id=(n + 1).to_bytes(12, "big"),
                      list_number=0, key=b"k" * 16, data=b"m%06d" % n, commit=True)
    print(json.dumps({"durable": writer.durable_lsn, "last": writer.last_lsn}), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def run_child(
    root: Path,
    url: str,
    boot: Path,
    count: int,
    *,
    interval_ms: int = 600_000,
    server: RedisServer | None = None,
    kill_at: int = -1,
    restart_at: int = -1,
    control: Path | None = None,
) -> dict[str, int]:
    """Run the child to its SIGKILL, doing what it asks to Redis meanwhile."""
    control = control or root.parent / "control"
    control.mkdir(exist_ok=True)
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(root), url, str(boot), str(count),
         str(interval_ms), str(kill_at), str(restart_at), str(control)],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while child.poll() is None and time.monotonic() < deadline:
        for what in ("kill", "restart"):
            asked = control / what
            if asked.exists():
                assert server is not None
                if what == "kill":
                    server.kill()
                else:
                    server.start()  # empty: it never saved
                asked.unlink()
        time.sleep(0.01)
    out, _ = child.communicate(timeout=30)
    assert child.returncode == -9, "the child should have died by SIGKILL"
    return dict(json.loads(out.strip().splitlines()[-1]))


def crash_machine(root: Path, durable_lsn: int, boot: Path) -> int:
    """What a power loss leaves: every byte after the last synced record of the writer's
    open segment reads as zeros, and the machine comes back with a new boot id.
    Returns how many records the segment still holds."""
    (_, path), *_ = Layout(root).segments(WRITER)[-1:]
    buf = bytearray(path.read_bytes())
    pos = SEGMENT_HEADER_BYTES
    kept = 0
    while pos + FRAME_HEADER_BYTES <= len(buf):
        length = FRAME.unpack_from(buf, pos)[0]
        if length == 0:
            break
        records = decode_frames(bytes(buf[pos : pos + FRAME_HEADER_BYTES + length]), "x", 0)[0]
        if not records or records[0].lsn > durable_lsn:
            break
        pos += FRAME_HEADER_BYTES + length
        kept += 1
    buf[pos:] = bytes(len(buf) - pos)
    path.write_bytes(bytes(buf))
    boot.write_text(f"boot-after-crash-{time.monotonic_ns()}\n")
    return kept


def _config() -> LogConfig:
    return LogConfig(durability=Durability.duplex(600_000), group_commit=GroupCommit.WRITER)


def _payloads(stream: LogStream) -> list[bytes]:
    return [r.data for r in stream.records() if r.record_type is RecordType.PUT and r.data]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "log"


def _expected(count: int) -> list[bytes]:
    return [b"m%06d" % n for n in range(count)]


def test_a_reopened_writer_copies_back_what_a_machine_crash_took_from_its_segment(
    root: Path, boot: Path, redis_servers: Callable[..., RedisServer]
) -> None:
    server = redis_servers()
    seen = run_child(root, server.url, boot, 200)
    assert seen == {"durable": 0, "last": 200}  # nothing synced: the commits only pushed
    assert crash_machine(root, seen["durable"], boot) == 0
    with LogStream(root, name=NAME, config=_config()) as stream:  # the STREAM file says where
        assert stream.logging is not None and stream.logging.url == server.url
        writer = stream.writer(WRITER)
        assert writer.lost == [] and writer.last_lsn == 200
        writer.close()
        assert _payloads(stream) == _expected(200)
    assert redis.Redis.from_url(server.url).keys("*") == []  # closed cleanly: set dropped


def test_a_peer_reading_the_log_copies_back_for_a_writer_whose_machine_crashed(
    root: Path, boot: Path, redis_servers: Callable[..., RedisServer]
) -> None:
    server = redis_servers()
    seen = run_child(root, server.url, boot, 150)
    crash_machine(root, seen["durable"], boot)
    with LogStream(root, name=NAME) as stream:  # a reader: no writer of its own
        assert _payloads(stream) == _expected(150)
        assert stream.check().whole
    with LogStream(root, name=NAME, config=_config()) as stream:  # the writer comes back
        writer = stream.writer(WRITER)
        assert writer.last_lsn == 150 and writer.lost == []
        writer.append(RecordType.PUT, op=1, seq=151, entry_id=bytes(12), list_number=0,
                      key=b"k" * 16, data=b"m000150", commit=True)  # fmt: skip
        writer.close()
        assert _payloads(stream) == _expected(151)


def test_a_process_crash_alone_needs_no_logging_structure(
    root: Path, boot: Path, redis_servers: Callable[..., RedisServer]
) -> None:
    server = redis_servers()
    seen = run_child(root, server.url, boot, 120)
    server.kill()  # gone for good: the same boot's page cache holds everything
    with LogStream(root, name=NAME, config=_config()) as stream:
        assert _payloads(stream) == _expected(120)
        assert stream.check().whole
    assert seen["durable"] == 0


def test_both_copies_lost_is_reported_as_a_loss_not_a_clean_read(
    root: Path, boot: Path, redis_servers: Callable[..., RedisServer]
) -> None:
    server = redis_servers()
    seen = run_child(root, server.url, boot, 80)
    crash_machine(root, seen["durable"], boot)
    server.kill()
    server.start()  # back empty: the logging structure lost the writer's set
    with LogStream(root, name=NAME, config=_config()) as stream:
        writer = stream.writer(WRITER)
        assert len(writer.lost) == 1
        first, _, why = writer.lost[0]
        assert first == 1 and "lost its copy" in why and server.url in why
        writer.close()
        coverage = stream.check()
        assert not coverage.whole
        (gap,) = [gap for gap in coverage.gaps if "lost its copy" in gap.why]
        assert "how many records they held is unknown" in str(gap)  # not 2**40 records


def test_the_logging_structure_down_at_copy_back_refuses_rather_than_guess(
    root: Path, boot: Path, redis_servers: Callable[..., RedisServer]
) -> None:
    server = redis_servers()
    seen = run_child(root, server.url, boot, 40)
    crash_machine(root, seen["durable"], boot)
    server.kill()
    with LogStream(root, name=NAME, config=_config()) as stream:
        with pytest.raises(LogIOError) as refused:
            stream.writer(WRITER)
        assert refused.value.reason is LogReason.LOGGING_UNAVAILABLE
        assert WRITER in str(refused.value)
        with pytest.raises(LogIOError) as read:
            stream.records()
        assert read.value.reason is LogReason.LOGGING_UNAVAILABLE
    server.start()  # nothing was lost meanwhile: the set is still... gone (never saved)
    # (the server kept nothing: this is now the both-lost case, reported as such)
    with LogStream(root, name=NAME, config=_config()) as stream:
        assert not stream.check().whole


def test_commits_sync_to_disk_while_the_logging_structure_is_down_and_lose_nothing(
    root: Path, boot: Path, redis_servers: Callable[..., RedisServer]
) -> None:
    server = redis_servers()
    seen = run_child(root, server.url, boot, 300, server=server, kill_at=100, restart_at=200)
    # Records 101..200 were committed with Redis down (synced to disk); the restart came
    # back empty, so the first commit after it synced again and started the set afresh.
    assert seen["durable"] >= 200
    crash_machine(root, seen["durable"], boot)
    with LogStream(root, name=NAME, config=_config()) as stream:
        writer = stream.writer(WRITER)
        assert writer.lost == [] and writer.last_lsn == 300
        writer.close()
        assert _payloads(stream) == _expected(300)


def test_the_sync_on_the_writers_clock_trims_the_logging_structure(
    root: Path, boot: Path, redis_server: RedisServer
) -> None:
    config = LogConfig(durability=Durability.duplex(20), group_commit=GroupCommit.WRITER)
    client = redis.Redis.from_url(redis_server.url)
    with LogStream(root, name=NAME, config=config, logging_structure=redis_server.url) as stream:
        writer = stream.writer(WRITER)
        for n in range(50):
            writer.append(RecordType.COMMIT, payload={"n": n}, commit=True)
        (key,) = client.keys(f"sharedq:logging:{stream.identity}:*")
        deadline = time.monotonic() + 10
        while client.zcard(key) > 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert client.zrange(key, 0, -1) == [logging_structure.OPEN_MEMBER]
        assert writer.durable_lsn == 50
        writer.close()
        assert client.exists(key) == 0


def test_duplex_settings_are_checked(root: Path, redis_server: RedisServer) -> None:
    assert Durability.parse("duplex_ms=100") == Durability.duplex(100)
    assert str(Durability.duplex(7)) == "duplex_ms=7"
    with pytest.raises(InvalidLogRequest):
        Durability.duplex(0)
    with (
        LogStream(root, name=NAME, config=_config()) as stream,
        pytest.raises(InvalidLogRequest, match="logging structure"),
    ):
        stream.writer(WRITER)
    with pytest.raises(InvalidLogRequest, match="Redis URL"):
        LogStream(root, name=NAME, logging_structure="http://nowhere")
    LogStream(root, name=NAME, logging_structure=redis_server.url).close()
    with pytest.raises(StreamMismatch, match="logging structure"):
        LogStream(root, name=NAME, logging_structure="redis://localhost:1/0")
    with pytest.raises(RecoveryError, match="logging_structure"):
        RecoverySettings(root=root.parent / "rec", durability=Durability.duplex(100))
    with pytest.raises(RecoveryError, match="Redis URL"):
        RecoverySettings(root=root.parent / "rec", logging_structure="nowhere")


def test_a_damaged_batch_in_the_logging_structure_is_a_reported_loss_from_there_on(
    root: Path, boot: Path, redis_servers: Callable[..., RedisServer]
) -> None:
    server = redis_servers()
    seen = run_child(root, server.url, boot, 30)
    crash_machine(root, seen["durable"], boot)
    client = redis.Redis.from_url(server.url)
    (key,) = client.keys("sharedq:logging:*")
    batches = client.zrange(key, 1, -1, withscores=True)  # one per commit: 30 of them
    bad, score = batches[10]
    client.zrem(key, bad)
    client.zadd(key, {bad[:-3] + b"???": score})  # its last bytes changed: the crc fails
    with LogStream(root, name=NAME, config=_config()) as stream:
        writer = stream.writer(WRITER)
        assert [(first, why.split(":")[0]) for first, _, why in writer.lost] == [
            (11, f"writer {WRITER}")
        ]
        assert "does not decode" in writer.lost[0][2]
        writer.close()
        assert _payloads(stream) == _expected(10)  # those before the bad batch
        assert not stream.check().whole


def test_the_logging_structures_password_is_used_and_never_recorded(
    root: Path, redis_servers: Callable[..., RedisServer]
) -> None:
    server = redis_servers(password="s3cret-logger")
    secret_url = server.url  # redis://:s3cret-logger@127.0.0.1:PORT/0
    assert "s3cret-logger@" in secret_url
    with LogStream(root, name=NAME, config=_config(), logging_structure=secret_url) as stream:
        writer = stream.writer(WRITER)
        writer.append(RecordType.COMMIT, payload={"n": 1}, commit=True)
        assert writer.durable_lsn == 0  # pushed, through the password, not synced
        assert "s3cret" not in repr(stream.logging)
        writer.close()
    recorded = (root / "STREAM").read_bytes()
    assert b"s3cret" not in recorded and b"127.0.0.1:%d/0" % server.port in recorded
    # A later process names it with its password again: the same logging structure.
    LogStream(root, name=NAME, logging_structure=secret_url).close()
    # A password in the query is not recorded either; other parameters are.
    strip = logging_structure.without_credentials
    assert strip("unix:///run/r.sock?db=2&password=pw") == "unix:///run/r.sock?db=2"
    assert strip("redis://u:pw@h:6379/0?password=pw") == "redis://h:6379/0"


def test_a_logging_structure_on_the_writers_machine_is_warned_of(
    root: Path, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    assert logging_structure.on_this_machine(redis_server.url)
    assert logging_structure.on_this_machine(redis_server.unix_url)
    assert not logging_structure.on_this_machine("redis://192.0.2.1:6379/0")  # TEST-NET-1
    with LogStream(root, name=NAME, config=_config(), logging_structure=redis_server.url) as stream:
        stream.writer(WRITER).close()
    assert any("single point of failure" in r.getMessage() for r in caplog.records)


def test_a_logging_structure_that_may_evict_is_warned_of(
    root: Path, redis_servers: Callable[..., RedisServer], caplog: pytest.LogCaptureFixture
) -> None:
    evicting = redis_servers(["--maxmemory-policy", "allkeys-lru"])
    with LogStream(root, name=NAME, config=_config(), logging_structure=evicting.url) as stream:
        stream.writer(WRITER).close()
    assert any("allkeys-lru" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with LogStream(root.parent / "other", name=NAME, config=_config(),
                   logging_structure=redis_servers().url) as stream:  # fmt: skip
        stream.writer(WRITER).close()
    assert not any("maxmemory-policy" in r.getMessage() for r in caplog.records)
