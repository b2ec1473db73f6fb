"""Reasons and exceptions of checkpoints and recovery.  Codes 3500-3599.

The log stream's own reasons are 3000-3499 (``sharedq.log.errors``); checkpoints,
SRDS files and structure recovery share the range with it because they are one
machinery: the log and the checkpoints together are what recovery reads.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from sharedq.errors import InvalidArgument, SharedqError


class RecoveryReason(IntEnum):
    """Why a checkpoint or recovery request failed."""

    BAD_ARGUMENT = 3501
    SRDS_UNREADABLE = 3510
    SRDS_WRITE_FAILED = 3511
    #: A small state file of the pair (a system checkpoint, a recovery in progress, an
    #: acceptance of loss) does not verify.
    STATE_DAMAGED = 3512
    #: No readable SRDS, and the log no longer goes back to the structure's start.
    STRUCTURE_UNRECOVERABLE = 3520
    #: Another server's structure recovery or copy did not finish in time.
    RECOVERY_TIMEOUT = 3521
    #: Records recovery needs are missing from the log (a gap in a writer's lsns); the
    #: detail names the writer, the range and the file.  Nothing was changed.
    LOG_INCOMPLETE = 3522
    #: The structure's changes are logged to another log stream than this server's.
    LOG_MISMATCH = 3523
    #: A structure checkpoint could not be completed (the structure was lost...).
    CHECKPOINT_FAILED = 3530
    #: A request waited longer than the settings allow for a quiesced structure.
    QUIESCE_TIMEOUT = 3540
    #: A structure copy could not be completed.
    COPY_FAILED = 3550


class RecoveryError(SharedqError):
    """Any failure of a checkpoint or of recovery."""

    reason: RecoveryReason


class InvalidRecoveryRequest(RecoveryError, InvalidArgument):
    """The request is malformed (``BAD_ARGUMENT``).  A
    :class:`sharedq.errors.InvalidArgument`, and so a ``ValueError``."""


class SrdsUnreadable(RecoveryError):
    """An SRDS file is missing, damaged or not an SRDS."""


class SrdsWriteFailed(RecoveryError):
    """An SRDS file could not be written; the slot keeps what it had."""


class StructureUnrecoverable(RecoveryError):
    """Structure recovery has nothing to start from: no readable SRDS, log incomplete."""


class LogIncomplete(StructureUnrecoverable):
    """Records the recovery needs are missing from the log; ``gaps`` says which."""


class LogMismatch(RecoveryError):
    """The structure is logged to another stream than the one this server writes."""


class StateDamaged(RecoveryError):
    """A small state file of the pair does not verify."""


class RecoveryTimeout(RecoveryError):
    """Waited too long for another server (a recovery, a copy, a quiesced structure)."""


class CheckpointFailed(RecoveryError):
    """A structure checkpoint could not be completed; the SRDS slots are as they were."""


class CopyFailed(RecoveryError):
    """A structure copy could not be completed."""


_CLASS_OF: dict[RecoveryReason, type[RecoveryError]] = {
    RecoveryReason.BAD_ARGUMENT: InvalidRecoveryRequest,
    RecoveryReason.SRDS_UNREADABLE: SrdsUnreadable,
    RecoveryReason.SRDS_WRITE_FAILED: SrdsWriteFailed,
    RecoveryReason.STATE_DAMAGED: StateDamaged,
    RecoveryReason.LOG_INCOMPLETE: LogIncomplete,
    RecoveryReason.LOG_MISMATCH: LogMismatch,
    RecoveryReason.STRUCTURE_UNRECOVERABLE: StructureUnrecoverable,
    RecoveryReason.RECOVERY_TIMEOUT: RecoveryTimeout,
    RecoveryReason.CHECKPOINT_FAILED: CheckpointFailed,
    RecoveryReason.QUIESCE_TIMEOUT: RecoveryTimeout,
    RecoveryReason.COPY_FAILED: CopyFailed,
}


def recovery_error(reason: RecoveryReason, detail: str = "", **context: Any) -> RecoveryError:
    """Build the exception of the right class for ``reason``."""
    return _CLASS_OF.get(reason, RecoveryError)(reason, detail, **context)
