"""Bulk moves and deletes by entry list, with budgets and redrive."""

from __future__ import annotations

from sharedq.cf import BulkMove, ById, ListFull, ListStructure, NoSuchEntry
from sharedq.cf.errors import InvalidRequest, ListMismatch
from sharedq.testing.conformance._registry import check, raises
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
