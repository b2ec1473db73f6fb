"""The state machine of the ``stateful`` check (it needs hypothesis, so the check
imports this module only when it runs).

Random sequences of requests, each checked against the reference model.

The machine drives one structure through a backend and the naive model in
``reference_model`` in lockstep: every request's outcome (the entry it returns, or
the reason it fails with) and, after every step, every list and count must agree.
Monitoring is checked too: each change's events must be exactly the transitions the
model's lists went through.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    rule,
)

from sharedq.cf import (
    BulkMove,
    ById,
    ByKey,
    BySecondaryKey,
    CFError,
    CFReason,
    Change,
    Compare,
    CouplingFacility,
    Head,
    ListEntry,
    ListStructure,
    MonitorState,
    Position,
    StructureParams,
    Tail,
)
from sharedq.testing.conformance.reference_model import ModelEntry, ModelError, StructureModel

LISTS = 3
MAX_ENTRIES = 10
MAX_ELEMENTS = 14
_names = itertools.count(1)

keys = st.sampled_from([bytes([b]) * 16 for b in (0x00, 0x04, 0x09, 0x0A, 0xF6, 0xFF)])
lists = st.integers(0, LISTS - 1)
payloads = st.sampled_from([b"", b"a", b"b" * 255, b"c" * 256, b"d" * 700])
secondary_keys = st.sampled_from([None, b"ID1", b"ID2"])
positions = st.sampled_from([Position.TAIL, Position.HEAD])

Outcome = tuple[str, object]


def outcome(fn: Callable[[], object]) -> Outcome:
    """What a request did: ("ok", value) or ("error", reason name)."""
    try:
        return ("ok", fn())
    except CFError as exc:
        return ("error", exc.reason.name)
    except ModelError as exc:
        return ("error", exc.reason.name)


def entry_of(change: object) -> ListEntry | None:
    assert change is None or isinstance(change, Change), change
    return None if change is None else change.entry


def _list_nonempty(list_number: int) -> Callable[[StructureModel], bool]:
    return lambda m: bool(m.lists[list_number])


class StructureMachine(RuleBasedStateMachine):
    facility: CouplingFacility

    ids = Bundle("ids")

    def __init__(self) -> None:
        super().__init__()
        name = f"SM{next(_names)}"
        self.facility.create(
            StructureParams.for_capacity(
                name, list_count=LISTS, entries=MAX_ENTRIES, elements=MAX_ELEMENTS
            )
        )
        self.real: ListStructure = self.facility.connect(name, "MACHINE")
        self.model = StructureModel(LISTS, MAX_ENTRIES, MAX_ELEMENTS)
        self.next_id = itertools.count(1)
        self.last_seq = self.real.statistics().seq
        # Monitors: one per list on the whole list, one on the committed range of list 0,
        # one on secondary key ID1 of list 1; all report both transitions.
        self.monitors: dict[int, Callable[[StructureModel], bool]] = {}
        for n in range(LISTS):
            reg = self.real.monitor_list(n, notify_empty=True)
            self.monitors[reg.monitor_id] = _list_nonempty(n)
        reg = self.real.monitor_key_range(
            0, b"\x00" * 16, b"\x09" + b"\xff" * 15, notify_empty=True
        )
        self.monitors[reg.monitor_id] = lambda m: any(e.key[0] <= 9 for e in m.lists[0])
        reg = self.real.monitor_sublist(1, b"ID1", secondary=True, notify_empty=True)
        self.monitors[reg.monitor_id] = lambda m: any(e.secondary_key == b"ID1" for e in m.lists[1])
        self.states = {mid: pred(self.model) for mid, pred in self.monitors.items()}

    def teardown(self) -> None:
        self.facility.delete(self.real.structure_name, force=True)

    # -- helpers -----------------------------------------------------------------------

    def _compare(self, real: Outcome, model: Outcome) -> None:
        assert real[0] == model[0], (real, model)
        if real[0] == "error":
            assert real[1] == model[1], (real, model)
        else:
            assert entry_of(real[1]) == model[1], (real, model)
            if real[1] is not None:
                assert isinstance(real[1], Change)
                seq = real[1].seq
                assert seq > self.last_seq
                self.last_seq = seq
        self._check_events()

    def _transitions(self) -> list[tuple[int, MonitorState]]:
        """The monitors' transitions since the model was last looked at."""
        expected = []
        for mid, pred in self.monitors.items():
            now = pred(self.model)
            if now != self.states[mid]:
                expected.append((mid, MonitorState.NONEMPTY if now else MonitorState.EMPTY))
                self.states[mid] = now
        return expected

    def _check_events(self, before: list[tuple[int, MonitorState]] | None = None) -> None:
        """The events queued are the transitions; ``before``: those of an earlier part of
        the request (a list may go non-empty by a move and empty again by a delete)."""
        expected = (before or []) + self._transitions()
        got = [(e.monitor_id, e.state) for e in self.real.events_nowait()]
        assert sorted(got, key=repr) == sorted(expected, key=repr)

    def _model_entry(self, entry_id: bytes) -> ModelEntry | None:
        return self.model.find(entry_id)

    # -- rules -------------------------------------------------------------------------

    @rule(
        target=ids,
        list_number=lists,
        key=keys,
        data=payloads,
        secondary_key=secondary_keys,
        position=positions,
        ignore_limit=st.booleans(),
    )
    def write(
        self,
        list_number: int,
        key: bytes,
        data: bytes,
        secondary_key: bytes | None,
        position: Position,
        ignore_limit: bool,
    ) -> bytes:
        entry_id = b"\x01" + next(self.next_id).to_bytes(11, "big")
        model_entry = ModelEntry(entry_id, list_number, key, data, b"adj", secondary_key, 0)
        real = outcome(
            lambda: self.real.write(
                list_number,
                key,
                data,
                adjunct=b"adj",
                secondary_key=secondary_key,
                entry_id=entry_id,
                position=position,
                ignore_limit=ignore_limit,
            )
        )
        model = outcome(lambda: self.model.write(model_entry, position, ignore_limit))
        self._compare(real, model)
        return entry_id

    @rule(entry_id=ids)
    def write_duplicate_id(self, entry_id: bytes) -> None:
        if self._model_entry(entry_id) is None:
            return
        real = outcome(lambda: self.real.write(0, b"\x00" * 16, entry_id=entry_id))
        assert real == ("error", "ENTRY_EXISTS")
        self._check_events()

    @rule(from_list=lists, to_list=lists, bound=keys, ignore_limit=st.booleans())
    def move_head_if_key_le(
        self, from_list: int, to_list: int, bound: bytes, ignore_limit: bool
    ) -> None:
        real = outcome(
            lambda: self.real.move(
                Head(from_list, key=bound, compare=Compare.LE), to_list, ignore_limit=ignore_limit
            )
        )

        def model_move() -> ListEntry | None:
            head = self.model.head(from_list)
            if head is None or head.key > bound:
                return None
            return self.model.move(head, to_list, None, False, ignore_limit)

        self._compare(real, outcome(model_move))

    @rule(
        entry_id=ids,
        to_list=lists,
        new_key=st.none() | keys,
        increment_version=st.booleans(),
        position=positions,
        ignore_limit=st.booleans(),
    )
    def move_by_id(
        self,
        entry_id: bytes,
        to_list: int,
        new_key: bytes | None,
        increment_version: bool,
        position: Position,
        ignore_limit: bool,
    ) -> None:
        real = outcome(
            lambda: self.real.move(
                ById(entry_id),
                to_list,
                new_key=new_key,
                increment_version=increment_version,
                position=position,
                ignore_limit=ignore_limit,
            )
        )

        def model_move() -> ListEntry:
            entry = self._model_entry(entry_id)
            if entry is None:
                raise ModelError(_reason("NO_SUCH_ENTRY"))
            return self.model.move(
                entry, to_list, new_key, increment_version, ignore_limit, position
            )

        self._compare(real, outcome(model_move))

    @rule(entry_id=consumes(ids), expect_version=st.none() | st.integers(0, 2))
    def delete_by_id(self, entry_id: bytes, expect_version: int | None) -> None:
        real = outcome(lambda: self.real.delete(ById(entry_id), expect_version=expect_version))

        def model_delete() -> ListEntry:
            entry = self._model_entry(entry_id)
            if entry is None:
                raise ModelError(_reason("NO_SUCH_ENTRY"))
            if expect_version is not None and entry.version != expect_version:
                raise ModelError(_reason("VERSION_MISMATCH"))
            return self.model.delete(entry)

        self._compare(real, outcome(model_delete))

    @rule(entry_id=ids, data=payloads)
    def update_data(self, entry_id: bytes, data: bytes) -> None:
        real = outcome(lambda: self.real.update(ById(entry_id), data=data))

        def model_update() -> ListEntry:
            entry = self._model_entry(entry_id)
            if entry is None:
                raise ModelError(_reason("NO_SUCH_ENTRY"))
            return self.model.update_data(entry, data)

        self._compare(real, outcome(model_update))

    @rule(list_number=lists, limit=st.none() | st.integers(0, 4))
    def set_limit(self, list_number: int, limit: int | None) -> None:
        self.real.set_list_controls(list_number, limit=limit)
        self.model.limits[list_number] = limit
        self._check_events()

    @rule(
        chosen=st.lists(ids, max_size=5, unique=True),
        to_list=lists,
        budget=st.integers(1, 4),
        missing_ok=st.booleans(),
    )
    def move_entries(
        self, chosen: list[bytes], to_list: int, budget: int, missing_ok: bool
    ) -> None:
        result = self.real.move_entries(
            [BulkMove(i, to_list, increment_version=True) for i in chosen],
            budget=budget,
            missing_ok=missing_ok,
            ignore_limit=True,
        )
        done = 0
        for entry_id in chosen[:budget]:
            entry = self._model_entry(entry_id)
            if entry is None:
                if not missing_ok:
                    break
            else:
                self.model.move(entry, to_list, None, True, True)
            done += 1
        assert result.processed == done
        assert (result.error is None) == (done == min(budget, len(chosen)))
        self._check_events()

    @rule(chosen=st.lists(ids, max_size=5, unique=True), budget=st.integers(1, 6))
    def delete_entries(self, chosen: list[bytes], budget: int) -> None:
        result = self.real.delete_entries(chosen, budget=budget, missing_ok=True)
        for entry_id in chosen[:budget]:
            entry = self._model_entry(entry_id)
            if entry is not None:
                self.model.delete(entry)
        assert result.processed == min(budget, len(chosen))
        self._check_events()

    @rule(
        moved=st.lists(ids, max_size=4, unique=True),
        deleted=st.lists(ids, max_size=4, unique=True),
        to_list=lists,
        budget=st.integers(1, 6),
        missing_ok=st.booleans(),
    )
    def move_and_delete_entries(
        self, moved: list[bytes], deleted: list[bytes], to_list: int, budget: int, missing_ok: bool
    ) -> None:
        result = self.real.move_and_delete_entries(
            [BulkMove(i, to_list, increment_version=True) for i in moved],
            deleted,
            budget=budget,
            missing_ok=missing_ok,
            ignore_limit=True,
        )
        done, stopped = 0, False
        for entry_id in moved[:budget]:
            entry = self._model_entry(entry_id)
            if entry is None:
                if not missing_ok:
                    stopped = True
                    break
            else:
                self.model.move(entry, to_list, None, True, True)
            done += 1
        moves_told = self._transitions()  # each part's changes go one way
        if not stopped:
            for entry_id in deleted[: budget - done]:
                entry = self._model_entry(entry_id)
                if entry is None:
                    if not missing_ok:
                        stopped = True
                        break
                else:
                    self.model.delete(entry)
                done += 1
        assert result.processed == done and result.requested == len(moved) + len(deleted)
        assert (result.error is None) is not stopped
        assert all(seq > self.last_seq for seq in result.seqs)
        assert list(result.seqs) == sorted(set(result.seqs))
        if result.seqs:
            self.last_seq = result.seqs[-1]
        self._check_events(moves_told)

    @rule(list_number=lists, key=keys, compare=st.sampled_from(list(Compare)))
    def read_by_key(self, list_number: int, key: bytes, compare: Compare) -> None:
        found = self.real.read(ByKey(list_number, key, compare))
        entries = self.model.lists[list_number]
        matches = [e for e in entries if compare.holds(e.key, key)]
        if compare is Compare.LE:
            expected = matches[-1] if matches else None
        else:
            expected = matches[0] if matches else None
        assert found == (None if expected is None else expected.as_entry(256))

    @rule(list_number=lists, secondary_key=st.sampled_from([b"ID1", b"ID2"]))
    def read_by_secondary_key(self, list_number: int, secondary_key: bytes) -> None:
        found = self.real.read(BySecondaryKey(list_number, secondary_key))
        matches = [e for e in self.model.lists[list_number] if e.secondary_key == secondary_key]
        assert found == (matches[0].as_entry(256) if matches else None)

    @rule(list_number=lists)
    def read_tail(self, list_number: int) -> None:
        entries = self.model.lists[list_number]
        assert self.real.read(Tail(list_number)) == (entries[-1].as_entry(256) if entries else None)

    # -- invariants -----------------------------------------------------------------

    @invariant()
    def lists_and_counts_agree(self) -> None:
        for n in range(LISTS):
            assert list(self.real.scan(n)) == self.model.snapshot(n)
            info = self.real.list_info(n)
            assert info.entries == len(self.model.lists[n])
            assert info.limit == self.model.limits[n]
        stats = self.real.statistics()
        assert stats.entries == len(self.model.all_entries())
        assert stats.elements == self.model.elements_in_use()
        assert stats.seq == self.last_seq or stats.seq > self.last_seq


def _reason(name: str) -> CFReason:
    return CFReason[name]
