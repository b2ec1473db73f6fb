"""A user's connection to a structure held in memory: the requests themselves.

Each request takes the structure's lock, checks its input, checks its conditions,
and only then changes anything, so a request that fails leaves the structure as it
was.  The hot requests (write, move, delete, read) check the common case inline and
call the precise validators of :mod:`sharedq.cf.validation` only when something looks
wrong, so that the error names the problem without slowing the path that succeeds.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from functools import partial

from sharedq.cf import validation as v
from sharedq.cf.api import ListStructure, StructureSnapshot, Taken, check_take_count
from sharedq.cf.errors import CFReason, cf_error
from sharedq.cf.memory import copying
from sharedq.cf.memory.structure import (
    DEFAULT_BULK_BUDGET,
    ORDINAL_BASE,
    ORDINAL_TOP,
    MemoryStructure,
    User,
)
from sharedq.cf.types import (
    HIGHEST_KEY,
    LOWEST_KEY,
    MAX_ELEMENTS_PER_ENTRY,
    MAX_ENTRY_BYTES,
    MAX_VERSION,
    UNCHANGED,
    BulkMove,
    BulkResult,
    BulkWrite,
    ById,
    Change,
    Compare,
    Head,
    ListEntry,
    ListInfo,
    Locator,
    MonitorEvent,
    MonitorSpec,
    Position,
    Registration,
    StructureStats,
    Unchanged,
    UserInfo,
    UserState,
)

_TAIL = Position.TAIL
# Build result tuples without the named tuple's Python-level __new__: these run once
# or twice per request on the hot path.
_entry = partial(tuple.__new__, ListEntry)
_change = partial(tuple.__new__, Change)


class MemoryListStructure(ListStructure):
    """A user's connection to a structure held in memory."""

    def __init__(self, structure: MemoryStructure, user: User, incarnation: int) -> None:
        self._s = structure
        self._user = user
        self._incarnation = incarnation
        element_size = structure.params.element_size
        self._max_entry_elements = min(MAX_ELEMENTS_PER_ENTRY, MAX_ENTRY_BYTES // element_size)

    def __repr__(self) -> str:
        state = "connected" if self.connected else "disconnected"
        return (
            f"<MemoryListStructure {self._s.params.name!r} user={self._user.user_id} "
            f"{self._user.name!r} {state}>"
        )

    @property
    def structure_name(self) -> str:
        return self._s.params.name

    @property
    def user_id(self) -> int:
        return self._user.user_id

    @property
    def user_name(self) -> str:
        return self._user.name

    @property
    def connected(self) -> bool:
        s = self._s
        with s.lock:
            user = self._user
            return (
                not s.deleted
                and user.incarnation == self._incarnation
                and user.state is UserState.ACTIVE
                and s.users.get(user.user_id) is user
            )

    # -- single-entry requests ------------------------------------------------------------

    def write(
        self,
        list_number: int,
        key: bytes,
        data: bytes = b"",
        *,
        adjunct: bytes = b"",
        secondary_key: bytes | None = None,
        entry_id: bytes | None = None,
        version: int = 0,
        position: Position = Position.TAIL,
        expect_authority: int | None = None,
        not_locked: Iterable[int] = (),
        ignore_limit: bool = False,
        reserve: bool = False,
    ) -> Change:
        # (reserve: a process's memory has no limit of its own beyond the counts)
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            params = s.params
            if type(list_number) is not int or not 0 <= list_number < params.list_count:
                v.check_list(list_number, params.list_count)
            if type(key) is not bytes or len(key) != 16:
                v.check_key(key)
            if type(data) is not bytes:
                v.elements_for(data, params.element_size)
            elements = -(-len(data) // params.element_size)
            if elements > self._max_entry_elements:
                v.elements_for(data, params.element_size)
            if adjunct:
                v.check_adjunct(adjunct)
            if secondary_key is not None:
                v.check_secondary_key(secondary_key)
            if type(version) is not int or version:
                v.check_version(version)
            if position is not _TAIL:
                v.check_position(position)
            if entry_id is not None:
                v.check_entry_id(entry_id)
                if entry_id in s.entries:
                    raise cf_error(CFReason.ENTRY_EXISTS, f"entry id {entry_id.hex()} is in use")
            if expect_authority is not None or not_locked:
                s.check_conditions(self._user.user_id, list_number, expect_authority, not_locked)
            lst = s.lists[list_number]
            if not ignore_limit and lst.limit is not None and len(lst.order) >= lst.limit:
                s.check_limit(list_number, ignore_limit)
            if (
                len(s.entries) >= s.capacity.max_entries
                or s.elements_in_use + elements > s.capacity.max_elements
            ):
                s.check_room(1, elements)
            seq = s.seq + 1
            if entry_id is None:
                entry_id = seq.to_bytes(12, "big")
                if entry_id in s.entries:  # only if a caller chose an id of this shape
                    raise cf_error(CFReason.ENTRY_EXISTS, f"entry id {entry_id.hex()} is in use")
            s.seq = seq
            entry: ListEntry = _entry(
                (entry_id, list_number, key, data, adjunct, secondary_key, version, elements)
            )
            s.elements_in_use += elements
            s.insert(entry, ORDINAL_BASE + seq if position is _TAIL else ORDINAL_BASE - seq)
            if s.touched:
                s.notify()
            return _change((seq, entry, len(lst.order)))

    def write_and_rekey(
        self,
        list_number: int,
        key: bytes,
        data: bytes = b"",
        *,
        adjunct: bytes = b"",
        secondary_key: bytes | None = None,
        entry_id: bytes | None = None,
        version: int = 0,
        position: Position = Position.TAIL,
        expect_authority: int | None = None,
        not_locked: Iterable[int] = (),
        ignore_limit: bool = False,
        new_key: bytes,
        new_secondary_key: bytes | Unchanged | None = UNCHANGED,
        set_version: int | None = None,
    ) -> tuple[Change, Change]:
        s = self._s
        with s.lock:  # re-entrant: the write and the move below are one request
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            if type(new_key) is not bytes or len(new_key) != 16:
                v.check_key(new_key, "new key")
            if new_secondary_key is not UNCHANGED:
                v.check_secondary_key(new_secondary_key)
            if set_version is not None:
                v.check_version_update(set_version, False)
            written = self.write(
                list_number,
                key,
                data,
                adjunct=adjunct,
                secondary_key=secondary_key,
                entry_id=entry_id,
                version=version,
                position=position,
                expect_authority=expect_authority,
                not_locked=not_locked,
                ignore_limit=ignore_limit,
            )
            # The move, as move() makes it, with nothing left to check.
            entry = written.entry
            seq = s.seq = s.seq + 1
            moved: ListEntry = _entry(
                (
                    entry.entry_id,
                    list_number,
                    new_key,
                    entry.data,
                    entry.adjunct,
                    entry.secondary_key if new_secondary_key is UNCHANGED else new_secondary_key,
                    entry.version if set_version is None else set_version,
                    entry.elements,
                )
            )
            s.remove(entry, s.entries[entry.entry_id][1], False)
            s.insert(moved, ORDINAL_BASE + seq)
            if s.touched:
                s.notify()
            return written, _change((seq, moved, written.entries))

    def read(self, locator: Locator) -> ListEntry | None:
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            found = s.locate(locator)
            return None if found is None else found[0]

    def move(
        self,
        locator: Locator,
        to_list: int,
        *,
        new_key: bytes | None = None,
        new_secondary_key: bytes | Unchanged | None = UNCHANGED,
        set_version: int | None = None,
        increment_version: bool = False,
        position: Position = Position.TAIL,
        expect_version: int | None = None,
        expect_authority: int | None = None,
        not_locked: Iterable[int] = (),
        ignore_limit: bool = False,
    ) -> Change | None:
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            params = s.params
            if type(to_list) is not int or not 0 <= to_list < params.list_count:
                v.check_list(to_list, params.list_count, "target list")
            if new_key is not None and (type(new_key) is not bytes or len(new_key) != 16):
                v.check_key(new_key, "new key")
            if new_secondary_key is not UNCHANGED:
                v.check_secondary_key(new_secondary_key)
            if set_version is not None or increment_version:
                v.check_version_update(set_version, increment_version)
            if position is not _TAIL:
                v.check_position(position)
            if (
                type(locator) is Head
                and locator.compare is Compare.LE
                and type(locator.key) is bytes
                and len(locator.key) == 16
                and type(locator.list_number) is int
                and 0 <= locator.list_number < params.list_count
            ):
                # A get: the head of a put list, if its key is in the committed range.
                order = s.lists[locator.list_number].order
                if not order:
                    return None
                (head_key, ordinal), entry = order.peekitem(0)
                if head_key > locator.key:
                    return None
            else:
                found = s.locate(locator)
                if found is None:
                    return None
                entry, ordinal = found
            if expect_version is not None:
                s.check_version(entry, expect_version)
            if expect_authority is not None or not_locked:
                s.check_conditions(
                    self._user.user_id, entry.list_number, expect_authority, not_locked
                )
            if to_list != entry.list_number:
                target = s.lists[to_list]
                if not ignore_limit and target.limit is not None:
                    s.check_limit(to_list, ignore_limit)
            version = entry.version
            if set_version is not None:
                version = set_version
            elif increment_version:
                version = _incremented(entry)
            seq = s.seq = s.seq + 1
            moved: ListEntry = _entry(
                (
                    entry.entry_id,
                    to_list,
                    entry.key if new_key is None else new_key,
                    entry.data,
                    entry.adjunct,
                    entry.secondary_key if new_secondary_key is UNCHANGED else new_secondary_key,
                    version,
                    entry.elements,
                )
            )
            s.remove(entry, ordinal, False)
            s.insert(moved, ORDINAL_BASE + seq if position is _TAIL else ORDINAL_BASE - seq)
            if s.touched:
                s.notify()
            return _change((seq, moved, len(s.lists[entry.list_number].order)))

    def delete(
        self,
        locator: Locator,
        *,
        expect_version: int | None = None,
        expect_authority: int | None = None,
        not_locked: Iterable[int] = (),
        with_data: bool = True,
    ) -> Change | None:
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            found = (
                s.entries.get(locator.entry_id)
                if type(locator) is ById and locator.list_number is None
                else None
            ) or s.locate(locator)
            if found is None:
                return None
            entry, ordinal = found
            if expect_version is not None:
                s.check_version(entry, expect_version)
            if expect_authority is not None or not_locked:
                s.check_conditions(
                    self._user.user_id, entry.list_number, expect_authority, not_locked
                )
            seq = s.seq = s.seq + 1
            s.remove(entry, ordinal, True)
            if s.touched:
                s.notify()
            if not with_data and entry.data:
                return _change((seq, _entry((*entry[:3], b"", *entry[4:])), None))
            return _change((seq, entry, None))

    def take(
        self,
        locator: Locator,
        to_list: int,
        *,
        delete: bool = False,
        expect_authority: int | None = None,
        monitor: MonitorSpec | None = None,
        take_events: bool = False,
        wait: float = 0.0,
    ) -> Taken:
        if wait > 0:
            self.wait_for_event(wait)
        s = self._s
        with s.lock:  # re-entrant: move, delete and the rest run inside this one hold
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            params = s.params
            if type(to_list) is not int or not 0 <= to_list < params.list_count:
                v.check_list(to_list, params.list_count, "target list")
            if monitor is not None:
                v.check_monitor_spec(monitor, params.list_count)
            found = s.locate(locator)
            # Every check before the first change (the events taken are one).
            if found is not None:
                entry = found[0]
                if expect_authority is not None:
                    s.check_conditions(self._user.user_id, entry.list_number, expect_authority, ())
                if to_list != entry.list_number:
                    s.check_limit(to_list, False)
            elif monitor is not None and s.emcs_in_use >= s.capacity.max_emcs:
                raise cf_error(
                    CFReason.EMC_AREA_FULL,
                    f"all {s.capacity.max_emcs} EMCs of structure {params.name} are in use",
                )
            events = self._take_events() if take_events else []
            if found is None:
                registration = None if monitor is None else self.register_monitor(monitor)
                return Taken(events, None, None, registration)
            moved = self.move(locator, to_list, expect_authority=expect_authority)
            assert moved is not None
            deleted = None
            if delete:
                deleted = self.delete(ById(moved.entry.entry_id, to_list))
            return Taken(events, moved, deleted, None)

    def take_many(
        self,
        head: Head,
        to_list: int,
        count: int,
        *,
        delete: bool = False,
        expect_authority: int | None = None,
    ) -> list[tuple[Change, Change | None]]:
        s = self._s
        with s.lock:  # re-entrant: the takes run inside this one hold
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            check_take_count(count)
            if type(head) is not Head:
                v.check_locator(head, s.params.list_count)
                raise cf_error(CFReason.BAD_ARGUMENT, f"take_many takes a Head, not {head!r}")
            if type(to_list) is not int or not 0 <= to_list < s.params.list_count:
                v.check_list(to_list, s.params.list_count, "target list")
            target = s.lists[to_list]
            limited = target.limit is not None and to_list != head.list_number
            done: list[tuple[Change, Change | None]] = []
            for _ in range(count):
                if done and limited and len(target.order) >= (target.limit or 0):
                    break  # the target is full now: keep what is done
                taken = self.take(head, to_list, delete=delete, expect_authority=expect_authority)
                if taken.moved is None:
                    break
                done.append((taken.moved, taken.deleted))
            return done

    def update(
        self,
        locator: Locator,
        *,
        data: bytes | Unchanged = UNCHANGED,
        adjunct: bytes | Unchanged = UNCHANGED,
        set_version: int | None = None,
        increment_version: bool = False,
        increment_authority: bool = False,
        expect_version: int | None = None,
        expect_authority: int | None = None,
        not_locked: Iterable[int] = (),
    ) -> Change | None:
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            elements = None
            if data is not UNCHANGED:
                elements = v.elements_for(data, s.params.element_size)
            if adjunct is not UNCHANGED:
                v.check_adjunct(adjunct)
            v.check_version_update(set_version, increment_version)
            found = s.locate(locator)
            if found is None:
                return None
            entry, ordinal = found
            s.check_version(entry, expect_version)
            s.check_conditions(self._user.user_id, entry.list_number, expect_authority, not_locked)
            if elements is not None and elements > entry.elements:
                s.check_room(0, elements - entry.elements)
            version = entry.version
            if set_version is not None:
                version = set_version
            elif increment_version:
                version = _incremented(entry)
            seq = s.next_seq()
            updated = ListEntry(
                entry.entry_id,
                entry.list_number,
                entry.key,
                entry.data if isinstance(data, Unchanged) else data,
                entry.adjunct if isinstance(adjunct, Unchanged) else adjunct,
                entry.secondary_key,
                version,
                entry.elements if elements is None else elements,
            )
            s.replace_in_place(entry, updated, ordinal)
            if increment_authority:
                s.lists[entry.list_number].authority += 1
            return Change(seq, updated)

    # -- bulk requests ------------------------------------------------------------------

    def move_entries(
        self,
        moves: Sequence[BulkMove],
        *,
        ignore_limit: bool = False,
        missing_ok: bool = False,
        not_locked: Iterable[int] = (),
        budget: int | None = None,
    ) -> BulkResult:
        # The mixed request with no deletes: the same checks, loop and result.
        return self.move_and_delete_entries(
            moves,
            (),
            ignore_limit=ignore_limit,
            missing_ok=missing_ok,
            not_locked=not_locked,
            budget=budget,
        )

    def delete_entries(
        self,
        entry_ids: Sequence[bytes],
        *,
        missing_ok: bool = False,
        not_locked: Iterable[int] = (),
        budget: int | None = None,
    ) -> BulkResult:
        # The mixed request with no moves: the same checks, loop and result.
        return self.move_and_delete_entries(
            (), entry_ids, missing_ok=missing_ok, not_locked=not_locked, budget=budget
        )

    def move_and_delete_entries(
        self,
        moves: Sequence[BulkMove],
        entry_ids: Sequence[bytes],
        *,
        ignore_limit: bool = False,
        missing_ok: bool = False,
        not_locked: Iterable[int] = (),
        budget: int | None = None,
    ) -> BulkResult:
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            count = s.params.list_count
            v.check_budget(budget)
            for move in moves:
                v.check_bulk_move(move, count)
            for entry_id in entry_ids:
                v.check_entry_id(entry_id)
            s.check_conditions(self._user.user_id, 0, None, not_locked)
            seqs: list[int] = []
            missing: list[bytes] = []
            requested = len(moves) + len(entry_ids)
            left = budget or DEFAULT_BULK_BUDGET
            processed, error = _move_each(s, moves[:left], ignore_limit, missing_ok, seqs, missing)
            if error is None and processed < left:
                deleted, error = _delete_each(
                    s, entry_ids[: left - processed], missing_ok, seqs, missing
                )
                processed += deleted
            return BulkResult(requested, processed, tuple(seqs), tuple(missing), error)

    def write_entries(
        self,
        writes: Sequence[BulkWrite],
        *,
        ignore_limit: bool = False,
        not_locked: Iterable[int] = (),
        budget: int | None = None,
        expect_authority: int | None = None,
    ) -> BulkResult:
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            if expect_authority is not None:
                count = s.params.list_count
                handled = writes[: budget or DEFAULT_BULK_BUDGET]
                for number in sorted({w.list_number for w in handled if _a_list(w, count)}):
                    s.check_conditions(self._user.user_id, number, expect_authority, ())
            return copying.write_entries(
                s,
                self._user.user_id,
                writes,
                ignore_limit=ignore_limit,
                not_locked=not_locked,
                budget=budget,
            )

    def snapshot(self) -> StructureSnapshot:
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            return copying.MemorySnapshot(s)

    def scan(
        self,
        list_number: int,
        low_key: bytes = LOWEST_KEY,
        high_key: bytes = HIGHEST_KEY,
        *,
        with_data: bool = True,
    ) -> Iterator[ListEntry]:
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            v.check_list(list_number, s.params.list_count)
            v.check_key(low_key, "low key")
            v.check_key(high_key, "high key")
            order = s.lists[list_number].order
            found = [order[k] for k in order.irange((low_key,), (high_key, ORDINAL_TOP))]
        if not with_data:
            found = [entry._replace(data=b"") for entry in found]
        return iter(found)

    # -- list controls and locks ----------------------------------------------------------

    def list_info(self, list_number: int) -> ListInfo:
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            v.check_list(list_number, s.params.list_count)
            lst = s.lists[list_number]
            return ListInfo(list_number, len(lst.order), lst.elements, lst.limit, lst.authority)

    def set_list_controls(
        self,
        list_number: int,
        *,
        limit: int | Unchanged | None = UNCHANGED,
        increment_authority: bool = False,
        expect_authority: int | None = None,
        not_locked: Iterable[int] = (),
    ) -> int:
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            v.check_list(list_number, s.params.list_count)
            if not isinstance(limit, Unchanged):
                v.check_limit(limit)
            s.check_conditions(self._user.user_id, list_number, expect_authority, not_locked)
            seq = s.next_seq()
            lst = s.lists[list_number]
            if not isinstance(limit, Unchanged):
                lst.limit = limit
            if increment_authority:
                lst.authority += 1
            return seq

    def lock(self, lock_number: int) -> int:
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            v.check_lock_number(lock_number, s.params.lock_count)
            holder = s.locks[lock_number]
            uid = self._user.user_id
            if holder is not None and holder != uid:
                raise cf_error(
                    CFReason.LOCK_HELD,
                    f"lock {lock_number} is held by user {holder}",
                    holder=holder,
                )
            if holder is None:
                s.locks[lock_number] = uid
                s.locks_held += 1
            return s.next_seq()

    def unlock(self, lock_number: int) -> int:
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            v.check_lock_number(lock_number, s.params.lock_count)
            if s.locks[lock_number] != self._user.user_id:
                raise cf_error(
                    CFReason.LOCK_NOT_HELD,
                    f"user {self._user.user_id} does not hold lock {lock_number}",
                )
            s.locks[lock_number] = None
            s.locks_held -= 1
            return s.next_seq()

    def lock_holder(self, lock_number: int) -> int | None:
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            v.check_lock_number(lock_number, s.params.lock_count)
            return s.locks[lock_number]

    # -- monitoring -------------------------------------------------------------------------

    def register_monitor(self, spec: MonitorSpec) -> Registration:
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            v.check_monitor_spec(spec, s.params.list_count)
            monitor = s.add_monitor(self._user, spec)
            seq = s.next_seq()
            return Registration(monitor.monitor_id, spec.list_number, monitor.nonempty, seq)

    def stop_monitor(self, monitor_id: int) -> int:
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            user = self._user
            monitor = user.monitors.get(monitor_id)
            if monitor is None:
                raise cf_error(
                    CFReason.NO_SUCH_MONITOR, f"user {user.user_id} has no monitor {monitor_id}"
                )
            s.release_monitor(user, monitor)
            kept = [event for event in user.events if event.monitor_id != monitor_id]
            user.events.clear()
            user.events.extend(kept)
            return s.next_seq()

    def events_nowait(self) -> list[MonitorEvent]:
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            return self._take_events()

    def wait_events(self, timeout: float | None = None) -> list[MonitorEvent]:
        s = self._s
        deadline = None if timeout is None else time.monotonic() + timeout
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            while not self._user.events:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return []
                self._user.condition.wait(remaining)
                if self._user.live != self._incarnation:
                    s.check_user(self._user, self._incarnation)
            return self._take_events()

    def wait_for_event(self, timeout: float) -> None:
        s = self._s
        deadline = time.monotonic() + timeout
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            while not self._user.events:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._user.condition.wait(remaining)
                if self._user.live != self._incarnation:
                    s.check_user(self._user, self._incarnation)

    def _take_events(self) -> list[MonitorEvent]:
        user = self._user
        events = list(user.events)
        user.events.clear()
        for monitor in user.monitors.values():
            monitor.undelivered_nonempty = False
        return events

    # -- users -------------------------------------------------------------------------------

    def users(self) -> list[UserInfo]:
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            return s.user_infos()

    def mark_failed(self, user_id: int) -> int:
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            user = s.user(user_id)
            user.state = UserState.FAILED
            user.live = 0
            user.condition.notify_all()
            return s.next_seq()

    def cleanup_user(self, user_id: int) -> int:
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            user = s.user(user_id)
            if user.state is not UserState.FAILED:
                raise cf_error(
                    CFReason.USER_NOT_FAILED,
                    f"user {user_id} is active; only failed users are cleaned up",
                )
            s.release_user(user)
            return s.next_seq()

    def disconnect(self) -> None:
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            s.release_user(self._user)
            s.next_seq()

    # -- the structure as a whole ----------------------------------------------------------

    def statistics(self) -> StructureStats:
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            return s.statistics()

    def alter(self, *, size: int | None = None, emc_percent: int | None = None) -> StructureStats:
        s = self._s
        with s.lock:
            if self._user.live != self._incarnation:
                s.check_user(self._user, self._incarnation)
            return s.alter(size, emc_percent)


def _a_list(write: BulkWrite, list_count: int) -> bool:
    """Whether a bulk write names a list that exists (else validation names the error)."""
    number = getattr(write, "list_number", None)
    return type(number) is int and 0 <= number < list_count


def _incremented(entry: ListEntry) -> int:
    if entry.version >= MAX_VERSION:
        raise cf_error(
            CFReason.BAD_ARGUMENT, f"entry {entry.entry_id.hex()} version cannot increase"
        )
    return entry.version + 1


# -- what the bulk requests share ------------------------------------------------------------


def _move_each(
    s: MemoryStructure,
    moves: Sequence[BulkMove],
    ignore_limit: bool,
    missing_ok: bool,
    seqs: list[int],
    missing: list[bytes],
) -> tuple[int, Exception | None]:
    """Carry out checked moves in order, under the structure's lock: how many were
    handled, and the error that stopped the rest (``None``: none did)."""
    processed = 0
    for move in moves:
        found = s.entries.get(move.entry_id)
        if found is None:
            if not missing_ok:
                return processed, cf_error(
                    CFReason.NO_SUCH_ENTRY, f"no entry {move.entry_id.hex()}"
                )
            missing.append(move.entry_id)
            processed += 1
            continue
        entry, ordinal = found
        try:
            if move.from_list is not None and entry.list_number != move.from_list:
                raise cf_error(
                    CFReason.LIST_MISMATCH,
                    f"entry {move.entry_id.hex()} is on list {entry.list_number}, "
                    f"not {move.from_list}",
                )
            if move.to_list != entry.list_number:
                s.check_limit(move.to_list, ignore_limit)
        except Exception as error:
            return processed, error
        version = entry.version
        if move.set_version is not None:
            version = move.set_version
        elif move.increment_version and version < MAX_VERSION:
            version += 1
        seq = s.next_seq()
        moved = ListEntry(
            entry.entry_id,
            move.to_list,
            entry.key if move.new_key is None else move.new_key,
            entry.data,
            entry.adjunct,
            entry.secondary_key
            if isinstance(move.new_secondary_key, Unchanged)
            else move.new_secondary_key,
            version,
            entry.elements,
        )
        s.remove(entry, ordinal, False)
        s.insert(moved, ORDINAL_BASE + seq)
        if s.touched:
            s.notify()
        seqs.append(seq)
        processed += 1
    return processed, None


def _delete_each(
    s: MemoryStructure,
    entry_ids: Sequence[bytes],
    missing_ok: bool,
    seqs: list[int],
    missing: list[bytes],
) -> tuple[int, Exception | None]:
    """Delete checked ids in order, under the structure's lock, as :func:`_move_each`."""
    processed = 0
    for entry_id in entry_ids:
        found = s.entries.get(entry_id)
        if found is None:
            if not missing_ok:
                return processed, cf_error(CFReason.NO_SUCH_ENTRY, f"no entry {entry_id.hex()}")
            missing.append(entry_id)
        else:
            seqs.append(s.next_seq())
            s.remove(found[0], found[1], True)
            if s.touched:
                s.notify()
        processed += 1
    return processed, None
