"""The state of one list structure held in memory, and its primitive changes.

All state sits behind one re-entrant lock, so every request (see ``connection.py``) is
atomic exactly as a coupling-facility command is; each user has a condition variable on
that lock, so a change that queues an event wakes that user's waiters directly.

Entries are stored as the immutable :class:`ListEntry` tuples requests return, so a
read or a delete hands out what is stored without copying; a change stores a new
tuple.  Each list keeps its entries in a ``SortedDict`` keyed by ``(key, ordinal)``:
the ordinal places an entry among others of equal key (tail or head of the sublist)
and never repeats, because it is derived from the structure's strictly increasing
sequence number.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from sortedcontainers import SortedDict, SortedList

from sharedq.cf import validation as v
from sharedq.cf.errors import CFReason, cf_error
from sharedq.cf.params import Capacity, StructureParams, validate_params
from sharedq.cf.types import (
    ById,
    ByKey,
    BySecondaryKey,
    Compare,
    Head,
    ListEntry,
    Locator,
    MonitorEvent,
    MonitorSpec,
    MonitorState,
    Position,
    StructureStats,
    Tail,
    UserInfo,
    UserState,
)

#: Entries a bulk request handles before it returns for a redrive, when not told.
DEFAULT_BULK_BUDGET = 1024
#: Ordinals of tail writes count up from here, of head writes down from it.
ORDINAL_BASE = 2**63
#: Above every ordinal: ``(key, ORDINAL_TOP)`` sorts after every entry of that key.
ORDINAL_TOP = 2**64


class MemoryList:
    """One list header: its entries in order, indexes, controls and monitors."""

    __slots__ = ("authority", "by_secondary", "elements", "limit", "monitors", "order")

    def __init__(self) -> None:
        self.order: SortedDict = SortedDict()  # (key, ordinal) -> ListEntry
        self.by_secondary: dict[bytes, SortedList] = {}  # skey -> SortedList[(key, ordinal)]
        self.limit: int | None = None
        self.authority = 0
        self.elements = 0
        self.monitors: list[Monitor] = []


@dataclass
class Monitor:
    monitor_id: int
    user_id: int
    spec: MonitorSpec
    nonempty: bool
    undelivered_nonempty: bool = False


@dataclass
class User:
    user_id: int
    name: str
    incarnation: int
    condition: threading.Condition
    state: UserState = UserState.ACTIVE
    #: The incarnation whose requests are accepted now; 0 once failed, gone or deleted.
    live: int = 0
    events: deque[MonitorEvent] = field(default_factory=deque)
    monitors: dict[int, Monitor] = field(default_factory=dict)


class MemoryStructure:
    """One structure's state; requests reach it through a connection, under its lock."""

    def __init__(self, params: StructureParams, sequence_floor: int = 0) -> None:
        self.capacity: Capacity = validate_params(params)
        self.params = params
        self.lock = threading.RLock()
        self.lists = [MemoryList() for _ in range(params.list_count)]
        # entry id -> (the entry, its ordinal); the entry names its list and key.
        self.entries: dict[bytes, tuple[ListEntry, int]] = {}
        self.users: dict[int, User] = {}
        self.locks: list[int | None] = [None] * params.lock_count
        self.locks_held = 0
        self.seq = sequence_floor
        self.elements_in_use = 0
        self.emcs_in_use = 0
        self.next_monitor_id = 1
        self.next_incarnation = 1
        self.deleted = False
        # (list, key, secondary key) of entries that came or went in the change in
        # progress; monitors are evaluated once the change is whole (see notify).
        self.touched: list[tuple[int, bytes, bytes | None]] = []

    # -- bookkeeping -------------------------------------------------------------------

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def check_user(self, user: User, incarnation: int) -> None:
        """Raise unless this connection of ``user`` may still make requests.

        Hot requests test ``user.live == incarnation`` inline and call this only when
        it does not hold, to raise the precise error.
        """
        if self.deleted:
            raise cf_error(CFReason.STRUCTURE_LOST, f"structure {self.params.name} was deleted")
        if (
            user.incarnation != incarnation
            or user.state is not UserState.ACTIVE
            or self.users.get(user.user_id) is not user
        ):
            raise cf_error(
                CFReason.NOT_CONNECTED,
                f"user {user.user_id} is not connected to structure {self.params.name}",
            )

    def check_conditions(
        self,
        user_id: int,
        list_number: int,
        expect_authority: int | None,
        not_locked: Iterable[int],
    ) -> None:
        for number in v.check_locks(not_locked, self.params.lock_count):
            holder = self.locks[number]
            if holder is not None and holder != user_id:
                raise cf_error(
                    CFReason.LOCK_HELD, f"lock {number} is held by user {holder}", holder=holder
                )
        if expect_authority is not None:
            authority = self.lists[list_number].authority
            if authority != expect_authority:
                raise cf_error(
                    CFReason.AUTHORITY_MISMATCH,
                    f"list {list_number} authority is {authority}, not {expect_authority}",
                    authority=authority,
                )

    def check_version(self, entry: ListEntry, expect_version: int | None) -> None:
        if expect_version is not None and entry.version != expect_version:
            v.check_version(expect_version, "expect_version")
            raise cf_error(
                CFReason.VERSION_MISMATCH,
                f"entry {entry.entry_id.hex()} has version {entry.version}, not {expect_version}",
                version=entry.version,
            )

    def check_room(self, entries: int, elements: int) -> None:
        if len(self.entries) + entries > self.capacity.max_entries:
            raise cf_error(
                CFReason.STRUCTURE_FULL,
                f"structure {self.params.name} has all {self.capacity.max_entries} entries in use",
            )
        if self.elements_in_use + elements > self.capacity.max_elements:
            raise cf_error(
                CFReason.STRUCTURE_FULL,
                f"structure {self.params.name} has {self.elements_in_use} of "
                f"{self.capacity.max_elements} elements in use; {elements} more do not fit",
            )

    def check_limit(self, list_number: int, ignore_limit: bool) -> None:
        lst = self.lists[list_number]
        if not ignore_limit and lst.limit is not None and len(lst.order) >= lst.limit:
            raise cf_error(
                CFReason.LIST_FULL, f"list {list_number} is at its limit of {lst.limit} entries"
            )

    # -- placing and removing entries (no checks; callers have checked) ---------------

    def insert(self, entry: ListEntry, ordinal: int) -> None:
        lst = self.lists[entry.list_number]
        sort_key = (entry.key, ordinal)
        lst.order[sort_key] = entry
        lst.elements += entry.elements
        self.entries[entry.entry_id] = (entry, ordinal)
        skey = entry.secondary_key
        if skey is not None:
            index = lst.by_secondary.get(skey)
            if index is None:
                index = lst.by_secondary[skey] = SortedList()
            index.add(sort_key)
        if lst.monitors:
            self.touched.append((entry.list_number, entry.key, skey))

    def remove(self, entry: ListEntry, ordinal: int, forget: bool) -> None:
        """Take an entry off its list; ``forget`` also drops it from the structure."""
        lst = self.lists[entry.list_number]
        sort_key = (entry.key, ordinal)
        del lst.order[sort_key]
        lst.elements -= entry.elements
        if forget:
            del self.entries[entry.entry_id]
            self.elements_in_use -= entry.elements
        skey = entry.secondary_key
        if skey is not None:
            index = lst.by_secondary[skey]
            index.remove(sort_key)
            if not index:
                del lst.by_secondary[skey]
        if lst.monitors:
            self.touched.append((entry.list_number, entry.key, skey))

    def replace_in_place(self, old: ListEntry, new: ListEntry, ordinal: int) -> None:
        """Store a changed entry that keeps its list, key and secondary key."""
        lst = self.lists[old.list_number]
        lst.order[(old.key, ordinal)] = new
        lst.elements += new.elements - old.elements
        self.elements_in_use += new.elements - old.elements
        self.entries[old.entry_id] = (new, ordinal)

    # -- locating -------------------------------------------------------------------------

    def locate(self, locator: Locator) -> tuple[ListEntry, int] | None:
        """The located entry and its ordinal; ``None`` for a positional miss."""
        kind = type(locator)
        if kind is ById:
            assert isinstance(locator, ById)
            if type(locator.entry_id) is not bytes:
                v.check_locator(locator, self.params.list_count)
            found = self.entries.get(locator.entry_id)
            if found is None:
                v.check_locator(locator, self.params.list_count)
                raise cf_error(
                    CFReason.NO_SUCH_ENTRY,
                    f"no entry {locator.entry_id.hex()} in structure {self.params.name}",
                )
            if locator.list_number is not None and found[0].list_number != locator.list_number:
                v.check_locator(locator, self.params.list_count)
                raise cf_error(
                    CFReason.LIST_MISMATCH,
                    f"entry {locator.entry_id.hex()} is on list {found[0].list_number}, "
                    f"not {locator.list_number}",
                    list_number=found[0].list_number,
                )
            return found
        if kind is Head:
            assert isinstance(locator, Head)
            number, key = locator.list_number, locator.key
            if (
                type(number) is not int
                or not 0 <= number < self.params.list_count
                or (key is not None and (type(key) is not bytes or len(key) != 16))
                or type(locator.compare) is not Compare
            ):
                v.check_locator(locator, self.params.list_count)
            order = self.lists[number].order
            if not order:
                return None
            (head_key, ordinal), head = order.peekitem(0)
            if key is not None and not (
                head_key <= key
                if locator.compare is Compare.LE
                else locator.compare.holds(head_key, key)
            ):
                return None
            return head, ordinal
        v.check_locator(locator, self.params.list_count)
        if kind is Tail:
            assert isinstance(locator, Tail)
            order = self.lists[locator.list_number].order
            if not order:
                return None
            (_, ordinal), tail = order.peekitem(-1)
            return tail, ordinal
        if kind is ByKey:
            assert isinstance(locator, ByKey)
            return self._locate_by_key(locator)
        assert isinstance(locator, BySecondaryKey)
        lst = self.lists[locator.list_number]
        index = lst.by_secondary.get(locator.secondary_key)
        if not index:
            return None
        sort_key = index[0]
        return lst.order[sort_key], sort_key[1]

    def _locate_by_key(self, locator: ByKey) -> tuple[ListEntry, int] | None:
        order = self.lists[locator.list_number].order
        key = locator.key
        if locator.compare is Compare.LE:
            at = order.bisect_right((key, ORDINAL_TOP)) - 1
        else:
            at = order.bisect_left((key,))
        if not 0 <= at < len(order):
            return None
        (found_key, ordinal), entry = order.peekitem(at)
        if locator.compare is Compare.EQ and found_key != key:
            return None
        return entry, ordinal

    @staticmethod
    def ordinal(seq: int, position: Position) -> int:
        return ORDINAL_BASE + seq if position is Position.TAIL else ORDINAL_BASE - seq

    # -- monitoring -------------------------------------------------------------------------

    def set_nonempty(self, lst: MemoryList, spec: MonitorSpec) -> bool:
        if spec.secondary_key is not None:
            return spec.secondary_key in lst.by_secondary
        order = lst.order
        at = order.bisect_left((spec.low_key,))
        return at < len(order) and bool(order.peekitem(at)[0][0] <= spec.high_key)

    def notify(self) -> None:
        """Evaluate the monitors touched by the change just made, and queue events.

        Called once a change is complete, so that a monitor sees only the change's
        final state (a move within a watched range is no transition at all).  Events
        carry the change's sequence number, ``self.seq``.
        """
        touched, self.touched = self.touched, []
        seen: set[int] = set()
        for list_number, key, skey in touched:
            lst = self.lists[list_number]
            for monitor in lst.monitors:
                spec = monitor.spec
                if monitor.monitor_id in seen:
                    continue
                if spec.secondary_key is not None:
                    if spec.secondary_key != skey:
                        continue
                elif not spec.low_key <= key <= spec.high_key:
                    continue
                seen.add(monitor.monitor_id)
                self._evaluate(monitor, lst, list_number)

    def _evaluate(self, monitor: Monitor, lst: MemoryList, list_number: int) -> None:
        spec = monitor.spec
        nonempty = self.set_nonempty(lst, spec)
        if nonempty == monitor.nonempty:
            return
        monitor.nonempty = nonempty
        if nonempty:
            if monitor.undelivered_nonempty:
                return
            monitor.undelivered_nonempty = True
            state = MonitorState.NONEMPTY
        else:
            if not spec.notify_empty:
                return
            monitor.undelivered_nonempty = False
            state = MonitorState.EMPTY
        user = self.users[monitor.user_id]
        user.events.append(
            MonitorEvent(monitor.monitor_id, list_number, state, self.seq, spec.token)
        )
        user.condition.notify_all()

    def add_monitor(self, user: User, spec: MonitorSpec) -> Monitor:
        if self.emcs_in_use >= self.capacity.max_emcs:
            raise cf_error(
                CFReason.EMC_AREA_FULL,
                f"all {self.capacity.max_emcs} EMCs of structure {self.params.name} are in use",
            )
        lst = self.lists[spec.list_number]
        monitor = Monitor(self.next_monitor_id, user.user_id, spec, self.set_nonempty(lst, spec))
        self.next_monitor_id += 1
        lst.monitors.append(monitor)
        user.monitors[monitor.monitor_id] = monitor
        self.emcs_in_use += 1
        return monitor

    def release_monitor(self, user: User, monitor: Monitor) -> None:
        del user.monitors[monitor.monitor_id]
        self.lists[monitor.spec.list_number].monitors.remove(monitor)
        self.emcs_in_use -= 1

    # -- users -------------------------------------------------------------------------------

    def attach(self, user_name: str) -> User:
        """Connect a user by name: reattach a failed one, or take the lowest free id."""
        if self.deleted:
            raise cf_error(CFReason.NO_SUCH_STRUCTURE, f"no structure {self.params.name!r}")
        if not isinstance(user_name, str) or not 1 <= len(user_name) <= 64:
            raise cf_error(CFReason.BAD_ARGUMENT, f"user name {user_name!r} must be 1-64 chars")
        incarnation = self.next_incarnation
        self.next_incarnation += 1
        for user in self.users.values():
            if user.name == user_name:
                if user.state is UserState.ACTIVE:
                    raise cf_error(
                        CFReason.USER_ACTIVE,
                        f"user {user_name!r} is already connected to {self.params.name}",
                    )
                user.state = UserState.ACTIVE
                user.incarnation = user.live = incarnation
                self.next_seq()
                return user
        free = next((i for i in range(1, 33) if i not in self.users), None)
        if free is None:
            raise cf_error(
                CFReason.TOO_MANY_USERS, f"structure {self.params.name} has 32 users already"
            )
        user = User(free, user_name, incarnation, threading.Condition(self.lock))
        user.live = incarnation
        self.users[free] = user
        self.next_seq()
        return user

    def user_infos(self) -> list[UserInfo]:
        return [UserInfo(u.user_id, u.name, u.state) for _, u in sorted(self.users.items())]

    def user(self, user_id: int) -> User:
        found = self.users.get(user_id)
        if found is None:
            raise cf_error(CFReason.NO_SUCH_USER, f"no user {user_id} on {self.params.name}")
        return found

    def release_user(self, user: User) -> None:
        """Free everything a user holds and its id."""
        for monitor in list(user.monitors.values()):
            self.release_monitor(user, monitor)
        user.events.clear()
        for number, holder in enumerate(self.locks):
            if holder == user.user_id:
                self.locks[number] = None
                self.locks_held -= 1
        del self.users[user.user_id]
        user.live = 0
        user.condition.notify_all()

    # -- the structure as a whole ----------------------------------------------------------

    def statistics(self) -> StructureStats:
        params, capacity = self.params, self.capacity
        return StructureStats(
            name=params.name,
            list_count=params.list_count,
            element_size=params.element_size,
            size=params.size,
            max_size=params.effective_max_size,
            emc_percent=params.emc_percent,
            max_entries=capacity.max_entries,
            entries=len(self.entries),
            max_elements=capacity.max_elements,
            elements=self.elements_in_use,
            max_emcs=capacity.max_emcs,
            emcs=self.emcs_in_use,
            users=len(self.users),
            seq=self.seq,
        )

    def alter(self, size: int | None, emc_percent: int | None) -> StructureStats:
        params = self.params
        if size is not None and (type(size) is not int or size < 1):  # as Redis: no bools
            raise cf_error(CFReason.BAD_ARGUMENT, f"size {size!r} must be a positive int")
        new_params = params.altered(size=size, emc_percent=emc_percent)
        if new_params.size > params.effective_max_size:
            raise cf_error(
                CFReason.ALTER_REJECTED,
                f"size {new_params.size} exceeds the maximum {params.effective_max_size}",
            )
        capacity = validate_params(new_params)
        if (
            capacity.max_entries < len(self.entries)
            or capacity.max_elements < self.elements_in_use
            or capacity.max_emcs < self.emcs_in_use
        ):
            raise cf_error(
                CFReason.ALTER_REJECTED,
                f"altered capacity {capacity} is below what is in use "
                f"({len(self.entries)} entries, {self.elements_in_use} elements, "
                f"{self.emcs_in_use} EMCs)",
            )
        self.params = new_params
        self.capacity = capacity
        self.next_seq()
        return self.statistics()
