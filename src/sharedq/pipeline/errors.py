"""Reasons and exceptions of the Spark pipeline.  Codes 4000-4099."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from sharedq.errors import InvalidArgument, SharedqError


class PipelineReason(IntEnum):
    """Why a pipeline job refused or failed."""

    #: A path, filter or setting given to a job is malformed.
    BAD_ARGUMENT = 4001
    #: The input directory holds no log stream (or no pair directory).
    NO_INPUT = 4002
    #: No SRDS at or before the point asked for, and the log does not reach back to
    #: the structure's start: the image at that point cannot be computed.
    POINT_UNRECOVERABLE = 4003
    #: Spark could not be started (no Java runtime, PySpark not installed).
    SPARK_UNAVAILABLE = 4004
    #: The log contradicts itself (a change of an entry that does not exist).
    INCONSISTENT_LOG = 4005
    #: Spark's Python workers failed at work the job gave them (decoding staging
    #: segments): ``sharedq`` not importable where they run, a path they cannot reach.
    WORKERS_FAILED = 4006
    #: Records a job needs are missing from the log (a gap in a writer's lsns: a file
    #: deleted or damaged beyond repair); the detail names writer, range and file.
    LOG_INCOMPLETE = 4007


class PipelineError(SharedqError):
    """Any failure of a pipeline job."""

    reason: PipelineReason


class InvalidPipelineRequest(PipelineError, InvalidArgument):
    """The request is malformed (``BAD_ARGUMENT``).  A
    :class:`sharedq.errors.InvalidArgument`, and so a ``ValueError``."""


def pipeline_error(reason: PipelineReason, detail: str = "", **context: Any) -> PipelineError:
    """Build the exception of the right class for ``reason``."""
    cls = InvalidPipelineRequest if reason is PipelineReason.BAD_ARGUMENT else PipelineError
    return cls(reason, detail, **context)
