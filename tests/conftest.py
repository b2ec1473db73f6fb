"""Fixtures shared by the whole suite."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

# The list-structure conformance checks are plain functions in sharedq.testing: have
# pytest show the values in their failed assertions, as in a test module's.
pytest.register_assert_rewrite("sharedq.testing.conformance")

from sharedq.testing.redis_server import RedisCluster, RedisServer  # noqa: E402 (after the rewrite)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sharedq.cf import CouplingFacility, StructureParams

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=60
)
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=400)
settings.load_profile(os.getenv("HYPOTHESIS_PROFILE", "default"))


# -- private Redis servers ---------------------------------------------------------------
# One server for the session serves every test that only needs "a Redis" (the
# conformance suite flushes it between tests); tests that kill, restart or configure a
# server take their own from ``redis_servers``.


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A private redis-server shared by the session; flush it if a test needs it empty."""
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster]:
    """A private three-node Redis Cluster shared by the session."""
    cluster = RedisCluster().start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def redis_servers() -> Iterator[Callable[..., RedisServer]]:
    """A factory of private servers for one test: ``redis_servers(args, password, tls)``.

    Each is started before it is returned and stopped when the test ends, whatever the
    test did to it (killed it, restarted it).
    """
    started: list[RedisServer] = []

    def make(
        args: Sequence[str] = (), password: str | None = None, tls: bool = False
    ) -> RedisServer:
        server = RedisServer(args, password, tls)
        started.append(server)
        return server.start()

    try:
        yield make
    finally:
        for server in started:
            server.stop()


# -- Spark -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The one SparkSession of the suite: ``local[2]``, few shuffle partitions, no UI."""
    from sharedq.pipeline.session import start_session

    session = start_session("local[2]", {"spark.sql.shuffle.partitions": "2"}).spark
    yield session
    session.stop()


# -- a facility per backend ----------------------------------------------------------------


@contextlib.contextmanager
def facility_on(
    backend: str, request: pytest.FixtureRequest, *structures: StructureParams
) -> Iterator[CouplingFacility]:
    """A ``MemoryFacility``, or one on the session's Redis server (flushed before and
    after), with ``structures`` allocated empty: the servers' test suites (cqs, ims)
    run each test on both backends through this."""
    from sharedq.cf.memory import MemoryFacility
    from sharedq.cf.redis import RedisFacility

    server: RedisServer | None = (
        request.getfixturevalue("redis_server") if backend == "redis" else None
    )
    if server is not None:
        server.flush()
    fac: CouplingFacility = (
        MemoryFacility() if server is None else RedisFacility.from_url(server.url)
    )
    for params in structures:
        fac.create(params)
    try:
        yield fac
    finally:
        fac.close()
        if server is not None:
            server.flush()


# -- the machine, as the log's logging structure sees it ---------------------------------


@pytest.fixture
def boot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's machine: a boot id file of its own
    (``sharedq.log.logging_structure.BOOT_ID_FILE``), which a test rewrites to play a
    machine that crashed and booted again; child processes are given its path."""
    from sharedq.log import logging_structure

    path = tmp_path / "boot_id"
    path.write_text("boot-before-crash\n")
    monkeypatch.setattr(logging_structure, "BOOT_ID_FILE", path)
    return path
