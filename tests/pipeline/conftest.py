"""The pipeline tests' input: a log the system itself wrote, made once per session.

A group of three managers on the memory backend runs the demo's workload (units of
work over several queues, backouts, expiry, get-waits), takes a structure checkpoint,
loses its last manager mid-request (a peer recovers it), loses both structures (the
first manager to reconnect rebuilds them from the SRDS and the log, and checkpoints
again), works on, and shuts down.  Small log segments make the log hold data sets
and staging records both.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sharedq.cf.memory import MemoryFacility
from sharedq.demo.workload import (
    DieAt,
    WorkloadPlan,
    define_queues,
    run_workload,
    sweep_expired,
)
from sharedq.log import LogConfig
from sharedq.mq import QueueManager, structure_params
from sharedq.mq.classify import recoverable_contents
from sharedq.pipeline.sources import PairInput, find_pairs
from sharedq.recovery import RecoverySettings, StructureContents, contents

ADMIN = "PADMIN"
APP = "PAPP"
STRUCTURES = (ADMIN, APP)


@dataclass(frozen=True)
class GroupLog:
    """A recovery root the group wrote, and what its structures held at the end."""

    root: Path
    pairs: list[PairInput]
    final: dict[str, StructureContents]
    crashed: str | None


def write_group_log(root: Path, rounds: int = 40) -> GroupLog:
    facility = MemoryFacility()
    for name in STRUCTURES:
        facility.create(structure_params(name, queues=8, managers=4, messages=20_000))
    settings = RecoverySettings(
        root,
        poll_seconds=0.05,
        max_wait_seconds=30,
        log_config=LogConfig(staging_bytes=256 << 10, segment_bytes=32 << 10),
    )
    killer = DieAt()

    def start(n: int, **options: object) -> QueueManager:
        return QueueManager(
            facility, f"QM{n}", n, admin=ADMIN, structures=[APP], recovery=settings, **options
        )

    managers = [start(1), start(2), start(3, faults=killer)]
    define_queues(managers[0], APP)
    plan = WorkloadPlan(rounds=rounds, crash_round=rounds * 2 // 3)
    result = run_workload(managers, plan, killer=killer)
    alive = [qm for qm in managers if qm.name != result.crashed]
    for name in STRUCTURES:
        facility.delete(name, force=True)
    for qm in alive:
        qm.reconnect()
    run_workload(alive, WorkloadPlan(rounds=rounds // 4, seed=11, checkpoint_round=10**9))
    sweep_expired(alive[0], plan)
    for qm in alive:
        qm.close()
    final = {}
    for name in STRUCTURES:
        with facility.connect(name, "AUDITOR") as auditor:
            final[name] = recoverable_contents(contents(auditor))
    return GroupLog(root, find_pairs(root), final, result.crashed)


@pytest.fixture(scope="session")
def group_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupLog]:
    yield write_group_log(tmp_path_factory.mktemp("group") / "recovery")
