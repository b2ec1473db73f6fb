"""Fixtures for the list-structure tests: one facility per backend.

The conformance suite itself is in :mod:`sharedq.testing.conformance`, public so that
third-party backends run it too; ``test_conformance.py`` runs every check of it on
every backend here through the runner's own entry point (:func:`run_check`), given
:func:`make_facility`.  A backend joins by adding its name to ``BACKENDS`` and a branch
to ``_factory``; the checks never name a backend.

``facility``, ``make_structure`` and ``struct`` are the arguments the runner gives a
check, as fixtures, built by the same functions, for tests here that are not (yet)
checks of the suite.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from sharedq.cf import CouplingFacility, ListStructure
from sharedq.cf.memory import MemoryFacility
from sharedq.cf.redis import RedisFacility
from sharedq.testing.conformance import (
    FacilityFactory,
    MakeStructure,
    connected_structure,
    structure_maker,
)
from sharedq.testing.redis_server import RedisCluster, RedisServer

BACKENDS = ["memory", "redis", "redis-cluster"]

#: The session fixture holding each Redis backend's server.
_SERVERS = {"redis": "redis_server", "redis-cluster": "redis_cluster"}

__all__ = ["BACKENDS", "MakeStructure"]


def _factory(request: pytest.FixtureRequest) -> FacilityFactory:
    if request.param == "memory":
        return MemoryFacility
    if request.param in _SERVERS:
        server: RedisServer | RedisCluster = request.getfixturevalue(_SERVERS[request.param])

        @contextmanager
        def on_server() -> Iterator[CouplingFacility]:
            try:
                with RedisFacility.from_url(server.url) as facility:
                    yield facility
            finally:
                # Some checks use fixed structure names: each starts on an empty server.
                server.flush()

        return on_server
    raise AssertionError(f"unknown backend {request.param}")


@pytest.fixture(params=BACKENDS)
def make_facility(request: pytest.FixtureRequest) -> FacilityFactory:
    """What the conformance runner takes for this backend: a fresh, empty facility
    on each call (a context manager that closes it, and empties its server)."""
    return _factory(request)


@pytest.fixture
def facility(make_facility: FacilityFactory) -> Iterator[CouplingFacility]:
    with make_facility() as fac:
        yield fac


@pytest.fixture
def make_structure(facility: CouplingFacility) -> MakeStructure:
    """Create a fresh structure and return its name; keywords go to ``for_capacity``."""
    return structure_maker(facility)


@pytest.fixture
def struct(facility: CouplingFacility, make_structure: MakeStructure) -> Iterator[ListStructure]:
    """A connection, as user ``U1``, to a fresh structure of 8 lists."""
    with connected_structure(facility, make_structure) as conn:
        yield conn
