"""What a queue manager's parts share: its identity, its connections, its units.

:class:`ManagerCore` is the internal object every part of the queue manager is given
(put and get, browse, syncpoint, peer recovery, the commands): who the manager is (its
name, id and the prefixes of the ids it makes), where time comes from, its journal,
its access to each structure and the lists it claimed there, the queues it opened, and
the units of work in progress.  :class:`~sharedq.mq.manager.QueueManager` is the public
face built on it; the parts never see the manager, only this.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from sharedq.cf import CFError, CouplingFacility
from sharedq.clock import Clock
from sharedq.mq import directory
from sharedq.mq.clock import Stamps
from sharedq.mq.definitions import PendingEvent, QueueState
from sharedq.mq.errors import MQReason, from_cf, mq_error, translated
from sharedq.mq.event_messages import CorrelIds
from sharedq.mq.event_stats import EventStats
from sharedq.mq.security import Guard
from sharedq.mq.units import UnitState
from sharedq.mq.waiting import EventDispatcher
from sharedq.seam.access import FaultHook, StructureAccess
from sharedq.seam.notes import Journal


@dataclass(eq=False)
class ManagerCore:
    """A queue manager's state, for its parts (see the module)."""

    name: str
    qm_id: int
    clock: Clock
    journal: Journal
    facility: CouplingFacility
    faults: FaultHook | None = None
    #: Its authorization checks (``sharedq.mq.security``); by default none.
    guard: Guard = field(default_factory=Guard.off)
    stamps: Stamps = field(init=False)
    #: The name as it goes into every message (its first 48 bytes).
    name_bytes: bytes = field(init=False)
    #: A generated message id is like MQ's: 'CSQ ', the name's first 4 characters, the
    #: put's stamp, then the manager id and incarnation nonce (unique in the group).
    msg_id_prefix: bytes = field(init=False)
    msg_id_suffix: bytes = field(init=False)
    #: An entry id is the manager id, the stamp and the nonce (the stamps').
    entry_id_prefix: bytes = field(init=False)
    nonce: bytes = field(init=False)
    #: (put list, priority, persistent) -> what its common puts share (operations.put).
    put_frames: dict[tuple[int, int, bool], tuple[bytes, bytes, bytes, bytes, bytes]] = field(
        init=False, default_factory=dict
    )
    #: The CorrelIds of the depth events it coordinates.
    correl_ids: CorrelIds = field(init=False)
    lock: threading.RLock = field(init=False, default_factory=threading.RLock)
    closed: bool = False
    #: The administrative structure, and the list holding this manager's descriptors.
    admin: StructureAccess = field(init=False)
    descriptor_list: int = field(init=False, default=0)
    structures: dict[str, StructureAccess] = field(init=False, default_factory=dict)
    #: Its own structure, whose directory holds its nonshared queues (also in
    #: ``structures``; see :mod:`sharedq.mq.private_queues`).
    private: StructureAccess | None = field(init=False, default=None)
    list_counts: dict[str, int] = field(init=False, default_factory=dict)
    #: The largest message body each structure takes (its entry size less the header).
    entry_limits: dict[str, int] = field(init=False, default_factory=dict)
    lists: dict[str, directory.ManagerLists] = field(init=False, default_factory=dict)
    queues: dict[str, QueueState] = field(init=False, default_factory=dict)
    dispatchers: dict[str, EventDispatcher] = field(init=False, default_factory=dict)
    #: Units of work in progress, by owning thread; units restart recovered, by id.
    active: dict[int, UnitState] = field(init=False, default_factory=dict)
    recovered: dict[bytes, UnitState] = field(init=False, default_factory=dict)
    #: MQ's PERFMEV: whether this manager issues queue depth event messages.
    performance_events: bool = False
    #: What a depth event this manager coordinates is handed to (its message and its
    #: broadcast: ``sharedq.mq.event_broadcast``); ``None``: only toggled.
    event_sink: Callable[[QueueState, PendingEvent], None] | None = None
    #: Given a queue opened with a depth event pending in its definition (one this
    #: manager's previous incarnation may have left unbroadcast).
    on_pending: Callable[[QueueState], None] | None = None

    def __post_init__(self) -> None:
        self.stamps = Stamps(self.clock, self.qm_id)
        self.name_bytes = self.name.encode()
        self.msg_id_prefix = b"CSQ " + self.name_bytes[:4].ljust(4)
        self.msg_id_suffix = bytes((self.qm_id,)) + self.stamps.nonce + b"\x00" * 4
        self.entry_id_prefix = bytes((self.qm_id,))
        self.nonce = self.stamps.nonce
        self.correl_ids = CorrelIds(self.qm_id, self.stamps.nonce)

    def check_open(self) -> None:
        if self.closed:
            raise mq_error(MQReason.HCONN_ERROR, f"queue manager {self.name} is closed")

    def check_unit(self, uow: UnitState) -> None:
        """``uow`` is a unit of this manager that the calling thread may work in now."""
        if not isinstance(uow, UnitState) or uow.stamps is not self.stamps:
            raise mq_error(MQReason.BAD_ARGUMENT, f"{uow!r} is not a unit of work of {self.name}")
        uow.check_usable(for_operation=True)

    def unit_ended(self, uow: UnitState) -> None:
        """Forget a unit that ended (its thread may begin another)."""
        owner = uow.owner
        if owner is None:  # a unit recovered at restart, resolved
            with self.lock:
                self.recovered.pop(uow.uow_id, None)
        elif self.active.get(owner) is uow:
            del self.active[owner]

    def state(self, name: str) -> QueueState:
        """A queue's state, read from the directory the first time it is asked for."""
        known = isinstance(name, str)  # else no queue's name (a list: not even hashable)
        state = self.queues.get(name) if known else None
        if state is not None:
            return state
        with self.lock, translated(f"open {name}"):
            state = self.queues.get(name) if known else None
            if state is not None:
                return state
            entry = directory.queue_entry(self.admin, name) if known else None
            if entry is None and self.private is not None and known:
                entry = directory.queue_entry(self.private, name)  # a nonshared queue
            if entry is None:
                raise mq_error(MQReason.UNKNOWN_OBJECT_NAME, f"no shared queue named {name!r}")
            acc = self.structures.get(entry.structure)
            if acc is None:
                raise mq_error(
                    MQReason.CF_NOT_AVAILABLE,
                    f"queue {name} is in structure {entry.structure}, which {self.name} "
                    "is not connected to",
                )
            lists = self.lists[entry.structure]
            state = QueueState(
                name,
                acc,
                entry.list_number,
                lists.get_list,
                lists.expiry_list,
                self.entry_limits[entry.structure],
            )
            state.stats = EventStats(self.clock.now_s())
            self.queues[name] = state
            if state.definition.pending_event is not None and self.on_pending is not None:
                self.on_pending(state)
            return state

    def refresh(self, queue: QueueState) -> None:
        """Read a queue's definition again (its list authority changed)."""
        try:
            queue.refresh()
        except CFError as error:
            raise from_cf(error, f"re-read {queue.name}") from error

    def dispatcher(self, acc: StructureAccess) -> EventDispatcher:
        """The structure's event dispatcher (one per connection, shared by waiters)."""
        with self.lock:
            found = self.dispatchers.get(acc.name)
            if found is None:
                found = self.dispatchers[acc.name] = EventDispatcher(acc)
            return found
