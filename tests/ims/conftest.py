"""Fixtures for the IMS tests: a facility per backend, IMS systems that shut down.

Every test that takes ``facility`` (or ``make_ims``) runs on a ``MemoryFacility`` and on
the session's private Redis server (flushed around each test), with the MSGQ structure
``MSGQ01`` allocated empty.  The IMSs of one test share one ``ManualClock`` that moves
on at each reading, so units of work made on different systems are ordered as made.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cf.redis import RedisFacility
from sharedq.cqs import structure_params
from sharedq.ims import IMS, SystemDefinition
from sharedq.ims.dli import Program
from sharedq.testing import ManualClock
from sharedq.testing.redis_server import RedisServer
from tests.conftest import facility_on
from tests.cqs.remote_server import ServedCQS

MSGQ, EMHQ = "MSGQ01", "EMHQ01"

MakeIMS = Callable[..., IMS]


@pytest.fixture(params=["memory", "redis"])
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def facility(backend: str, request: pytest.FixtureRequest) -> Iterator[CouplingFacility]:
    with facility_on(backend, request, structure_params(MSGQ, messages=200)) as fac:
        yield fac


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(tick_s=0.000_01)


@pytest.fixture
def make_ims(facility: CouplingFacility, clock: ManualClock) -> Iterator[MakeIMS]:
    """Start an IMS from a definition and its programs; shut down at the end."""
    started: list[IMS] = []

    def make(definition: SystemDefinition, programs: Mapping[str, Program], **options: Any) -> IMS:
        options.setdefault("clock", clock)
        ims = IMS(facility, definition, programs, msgq=MSGQ, **options)
        started.append(ims)
        return ims.start()

    yield make
    for ims in reversed(started):
        with contextlib.suppress(Exception):
            ims.shutdown()


@pytest.fixture
def redis_pair(redis_server: RedisServer) -> Iterator[RedisFacility]:
    """The MSGQ and EMHQ structures on the private Redis server (for IMSs and CQSs in
    processes of their own, which memory structures cannot reach)."""
    redis_server.flush()
    with RedisFacility.from_url(redis_server.url) as fac:
        fac.create(structure_params(MSGQ, messages=200))
        fac.create(structure_params(EMHQ, messages=200))
        yield fac
    redis_server.flush()


@pytest.fixture
def served(redis_server: RedisServer) -> Iterator[ServedCQS]:
    """IMSA's CQS (MSGQ and EMHQ) in a process of its own."""
    server = ServedCQS(redis_server.url, "CQSIMSA", "IMSA", emhq=EMHQ).start()
    yield server
    server.stop()
