"""Checkpoints and recovery of structure pairs, shared by the queue manager and CQS.

:mod:`sharedq.recovery.srds` defines the structure recovery data sets (SRDS1/SRDS2):
the checkpoint file format that recovery and the Spark pipeline both read.
:mod:`sharedq.recovery.restore` rebuilds a structure from an SRDS image and the log
after it: the computation structure recovery runs and the pipeline is checked against.
"""

from sharedq.recovery.errors import (
    InvalidRecoveryRequest,
    RecoveryError,
    RecoveryReason,
    SrdsUnreadable,
    SrdsWriteFailed,
    recovery_error,
)
from sharedq.recovery.restore import (
    RECOVERY_USER,
    RebuildResult,
    StructureContents,
    contents,
    load_image,
    rebuild,
    set_controls,
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
    "RECOVERY_USER",
    "SLOTS",
    "SRDS_FORMAT",
    "EntryRow",
    "InvalidRecoveryRequest",
    "ListControls",
    "RebuildResult",
    "RecoveryError",
    "RecoveryReason",
    "SlotStatus",
    "SrdsImage",
    "SrdsUnreadable",
    "SrdsWriteFailed",
    "StructureContents",
    "StructureImage",
    "contents",
    "load_image",
    "newest_readable",
    "read_srds",
    "rebuild",
    "recovery_error",
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
