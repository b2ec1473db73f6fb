"""Reasons and exceptions of checkpoints and recovery.  Codes 3500-3599.

The log stream's own reasons are 3000-3499 (``sharedq.log.errors``); checkpoints,
SRDS files and structure recovery share the range with it because they are one
machinery: the log and the checkpoints together are what recovery reads.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from sharedq.errors import SharedqError


class RecoveryReason(IntEnum):
    """Why a checkpoint or recovery request failed."""

    BAD_ARGUMENT = 3501
    SRDS_UNREADABLE = 3510
    SRDS_WRITE_FAILED = 3511


class RecoveryError(SharedqError):
    """Any failure of a checkpoint or of recovery."""

    reason: RecoveryReason


class InvalidRecoveryRequest(RecoveryError, ValueError):
    """The request is malformed."""


class SrdsUnreadable(RecoveryError):
    """An SRDS file is missing, damaged or not an SRDS."""


class SrdsWriteFailed(RecoveryError):
    """An SRDS file could not be written; the slot keeps what it had."""


_CLASS_OF: dict[RecoveryReason, type[RecoveryError]] = {
    RecoveryReason.BAD_ARGUMENT: InvalidRecoveryRequest,
    RecoveryReason.SRDS_UNREADABLE: SrdsUnreadable,
    RecoveryReason.SRDS_WRITE_FAILED: SrdsWriteFailed,
}


def recovery_error(reason: RecoveryReason, detail: str = "", **context: Any) -> RecoveryError:
    """Build the exception of the right class for ``reason``."""
    return _CLASS_OF.get(reason, RecoveryError)(reason, detail, **context)
