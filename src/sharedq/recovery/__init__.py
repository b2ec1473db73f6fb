"""Checkpoints and recovery of structure pairs, shared by the queue manager and CQS.

:mod:`sharedq.recovery.srds` defines the structure recovery data sets (SRDS1/SRDS2):
the checkpoint file format that recovery and the Spark pipeline both read.
"""

from sharedq.recovery.errors import (
    InvalidRecoveryRequest,
    RecoveryError,
    RecoveryReason,
    SrdsUnreadable,
    SrdsWriteFailed,
    recovery_error,
)
from sharedq.recovery.srds import (
    ENTRY_SCHEMA,
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

__all__ = [
    "ENTRY_SCHEMA",
    "SLOTS",
    "SRDS_FORMAT",
    "EntryRow",
    "InvalidRecoveryRequest",
    "ListControls",
    "RecoveryError",
    "RecoveryReason",
    "SlotStatus",
    "SrdsImage",
    "SrdsUnreadable",
    "SrdsWriteFailed",
    "StructureImage",
    "newest_readable",
    "read_srds",
    "recovery_error",
    "rows_to_table",
    "slot_status",
    "srds_path",
    "table_to_entries",
    "target_slot",
    "version_from_i64",
    "version_to_i64",
    "write_srds",
]
