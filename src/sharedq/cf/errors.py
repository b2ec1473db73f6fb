"""Reasons and exceptions of the list-structure layer.

The reasons follow the return and reason codes a coupling facility gives for list
commands (list full, structure full, version or authority comparison failure, lock
held, ...).  Every backend raises these through :func:`cf_error`, so the same
condition produces the same exception class and reason on every backend: the
conformance suite relies on that.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from sharedq.errors import InvalidArgument, SharedqError


class CFReason(IntEnum):
    """Why a list-structure request failed.  Codes 1000-1999."""

    # Bad input: the request is malformed; nothing was looked at or changed.
    BAD_KEY = 1001
    DATA_TOO_LARGE = 1002
    BAD_ELEMENT_SIZE = 1003
    BAD_LIST_NUMBER = 1004
    BAD_ADJUNCT = 1005
    BAD_ENTRY_ID = 1006
    BAD_SECONDARY_KEY = 1007
    BAD_ARGUMENT = 1008
    BAD_LOCK_NUMBER = 1009
    BAD_STRUCTURE_PARAMS = 1010
    BAD_URL = 1011
    # Something named does not exist, or exists already.
    NO_SUCH_ENTRY = 1020
    ENTRY_EXISTS = 1021
    NO_SUCH_STRUCTURE = 1022
    STRUCTURE_EXISTS = 1023
    NO_SUCH_MONITOR = 1024
    # Users.
    NOT_CONNECTED = 1030
    TOO_MANY_USERS = 1031
    USER_ACTIVE = 1032
    NO_SUCH_USER = 1033
    USER_NOT_FAILED = 1034
    # Capacity.
    STRUCTURE_FULL = 1040
    LIST_FULL = 1041
    EMC_AREA_FULL = 1042
    ALTER_REJECTED = 1043
    # Conditions attached to a change did not hold.
    VERSION_MISMATCH = 1050
    AUTHORITY_MISMATCH = 1051
    LOCK_HELD = 1052
    LOCK_NOT_HELD = 1053
    LIST_MISMATCH = 1054
    # The store behind the structure.
    STRUCTURE_LOST = 1060
    CONNECTION_FAILED = 1061
    AUTHENTICATION_FAILED = 1062
    SERVER_UNSUITABLE = 1063


class CFError(SharedqError):
    """Any failure of a list-structure request."""

    reason: CFReason


class InvalidRequest(CFError, InvalidArgument):
    """The request is malformed (bad key, oversized data, unknown list number...):
    ``BAD_ARGUMENT`` or a more specific reason, codes 1001-1019.  A
    :class:`sharedq.errors.InvalidArgument`, and so a ``ValueError``."""


class NoSuchEntry(CFError, LookupError):
    """The entry named by id is not in the structure."""


class EntryExists(CFError):
    """A write named an entry id that is already in use in the structure."""


class NoSuchStructure(CFError, LookupError):
    """No structure of that name exists on this facility."""


class StructureExists(CFError):
    """A structure of that name exists already."""


class NoSuchMonitor(CFError, LookupError):
    """The monitor id is not registered to this user."""


class UserError(CFError):
    """Connection bookkeeping failed: too many users, name in use, unknown user."""


class NotConnected(UserError):
    """The connection was disconnected, or declared failed by a peer."""


class CapacityError(CFError):
    """The change would exceed a size: the structure, a list's limit or the EMC area."""


class StructureFull(CapacityError):
    """The structure has no room for the entries or elements the change needs."""


class ListFull(CapacityError):
    """The target list is at its list limit."""


class EmcAreaFull(CapacityError):
    """No event monitor control is left for another registration."""


class AlterRejected(CapacityError):
    """An alter asked for more than the structure's maximum or less than is in use."""


class ConditionFailed(CFError):
    """A condition attached to the change did not hold; nothing was changed."""


class VersionMismatch(ConditionFailed):
    """The entry's version number did not compare equal to the expected one."""


class AuthorityMismatch(ConditionFailed):
    """The list's authority value did not compare equal to the expected one."""


class LockHeld(ConditionFailed):
    """A lock-table entry the change is conditioned on is held by another user."""


class LockNotHeld(ConditionFailed):
    """An unlock named a lock-table entry this user does not hold."""


class ListMismatch(ConditionFailed):
    """The entry is not on the list the request said it must be on."""


class StoreError(CFError):
    """The store holding the structure failed or refused us."""


class StructureLost(StoreError):
    """The structure's store became unreachable or lost the structure mid-use."""


class ConnectionFailed(StoreError):
    """The store could not be reached at connect time."""


class AuthenticationFailed(StoreError):
    """The store refused the credentials."""


class ServerUnsuitable(StoreError):
    """The store is reachable but configured or versioned so that it could lose data."""


_CLASS_OF: dict[CFReason, type[CFError]] = {
    CFReason.NO_SUCH_ENTRY: NoSuchEntry,
    CFReason.ENTRY_EXISTS: EntryExists,
    CFReason.NO_SUCH_STRUCTURE: NoSuchStructure,
    CFReason.STRUCTURE_EXISTS: StructureExists,
    CFReason.NO_SUCH_MONITOR: NoSuchMonitor,
    CFReason.NOT_CONNECTED: NotConnected,
    CFReason.TOO_MANY_USERS: UserError,
    CFReason.USER_ACTIVE: UserError,
    CFReason.NO_SUCH_USER: UserError,
    CFReason.USER_NOT_FAILED: UserError,
    CFReason.STRUCTURE_FULL: StructureFull,
    CFReason.LIST_FULL: ListFull,
    CFReason.EMC_AREA_FULL: EmcAreaFull,
    CFReason.ALTER_REJECTED: AlterRejected,
    CFReason.VERSION_MISMATCH: VersionMismatch,
    CFReason.AUTHORITY_MISMATCH: AuthorityMismatch,
    CFReason.LOCK_HELD: LockHeld,
    CFReason.LOCK_NOT_HELD: LockNotHeld,
    CFReason.LIST_MISMATCH: ListMismatch,
    CFReason.STRUCTURE_LOST: StructureLost,
    CFReason.CONNECTION_FAILED: ConnectionFailed,
    CFReason.AUTHENTICATION_FAILED: AuthenticationFailed,
    CFReason.SERVER_UNSUITABLE: ServerUnsuitable,
}


def cf_error(reason: CFReason, detail: str = "", **context: Any) -> CFError:
    """Build the exception of the right class for ``reason``.

    Backends translate their own failures (a Lua script's error reply, a redis-py
    exception) through here so that every backend raises identically.
    """
    cls = _CLASS_OF.get(reason)
    if cls is None:
        cls = InvalidRequest if 1000 < reason.value < 1020 else CFError
    return cls(reason, detail, **context)
