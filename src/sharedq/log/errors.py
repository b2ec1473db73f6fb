"""Reasons and exceptions of the log stream layer.

Codes 3000-3499 (see :mod:`sharedq.errors`; recovery's are 3500-3599).  Every
failure raised by ``sharedq.log`` comes from :func:`log_error`, so the same condition
always gives the same class and reason, whichever module noticed it.

Damage found while *reading* is not an exception by default: the reader reports it
(:class:`sharedq.log.Damage`) and goes on with everything it can still read, because
the records before the damage are what recovery needs.  :class:`LogDamaged` is raised
only where the caller asked for strictness.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from sharedq.errors import InvalidArgument, SharedqError


class LogReason(IntEnum):
    """Why a log stream request failed.  Codes 3000-3499."""

    # Bad input: nothing was written or changed.
    BAD_CONFIG = 3001
    BAD_RECORD = 3002
    BAD_NAME = 3003
    BAD_ARGUMENT = 3004
    # The stream's directory and its owners.
    STREAM_MISMATCH = 3010
    WRITER_IN_USE = 3011
    WRITER_CLOSED = 3012
    # Capacity.
    LOG_FULL = 3020
    # What is stored is not what was written.
    LOG_DAMAGED = 3030
    # Applying records to a structure (raised by ``sharedq.recovery.replay``; the code
    # stays here, where it always was, so that it does not change).
    REPLAY_FAILED = 3040
    # The file system refused.
    IO_FAILED = 3050
    OFFLOAD_FAILED = 3051
    # The logging structure (``Durability.duplex``) did not answer when a writer or
    # reader needed the records only it holds.
    LOGGING_UNAVAILABLE = 3060


class LogError(SharedqError):
    """Any failure of a log stream request."""

    reason: LogReason


class InvalidLogRequest(LogError, InvalidArgument):
    """Bad configuration, a malformed record, a bad writer or stream name, any other
    bad argument (``BAD_ARGUMENT``).  A :class:`sharedq.errors.InvalidArgument`, and so
    a ``ValueError``."""


class StreamMismatch(LogError):
    """The directory holds another stream, or a format this code does not read."""


class WriterInUse(LogError):
    """Another writer object (in this or another process) owns that writer name."""


class WriterClosed(LogError):
    """The writer was closed; open a new one to append again."""


class LogFull(LogError):
    """The log is at its maximum size and the log-full handler could not make room."""


class LogDamaged(LogError):
    """A segment or data set is damaged and the caller asked not to read past it."""


class ReplayError(LogError):
    """A record could not be applied to the structure being rebuilt
    (:func:`sharedq.recovery.replay`)."""


class LogIOError(LogError):
    """The file system failed a read, write, sync or rename; the ``OSError`` is the cause."""


_CLASS_OF: dict[LogReason, type[LogError]] = {
    LogReason.BAD_CONFIG: InvalidLogRequest,
    LogReason.BAD_RECORD: InvalidLogRequest,
    LogReason.BAD_NAME: InvalidLogRequest,
    LogReason.BAD_ARGUMENT: InvalidLogRequest,
    LogReason.STREAM_MISMATCH: StreamMismatch,
    LogReason.WRITER_IN_USE: WriterInUse,
    LogReason.WRITER_CLOSED: WriterClosed,
    LogReason.LOG_FULL: LogFull,
    LogReason.LOG_DAMAGED: LogDamaged,
    LogReason.REPLAY_FAILED: ReplayError,
    LogReason.IO_FAILED: LogIOError,
    LogReason.OFFLOAD_FAILED: LogIOError,
    LogReason.LOGGING_UNAVAILABLE: LogIOError,
}


def log_error(reason: LogReason, detail: str = "", **context: Any) -> LogError:
    """Build the exception of the right class for ``reason``."""
    return _CLASS_OF.get(reason, LogError)(reason, detail, **context)
