"""The Common Queue Server's reasons and exceptions (codes 5000-5499).

Every request of :class:`~sharedq.cqs.CQS` that refuses raises a :class:`CQSError` with
one of these reasons; list-structure errors are translated at this layer's edge
(:func:`from_cf`), so that a client sees only this family.  "No message" is not an
error: a read or browse of an empty queue returns ``None`` or ``[]`` (the seed's first
reader wins, the others see an empty queue).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from sharedq.cf import errors as cfe
from sharedq.errors import InvalidArgument, SharedqError
from sharedq.seam.access import JournalFailure


class CQSReason(IntEnum):
    """Why a CQS request was refused."""

    BAD_ARGUMENT = 5001
    BAD_QUEUE_NAME = 5002
    BAD_UOW = 5003
    BAD_TOKEN = 5004
    NOT_AUTHORIZED = 5010
    NOT_CONNECTED = 5011
    ALREADY_CONNECTED = 5012
    NO_SUCH_STRUCTURE = 5013
    NOT_LOCKED_BY_YOU = 5020
    NOT_LOCKED = 5021
    EMC_FULL = 5030
    STRUCTURE_FULL = 5031
    MESSAGE_TOO_LARGE = 5032
    NOT_REGISTERED = 5033
    #: A put to a queue in overflow mode on a pair without an overflow structure
    #: (seed 000: CQSPUT rejected until usage falls 20 % below the threshold).
    QUEUE_IN_OVERFLOW = 5034
    JOURNAL_FAILED = 5040
    STRUCTURE_ERROR = 5050


class CQSError(SharedqError):
    """A Common Queue Server request was refused; ``reason`` says why."""


class InvalidCQSRequest(CQSError, InvalidArgument):
    """A request with a bad argument (a queue name, a unit of work, a token...)."""


class NotAuthorized(CQSError):
    """CQSCONN refused: the user lacks UPDATE on ``CQSSTR.<primary structure>``, or
    the Redis server's ACL does not let its user reach the structure's keys."""


class CapacityExceeded(CQSError):
    """No room: the EMC area (a registration) or the structure (entries, elements)."""


class NotLocked(CQSError):
    """The message a lock token names is not on the lock queue, or not this CQS's."""


class CQSJournalFailed(CQSError, JournalFailure):
    """The log could not record a change, and the request took it back (put, read,
    move, unlock, delete: :mod:`sharedq.cqs.takeback`); only a multi-part delete past
    its first step is finished instead, with ``context["deleted"]`` (docs/cqs.md)."""


_BAD = {
    CQSReason.BAD_ARGUMENT,
    CQSReason.BAD_QUEUE_NAME,
    CQSReason.BAD_UOW,
    CQSReason.BAD_TOKEN,
    CQSReason.MESSAGE_TOO_LARGE,
}
_CLASS_OF: dict[CQSReason, type[CQSError]] = {
    **{r: InvalidCQSRequest for r in _BAD},
    CQSReason.NOT_AUTHORIZED: NotAuthorized,
    CQSReason.EMC_FULL: CapacityExceeded,
    CQSReason.STRUCTURE_FULL: CapacityExceeded,
    CQSReason.QUEUE_IN_OVERFLOW: CapacityExceeded,
    CQSReason.NOT_LOCKED_BY_YOU: NotLocked,
    CQSReason.NOT_LOCKED: NotLocked,
    CQSReason.JOURNAL_FAILED: CQSJournalFailed,
}


def cqs_error(reason: CQSReason, detail: str = "", **context: Any) -> CQSError:
    """Build the exception of the right class for ``reason``."""
    return _CLASS_OF.get(reason, CQSError)(reason, detail, **context)


def from_cf(error: cfe.CFError, detail: str) -> CQSError:
    """The CQS error for a list-structure error the request did not expect otherwise."""
    text = f"{detail}: {error}"
    if isinstance(error, cfe.EmcAreaFull):
        return cqs_error(CQSReason.EMC_FULL, text)
    if isinstance(error, cfe.StructureFull | cfe.ListFull):
        return cqs_error(CQSReason.STRUCTURE_FULL, text)
    if isinstance(error, cfe.AuthenticationFailed):
        # The Redis server's ACL refused this user the structure's keys: the same
        # refusal as a CQSSTR profile's, from the real fence between users.
        return cqs_error(CQSReason.NOT_AUTHORIZED, text)
    if isinstance(error, cfe.NoSuchStructure):
        return cqs_error(CQSReason.NO_SUCH_STRUCTURE, text)
    if isinstance(error, cfe.NotConnected):
        return cqs_error(CQSReason.NOT_CONNECTED, text)
    return cqs_error(CQSReason.STRUCTURE_ERROR, text)
