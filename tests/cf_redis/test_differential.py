"""Memory and Redis driven by the same random requests: every result must be the same.

The machine keeps one structure on each backend, created alike, with two users each,
and applies every request to both: the entry a request returns (ids and seqs
included, since both number changes alike), the error it raises (class, reason and
context), the events each user is given, and after every step the lists and counts.
The memory backend is the reference; any difference is a Redis backend bug.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import astuple, is_dataclass
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from sharedq.cf import (
    UNCHANGED,
    BulkMove,
    BulkResult,
    ById,
    ByKey,
    BySecondaryKey,
    CFError,
    Change,
    Compare,
    CouplingFacility,
    Head,
    ListStructure,
    MonitorSpec,
    Position,
    StructureParams,
    Tail,
)
from sharedq.cf.memory import MemoryFacility
from sharedq.cf.redis import RedisFacility
from sharedq.testing.redis_server import RedisServer

LISTS = 4
LOCKS = 4
USERS = ("A", "B")
_names = itertools.count(1)

users = st.sampled_from(USERS)
lists = st.integers(0, LISTS - 1)
keys = st.sampled_from([bytes([b]) * 16 for b in (0x00, 0x04, 0x09, 0x0A, 0xF6, 0xFF)])
compares = st.sampled_from(list(Compare))
payloads = st.sampled_from([b"", b"m", b"d" * 256, b"e" * 300, b"f" * 1000])
adjuncts = st.sampled_from([b"", b"adj", b"\x00\xff" * 32])
secondary_keys = st.sampled_from([None, b"ID1", b"ID2"])
explicit_ids = st.sampled_from([b"\x01" + n.to_bytes(11, "big") for n in range(1, 7)])
versions = st.sampled_from([0, 1, 7, 2**64 - 1])
positions = st.sampled_from(list(Position))
# Conditions are given now and then, not always, so that most requests get through.
maybe_authority = st.none() | st.none() | st.none() | st.integers(0, 2)
maybe_version = st.none() | st.none() | st.none() | st.sampled_from([0, 1, 7])
lock_sets = st.just([]) | st.just([]) | st.lists(st.integers(0, LOCKS - 1), max_size=2, unique=True)
new_skeys = st.sampled_from([UNCHANGED, None, b"ID1", b"ID3"])
version_ops = st.sampled_from([(None, False), (None, True), (3, False)])


def normal(value: Any) -> Any:
    """A result in a form that compares across backends (lists for iterators, ...)."""
    if isinstance(value, BulkResult):
        return ("bulk", value.requested, value.processed, value.seqs, value.missing,
                normal(value.error))  # fmt: skip
    if isinstance(value, CFError):
        return ("error", type(value).__name__, value.reason.name, value.context)
    if isinstance(value, Iterator):
        return [normal(item) for item in value]
    if isinstance(value, list | tuple) and not hasattr(value, "_fields"):
        return [normal(item) for item in value]
    if is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, *map(normal, astuple(value)))
    return value


def _connection(handle: ListStructure | CFError) -> Any:
    if isinstance(handle, CFError):
        return normal(handle)
    return ("connection", handle.user_id, handle.user_name)


def some_ids(present: list[bytes], known: list[bytes]) -> st.SearchStrategy[bytes]:
    """Entry ids: mostly of entries there now, sometimes of gone or never-written ones."""
    choices = [explicit_ids]
    if known:
        choices.append(st.sampled_from(known))
    if present:
        choices += [st.sampled_from(present)] * 3
    return st.one_of(choices)


@st.composite
def locators(draw: st.DrawFn, ids: st.SearchStrategy[bytes]) -> Any:
    """Any locator: by id (drawn from ``ids``), position, key or secondary key."""
    kind = draw(st.sampled_from(["id", "id", "id", "head", "head", "tail", "key", "skey"]))
    number = draw(lists)
    if kind == "id":
        return ById(draw(ids), draw(st.none() | st.none() | lists))
    if kind == "head":
        return Head(number, draw(st.none() | keys), draw(compares))
    if kind == "tail":
        return Tail(number)
    if kind == "key":
        return ByKey(number, draw(keys), draw(compares))
    return BySecondaryKey(number, draw(st.sampled_from([b"ID1", b"ID2", b"ID3"])))


def outcome(request: Callable[[], Any]) -> Any:
    try:
        return normal(request())
    except CFError as exc:
        return normal(exc)


class Differential(RuleBasedStateMachine):
    url: str

    def __init__(self) -> None:
        super().__init__()
        self.name = f"D{next(_names)}"
        self.memory: CouplingFacility = MemoryFacility()
        self.redis: CouplingFacility = RedisFacility.from_url(self.url)
        params = StructureParams.for_capacity(
            self.name, list_count=LISTS, entries=16, elements=30, lock_count=LOCKS, growth=2.0
        )
        expected = outcome(lambda: self.memory.create(params, sequence_floor=100))
        assert outcome(lambda: self.redis.create(params, sequence_floor=100)) == expected
        self.handles: dict[str, tuple[ListStructure, ListStructure]] = {}
        for user in USERS:
            self.connect(user)
        self.ids: list[bytes] = []  # entry ids either backend ever returned
        self.monitor_ids: list[int] = []

    def teardown(self) -> None:
        self.redis.delete(self.name, force=True)
        self.redis.close()

    def same(self, request: Callable[[Any], Any], user: str) -> Any:
        """Apply a request to both backends as ``user``, and compare what they did."""
        memory, redis = self.handles[user]
        expected, got = outcome(lambda: request(memory)), outcome(lambda: request(redis))
        assert got == expected
        self._remember(got)
        return got

    def _remember(self, result: Any) -> None:
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], Change):
            result = result[1]  # write_and_rekey's pair of changes: the entry's id is one
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], tuple):
            entry = result[1]  # a Change: (seq, entry)
            if len(entry) == 8 and isinstance(entry[0], bytes) and entry[0] not in self.ids:
                self.ids.append(entry[0])

    def entry_ids(self) -> st.SearchStrategy[bytes]:
        live = [memory for memory, _ in self.handles.values() if memory.connected]
        present = [e.entry_id for n in range(LISTS) for e in live[0].scan(n)] if live else []
        return some_ids(present, self.ids)

    # -- users ----------------------------------------------------------------------------

    @rule(user=users)
    def connect(self, user: str) -> None:
        """Connect (or reconnect after a failure); keep the handles when both connected."""
        handles: list[ListStructure | CFError] = []
        for facility in (self.memory, self.redis):
            try:
                handles.append(facility.connect(self.name, user))
            except CFError as exc:
                handles.append(exc)
        memory, redis = handles
        assert _connection(redis) == _connection(memory)
        if isinstance(memory, ListStructure) and isinstance(redis, ListStructure):
            self.handles[user] = (memory, redis)

    @rule(user=users, victim=st.integers(1, 3))
    def mark_failed(self, user: str, victim: int) -> None:
        self.same(lambda s: s.mark_failed(victim), user)

    @rule(user=users, victim=st.integers(1, 3))
    def cleanup_user(self, user: str, victim: int) -> None:
        self.same(lambda s: s.cleanup_user(victim), user)

    @rule(user=users)
    def users_and_statistics(self, user: str) -> None:
        self.same(lambda s: (s.users(), s.statistics()), user)

    # -- entries ---------------------------------------------------------------------------

    @rule(
        user=users, list_number=lists, key=keys, data=payloads, adjunct=adjuncts,
        secondary_key=secondary_keys, explicit=st.booleans(), entry_id=explicit_ids,
        version=versions, position=positions, expect_authority=maybe_authority,
        not_locked=lock_sets, ignore_limit=st.booleans(),
    )  # fmt: skip
    def write(
        self, user: str, list_number: int, key: bytes, data: bytes, adjunct: bytes,
        secondary_key: bytes | None, explicit: bool, entry_id: bytes, version: int,
        position: Position, expect_authority: int | None, not_locked: list[int],
        ignore_limit: bool,
    ) -> None:  # fmt: skip
        self.same(
            lambda s: s.write(
                list_number,
                key,
                data,
                adjunct=adjunct,
                secondary_key=secondary_key,
                entry_id=entry_id if explicit else None,
                version=version,
                position=position,
                expect_authority=expect_authority,
                not_locked=not_locked,
                ignore_limit=ignore_limit,
            ),
            user,
        )

    @rule(
        user=users, list_number=lists, key=keys, data=payloads, secondary_key=secondary_keys,
        explicit=st.booleans(), entry_id=explicit_ids, version=versions,
        expect_authority=maybe_authority, ignore_limit=st.booleans(), new_key=keys,
        new_skey=new_skeys, set_version=st.sampled_from([None, 0, 5]),
    )  # fmt: skip
    def write_and_rekey(
        self, user: str, list_number: int, key: bytes, data: bytes,
        secondary_key: bytes | None, explicit: bool, entry_id: bytes, version: int,
        expect_authority: int | None, ignore_limit: bool, new_key: bytes, new_skey: Any,
        set_version: int | None,
    ) -> None:  # fmt: skip
        self.same(
            lambda s: s.write_and_rekey(
                list_number,
                key,
                data,
                secondary_key=secondary_key,
                entry_id=entry_id if explicit else None,
                version=version,
                expect_authority=expect_authority,
                ignore_limit=ignore_limit,
                new_key=new_key,
                new_secondary_key=new_skey,
                set_version=set_version,
            ),
            user,
        )

    @rule(user=users, data=st.data())
    def read(self, user: str, data: st.DataObject) -> None:
        locator = data.draw(locators(self.entry_ids()))
        self.same(lambda s: s.read(locator), user)

    @rule(
        user=users, data=st.data(), to_list=lists, new_key=st.none() | keys, new_skey=new_skeys,
        version_op=version_ops, position=positions, expect_version=maybe_version,
        expect_authority=maybe_authority, not_locked=lock_sets, ignore_limit=st.booleans(),
    )  # fmt: skip
    def move(
        self, user: str, data: st.DataObject, to_list: int, new_key: bytes | None,
        new_skey: Any, version_op: tuple[int | None, bool], position: Position,
        expect_version: int | None, expect_authority: int | None, not_locked: list[int],
        ignore_limit: bool,
    ) -> None:  # fmt: skip
        locator = data.draw(locators(self.entry_ids()))
        self.same(
            lambda s: s.move(
                locator,
                to_list,
                new_key=new_key,
                new_secondary_key=new_skey,
                set_version=version_op[0],
                increment_version=version_op[1],
                position=position,
                expect_version=expect_version,
                expect_authority=expect_authority,
                not_locked=not_locked,
                ignore_limit=ignore_limit,
            ),
            user,
        )

    @rule(
        user=users, data=st.data(), expect_version=maybe_version,
        expect_authority=maybe_authority, not_locked=lock_sets, with_data=st.booleans(),
    )  # fmt: skip
    def delete(
        self, user: str, data: st.DataObject, expect_version: int | None,
        expect_authority: int | None, not_locked: list[int], with_data: bool,
    ) -> None:  # fmt: skip
        locator = data.draw(locators(self.entry_ids()))
        self.same(
            lambda s: s.delete(
                locator,
                expect_version=expect_version,
                expect_authority=expect_authority,
                not_locked=not_locked,
                with_data=with_data,
            ),
            user,
        )

    @rule(
        user=users, data=st.data(), new_data=st.just(UNCHANGED) | payloads,
        adjunct=st.just(UNCHANGED) | adjuncts, version_op=version_ops,
        increment_authority=st.booleans(), expect_version=maybe_version,
        expect_authority=maybe_authority, not_locked=lock_sets,
    )  # fmt: skip
    def update(
        self, user: str, data: st.DataObject, new_data: Any, adjunct: Any,
        version_op: tuple[int | None, bool], increment_authority: bool,
        expect_version: int | None, expect_authority: int | None, not_locked: list[int],
    ) -> None:  # fmt: skip
        locator = data.draw(locators(self.entry_ids()))
        self.same(
            lambda s: s.update(
                locator,
                data=new_data,
                adjunct=adjunct,
                set_version=version_op[0],
                increment_version=version_op[1],
                increment_authority=increment_authority,
                expect_version=expect_version,
                expect_authority=expect_authority,
                not_locked=not_locked,
            ),
            user,
        )

    @rule(
        user=users, data=st.data(), to_list=lists, new_key=st.none() | keys,
        new_skey=new_skeys, version_op=version_ops, from_list=st.none() | lists,
        ignore_limit=st.booleans(), missing_ok=st.booleans(), not_locked=lock_sets,
        budget=st.none() | st.integers(1, 4),
    )  # fmt: skip
    def move_entries(
        self, user: str, data: st.DataObject, to_list: int, new_key: bytes | None,
        new_skey: Any, version_op: tuple[int | None, bool], from_list: int | None,
        ignore_limit: bool, missing_ok: bool, not_locked: list[int], budget: int | None,
    ) -> None:  # fmt: skip
        chosen = data.draw(st.lists(self.entry_ids(), max_size=5))
        moves = [
            BulkMove(entry_id, to_list if n % 2 else (to_list + 1) % LISTS, new_key, new_skey,
                     version_op[0], version_op[1], from_list if n == 0 else None)
            for n, entry_id in enumerate(chosen)
        ]  # fmt: skip
        self.same(
            lambda s: s.move_entries(
                moves,
                ignore_limit=ignore_limit,
                missing_ok=missing_ok,
                not_locked=not_locked,
                budget=budget,
            ),
            user,
        )

    @rule(
        user=users, data=st.data(), missing_ok=st.booleans(), not_locked=lock_sets,
        budget=st.none() | st.integers(1, 4),
    )  # fmt: skip
    def delete_entries(
        self, user: str, data: st.DataObject, missing_ok: bool, not_locked: list[int],
        budget: int | None,
    ) -> None:  # fmt: skip
        chosen = data.draw(st.lists(self.entry_ids(), max_size=5))
        self.same(
            lambda s: s.delete_entries(
                chosen, missing_ok=missing_ok, not_locked=not_locked, budget=budget
            ),
            user,
        )

    @rule(user=users, list_number=lists, low=keys, high=keys, with_data=st.booleans())
    def scan(self, user: str, list_number: int, low: bytes, high: bytes, with_data: bool) -> None:
        self.same(lambda s: s.scan(list_number, low, high, with_data=with_data), user)

    # -- list controls, locks, monitors, the structure --------------------------------------

    @rule(
        user=users, list_number=lists, limit=st.just(UNCHANGED) | st.none() | st.integers(0, 3),
        increment_authority=st.booleans(), expect_authority=maybe_authority,
        not_locked=lock_sets,
    )  # fmt: skip
    def set_list_controls(
        self, user: str, list_number: int, limit: Any, increment_authority: bool,
        expect_authority: int | None, not_locked: list[int],
    ) -> None:  # fmt: skip
        self.same(
            lambda s: s.set_list_controls(
                list_number,
                limit=limit,
                increment_authority=increment_authority,
                expect_authority=expect_authority,
                not_locked=not_locked,
            ),
            user,
        )

    @rule(user=users, number=st.integers(0, LOCKS - 1), op=st.sampled_from(["lock", "unlock"]))
    def lock_table(self, user: str, number: int, op: str) -> None:
        self.same(lambda s: (getattr(s, op)(number), s.lock_holder(number)), user)

    @rule(
        user=users, list_number=lists, low=keys, high=keys, secondary=secondary_keys,
        notify_empty=st.booleans(), token=st.sampled_from([b"", b"T1", b"\x00" * 16]),
    )  # fmt: skip
    def register_monitor(
        self, user: str, list_number: int, low: bytes, high: bytes, secondary: bytes | None,
        notify_empty: bool, token: bytes,
    ) -> None:  # fmt: skip
        low, high = min(low, high), max(low, high)
        spec = MonitorSpec(list_number, low, high, secondary, notify_empty, token)
        result = self.same(lambda s: s.register_monitor(spec), user)
        if result[0] == "Registration":
            self.monitor_ids.append(result[1])

    @rule(user=users, data=st.data())
    def stop_monitor(self, user: str, data: st.DataObject) -> None:
        monitor_id = data.draw(
            st.sampled_from(self.monitor_ids) if self.monitor_ids else st.just(1)
        )
        self.same(lambda s: s.stop_monitor(monitor_id), user)

    @rule(user=users, size_factor=st.sampled_from([None, 1.0, 1.5, 2.0, 0.5]),
          emc_percent=st.sampled_from([None, 0, 10, 20, 50, 51]))  # fmt: skip
    def alter(self, user: str, size_factor: float | None, emc_percent: int | None) -> None:
        memory = self.handles[user][0]
        try:
            base = memory.statistics().size
        except CFError:
            base = 10_000
        size = None if size_factor is None else int(base * size_factor)
        self.same(lambda s: s.alter(size=size, emc_percent=emc_percent), user)

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def same_events(self) -> None:
        for user in USERS:
            self.same(lambda s: s.events_nowait(), user)

    @invariant()
    def same_lists(self) -> None:
        live = [user for user in USERS if self.handles[user][0].connected]
        if live:
            self.same(lambda s: [(s.list_info(n), list(s.scan(n))) for n in range(LISTS)], live[0])


@pytest.mark.slow
def test_redis_gives_what_memory_gives(redis_server: RedisServer) -> None:
    redis_server.flush()
    machine = type("Machine", (Differential,), {"url": redis_server.url})
    run_state_machine_as_test(machine)
