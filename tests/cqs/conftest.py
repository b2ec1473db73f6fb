"""Fixtures for the Common Queue Server tests: a facility per backend, CQSs that close.

Every test that takes ``facility`` (or ``make_cqs``) runs on a ``MemoryFacility`` and on
the session's private Redis server (flushed after each test), with the MSGQ structure
``MSGQ01`` and the EMHQ structure ``EMHQ01`` allocated empty.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cf.redis import RedisFacility
from sharedq.cqs import CQS, structure_params
from sharedq.testing import ManualClock, SimulatedFailure
from sharedq.testing.redis_server import RedisServer
from tests.conftest import facility_on

MSGQ = "MSGQ01"
EMHQ = "EMHQ01"
BACKENDS = ["memory", "redis"]

MakeCQS = Callable[..., CQS]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def facility(backend: str, request: pytest.FixtureRequest) -> Iterator[CouplingFacility]:
    with facility_on(
        backend, request, structure_params(MSGQ, messages=500), structure_params(EMHQ, messages=100)
    ) as fac:
        yield fac


@pytest.fixture
def redis_facility(redis_server: RedisServer) -> Iterator[RedisFacility]:
    """For the tests with CQSs in processes of their own: the session's Redis server,
    empty but for ``MSGQ01``."""
    redis_server.flush()
    facility = RedisFacility.from_url(redis_server.url)
    facility.create(structure_params(MSGQ, messages=500))
    try:
        yield facility
    finally:
        facility.close()
        redis_server.flush()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(tick_s=0.000_01)


@pytest.fixture
def make_cqs(facility: CouplingFacility, clock: ManualClock) -> Iterator[MakeCQS]:
    """Connect a CQS ``CQS<system>`` for client ``system``; disconnected at the end."""
    started: list[CQS] = []

    def make(system: str, *, connect: bool = True, **options: Any) -> CQS:
        options.setdefault("msgq", MSGQ)
        options.setdefault("clock", clock)
        cqs = CQS(facility, options.pop("name", f"CQS{system}"), system=system, **options)
        started.append(cqs)
        return cqs.connect() if connect else cqs

    yield make
    for cqs in started:
        with contextlib.suppress(Exception, SimulatedFailure):
            cqs.disconnect()
