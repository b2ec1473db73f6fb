"""What a unit of work tracks: the patent's eTHRD, TRQS and TROP (§4).

A unit of work (:class:`UnitState`; the application's handle is
:class:`~sharedq.mq.uow.UnitOfWork`) is owned by the thread that began it.  It keeps, per structure
(by structure number) and per queue in order of first access, a :class:`Trqs` whose
:class:`Trop` records are the unit's puts and gets.  At syncpoint the structures are
processed in ascending number, the queues in order of first access, and each queue's
operations in priority and put-time order (§4.5).

The best keys (§5.5): for each queue, the committed form of the unit's best
(highest-priority, then earliest) own uncommitted in-syncpoint put, overall and among
persistent puts only.  A get in syncpoint takes the head of the put list only if its
key is at most the best key; otherwise the unit gets its own put.  The candidates are
kept sorted, so that the best keys stay right when a put becomes a get and when a
backout-last turns it back into a put (gap O4).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from enum import Enum, IntEnum
from operator import attrgetter

from sortedcontainers import SortedKeyList

from sharedq.mq import keys
from sharedq.mq.clock import Stamps
from sharedq.mq.definitions import QueueState
from sharedq.mq.errors import MQReason, mq_error


class TropKind(IntEnum):
    """What one operation of a unit of work is."""

    #: An uncommitted put (key X'F6...').
    PUT = 1
    #: A get of a committed message, now on this manager's get list.
    GET = 2
    #: A get of the unit's own uncommitted put: the entry stays on the put list.
    OWN_GET = 3


class Trop:
    """One put or get of a unit of work (a TROP, §4.3)."""

    __slots__ = (
        "ckey",
        "entry_id",
        "expires_at",
        "key",
        "kind",
        "msg_id",
        "persistent",
        "secondary",
        "trqs",
    )

    def __init__(
        self,
        kind: TropKind,
        entry_id: bytes,
        key: bytes,
        persistent: bool,
        msg_id: bytes,
        secondary: bytes | None,
        expires_at: float | None,
        trqs: Trqs,
    ) -> None:
        self.kind = kind
        self.entry_id = entry_id
        #: The entry's key now: uncommitted for PUT and OWN_GET, committed for GET.
        self.key = key
        self.ckey = key if key[0] != keys.UNCOMMITTED_MARK else keys.committed_form(key)
        self.persistent = persistent
        self.msg_id = msg_id
        #: The secondary key a put takes at commit (indexed queues), else ``None``.
        self.secondary = secondary
        self.expires_at = expires_at
        self.trqs = trqs

    def __repr__(self) -> str:
        return f"<Trop {self.kind.name} {self.entry_id.hex()} key={self.key.hex()}>"


#: A TROP's committed key (a C-level getter: sorting runs it once per operation).
_by_committed_key = attrgetter("ckey")


class Trqs:
    """The operations of one unit of work on one queue (a TRQS, §4.2).

    Puts added become candidates for the best keys lazily: they wait in a list until a
    best key is asked for (a unit that only puts never sorts them).
    """

    __slots__ = ("_best_all", "_best_persistent", "_pending", "queue", "trops")

    def __init__(self, queue: QueueState) -> None:
        self.queue = queue
        self.trops: list[Trop] = []
        self._best_all: SortedKeyList | None = None
        self._best_persistent: SortedKeyList | None = None
        #: Candidates not yet in the sorted lists, in the order they came.
        self._pending: list[Trop] = []

    def add(self, trop: Trop) -> None:
        self.trops.append(trop)
        if trop.kind is _PUT_OP:
            self._pending.append(trop)

    def add_puts(self, trops: list[Trop]) -> None:
        """Add a batch of PUT operations (``add`` each, at once)."""
        self.trops += trops
        self._pending += trops

    def _candidate(self, trop: Trop) -> None:
        self._pending.append(trop)

    def _sorted(self) -> tuple[SortedKeyList, SortedKeyList]:
        """The candidates, sorted, every pending one taken in (committed keys hold
        their put's stamp, so no two are equal and the order they came in is moot)."""
        best_all, best_persistent = self._best_all, self._best_persistent
        if best_all is None or best_persistent is None:
            best_all = self._best_all = SortedKeyList(key=_by_committed_key)
            best_persistent = self._best_persistent = SortedKeyList(key=_by_committed_key)
        pending = self._pending
        if pending:
            best_all.update(pending)
            best_persistent.update([trop for trop in pending if trop.persistent])
            pending.clear()
        return best_all, best_persistent

    def best(self, persistent_only: bool) -> Trop | None:
        """The unit's best own uncommitted put here, or ``None``."""
        if self._best_all is None and not self._pending:
            return None
        best_all, best_persistent = self._sorted()
        found = best_persistent if persistent_only else best_all
        return found[0] if found else None

    def best_key(self, persistent_only: bool) -> bytes:
        """The key a get compares the head with: X'0A00..' when there is no candidate."""
        best = self.best(persistent_only)
        return keys.COMMITTED_COMPARATOR if best is None else best.ckey

    def take_own(self, trop: Trop) -> None:
        """A get returned the unit's own put: the TROP says get now (p[158], p[227])."""
        self._drop_candidate(trop)
        trop.kind = TropKind.OWN_GET

    def give_back_own(self, trop: Trop) -> None:
        """Backout last message of an own put: the TROP says put again (p[242])."""
        trop.kind = TropKind.PUT
        self._candidate(trop)

    def remove(self, trop: Trop) -> None:
        self.trops.remove(trop)
        if trop.kind is TropKind.PUT:
            self._drop_candidate(trop)

    def _drop_candidate(self, trop: Trop) -> None:
        if self._best_all is None and not self._pending:
            return
        best_all, best_persistent = self._sorted()
        if trop in best_all:
            best_all.remove(trop)
        if trop in best_persistent:
            best_persistent.remove(trop)

    def ordered(self) -> list[Trop]:
        """The operations in priority, then put-time, order (§4.4)."""
        return sorted(self.trops, key=_by_committed_key)


class Status(IntEnum):
    """A unit of work's disposition as its descriptors record it (§6.2)."""

    BEGIN_COMMIT = 1
    IN_COMMIT = 2
    IN_PREPARE = 3
    IN_ABORT = 4

    @property
    def peer_recoverable(self) -> bool:
        """A peer may finish "in commit" and "in abort"; the others are the owner's."""
        return self in (Status.IN_COMMIT, Status.IN_ABORT)


@dataclass
class Written:
    """What a unit of work wrote (its descriptors), so that it can update and delete it."""

    status: Status
    #: structure number -> entry ids of its parts, in part order.
    parts: dict[int, list[bytes]]
    #: The entry holding the status (the MUSE, or the single structure's part 0).
    status_id: bytes
    status_version: int = 0
    muse_id: bytes | None = None


class UowState(Enum):
    """Where a unit of work is (``ethr_State``, §6.1, plus its end)."""

    ACTIVE = "active"
    BEGIN_COMMIT = "begin-commit"
    PREPARED = "prepared"
    ENDED = "ended"


#: Enum members read on every message, as globals (cheaper than from their class).
_ACTIVE, _ENDED, _PUT_OP = UowState.ACTIVE, UowState.ENDED, TropKind.PUT


class UnitState:
    """A unit of work's state: its operations per structure and queue, its status, its
    descriptors.  What syncpoint works on; the application holds a ``UnitOfWork``."""

    def __init__(self, stamps: Stamps, owner: int | None) -> None:
        #: The owning manager's stamps: they make the unit's id, and say whose it is.
        self.stamps = stamps
        #: The thread id of the owner; ``None`` for a unit recovered at restart.
        self.owner = owner
        self.state = _ACTIVE
        self._uow_id: bytes | None = None
        #: structure number -> put list -> TRQS, in order of first access.
        self.structures: dict[int, dict[int, Trqs]] = {}
        self.marked: Trop | None = None
        #: Descriptor bookkeeping of :mod:`sharedq.mq.descriptors`, once written.
        self.descriptors: Written | None = None
        #: Why the unit ended without its owner (a structure it used was lost).
        self.lost: str | None = None

    def __repr__(self) -> str:
        ident = self._uow_id.hex() if self._uow_id else "-"
        return f"<{type(self).__name__} {ident} {self.state.value} ops={self.operation_count}>"

    @property
    def uow_id(self) -> bytes:
        """The 8-byte UOW id: created at the first put or get (p[57])."""
        if self._uow_id is None:
            self._uow_id = self.stamps.uow_id()
        return self._uow_id

    @property
    def has_id(self) -> bool:
        return self._uow_id is not None

    def renew_id(self) -> None:
        self._uow_id = None

    def restore_id(self, uow_id: bytes) -> None:
        """Take the id of a unit of a previous incarnation (restart rebuilds it)."""
        self._uow_id = uow_id

    @property
    def operation_count(self) -> int:
        return sum(len(t.trops) for qs in self.structures.values() for t in qs.values())

    def trqs_for(self, queue: QueueState) -> Trqs:
        per_structure = self.structures.get(queue.acc.number)
        if per_structure is None:
            per_structure = self.structures[queue.acc.number] = {}
        trqs = per_structure.get(queue.put_list)
        if trqs is None:
            trqs = per_structure[queue.put_list] = Trqs(queue)
        return trqs

    def existing_trqs(self, queue: QueueState) -> Trqs | None:
        per_structure = self.structures.get(queue.acc.number)
        return None if per_structure is None else per_structure.get(queue.put_list)

    def forget(self, trop: Trop) -> None:
        """Remove one operation (and its TRQS if that empties it)."""
        trqs = trop.trqs
        trqs.remove(trop)
        if not trqs.trops:
            per_structure = self.structures[trqs.queue.acc.number]
            del per_structure[trqs.queue.put_list]
            if not per_structure:
                del self.structures[trqs.queue.acc.number]

    def find(self, token: bytes) -> Trop | None:
        for per_structure in self.structures.values():
            for trqs in per_structure.values():
                for trop in trqs.trops:
                    if trop.entry_id == token:
                        return trop
        return None

    # -- checks --------------------------------------------------------------------------

    def check_usable(self, *, for_operation: bool) -> None:
        """Raise unless the calling thread may use this unit now."""
        if self.owner is not None and self.owner != threading.get_ident():
            raise mq_error(MQReason.UOW_NOT_OWNER, "this unit of work belongs to another thread")
        if self.lost is not None:
            raise mq_error(MQReason.BACKED_OUT, self.lost)
        if self.state is _ENDED:
            raise mq_error(MQReason.UOW_STATE_ERROR, "this unit of work has ended")
        if for_operation and self.state is not _ACTIVE:
            raise mq_error(
                MQReason.UOW_STATE_ERROR,
                f"no puts or gets in a unit of work that is {self.state.value}",
            )
