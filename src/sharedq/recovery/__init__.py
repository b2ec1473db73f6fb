"""Checkpoints and recovery of structure pairs, shared by the queue manager and CQS.

:mod:`sharedq.recovery.srds` defines the structure recovery data sets (SRDS1/SRDS2):
the checkpoint file format that recovery and the Spark pipeline both read.
:mod:`sharedq.recovery.restore` rebuilds a structure from an SRDS image and the log
after it: the computation structure recovery runs and the pipeline is checked against.
:mod:`sharedq.recovery.replay` applies log records to a structure (:func:`replay`).

The machinery a server layer plugs into (``docs/recovery.md``):

* :mod:`~sharedq.recovery.pair`: :class:`PairRecovery`, one server's part in one
  structure pair (its triggers, its watcher), and the :class:`RecoveryClient` protocol
  the server layer implements;
* :mod:`~sharedq.recovery.structure_checkpoint`, :mod:`~sharedq.recovery.system_checkpoint`,
  :mod:`~sharedq.recovery.structure_recovery` (the decision table),
  :mod:`~sharedq.recovery.copy` (structure copy);
* :mod:`~sharedq.recovery.quiesce` (the quiesce rule), :mod:`~sharedq.recovery.master`
  (master election), :mod:`~sharedq.recovery.control` (the machinery's control
  entries), :mod:`~sharedq.recovery.layout` (the pair's directory),
  :mod:`~sharedq.recovery.settings` (:class:`RecoverySettings`).

pyarrow (SRDS files are Parquet) is imported by the functions that write or read an
SRDS, not with the package (:mod:`sharedq.log` says why).
"""

from typing import TYPE_CHECKING, Any

from sharedq.recovery.control import ControlArea
from sharedq.recovery.copy import CopyResult
from sharedq.recovery.errors import (
    CheckpointFailed,
    CopyFailed,
    InvalidRecoveryRequest,
    LogIncomplete,
    LogMismatch,
    RecoveryError,
    RecoveryReason,
    RecoveryTimeout,
    SrdsUnreadable,
    SrdsWriteFailed,
    StateDamaged,
    StructureUnrecoverable,
    recovery_error,
)
from sharedq.recovery.layout import PairLayout
from sharedq.recovery.log_check import LogReport
from sharedq.recovery.loss import PairCheck, accept_loss, check_pair
from sharedq.recovery.pair import PairRecovery, RecoveryClient
from sharedq.recovery.quiesce import QuiesceGate
from sharedq.recovery.replay import ReplayResult, apply_record, replay
from sharedq.recovery.restore import (
    RECOVERY_USER,
    RebuildResult,
    StructureContents,
    contents,
    load_image,
    rebuild,
    set_controls,
)
from sharedq.recovery.settings import RecoverySettings
from sharedq.recovery.srds import (
    SLOTS,
    SRDS_FORMAT,
    EntryRow,
    ListControls,
    SlotStatus,
    SrdsImage,
    StructureImage,
    newest_readable,
    read_srds,
    rows_to_table,
    slot_status,
    srds_path,
    table_to_entries,
    target_slot,
    version_from_i64,
    version_to_i64,
    write_srds,
)
from sharedq.recovery.structure_checkpoint import CheckpointResult
from sharedq.recovery.structure_recovery import StructureOutcome

if TYPE_CHECKING:
    from sharedq.recovery.srds import ENTRY_SCHEMA


def __getattr__(name: str) -> Any:
    """:data:`~sharedq.recovery.srds.ENTRY_SCHEMA`, made at its first use (it needs
    pyarrow, which a server that never checkpoints does without)."""
    if name == "ENTRY_SCHEMA":
        from sharedq.recovery import srds

        return srds.ENTRY_SCHEMA
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ENTRY_SCHEMA",
    "RECOVERY_USER",
    "SLOTS",
    "SRDS_FORMAT",
    "CheckpointFailed",
    "CheckpointResult",
    "ControlArea",
    "CopyFailed",
    "CopyResult",
    "EntryRow",
    "InvalidRecoveryRequest",
    "ListControls",
    "LogIncomplete",
    "LogMismatch",
    "LogReport",
    "PairCheck",
    "PairLayout",
    "PairRecovery",
    "QuiesceGate",
    "RebuildResult",
    "RecoveryClient",
    "RecoveryError",
    "RecoveryReason",
    "RecoverySettings",
    "RecoveryTimeout",
    "ReplayResult",
    "SlotStatus",
    "SrdsImage",
    "SrdsUnreadable",
    "SrdsWriteFailed",
    "StateDamaged",
    "StructureContents",
    "StructureImage",
    "StructureOutcome",
    "StructureUnrecoverable",
    "accept_loss",
    "apply_record",
    "check_pair",
    "contents",
    "load_image",
    "newest_readable",
    "read_srds",
    "rebuild",
    "recovery_error",
    "replay",
    "rows_to_table",
    "set_controls",
    "slot_status",
    "srds_path",
    "table_to_entries",
    "target_slot",
    "version_from_i64",
    "version_to_i64",
    "write_srds",
]
