"""The demo's queue-sharing group: its structures, its managers, and the two disasters.

Kept apart from the workload (what the applications do) and from the report (what the
pipeline finds), so that the in-process demo and the multi-process one share it.
"""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sharedq.cf import CouplingFacility
from sharedq.demo.workload import BURSTS, NOTICES, QUEUES
from sharedq.log import LogConfig
from sharedq.mq import QueueManager, structure_params
from sharedq.recovery import RecoverySettings

#: The administration structure (queue-manager directory, units of work).
ADMIN = "DEMOADMIN"
#: The application structure, where the workload's queues live.
APP = "DEMOAPP"
STRUCTURES = (ADMIN, APP)
#: Log settings small enough that the demo's log is offloaded to Parquet data sets.
DEMO_LOG = LogConfig(staging_bytes=2 << 20, segment_bytes=256 << 10)


@dataclass(frozen=True)
class GroupLayout:
    """Where the demo writes: the recovery root (log, SRDS) and the pipeline's output."""

    output: Path

    @property
    def recovery(self) -> Path:
        return self.output / "recovery"

    @property
    def pipeline(self) -> Path:
        return self.output / "pipeline"

    def reset(self) -> None:
        """Start from nothing: an old run's log would be recovered into the new structures."""
        for path in (self.recovery, self.pipeline):
            if path.exists():
                shutil.rmtree(path)
        self.output.mkdir(parents=True, exist_ok=True)


def settings(layout: GroupLayout) -> RecoverySettings:
    return RecoverySettings(layout.recovery, poll_seconds=0.1, log_config=DEMO_LOG)


def create_structures(facility: CouplingFacility, messages: int) -> None:
    """Allocate both structures afresh (a structure left by an earlier run is deleted)."""
    for name in STRUCTURES:
        with contextlib.suppress(Exception):
            facility.delete(name, force=True)
        facility.create(structure_params(name, queues=8, managers=4, messages=messages))


def start_manager(
    facility: CouplingFacility, layout: GroupLayout, number: int, **options: Any
) -> QueueManager:
    """Manager QM<number> of the group, with PERFMEV enabled (it issues queue depth
    event messages) unless ``options`` say otherwise."""
    options.setdefault("performance_events", True)
    return QueueManager(
        facility,
        f"QM{number}",
        number,
        admin=ADMIN,
        structures=[APP],
        recovery=settings(layout),
        **options,
    )


def depths(qm: QueueManager) -> dict[str, int]:
    """Messages on each of the workload's queues, as a manager sees them now."""
    return {name: qm.open(name).depth() for name in (*QUEUES, NOTICES, BURSTS)}


def destroy_structures(facility: CouplingFacility) -> None:
    """Lose both structures for real: deleted, whoever is connected."""
    for name in STRUCTURES:
        facility.delete(name, force=True)
