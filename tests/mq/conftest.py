"""Fixtures for the queue-manager tests: a facility, a clock, managers that clean up.

Every test that takes ``facility`` (or a fixture built on it: ``make_qm``, ``qm``) runs
once per backend: on a ``MemoryFacility``, and on the session's private Redis server,
flushed after each test as the list-structure conformance suite does.  Every manager of
a test shares that one facility and one ``ManualClock``, so that put times are known
and expiry can be stepped over.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cf.memory import MemoryFacility
from sharedq.cf.redis import RedisFacility
from sharedq.mq import QueueManager, structure_params
from sharedq.testing import ManualClock, SimulatedFailure
from sharedq.testing.redis_server import RedisServer

ADMIN = "QSGADMIN"
APP = "APP1"
#: The backends every semantic test runs on (a cluster adds nothing the queue manager
#: could tell apart: each structure lives on one node).
BACKENDS = ["memory", "redis"]

MakeManager = Callable[..., QueueManager]
#: Opens an empty facility of the test's backend; closed and emptied at the end.
OpenFacility = Callable[[], CouplingFacility]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def open_backend(backend: str, request: pytest.FixtureRequest) -> Iterator[OpenFacility]:
    """A factory of facilities on the test's backend, for tests that build their own
    group (the stateful test opens one per example).  Each starts empty."""
    opened: list[CouplingFacility] = []
    server: RedisServer | None = (
        request.getfixturevalue("redis_server") if backend == "redis" else None
    )

    def open_one() -> CouplingFacility:
        for fac in opened:
            fac.close()
        opened.clear()
        if server is not None:
            server.flush()
        opened.append(MemoryFacility() if server is None else RedisFacility.from_url(server.url))
        return opened[-1]

    try:
        yield open_one
    finally:
        for fac in opened:
            fac.close()
        if server is not None:
            server.flush()  # the next test starts on an empty server


@pytest.fixture
def facility(open_backend: OpenFacility) -> CouplingFacility:
    fac = open_backend()
    fac.create(structure_params(ADMIN, queues=16, managers=4, messages=2000))
    fac.create(structure_params(APP, queues=16, managers=4, messages=2000))
    return fac


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(tick_s=0.000_01)


@pytest.fixture
def make_qm(facility: CouplingFacility, clock: ManualClock) -> Iterator[MakeManager]:
    """Start a manager (``QM<n>`` with id ``n`` by default); closed at the end."""
    started: list[QueueManager] = []

    def make(qm_id: int = 1, name: str | None = None, **options: Any) -> QueueManager:
        options.setdefault("admin", ADMIN)
        options.setdefault("structures", [APP])
        options.setdefault("clock", clock)
        qm = QueueManager(facility, name or f"QM{qm_id}", qm_id, **options)
        started.append(qm)
        return qm

    yield make
    for qm in started:
        # A manager a test killed on purpose fails to close: it is dead already.
        with contextlib.suppress(Exception, SimulatedFailure):
            qm.close()


@pytest.fixture
def qm(make_qm: MakeManager) -> QueueManager:
    return make_qm(1)
