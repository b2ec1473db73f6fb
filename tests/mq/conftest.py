"""Fixtures for the queue-manager tests: a facility, a clock, managers that clean up.

Every manager of a test shares one ``MemoryFacility`` (the structures) and one
``ManualClock``, so that put times are known and expiry can be stepped over.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cf.memory import MemoryFacility
from sharedq.mq import ManualClock, QueueManager, SimulatedFailure, structure_params

ADMIN = "QSGADMIN"
APP = "APP1"

MakeManager = Callable[..., QueueManager]


@pytest.fixture
def facility() -> Iterator[CouplingFacility]:
    fac = MemoryFacility()
    fac.create(structure_params(ADMIN, queues=16, managers=4, messages=2000))
    fac.create(structure_params(APP, queues=16, managers=4, messages=2000))
    yield fac
    fac.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(tick=0.000_01)


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
