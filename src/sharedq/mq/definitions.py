"""Shared queue definitions: kept in each put list's control entry, the LHQC.

A queue's attributes live in its LHQC (list-header queue controls), the entry with key
X'FF'x16 on its put list (p[118]).  Every manager caches them with the list's
*authority* value as it read it, and passes that authority on every put and get
(``expect_authority``).  Changing a queue follows the patent's protocol (p[119]):
read the authority, then the LHQC, rewrite the LHQC on condition that the authority
is unchanged, and increment the authority in the same request.  Every other manager's
next put or get then fails its authority comparison, re-reads the LHQC and acts on
what it finds, so put-inhibiting a queue on one manager is honoured by all.

The queue's list limit is its maximum depth plus one, for the LHQC (p[258]).

Depth-event settings (``DepthEvents``) are attributes like the others; a depth event
toggles them with the same protocol (:mod:`sharedq.mq.depth_events`), and records the
event it has yet to broadcast in the LHQC too (``pending_event``), in the same request.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from typing import Any

import msgpack

from sharedq import names
from sharedq.cf import AuthorityMismatch, ById, CFError, NoSuchEntry
from sharedq.mq import directory, keys
from sharedq.mq.errors import JournalFailed, MQReason, mq_error
from sharedq.mq.event_stats import EventStats
from sharedq.mq.journal import ChangeKind
from sharedq.seam.access import StructureAccess, tolerating

#: MQ's largest MAXDEPTH.
MAX_DEPTH_LIMIT = 999_999_999
#: MQ's default MAXDEPTH for a local queue.
DEFAULT_MAX_DEPTH = 5000
#: MQ's longest DESCR, in characters.
MAX_DESCRIPTION = 64
#: Fields of a definition that define_queue and alter_queue do not take.
NOT_ATTRIBUTES = frozenset({"name", "structure", "pending_event"})


class IndexType(Enum):
    """What a shared queue is indexed by (MQ's INDXTYPE): gets by that id are direct."""

    NONE = "none"
    MSG_ID = "msg-id"
    CORREL_ID = "correl-id"


class Disposition(Enum):
    """Where a queue lives (MQ's QSGDISP): shared by the group, or one manager's own.

    ``SHARED`` queues are in a list structure every manager of the group reaches;
    ``QMGR`` (nonshared) queues are reachable by the manager that defined them only.
    """

    SHARED = "shared"
    QMGR = "qmgr"


@dataclass(frozen=True)
class DepthEvents:
    """Queue depth event settings: MQ's QDEPTHHI, QDEPTHLO (percentages of max depth),
    QDPHIEV, QDPLOEV and QDPMAXEV.

    Every event is disabled by default, as in MQ (spec QD-1); the limits default to
    MQ's 80 and 20 per cent.  A depth event toggles the flags (docs/depth-events.md).
    """

    high_limit: int = 80
    low_limit: int = 20
    high_enabled: bool = False
    low_enabled: bool = False
    full_enabled: bool = False


@dataclass(frozen=True)
class PendingEvent:
    """A depth event toggled on a shared queue and not yet broadcast (kept in the LHQC).

    The coordinator writes it in the same compare-and-swap that toggles the queue and
    clears it once every active manager was asked; a coordinator that died in between
    leaves it for the manager that recovers it to finish (docs/depth-events.md).
    """

    correl_id: bytes
    event: str
    coordinator: str
    at_s: float
    depth: int


@dataclass(frozen=True)
class QueueDefinition:
    """A shared queue's definition, as every manager of the group sees it.

    ``max_message_length`` of ``None`` means as long as a list entry of the queue's
    structure can hold.
    """

    name: str
    structure: str
    max_depth: int = DEFAULT_MAX_DEPTH
    index: IndexType = IndexType.NONE
    max_message_length: int | None = None
    put_inhibited: bool = False
    get_inhibited: bool = False
    default_priority: int = 0
    default_persistent: bool = False
    description: str = ""
    depth_events: DepthEvents = field(default_factory=DepthEvents)
    disposition: Disposition = Disposition.SHARED
    #: Not an attribute: the depth event in progress (see :class:`PendingEvent`).
    pending_event: PendingEvent | None = None

    def check(self) -> None:
        """``InvalidArgument`` unless every attribute is valid."""
        bad = MQReason.BAD_ARGUMENT
        problem = names.QUEUE.problem(self.name)  # MQ's object names (sharedq.names)
        if problem is not None:
            raise mq_error(bad, problem)
        if not _int_in(self.max_depth, 0, MAX_DEPTH_LIMIT):
            raise mq_error(bad, f"max_depth {self.max_depth!r} must be 0..{MAX_DEPTH_LIMIT}")
        if not isinstance(self.disposition, Disposition):
            raise mq_error(bad, f"disposition {self.disposition!r} must be a Disposition")
        if not isinstance(self.index, IndexType):
            raise mq_error(bad, f"index {self.index!r} must be an IndexType")
        if self.max_message_length is not None and not _int_in(self.max_message_length, 0, 1 << 20):
            raise mq_error(bad, f"max_message_length {self.max_message_length!r} is not valid")
        if not _int_in(self.default_priority, 0, 9):
            raise mq_error(MQReason.PRIORITY_ERROR, "default_priority must be 0..9")
        events = self.depth_events
        if not isinstance(events, DepthEvents):
            raise mq_error(bad, f"depth_events {events!r} must be a DepthEvents")
        if not (_int_in(events.high_limit, 0, 100) and _int_in(events.low_limit, 0, 100)):
            raise mq_error(bad, "depth event limits are percentages, 0..100")
        for flag in (events.high_enabled, events.low_enabled, events.full_enabled):
            if not isinstance(flag, bool):
                raise mq_error(bad, f"depth event switch {flag!r} is not a bool")
        for flag in (self.put_inhibited, self.get_inhibited, self.default_persistent):
            if not isinstance(flag, bool):
                raise mq_error(bad, f"{flag!r} is not a bool")
        if not isinstance(self.description, str) or len(self.description) > MAX_DESCRIPTION:
            raise mq_error(bad, f"description must be text of 0..{MAX_DESCRIPTION} characters")

    def encode(self) -> bytes:
        value = asdict(self)
        value["index"] = self.index.value
        value["disposition"] = self.disposition.value
        packed: bytes = msgpack.packb(value, use_bin_type=True)
        return packed

    @classmethod
    def decode(cls, data: bytes) -> QueueDefinition:
        value: dict[str, Any] = msgpack.unpackb(data, raw=False)
        value["index"] = IndexType(value["index"])
        value["depth_events"] = DepthEvents(**value["depth_events"])
        pending = value.get("pending_event")
        value["pending_event"] = None if pending is None else PendingEvent(**pending)
        value["disposition"] = Disposition(value.get("disposition", Disposition.SHARED.value))
        return cls(**value)


def _int_in(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


class QueueState:
    """A manager's view of one shared queue: where it is, and its cached definition.

    ``authority`` is the list authority the cached definition was read under; puts and
    gets pass it, and a mismatch makes them call :meth:`refresh`.
    """

    __slots__ = (
        "_entry_limit",
        "_lock",
        "acc",
        "authority",
        "definition",
        "expiry_list",
        "get_list",
        "index",
        "lhqc_id",
        "max_body",
        "name",
        "put_list",
        "stats",
    )

    def __init__(
        self,
        name: str,
        acc: StructureAccess,
        put_list: int,
        get_list: int,
        expiry_list: int,
        entry_body_limit: int,
    ) -> None:
        self.name = name
        self.acc = acc
        self.put_list = put_list
        self.get_list = get_list
        self.expiry_list = expiry_list
        self.lhqc_id = keys.lhqc_id(put_list)
        self._lock = threading.Lock()
        self.authority = -1
        self.definition = QueueDefinition(name, acc.name)
        self.index = IndexType.NONE
        self.max_body = entry_body_limit
        self._entry_limit = entry_body_limit
        #: This manager's statistics window on the queue (its opener sets the start).
        self.stats = EventStats(0.0)
        self.refresh()

    def refresh(self) -> QueueDefinition:
        """Re-read the authority, then the LHQC: never a stale LHQC under a new authority."""
        with self._lock:
            info = self.acc.list_info(self.put_list)
            entry = self.acc.read(ById(self.lhqc_id, self.put_list))
            if entry is None:  # pragma: no cover - ById raises rather than finds nothing
                raise mq_error(MQReason.UNKNOWN_OBJECT_NAME, f"queue {self.name} has no LHQC")
            definition = QueueDefinition.decode(entry.data)
            self.definition = definition
            self.index = definition.index
            limit = self._entry_limit
            if definition.max_message_length is not None:
                limit = min(limit, definition.max_message_length)
            self.max_body = limit
            self.authority = info.authority
            if info.limit != definition.max_depth + 1:
                # An alter that died between rewriting the LHQC and setting the limit.
                # A repair: it stands even if the log cannot record it (a structure
                # rebuilt without it is repaired again by its first refresh).
                with tolerating():
                    self.acc.set_list_controls(
                        self.put_list,
                        limit=definition.max_depth + 1,
                        kind=ChangeKind.DEFINITION,
                        queue=self.name,
                    )
            return definition

    def revalidate(self) -> QueueDefinition:
        """Re-read the definition only if the authority moved since it was read.

        A manager that saw the queue inhibited must not go on refusing from its cache:
        a refusal is decided only after checking the structure.
        """
        if self.acc.list_info(self.put_list).authority != self.authority:
            return self.refresh()
        return self.definition

    def alter(self, **changes: Any) -> QueueDefinition:
        """Change attributes with the LHQC protocol; returns the new definition."""
        for _ in range(100):
            current = self.refresh()
            altered = replace(current, **changes)
            altered.check()
            try:
                self.rewrite(altered)
            except AuthorityMismatch:
                continue
            except JournalFailed:
                self._restore(current, current)
                raise
            try:
                if altered.max_depth != current.max_depth:
                    self.acc.set_list_controls(
                        self.put_list,
                        limit=altered.max_depth + 1,
                        kind=ChangeKind.DEFINITION,
                        queue=self.name,
                    )
            except JournalFailed:
                self._restore(current, altered)
                raise
            self.refresh()
            return altered
        raise mq_error(MQReason.UNEXPECTED_ERROR, f"queue {self.name} kept changing under alter")

    def rewrite(self, definition: QueueDefinition) -> None:
        """Rewrite the LHQC, on condition that the authority is the one the cached
        definition was read under, and increment it (``AuthorityMismatch`` if not)."""
        self.acc.update(
            ById(self.lhqc_id, self.put_list),
            data=definition.encode(),
            expect_authority=self.authority,
            increment_authority=True,
            kind=ChangeKind.DEFINITION,
            queue=self.name,
        )

    def _restore(self, current: QueueDefinition, limit_of: QueueDefinition) -> None:
        """Take back an alter the log could not record: the old LHQC (the authority moves
        again, so every manager re-reads it) and, if it was changed, the old limit."""
        with contextlib.suppress(CFError), tolerating():
            if limit_of.max_depth != current.max_depth:
                self.acc.set_list_controls(
                    self.put_list,
                    limit=current.max_depth + 1,
                    kind=ChangeKind.DEFINITION,
                    queue=self.name,
                )
            self.acc.update(
                ById(self.lhqc_id, self.put_list),
                data=current.encode(),
                increment_authority=True,
                kind=ChangeKind.DEFINITION,
                queue=self.name,
            )


def define(
    admin: StructureAccess, acc: StructureAccess, definition: QueueDefinition, list_count: int
) -> bool:
    """Claim a put list for a new queue, write its LHQC, record it in the directory.

    ``False`` if a queue of that name was recorded meanwhile.  What the log could not
    record is taken back, with what was done for it (``JournalFailed`` raised).
    """
    name = definition.name
    put_list = directory.claim_list(acc, directory.USE_QUEUE, name, list_count)
    failure: JournalFailed | None = None
    try:
        create_lhqc(acc, definition, put_list)
        if directory.add_queue_entry(admin, directory.QueueEntry(name, acc.name, put_list)):
            return True
    except JournalFailed as error:
        failure = error
    with contextlib.suppress(CFError), tolerating():
        with contextlib.suppress(NoSuchEntry):
            acc.delete(ById(keys.lhqc_id(put_list)), kind=ChangeKind.DEFINITION, queue=name)
        directory.release_list(acc, put_list)
    if failure is not None:
        raise failure
    return False


def create_lhqc(acc: StructureAccess, definition: QueueDefinition, put_list: int) -> None:
    """Write a new queue's LHQC and set its list limit (its list is freshly claimed)."""
    acc.write(
        put_list,
        keys.LHQC_KEY,
        definition.encode(),
        entry_id=keys.lhqc_id(put_list),
        kind=ChangeKind.DEFINITION,
        queue=definition.name,
    )
    acc.set_list_controls(
        put_list, limit=definition.max_depth + 1, kind=ChangeKind.DEFINITION, queue=definition.name
    )
