"""Bulk writes and snapshots: loading a structure and copying it whole, on every backend."""

from __future__ import annotations

import threading

from sharedq.cf import (
    BulkMove,
    BulkWrite,
    ById,
    CouplingFacility,
    EntryExists,
    InvalidRequest,
    ListFull,
    ListStructure,
    LockHeld,
    MonitorState,
    Position,
    StructureFull,
    StructureLost,
)
from sharedq.testing.conformance._registry import MakeStructure, check, raises
from sharedq.testing.conformance.helpers import data_on, eid, key, keys_on


def _writes(count: int, list_number: int = 0, first: int = 0) -> list[BulkWrite]:
    return [
        BulkWrite(list_number, key(n % 3), b"%d" % n, entry_id=eid(first + n)) for n in range(count)
    ]


# -- write_entries ---------------------------------------------------------------------


@check
def write_entries_writes_each_entry_as_write_would(struct: ListStructure) -> None:
    result = struct.write_entries(
        [
            BulkWrite(0, key(5), b"five", adjunct=b"adj", secondary_key=b"S", entry_id=eid(1),
                      version=7),
            BulkWrite(0, key(5), b"head", entry_id=eid(2), position=Position.HEAD),
            BulkWrite(1, key(1), b""),
        ]
    )  # fmt: skip
    assert result.complete and result.processed == 3 and result.missing == ()
    assert list(result.seqs) == sorted(set(result.seqs))
    assert data_on(struct, 0) == [b"head", b"five"]
    written = struct.read(ById(eid(1)))
    assert written is not None
    assert (written.adjunct, written.secondary_key, written.version) == (b"adj", b"S", 7)
    generated = next(struct.scan(1))
    assert generated.entry_id == result.seqs[2].to_bytes(12, "big")
    assert struct.statistics().seq == result.seqs[-1]


@check
def write_entries_stops_at_its_budget_and_redrives(struct: ListStructure) -> None:
    writes = _writes(7)
    start, rounds = 0, []
    while True:
        result = struct.write_entries(writes[start:], budget=3)
        rounds.append(result.processed)
        if result.complete:
            break
        assert result.redrive_from == 3
        start += result.processed
    assert rounds == [3, 3, 1]
    assert keys_on(struct, 0) == sorted(key(n % 3) for n in range(7))


@check
def write_entries_validates_everything_before_writing_anything(
    struct: ListStructure,
) -> None:
    with raises(InvalidRequest):
        struct.write_entries([*_writes(2), BulkWrite(0, b"short")])
    with raises(InvalidRequest):
        struct.write_entries([*_writes(2), BulkWrite(99, key(1))])
    assert struct.statistics().entries == 0


@check
def write_entries_stops_at_an_entry_it_cannot_write(
    struct: ListStructure, make_structure: MakeStructure, facility: CouplingFacility
) -> None:
    struct.write(0, key(1), entry_id=eid(3))
    result = struct.write_entries(_writes(5))
    assert isinstance(result.error, EntryExists) and result.processed == 3
    assert len(result.seqs) == 3 and struct.list_info(0).entries == 4
    struct.set_list_controls(1, limit=2)
    result = struct.write_entries(_writes(3, list_number=1, first=10))
    assert isinstance(result.error, ListFull) and result.processed == 2
    assert struct.write_entries(_writes(3, 1, 20), ignore_limit=True).complete
    with facility.connect(make_structure(entries=2, elements=8), "U1") as small:
        result = small.write_entries(_writes(3))
        assert isinstance(result.error, StructureFull) and result.processed == 2


@check
def write_entries_honours_locks_and_wakes_monitors(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    name = make_structure()
    with facility.connect(name, "U1") as writer, facility.connect(name, "U2") as other:
        other.lock(1)
        with raises(LockHeld):
            writer.write_entries(_writes(2), not_locked=[1])
        assert writer.statistics().entries == 0
        other.unlock(1)
        other.monitor_list(0)
        assert writer.write_entries(_writes(2), not_locked=[1]).complete
        events = other.wait_events(timeout=5)
        assert [e.state for e in events] == [MonitorState.NONEMPTY]


# -- snapshot --------------------------------------------------------------------------


@check
def a_snapshot_holds_the_structure_as_it_was(struct: ListStructure) -> None:
    struct.write_entries(_writes(5))
    struct.write(2, key(9), b"x" * 700, adjunct=b"A", secondary_key=b"SK", version=3)
    struct.set_list_controls(2, limit=9, increment_authority=True)
    before = {n: list(struct.scan(n)) for n in range(8)}
    with struct.snapshot() as snap:
        assert snap.seq == struct.statistics().seq
        # Changes after the snapshot do not show in it.
        struct.delete(ById(eid(0)))
        struct.write(3, key(1), b"later")
        struct.set_list_controls(2, limit=None)
        assert {n: list(snap.entries(n)) for n in range(8)} == before
        info = snap.lists[2]
        assert (info.list_number, info.entries, info.limit, info.authority) == (2, 1, 9, 1)
        assert info.elements == before[2][0].elements
        assert [i.entries for i in snap.lists] == [len(before[n]) for n in range(8)]
        params = snap.params
        assert params.name == struct.structure_name and params.list_count == 8
    with raises(InvalidRequest):
        list(snap.entries(0))
    snap.release()  # idempotent


@check
def a_snapshot_keeps_what_every_kind_of_later_change_replaces(struct: ListStructure) -> None:
    """Whatever happens to the entries after it, two snapshots show them as they were."""
    struct.write_entries(_writes(8))
    struct.write(1, key(1), b"", entry_id=eid(50))  # no data
    struct.write(1, key(2), b"y" * 600, entry_id=eid(51))
    before = {n: list(struct.scan(n)) for n in range(8)}
    first = struct.snapshot()
    struct.delete(ById(eid(0)))
    struct.write(0, key(7), b"born again", entry_id=eid(0))  # the same id, new entry
    struct.update(ById(eid(1)), data=b"rewritten", adjunct=b"ADJ", increment_version=True)
    struct.update(ById(eid(50)), data=b"now with data")
    struct.update(ById(eid(51)), data=b"")
    struct.move(ById(eid(2)), 3, new_key=key(9))
    second = struct.snapshot()
    struct.move_entries([BulkMove(eid(3), 4, increment_version=True), BulkMove(eid(1), 4)])
    struct.delete_entries([eid(4), eid(5), eid(0)])
    struct.update(ById(eid(6)), data=b"after both")
    with first, second:
        assert {n: list(first.entries(n)) for n in range(8)} == before
        middle = {n: list(second.entries(n)) for n in range(8)}
    assert [e.data for e in middle[0] if e.entry_id == eid(0)] == [b"born again"]
    assert [e.data for e in middle[1] if e.entry_id == eid(50)] == [b"now with data"]
    assert [(e.key, e.list_number) for e in middle[3]] == [(key(9), 3)]
    assert {e.entry_id for e in middle[0]} == {eid(n) for n in (0, 1, 3, 4, 5, 6, 7)}


@check
def snapshot_params_allocate_a_structure_of_the_same_capacity(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    name = make_structure(entries=50, elements=120, growth=2.0)
    with facility.connect(name, "U1") as conn:
        conn.alter(size=conn.statistics().size + 10_000)
        stats = conn.statistics()
        with conn.snapshot() as snap:
            params = snap.params
    facility.delete(name)
    facility.create(params)
    with facility.connect(name, "U1") as again:
        rebuilt = again.statistics()
        assert (rebuilt.size, rebuilt.max_entries, rebuilt.max_elements) == (
            stats.size,
            stats.max_entries,
            stats.max_elements,
        )


@check
def a_large_snapshot_reads_in_pages_while_the_structure_changes(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    count = 2500  # more than a page of every backend
    name = make_structure(entries=count + 10, elements=count + 10)
    with facility.connect(name, "U1") as conn:
        writes = [BulkWrite(1, key(n), b"%d" % n, entry_id=eid(n)) for n in range(count)]
        start = 0
        while start < count:
            start += conn.write_entries(writes[start:]).processed
        with conn.snapshot() as snap:
            stop = threading.Event()

            def churn() -> None:
                n = 0
                while not stop.is_set():
                    conn.move(ById(eid(n % count)), 2)
                    n += 1

            worker = threading.Thread(target=churn)
            worker.start()
            try:
                seen = [(e.entry_id, e.data) for e in snap.entries(1)]
            finally:
                stop.set()
                worker.join()
        assert seen == [(eid(n), b"%d" % n) for n in range(count)]
        assert conn.list_info(2).entries > 0  # the structure did change meanwhile


@check
def a_snapshot_of_a_deleted_structure_is_gone(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    name = make_structure()
    conn = facility.connect(name, "U1")
    conn.write(0, key(1), b"x")
    snap = conn.snapshot()
    facility.delete(name, force=True)
    try:
        entries: list[bytes] | None = [e.data for e in snap.entries(0)]
    except StructureLost:
        entries = None
    # The memory backend's copy is the entries themselves, still readable; Redis drops
    # the copy with the structure.
    assert entries in (None, [b"x"])
    snap.release()
    with raises(StructureLost):
        conn.snapshot()
