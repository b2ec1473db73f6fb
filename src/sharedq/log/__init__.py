"""The log stream: every server's records of its structure changes, merged and kept.

One log stream per structure pair (a directory), written by every server connected to
it.  Each writer appends length-prefixed, CRC-32C-checked records to its own staging
segments, synced per its durability setting; closed segments are offloaded to Parquet
*log data sets* past HIGHOFFLOAD; a reader merges everything by the structure's
sequence numbers; retention deletes what recovery no longer needs.  The log knows its
records' schema, not structures: applying records to a ``ListStructure`` (replay) is
:mod:`sharedq.recovery.replay`.  Start with :class:`LogStream`.  The record schema is
in :mod:`sharedq.log.records` and ``docs/log-records.md``; operators read ``docs/log.md``.

pyarrow is imported when it is needed, not with the package: by the functions that
write or read log data sets (offload, a reader that reaches them, retention looking at
their footers) and by the first use of :data:`ARROW_SCHEMA` or a field's
``arrow_type``.  A writer that appends and commits to staging segments, as a queue
manager or CQS does between offloads, never imports it: importing pyarrow costs a
process about 0.2 s and 90 MB (``docs/log.md``, "What a process imports").
"""

from typing import TYPE_CHECKING, Any

from sharedq.log.changes import MessageInfo
from sharedq.log.codec import Damage, DamageReason
from sharedq.log.config import Durability, DurabilityMode, GroupCommit, LogConfig
from sharedq.log.continuity import Coverage, Gap
from sharedq.log.errors import (
    InvalidLogRequest,
    LogDamaged,
    LogError,
    LogFull,
    LogIOError,
    LogReason,
    ReplayError,
    StreamMismatch,
    WriterClosed,
    WriterInUse,
    log_error,
)
from sharedq.log.groupsync import SyncStatistics, sync_statistics
from sharedq.log.offload import OffloadResult
from sharedq.log.reader import (
    DecodedSources,
    LogReader,
    LogSources,
    ReadFilter,
    ReadPlan,
    SegmentDecoded,
    StagingSegment,
)
from sharedq.log.records import (
    FIELDS,
    LIMIT_NONE,
    SCHEMA_VERSION,
    ChangeOp,
    Field,
    LogPosition,
    LogRecord,
    PackedPayload,
    RecordType,
    pack_payload,
    unpack_payload,
)
from sharedq.log.retention import LogFullEvent, LogFullHandler, PurgeResult
from sharedq.log.stream import LogStream
from sharedq.log.writer import LogWriter

if TYPE_CHECKING:
    from sharedq.log.records import ARROW_SCHEMA


def __getattr__(name: str) -> Any:
    """:data:`ARROW_SCHEMA`, made at its first use (the module docstring says why)."""
    if name == "ARROW_SCHEMA":
        from sharedq.log import records

        return records.ARROW_SCHEMA
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ARROW_SCHEMA",
    "FIELDS",
    "LIMIT_NONE",
    "SCHEMA_VERSION",
    "ChangeOp",
    "Coverage",
    "Damage",
    "DamageReason",
    "DecodedSources",
    "Durability",
    "DurabilityMode",
    "Field",
    "Gap",
    "GroupCommit",
    "InvalidLogRequest",
    "LogConfig",
    "LogDamaged",
    "LogError",
    "LogFull",
    "LogFullEvent",
    "LogFullHandler",
    "LogIOError",
    "LogPosition",
    "LogReader",
    "LogReason",
    "LogRecord",
    "LogSources",
    "LogStream",
    "LogWriter",
    "MessageInfo",
    "OffloadResult",
    "PackedPayload",
    "PurgeResult",
    "ReadFilter",
    "ReadPlan",
    "RecordType",
    "ReplayError",
    "SegmentDecoded",
    "StagingSegment",
    "StreamMismatch",
    "SyncStatistics",
    "WriterClosed",
    "WriterInUse",
    "log_error",
    "pack_payload",
    "sync_statistics",
    "unpack_payload",
]
