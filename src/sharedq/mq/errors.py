"""Reasons and exceptions of the queue manager.

Codes are in the range 2000-2999.  Where IBM MQ has a reason code (MQRC) for the
condition, the reason carries that code and name, so that an operator who knows MQ
recognises it (2033 no message available, 2053 queue full, ...).  Conditions MQ has no
code for take codes from 2900 up.

Every failure is raised before anything in a structure changes, or after what the
request changed was undone, except where a docstring says otherwise (a commit whose
phase 2 fails part-way is completed by recovery; that is the point of the
descriptors).  A call raises only if its effect did not happen (was undone, or will be
backed out by recovery) or is left pending (:class:`OutcomePending`); when its effect
stands, it returns.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import IntEnum
from typing import Any

import sharedq.errors
from sharedq.cf import errors as cfe
from sharedq.errors import SharedqError
from sharedq.log.errors import LogReason
from sharedq.seam.access import JournalFailure
from sharedq.seam.notes import Note


class MQReason(IntEnum):
    """Why a queue-manager request failed.  Codes 2000-2999, MQRC values where MQ has one."""

    BACKED_OUT = 2003
    CONNECTION_BROKEN = 2009
    EXPIRY_ERROR = 2013
    GET_INHIBITED = 2016
    HCONN_ERROR = 2018
    MAX_CONNS_LIMIT_REACHED = 2025
    MD_ERROR = 2026
    MSG_TOO_BIG_FOR_Q = 2030
    MSG_TOO_BIG_FOR_Q_MGR = 2031
    NO_MSG_AVAILABLE = 2033
    NOT_AUTHORIZED = 2035
    NOT_OPEN_FOR_BROWSE = 2036
    NOT_OPEN_FOR_INPUT = 2037
    NOT_OPEN_FOR_OUTPUT = 2039
    PERSISTENCE_ERROR = 2047
    PRIORITY_ERROR = 2050
    PUT_INHIBITED = 2051
    Q_FULL = 2053
    Q_MGR_NAME_ERROR = 2058
    SECOND_MARK_NOT_ALLOWED = 2062
    STORAGE_NOT_AVAILABLE = 2071
    TRUNCATED_MSG_FAILED = 2080
    UNKNOWN_OBJECT_NAME = 2085
    OBJECT_ALREADY_EXISTS = 2100
    OUTCOME_PENDING = 2124
    UOW_IN_PROGRESS = 2128
    STORAGE_MEDIUM_FULL = 2192
    UNEXPECTED_ERROR = 2195
    MSG_ID_ERROR = 2206
    CORREL_ID_ERROR = 2207
    CF_NOT_AVAILABLE = 2345
    CF_STRUC_IN_USE = 2346
    CF_STRUC_LIST_HDR_IN_USE = 2347
    CF_STRUC_AUTH_FAILED = 2348
    CF_STRUC_FAILED = 2373
    # No MQRC for these.
    UOW_STATE_ERROR = 2901
    UOW_NOT_OWNER = 2902
    NOT_A_GET = 2903
    NO_FREE_LIST = 2904
    NO_SUCH_UOW = 2905
    BAD_ARGUMENT = 2906


class MQError(SharedqError):
    """Any failure of a queue-manager request."""

    reason: MQReason


class NoMessageAvailable(MQError):
    """No message satisfied the get (2033): the queue's committed portion is empty,
    holds no match for the ids asked for, or the wait timed out."""


class NotAuthorized(MQError):
    """The manager's user may not do this (2035, MQ's MQRC_NOT_AUTHORIZED): its
    security profiles refuse it (``sharedq.security``), and nothing was changed.

    The message names the user, the resource class and profile, and the access that
    was needed; ``context`` holds ``user``, ``resource_class``, ``profile`` and
    ``access``.  Also 2348 (MQRC_CF_STRUC_AUTH_FAILED): the Redis server's ACL refused
    the manager's Redis user a structure.
    """


class NotOpenFor(MQError):
    """The queue handle was not opened for this: a put (2039, NOT_OPEN_FOR_OUTPUT), a
    get (2037, NOT_OPEN_FOR_INPUT) or a browse (2036, NOT_OPEN_FOR_BROWSE).  Open the
    queue again with that intent (``qm.open(name, OpenFor.PUT | ...)``)."""


class UnknownQueue(MQError, LookupError):
    """No shared queue of that name is defined in the queue-sharing group (2085)."""


class QueueExists(MQError):
    """A queue of that name is defined already (2100)."""


class Inhibited(MQError):
    """Puts (2051) or gets and browses (2016) are inhibited on the queue."""


class QueueFull(MQError):
    """The queue holds its maximum depth of messages (2053)."""


class StorageFull(MQError):
    """The structure holding the queue, or the administrative structure, is full (2192)."""


class MessageTooBig(MQError):
    """The message is longer than the queue allows (2030) or a list entry holds (2031)."""


class Truncated(MQError):
    """The message is longer than ``max_length`` and truncation was not accepted (2080).

    The message stays where it was (backout last message); ``context['data_length']``
    is its length, so that the caller can retry with a large enough buffer.
    """


class InvalidArgument(MQError, sharedq.errors.InvalidArgument):
    """A bad priority, persistence, expiry, id or option; nothing was looked at.

    ``BAD_ARGUMENT``, or MQ's reason for the argument (``PRIORITY_ERROR``, ...).  A
    :class:`sharedq.errors.InvalidArgument`, and so a ``ValueError``.
    """


class UowError(MQError):
    """A unit of work was used against its state or by a thread that does not own it:
    commit after backout, a second mark-skip-backout, put after prepare, ..."""


class BackedOut(MQError):
    """A commit failed before its decision was made durable, and the unit of work was
    backed out instead (2003): no room for its descriptors, the structure refused a
    change, the journal could not log one.  What the structure would not take back at
    once, restart or peer recovery backs out, as it does a failed manager's unit."""


class OutcomePending(MQError):
    """A commit (or a prepared unit's backout) failed after its outcome was decided,
    or before it could be recorded (2124, MQ's MQRC_OUTCOME_PENDING).

    The unit of work has ended here (the thread may begin another); its descriptors,
    or the commit decision in the log, make this manager's restart (or a peer's
    recovery of it) carry the decided outcome out.  A unit that had decided to commit
    is never backed out; a prepared unit is in doubt again at the restart, for its
    coordinator to resolve.  Until then its messages stay where the failure left them.
    """


class ConnectionBroken(MQError):
    """The manager is closed, was declared failed, or lost a structure (2009, 2018, 2373)."""


class ConfigurationError(MQError):
    """The queue-sharing group refuses the request: a manager id or name in use by
    another (or running already), a structure not connected, no free list header, 32
    users on a structure (2058, 2345, 2904, 2025)."""


class RecoveryInProgress(MQError):
    """A list header is being recovered by a peer; retry shortly (2347)."""


class JournalFailed(MQError, JournalFailure):
    """The manager's journal (its recovery log) could not record a change (2195).

    The manager undid the change in the structure before raising (a put's entry is
    deleted, a get's message goes back...), so the request did not happen.  The
    journal's exception (a ``sharedq.log.LogError``) is the cause.  ``note`` is the
    journal note of the change that was not recorded (``sharedq.seam.notes``), and
    ``entry`` the entry as that change left it.
    """


class JournalFull(JournalFailed, StorageFull):
    """The recovery log is full, at its maximum or because the disk holding it is
    (2192, MQ's MQRC_STORAGE_MEDIUM_FULL); as :class:`JournalFailed` otherwise."""


_CLASS_OF: dict[MQReason, type[MQError]] = {
    MQReason.NO_MSG_AVAILABLE: NoMessageAvailable,
    MQReason.NOT_AUTHORIZED: NotAuthorized,
    MQReason.CF_STRUC_AUTH_FAILED: NotAuthorized,
    MQReason.NOT_OPEN_FOR_BROWSE: NotOpenFor,
    MQReason.NOT_OPEN_FOR_INPUT: NotOpenFor,
    MQReason.NOT_OPEN_FOR_OUTPUT: NotOpenFor,
    MQReason.UNKNOWN_OBJECT_NAME: UnknownQueue,
    MQReason.OBJECT_ALREADY_EXISTS: QueueExists,
    MQReason.PUT_INHIBITED: Inhibited,
    MQReason.GET_INHIBITED: Inhibited,
    MQReason.Q_FULL: QueueFull,
    MQReason.STORAGE_MEDIUM_FULL: StorageFull,
    MQReason.STORAGE_NOT_AVAILABLE: StorageFull,
    MQReason.MSG_TOO_BIG_FOR_Q: MessageTooBig,
    MQReason.MSG_TOO_BIG_FOR_Q_MGR: MessageTooBig,
    MQReason.TRUNCATED_MSG_FAILED: Truncated,
    MQReason.EXPIRY_ERROR: InvalidArgument,
    MQReason.MD_ERROR: InvalidArgument,
    MQReason.PERSISTENCE_ERROR: InvalidArgument,
    MQReason.PRIORITY_ERROR: InvalidArgument,
    MQReason.MSG_ID_ERROR: InvalidArgument,
    MQReason.CORREL_ID_ERROR: InvalidArgument,
    MQReason.BAD_ARGUMENT: InvalidArgument,
    MQReason.UOW_IN_PROGRESS: UowError,
    MQReason.UOW_STATE_ERROR: UowError,
    MQReason.UOW_NOT_OWNER: UowError,
    MQReason.SECOND_MARK_NOT_ALLOWED: UowError,
    MQReason.NOT_A_GET: UowError,
    MQReason.NO_SUCH_UOW: UowError,
    MQReason.BACKED_OUT: BackedOut,
    MQReason.OUTCOME_PENDING: OutcomePending,
    MQReason.CONNECTION_BROKEN: ConnectionBroken,
    MQReason.HCONN_ERROR: ConnectionBroken,
    MQReason.CF_STRUC_FAILED: ConnectionBroken,
    MQReason.Q_MGR_NAME_ERROR: ConfigurationError,
    MQReason.MAX_CONNS_LIMIT_REACHED: ConfigurationError,
    MQReason.CF_NOT_AVAILABLE: ConfigurationError,
    MQReason.CF_STRUC_IN_USE: ConfigurationError,
    MQReason.NO_FREE_LIST: ConfigurationError,
    MQReason.CF_STRUC_LIST_HDR_IN_USE: RecoveryInProgress,
}


def mq_error(reason: MQReason, detail: str = "", **context: Any) -> MQError:
    """Build the exception of the right class for ``reason``."""
    return _CLASS_OF.get(reason, MQError)(reason, detail, **context)


def from_cf(error: cfe.CFError, detail: str = "") -> MQError:
    """The queue-manager error for a list-structure error nobody handled more precisely.

    Callers translate the conditions they expect (a full list is a full queue, an
    authority mismatch means re-read the queue's controls) themselves; this covers the
    rest, so that an application sees only ``MQError`` subclasses.
    """
    text = f"{detail}: {error}" if detail else str(error)
    if isinstance(error, cfe.StructureFull):
        reason = MQReason.STORAGE_MEDIUM_FULL
    elif isinstance(error, cfe.EmcAreaFull):
        reason = MQReason.STORAGE_NOT_AVAILABLE
    elif isinstance(error, cfe.NotConnected):
        reason = MQReason.CONNECTION_BROKEN
    elif error.reason is cfe.CFReason.USER_ACTIVE:
        reason = MQReason.Q_MGR_NAME_ERROR  # a manager of that name is running
    elif error.reason is cfe.CFReason.TOO_MANY_USERS:
        reason = MQReason.MAX_CONNS_LIMIT_REACHED
    elif error.reason is cfe.CFReason.AUTHENTICATION_FAILED:
        reason = MQReason.CF_STRUC_AUTH_FAILED  # the Redis ACL refused the structure
    elif error.reason is cfe.CFReason.NO_SUCH_STRUCTURE:
        reason = MQReason.CF_NOT_AVAILABLE  # e.g. an admin structure nobody allocated
    elif isinstance(error, cfe.StoreError):
        reason = MQReason.CF_STRUC_FAILED
    else:
        reason = MQReason.UNEXPECTED_ERROR
    exc = mq_error(reason, text)
    exc.__cause__ = error
    return exc


#: ``errno`` values that mean "the disk is full".
_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


def _log_full(error: BaseException) -> bool:
    """Whether a journal's exception says the log, or the disk holding it, is full."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if getattr(current, "reason", None) is LogReason.LOG_FULL:
            return True
        if isinstance(current, OSError) and current.errno in _NO_SPACE:
            return True
        current = current.__cause__ or current.__context__
    return False


def journal_failed(error: BaseException, note: Note) -> JournalFailed:
    """The queue-manager error for a change ``note`` the journal failed to record.

    Raise it ``from error``.  The log being full (or its disk) is ``STORAGE_MEDIUM_FULL``
    (2192, a :class:`JournalFull`), anything else ``UNEXPECTED_ERROR`` (2195).
    """
    text = f"the recovery log could not record a {note.meaning.tag} in {note.structure}: {error}"
    if _log_full(error):
        exc: JournalFailed = JournalFull(MQReason.STORAGE_MEDIUM_FULL, text)
    else:
        exc = JournalFailed(MQReason.UNEXPECTED_ERROR, text)
    exc.note = note
    return exc


@contextmanager
def translated(
    detail: str = "", on: Callable[[cfe.CFError], MQError | None] | None = None
) -> Iterator[None]:
    """Turn list-structure errors raised inside the block into queue-manager errors.

    ``on`` may map an error more precisely (return ``None`` to fall back to
    :func:`from_cf`).
    """
    try:
        yield
    except cfe.CFError as error:
        mapped = on(error) if on is not None else None
        raise (mapped or from_cf(error, detail)) from error
