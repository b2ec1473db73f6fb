"""``sharedq cqs serve --durability duplex_ms=N --logging-structure URL``: a served CQS
whose requests wait for their records' push to the logging structure, not the disk.

The server is a process of its own on a private Redis; the logging structure is a
second private Redis, as it would be another machine's.  What is proven here is the
command line's part (the options reach the log, bad ones are refused before anything
connects); ``tests/log/test_duplex.py`` proves the copy back after a machine crash.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from sharedq.cf.redis import RedisFacility
from sharedq.cli.main import cli
from sharedq.log.logging_structure import OPEN_MEMBER
from sharedq.testing.redis_server import RedisServer

from .helpers import TRANB
from .remote_server import ServedCQS


def test_a_served_cqs_pushes_each_request_to_the_logging_structure(
    redis_server: RedisServer,
    redis_facility: RedisFacility,
    redis_servers: Callable[..., RedisServer],
    tmp_path: Path,
) -> None:
    logger = redis_servers()
    options = ("--durability", "duplex_ms=600000", "--logging-structure", logger.url)
    served = ServedCQS(
        redis_server.url, "CQSIMSA", "IMSA", recovery_root=str(tmp_path), options=options
    ).start()
    sets = redis.Redis.from_url(logger.url)
    try:
        remote = served.client().connect()
        for n in range(5):
            remote.put(TRANB, b"message %d" % n)
        # Never synced (600 s): each put's records are in the set, or they would be
        # nowhere but the page cache.
        (key,) = sets.keys("sharedq:logging:*:CQSIMSA")
        held = sets.zrange(key, 0, -1)
        assert held[0] == OPEN_MEMBER and len(held) >= 1 + 5
        assert all(b"message %d" % n in b"".join(held) for n in range(5))
        remote.disconnect()
    finally:
        assert served.stop() == 0
    assert sets.keys("sharedq:logging:*") == []  # a clean end syncs and drops the set


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        (["--durability", "duplex_ms=100"], "logging_structure"),
        (["--durability", "sometimes"], "duplex_ms=N"),
        (["--durability", "duplex_ms=100,replicas=some"], "duplex_ms=N,replicas=R"),
        (["--durability", "every_commit,replicas=1"], "duplex_ms=N,replicas=R"),
        (["--durability", "duplex_ms=100", "--logging-structure", "http://x"], "Redis URL"),
        (
            ["--durability", "duplex_ms=100", "--logging-structure", "redis+sentinel://h1/lg"],
            "sentinels are host:port",
        ),
    ],
)
def test_bad_durability_options_are_refused_before_connecting(
    tmp_path: Path, options: list[str], problem: str
) -> None:
    args = ["cqs", "serve", "--facility", "redis://127.0.0.1:1/0", "--name", "CQSIMSA"]
    args += ["--system", "IMSA", "--socket", str(tmp_path / "s")]
    args += ["--authkey-file", str(tmp_path / "key"), "--recovery-root", str(tmp_path / "r")]
    result = CliRunner().invoke(cli, args + options)
    assert result.exit_code == 2, result.output
    assert problem in result.output
    assert not (tmp_path / "key").exists()  # refused before anything was made


def test_durability_without_a_recovery_root_is_refused(tmp_path: Path) -> None:
    args = ["cqs", "serve", "--facility", "redis://127.0.0.1:1/0", "--name", "CQSIMSA"]
    args += ["--system", "IMSA", "--socket", str(tmp_path / "s")]
    args += ["--authkey-file", str(tmp_path / "key"), "--durability", "duplex_ms=100"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "--recovery-root" in result.output
