"""Fixtures for the list-structure conformance suite.

Every test here takes ``facility`` (or a fixture built on it) and so runs once per
backend.  A backend joins by adding its name to ``BACKENDS`` and a branch to
``_open``; the tests themselves never name a backend.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest

from sharedq.cf import CouplingFacility, ListStructure, StructureParams
from sharedq.cf.memory import MemoryFacility
from sharedq.cf.redis import RedisFacility
from tests.redis_server import RedisCluster, RedisServer

BACKENDS = ["memory", "redis", "redis-cluster"]

#: The session fixture holding each Redis backend's server.
_SERVERS = {"redis": "redis_server", "redis-cluster": "redis_cluster"}
_names = itertools.count(1)


def _open(request: pytest.FixtureRequest) -> CouplingFacility:
    if request.param == "memory":
        return MemoryFacility()
    if request.param in _SERVERS:
        server: RedisServer | RedisCluster = request.getfixturevalue(_SERVERS[request.param])
        return RedisFacility.from_url(server.url)
    raise AssertionError(f"unknown backend {request.param}")


@pytest.fixture(params=BACKENDS)
def facility(request: pytest.FixtureRequest) -> Iterator[CouplingFacility]:
    fac = _open(request)
    try:
        yield fac
    finally:
        fac.close()
        if request.param in _SERVERS:
            # Some tests use fixed structure names: each starts on an empty server.
            request.getfixturevalue(_SERVERS[request.param]).flush()


MakeStructure = Callable[..., str]


@pytest.fixture
def make_structure(facility: CouplingFacility) -> MakeStructure:
    """Create a fresh structure and return its name; keywords go to ``for_capacity``."""

    def make(**overrides: object) -> str:
        name = f"T{next(_names)}"
        options: dict[str, object] = {"list_count": 8, "entries": 200, "elements": 800}
        options.update(overrides)
        facility.create(StructureParams.for_capacity(name, **options))  # type: ignore[arg-type]
        return name

    return make


@pytest.fixture
def struct(facility: CouplingFacility, make_structure: MakeStructure) -> Iterator[ListStructure]:
    """A connection, as user ``U1``, to a fresh structure of 8 lists."""
    conn = facility.connect(make_structure(), "U1")
    yield conn
    if conn.connected:
        conn.disconnect()
