"""The values list-structure requests take and return.

Results that the hot path returns (an entry, a change) are named tuples: they are
immutable, cheap to build, and a queue manager makes several per message.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

#: Bytes in a list entry key (the LEK); keys order entries on a list, bytewise ascending.
KEY_LENGTH = 16
#: Bytes in a list entry id (the PLEID of the patent).
ENTRY_ID_LENGTH = 12
#: The most bytes an adjunct area holds.
MAX_ADJUNCT = 64
#: The most bytes a secondary key (the SLEK) holds.
MAX_SECONDARY_KEY = 32
#: The most bytes of user notification controls (UNC) a registration carries.
MAX_TOKEN = 16
#: The most data elements one entry may take.
MAX_ELEMENTS_PER_ENTRY = 255
#: The most data bytes one entry may hold (elements x element size may not exceed it).
MAX_ENTRY_BYTES = 65536
#: The most users connected to one structure at a time.
MAX_USERS = 32
#: The largest version number (versions are 8 bytes, unsigned).
MAX_VERSION = 2**64 - 1
#: The lowest and highest possible keys.
LOWEST_KEY = b"\x00" * KEY_LENGTH
HIGHEST_KEY = b"\xff" * KEY_LENGTH


class Compare(Enum):
    """How a request compares an entry's key with the key it names."""

    EQ = "=="
    LE = "<="
    GE = ">="

    def holds(self, entry_key: bytes, key: bytes) -> bool:
        if self is Compare.EQ:
            return entry_key == key
        if self is Compare.LE:
            return entry_key <= key
        return entry_key >= key


class Position(Enum):
    """Where among entries of equal key a written or moved entry goes."""

    TAIL = "tail"
    HEAD = "head"


class MonitorState(Enum):
    """The state a monitored set of entries moved to."""

    EMPTY = "empty"
    NONEMPTY = "nonempty"


class UserState(Enum):
    """A connected user is active; a failed user keeps its resources until cleaned up."""

    ACTIVE = "active"
    FAILED = "failed"


class _Unchanged(Enum):
    UNCHANGED = "unchanged"


#: Pass to leave a field of an entry as it is.
UNCHANGED = _Unchanged.UNCHANGED
Unchanged = _Unchanged


class ListEntry(NamedTuple):
    """One list entry as the structure holds it."""

    entry_id: bytes
    list_number: int
    key: bytes
    data: bytes
    adjunct: bytes
    secondary_key: bytes | None
    version: int
    elements: int


class Change(NamedTuple):
    """The outcome of a single-entry change.

    ``seq`` is the structure sequence number the change took.  ``entry`` is the entry
    after the change (write, move, update) or as it was before it (delete).

    ``entries``: how many entries the list the request found the entry on holds after
    the change: for a write the list written, for a move (and a take's move) the list
    the entry left.  Every backend gives it for write, ``write_and_rekey``, move and
    take's move, where it costs nothing (the request is on that list already), so that
    a queue's depth comes back with the put or get that changed it (queue depth events)
    and costs no request of its own; ``None`` elsewhere.
    """

    seq: int
    entry: ListEntry
    entries: int | None = None


@dataclass(frozen=True)
class BulkMove:
    """One entry of a bulk move: which entry, where to, and what to change on the way.

    ``from_list`` makes the move conditional on the entry being on that list.
    """

    entry_id: bytes
    to_list: int
    new_key: bytes | None = None
    new_secondary_key: bytes | Unchanged | None = UNCHANGED
    set_version: int | None = None
    increment_version: bool = False
    from_list: int | None = None


class BulkWrite(NamedTuple):
    """One entry of a bulk write: what ``write`` takes, as one value.

    A named tuple, not a dataclass: structure recovery builds one per entry it loads.
    """

    list_number: int
    key: bytes
    data: bytes = b""
    adjunct: bytes = b""
    secondary_key: bytes | None = None
    entry_id: bytes | None = None
    version: int = 0
    position: Position = Position.TAIL


@dataclass(frozen=True)
class BulkResult:
    """How far a bulk write, move or delete got.

    A bulk request stops after its budget of entries (the coupling facility's
    "timeout") and says so: ``processed`` entries of the request were handled (moved,
    deleted, or found missing when missing entries were allowed); redrive with the
    request's entries from ``processed`` on.  ``seqs`` holds one sequence number per
    entry changed, in request order; ``missing`` the ids that were not there.

    A request can also stop at an entry that cannot be handled (absent without
    ``missing_ok``, on the wrong list, a full target list).  The entries before it stay
    done, so that their sequence numbers can still be logged; ``error`` then holds the
    exception for the entry at ``processed``.
    """

    requested: int
    processed: int
    seqs: tuple[int, ...]
    missing: tuple[bytes, ...] = ()
    error: Exception | None = None

    @property
    def complete(self) -> bool:
        return self.error is None and self.processed >= self.requested

    @property
    def redrive_from(self) -> int | None:
        """The index to redrive from, or ``None`` when the whole request was done."""
        return None if self.complete else self.processed


@dataclass(frozen=True)
class ListInfo:
    """A list's controls and counts."""

    list_number: int
    entries: int
    elements: int
    limit: int | None
    authority: int


@dataclass(frozen=True)
class StructureStats:
    """Maximum and in-use counts of a structure, for monitoring and capacity planning."""

    name: str
    list_count: int
    element_size: int
    size: int
    max_size: int
    emc_percent: int
    max_entries: int
    entries: int
    max_elements: int
    elements: int
    max_emcs: int
    emcs: int
    users: int
    seq: int


@dataclass(frozen=True)
class UserInfo:
    """A user of a structure as the structure records it."""

    user_id: int
    name: str
    state: UserState


@dataclass(frozen=True)
class MonitorSpec:
    """What a registration watches on one list.

    A key range ``[low_key, high_key]`` (both inclusive) of primary keys, or, when
    ``secondary_key`` is given, the entries whose secondary key equals it.  A whole list
    is the range ``[LOWEST_KEY, HIGHEST_KEY]``; a sublist is ``[key, key]``.
    """

    list_number: int
    low_key: bytes = LOWEST_KEY
    high_key: bytes = HIGHEST_KEY
    secondary_key: bytes | None = None
    notify_empty: bool = False
    token: bytes = b""


@dataclass(frozen=True)
class Registration:
    """A monitor as registered, with the state of its set at registration."""

    monitor_id: int
    list_number: int
    nonempty: bool
    seq: int


@dataclass(frozen=True)
class MonitorEvent:
    """The monitored set of ``monitor_id`` moved to ``state`` at change ``seq``."""

    monitor_id: int
    list_number: int
    state: MonitorState
    seq: int
    token: bytes


# -- locators: how a request finds the one entry it acts on -------------------------
# Named tuples rather than dataclasses: a queue manager builds one per request.


class ById(NamedTuple):
    """The entry with this id; with ``list_number``, only if it is on that list."""

    entry_id: bytes
    list_number: int | None = None


class Head(NamedTuple):
    """The head (lowest-keyed) entry of a list; with ``key``, only if it compares.

    ``Head(3, key=K, compare=Compare.LE)`` is the patent's "key range checking on
    read": take the head of list 3 only if its key is ``<= K``.
    """

    list_number: int
    key: bytes | None = None
    compare: Compare = Compare.LE


class Tail(NamedTuple):
    """The tail (highest-keyed) entry of a list."""

    list_number: int


class ByKey(NamedTuple):
    """An entry found by key: the first ``== key``, the first ``>= key`` or the last ``<= key``."""

    list_number: int
    key: bytes
    compare: Compare = Compare.EQ


class BySecondaryKey(NamedTuple):
    """The first entry (in list order) whose secondary key equals ``secondary_key``."""

    list_number: int
    secondary_key: bytes


Locator = ById | Head | Tail | ByKey | BySecondaryKey
