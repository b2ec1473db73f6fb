"""Bulk moves and deletes by entry list, with budgets and redrive; both in one request."""

from __future__ import annotations

from sharedq.cf import (
    BulkMove,
    ById,
    CouplingFacility,
    ListFull,
    ListStructure,
    MonitorState,
    NoSuchEntry,
)
from sharedq.cf.errors import InvalidRequest, ListMismatch
from sharedq.testing.conformance._registry import MakeStructure, check, raises
from sharedq.testing.conformance.helpers import data_on, eid, key, keys_on


def _fill(struct: ListStructure, count: int, list_number: int = 0) -> list[bytes]:
    return [
        struct.write(list_number, key(0xF600 + n), b"%d" % n, entry_id=eid(n)).entry.entry_id
        for n in range(count)
    ]


@check
def move_entries_commits_keys_in_one_request(struct: ListStructure) -> None:
    ids = _fill(struct, 5)
    moves = [BulkMove(i, 0, new_key=key(n), set_version=0) for n, i in enumerate(ids)]
    result = struct.move_entries(moves)
    assert result.complete and result.redrive_from is None
    assert result.processed == result.requested == 5
    assert len(result.seqs) == 5 and list(result.seqs) == sorted(set(result.seqs))
    assert keys_on(struct, 0) == [key(n) for n in range(5)]


@check
def move_entries_stops_at_its_budget_and_redrives(struct: ListStructure) -> None:
    ids = _fill(struct, 7)
    moves = [BulkMove(i, 1) for i in ids]
    done: list[int] = []
    start = 0
    while True:
        result = struct.move_entries(moves[start:], budget=3)
        done.append(result.processed)
        if result.complete:
            break
        assert result.redrive_from == 3
        start += result.processed
    assert done == [3, 3, 1]
    assert data_on(struct, 1) == [b"%d" % n for n in range(7)]
    assert struct.list_info(0).entries == 0


@check
def move_entries_validates_everything_before_moving_anything(
    struct: ListStructure,
) -> None:
    ids = _fill(struct, 3)
    moves = [BulkMove(ids[0], 1), BulkMove(ids[1], 1, new_key=b"short")]
    with raises(InvalidRequest):
        struct.move_entries(moves)
    assert struct.list_info(1).entries == 0


@check
def move_entries_missing_ok_records_the_missing(struct: ListStructure) -> None:
    ids = _fill(struct, 2)
    result = struct.move_entries(
        [BulkMove(ids[0], 1), BulkMove(eid(999), 1), BulkMove(ids[1], 1)], missing_ok=True
    )
    assert result.complete
    assert result.missing == (eid(999),)
    assert len(result.seqs) == 2
    assert struct.list_info(1).entries == 2


@check
def move_entries_stops_at_a_missing_entry_keeping_what_it_did(
    struct: ListStructure,
) -> None:
    ids = _fill(struct, 3)
    result = struct.move_entries([BulkMove(ids[0], 1), BulkMove(eid(999), 1), BulkMove(ids[1], 1)])
    assert not result.complete
    assert result.processed == 1
    assert isinstance(result.error, NoSuchEntry)
    assert len(result.seqs) == 1
    assert data_on(struct, 1) == [b"0"]


@check
def move_entries_respects_from_list_and_limits(struct: ListStructure) -> None:
    ids = _fill(struct, 3)
    result = struct.move_entries([BulkMove(ids[0], 1, from_list=2)])
    assert isinstance(result.error, ListMismatch) and result.processed == 0
    struct.set_list_controls(1, limit=1)
    result = struct.move_entries([BulkMove(i, 1) for i in ids])
    assert isinstance(result.error, ListFull) and result.processed == 1
    result = struct.move_entries([BulkMove(i, 1) for i in ids[1:]], ignore_limit=True)
    assert result.complete
    assert struct.list_info(1).entries == 3


@check
def move_entries_with_new_secondary_key_and_version(struct: ListStructure) -> None:
    (entry_id,) = _fill(struct, 1)
    struct.move_entries(
        [BulkMove(entry_id, 0, new_key=key(1), new_secondary_key=b"MSG1", increment_version=True)]
    )
    entry = struct.read(ById(entry_id))
    assert entry is not None
    assert (entry.key, entry.secondary_key, entry.version) == (key(1), b"MSG1", 1)


@check
def delete_entries_with_budget_missing_and_redrive(struct: ListStructure) -> None:
    ids = _fill(struct, 5)
    first = struct.delete_entries(ids, budget=2)
    assert (first.processed, first.complete) == (2, False)
    rest = struct.delete_entries([*ids[first.processed :], eid(500)], missing_ok=True)
    assert rest.complete and rest.missing == (eid(500),)
    assert len(first.seqs) + len(rest.seqs) == 5
    assert struct.statistics().entries == 0
    # Deleting again is harmless when missing entries are allowed (idempotent recovery).
    again = struct.delete_entries(ids, missing_ok=True)
    assert again.complete and again.seqs == () and len(again.missing) == 5


@check
def delete_entries_stops_at_a_missing_entry(struct: ListStructure) -> None:
    ids = _fill(struct, 2)
    result = struct.delete_entries([ids[0], eid(777), ids[1]])
    assert result.processed == 1 and isinstance(result.error, NoSuchEntry)
    assert struct.statistics().entries == 1


@check
def bad_budget_is_refused(struct: ListStructure) -> None:
    with raises(InvalidRequest):
        struct.delete_entries([eid(1)], budget=0)


# -- moves, then deletes, in one request -------------------------------------------------


def _unit(struct: ListStructure) -> tuple[list[BulkMove], list[bytes]]:
    """A unit's commit: three puts on list 0 to commit onto list 1, two gets on list 2."""
    puts = _fill(struct, 3)
    gets = [
        struct.write(2, key(n), b"g%d" % n, entry_id=eid(100 + n)).entry.entry_id for n in (0, 1)
    ]
    moves = [BulkMove(i, 1, new_key=key(n), set_version=0, from_list=0) for n, i in enumerate(puts)]
    return moves, gets


@check
def move_and_delete_entries_commits_puts_and_gets_in_one_request(struct: ListStructure) -> None:
    moves, gets = _unit(struct)
    result = struct.move_and_delete_entries(moves, gets)
    assert result.complete and result.redrive_from is None
    assert result.processed == result.requested == 5 and result.missing == ()
    assert len(result.seqs) == 5 and list(result.seqs) == sorted(set(result.seqs))
    assert keys_on(struct, 1) == [key(n) for n in range(3)]
    assert struct.list_info(0).entries == struct.list_info(2).entries == 0
    stats = struct.statistics()
    assert stats.entries == 3


@check
def move_and_delete_entries_counts_moves_then_deletes_against_one_budget(
    struct: ListStructure,
) -> None:
    moves, gets = _unit(struct)
    first = struct.move_and_delete_entries(moves, gets, budget=2)
    assert (first.processed, first.requested, first.redrive_from) == (2, 5, 2)
    assert struct.list_info(1).entries == 2 and struct.list_info(2).entries == 2
    second = struct.move_and_delete_entries(moves[2:], gets, budget=2)
    assert (second.processed, second.redrive_from) == (2, 2)  # the last move, one delete
    assert struct.list_info(1).entries == 3 and data_on(struct, 2) == [b"g1"]
    third = struct.move_and_delete_entries([], gets[1:], budget=2)
    assert third.complete and third.processed == 1
    assert len(first.seqs + second.seqs + third.seqs) == 5
    assert struct.statistics().entries == 3


@check
def move_and_delete_entries_validates_both_lists_before_changing_anything(
    struct: ListStructure,
) -> None:
    moves, gets = _unit(struct)
    with raises(InvalidRequest):
        struct.move_and_delete_entries(moves, [gets[0], b"short"])
    with raises(InvalidRequest):
        struct.move_and_delete_entries([*moves, BulkMove(gets[0], 99)], gets)
    with raises(InvalidRequest):
        struct.move_and_delete_entries(moves, gets, budget=0)
    assert struct.list_info(0).entries == 3 and struct.list_info(2).entries == 2


@check
def move_and_delete_entries_stops_at_a_move_before_any_delete(struct: ListStructure) -> None:
    moves, gets = _unit(struct)
    struct.move(ById(moves[1].entry_id), 3)  # moved away under the unit
    result = struct.move_and_delete_entries(moves, gets)
    assert isinstance(result.error, ListMismatch) and result.processed == 1
    assert len(result.seqs) == 1 and result.redrive_from == 1
    assert struct.list_info(1).entries == 1 and struct.list_info(2).entries == 2
    struct.set_list_controls(1, limit=1)
    result = struct.move_and_delete_entries(moves[2:], gets)
    assert isinstance(result.error, ListFull) and result.processed == 0
    result = struct.move_and_delete_entries(moves[2:], gets, ignore_limit=True)
    assert result.complete and struct.statistics().entries == 3


@check
def move_and_delete_entries_missing_entries(struct: ListStructure) -> None:
    moves, gets = _unit(struct)
    ghost = BulkMove(eid(999), 1)
    result = struct.move_and_delete_entries(
        [moves[0], ghost, *moves[1:]], [eid(998), *gets], missing_ok=True
    )
    assert result.complete and result.processed == result.requested == 7
    assert result.missing == (eid(999), eid(998)) and len(result.seqs) == 5
    again = struct.move_and_delete_entries([], gets, missing_ok=True)  # idempotent
    assert again.complete and again.seqs == () and again.missing == tuple(gets)
    # Without missing_ok a missing delete stops the request, the moves before it done.
    put = struct.write(0, key(0xF6), entry_id=eid(200)).entry.entry_id
    gets = [
        struct.write(2, key(n), b"h%d" % n, entry_id=eid(300 + n)).entry.entry_id for n in (0, 1)
    ]
    result = struct.move_and_delete_entries([BulkMove(put, 1)], [gets[0], eid(997), gets[1]])
    assert isinstance(result.error, NoSuchEntry) and result.processed == 2
    assert len(result.seqs) == 2 and data_on(struct, 2) == [b"h1"]
    assert struct.list_info(1).entries == 4


@check
def move_and_delete_entries_deletes_what_it_moved(struct: ListStructure) -> None:
    """The deletes see the moves: an entry moved and then named for deletion is gone,
    and an id named twice for deletion is missing the second time."""
    moves, gets = _unit(struct)
    moved = moves[0].entry_id
    result = struct.move_and_delete_entries(moves, [moved, *gets, gets[0]], missing_ok=True)
    assert result.complete and result.missing == (gets[0],) and len(result.seqs) == 6
    assert keys_on(struct, 1) == [key(1), key(2)] and struct.statistics().entries == 2
    with raises(NoSuchEntry):
        struct.read(ById(moved))


@check
def move_and_delete_entries_tells_monitors_what_two_requests_would(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    name = make_structure()
    with facility.connect(name, "WATCHER") as watcher, facility.connect(name, "WORKER") as worker:
        moves, gets = _unit(worker)
        into = watcher.monitor_list(1, notify_empty=True, token=b"INTO")
        out_of = watcher.monitor_list(2, notify_empty=True, token=b"OUT")
        source = watcher.monitor_list(0, notify_empty=True, token=b"SOURCE")
        result = worker.move_and_delete_entries(moves, gets)
        events = [(e.monitor_id, e.state, e.seq) for e in watcher.events_nowait()]
        assert events == [
            (into.monitor_id, MonitorState.NONEMPTY, result.seqs[0]),
            (source.monitor_id, MonitorState.EMPTY, result.seqs[2]),
            (out_of.monitor_id, MonitorState.EMPTY, result.seqs[4]),
        ]


@check
def move_and_delete_entries_keeps_a_snapshot_as_it_was(struct: ListStructure) -> None:
    moves, gets = _unit(struct)
    before = {n: list(struct.scan(n)) for n in range(4)}
    with struct.snapshot() as snap:
        struct.move_and_delete_entries(moves, [moves[1].entry_id, *gets])
        assert {n: list(snap.entries(n)) for n in range(4)} == before
    assert struct.statistics().entries == 2
