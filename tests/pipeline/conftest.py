"""The pipeline tests' input: a log the system itself wrote, made once per session.

A group of three managers on the memory backend runs the demo's workload (units of
work over several queues, backouts, expiry, get-waits), takes a structure checkpoint,
loses its last manager mid-request (a peer recovers it), loses both structures (the
first manager to reconnect rebuilds them from the SRDS and the log, and checkpoints
again), works on, and shuts down.  Small log segments make the log hold data sets
and staging records both.  With two structure checkpoints behind it, each structure's
log has been deleted before the older SRDS: it no longer reaches back to the
structure's start (the fixture checks it), so a point before that is unrecoverable.
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
from sharedq.log import LogConfig, LogStream
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
    #: Each structure's retention point: the log holds its changes from this seq on.
    retained: dict[str, int]


def write_group_log(root: Path, rounds: int = 40) -> GroupLog:
    facility = MemoryFacility()
    for name in STRUCTURES:
        facility.create(structure_params(name, queues=8, managers=4, messages=20_000))
    settings = RecoverySettings(
        root,
        poll_seconds=0.05,
        max_wait_seconds=30,
        log_config=LogConfig(staging_bytes=128 << 10, segment_bytes=16 << 10),
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
    pairs = find_pairs(root)
    retained = {  # (each pair here is one structure, its name)
        pair.name: LogStream.open_existing(pair.log).retention_points().get(pair.name, 0)
        for pair in pairs
    }
    return GroupLog(root, pairs, final, result.crashed, retained)


@pytest.fixture(scope="session")
def group_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupLog]:
    found = write_group_log(tmp_path_factory.mktemp("group") / "recovery")
    # The workload's structure checkpoint and the one taken after the structures were
    # rebuilt: the second deletes each log before the first's SRDS.
    assert set(found.retained) == set(STRUCTURES), found.retained
    assert all(seq > 0 for seq in found.retained.values()), (
        f"the log still reaches back to a structure's start: {found.retained}"
    )
    yield found
