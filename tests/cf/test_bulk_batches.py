"""Bulk requests that the Redis backend does in few commands, on every backend.

``take_many`` to another list reads the heads to come in one go and, with neither list
watched, changes their list members and records in one command each; ``delete_entries``
reads its records in one go and deletes unwatched entries together; ``move_entries``
and ``write_entries`` count a limited list once.  Each must still behave as one
request per entry would: these are the cases where a batch could differ (a key
condition ending the takes, secondary keys, an id named twice, a list filling up and
emptying within one request, a watched list among unwatched ones).
"""

from __future__ import annotations

from sharedq.cf import (
    BulkMove,
    BulkWrite,
    Compare,
    EntryExists,
    ListFull,
    ListStructure,
    NoSuchEntry,
)
from sharedq.cf.types import BySecondaryKey, Head, MonitorSpec, MonitorState


def _key(n: int) -> bytes:
    return n.to_bytes(16, "big")


def _ids(conn: ListStructure, list_number: int) -> list[bytes]:
    return [e.entry_id for e in conn.scan(list_number)]


def _write(conn: ListStructure, list_number: int, spec: list[tuple[bytes, int]]) -> None:
    for entry_id, key in spec:
        conn.write(
            list_number,
            _key(key),
            b"data-" + entry_id,
            entry_id=entry_id,
            secondary_key=b"s-" + entry_id,
        )


def test_take_many_to_another_list_stops_where_the_head_stops_qualifying(
    struct: ListStructure,
) -> None:
    ids = [b"%012d" % i for i in range(6)]
    _write(struct, 0, list(zip(ids, [1, 1, 2, 2, 3, 4], strict=True)))
    taken = struct.take_many(Head(0, key=_key(2), compare=Compare.LE), 1, 10)
    assert [moved.entry.entry_id for moved, _ in taken] == ids[:4]
    assert [moved.entry.data for moved, _ in taken] == [b"data-" + i for i in ids[:4]]
    assert [deleted for _, deleted in taken] == [None] * 4
    seqs = [moved.seq for moved, _ in taken]
    assert seqs == list(range(seqs[0], seqs[0] + 4))
    assert _ids(struct, 0) == ids[4:]
    assert _ids(struct, 1) == ids[:4]
    for entry_id in ids[:4]:  # the secondary-key index follows the entries
        assert struct.read(BySecondaryKey(0, b"s-" + entry_id)) is None
        found = struct.read(BySecondaryKey(1, b"s-" + entry_id))
        assert found is not None and found.entry_id == entry_id
    assert struct.take_many(Head(0, key=_key(2), compare=Compare.LE), 1, 10) == []


def test_take_many_with_delete_and_a_count_below_the_heads(struct: ListStructure) -> None:
    ids = [b"%012d" % i for i in range(5)]
    _write(struct, 0, [(i, 7) for i in ids])
    taken = struct.take_many(Head(0), 2, 3, delete=True)
    assert [moved.entry.entry_id for moved, _ in taken] == ids[:3]
    assert all(d is not None and d.seq == m.seq + 1 for m, d in taken)
    assert _ids(struct, 0) == ids[3:]
    assert _ids(struct, 2) == []
    assert struct.read(BySecondaryKey(0, b"s-" + ids[0])) is None
    assert struct.read(BySecondaryKey(0, b"s-" + ids[3])) is not None


def test_take_many_stops_at_the_target_limit(struct: ListStructure) -> None:
    ids = [b"%012d" % i for i in range(5)]
    _write(struct, 0, [(i, 1) for i in ids])
    struct.set_list_controls(1, limit=2)
    taken = struct.take_many(Head(0), 1, 5)
    assert [moved.entry.entry_id for moved, _ in taken] == ids[:2]
    assert _ids(struct, 1) == ids[:2]
    assert _ids(struct, 0) == ids[2:]


def test_delete_entries_naming_an_id_twice(struct: ListStructure) -> None:
    a, b, c = b"a" * 12, b"b" * 12, b"c" * 12
    _write(struct, 0, [(a, 1), (b, 2), (c, 3)])
    result = struct.delete_entries([a, b, a], missing_ok=True)
    assert (result.processed, len(result.seqs), result.missing) == (3, 2, (a,))
    assert _ids(struct, 0) == [c]
    _write(struct, 0, [(a, 1)])
    result = struct.delete_entries([a, c, a])
    assert (result.processed, len(result.seqs)) == (2, 2)
    assert isinstance(result.error, NoSuchEntry)
    assert _ids(struct, 0) == []
    assert struct.read(BySecondaryKey(0, b"s-" + c)) is None


def test_delete_entries_across_watched_and_unwatched_lists(struct: ListStructure) -> None:
    ids = [b"%012d" % i for i in range(6)]
    _write(struct, 0, [(i, 1) for i in ids[:3]])
    _write(struct, 1, [(i, 1) for i in ids[3:]])
    struct.register_monitor(MonitorSpec(1, notify_empty=True))
    result = struct.delete_entries([ids[0], ids[3], ids[1], ids[4], ids[5]])
    assert (result.processed, len(result.seqs), result.error) == (5, 5, None)
    assert _ids(struct, 0) == [ids[2]]
    assert _ids(struct, 1) == []
    events = struct.wait_events(timeout=5)
    # One event: list 1 empty at the last delete's seq (the watched list as each
    # delete left it), nothing for unwatched list 0.
    assert [(e.list_number, e.state, e.seq) for e in events] == [
        (1, MonitorState.EMPTY, result.seqs[-1])
    ]


def test_move_entries_counts_a_limited_list_as_entries_come_and_go(
    struct: ListStructure,
) -> None:
    ids = [b"%012d" % i for i in range(6)]
    _write(struct, 0, [(i, 1) for i in ids])
    struct.set_list_controls(1, limit=3)
    moves = [BulkMove(ids[0], 1), BulkMove(ids[1], 1), BulkMove(ids[0], 2)]
    moves += [BulkMove(ids[i], 1) for i in (2, 3, 4)]
    result = struct.move_entries(moves)
    assert result.processed == 5
    assert isinstance(result.error, ListFull)
    assert _ids(struct, 1) == [ids[1], ids[2], ids[3]]
    assert _ids(struct, 2) == [ids[0]]
    assert _ids(struct, 0) == [ids[4], ids[5]]


def test_write_entries_with_an_id_in_use_or_named_twice(struct: ListStructure) -> None:
    a, b, c = b"a" * 12, b"b" * 12, b"c" * 12
    _write(struct, 0, [(a, 1)])
    struct.set_list_controls(1, limit=3)
    writes = [BulkWrite(1, _key(5), b"b", entry_id=b, secondary_key=b"s-b")]
    writes += [BulkWrite(1, _key(4), b"c", entry_id=c), BulkWrite(1, _key(3), b"x", entry_id=b)]
    result = struct.write_entries(writes)
    assert (result.processed, len(result.seqs)) == (2, 2)
    assert isinstance(result.error, EntryExists)
    assert _ids(struct, 1) == [c, b]
    found = struct.read(BySecondaryKey(1, b"s-b"))
    assert found is not None and found.data == b"b"
    result = struct.write_entries([BulkWrite(1, _key(1)), BulkWrite(1, _key(1), entry_id=a)])
    assert (result.processed, len(result.seqs)) == (1, 1)
    assert isinstance(result.error, EntryExists)  # the id is checked before the limit
    generated = (result.seqs[0]).to_bytes(12, "big")
    assert _ids(struct, 1) == [generated, c, b]
    result = struct.write_entries([BulkWrite(1, _key(1), entry_id=b"d" * 12)])
    assert (result.processed, result.seqs) == (0, ())
    assert isinstance(result.error, ListFull)
    result = struct.write_entries([BulkWrite(2, _key(1), entry_id=a)])
    assert (result.processed, result.seqs) == (0, ())
    assert isinstance(result.error, EntryExists)


def test_write_entries_on_a_watched_list_among_unwatched_ones(struct: ListStructure) -> None:
    struct.register_monitor(MonitorSpec(1))
    writes = [BulkWrite(n % 2, _key(n), entry_id=b"%012d" % n) for n in range(6)]
    result = struct.write_entries(writes)
    assert (result.processed, len(result.seqs), result.error) == (6, 6, None)
    assert _ids(struct, 0) == [b"%012d" % n for n in (0, 2, 4)]
    assert _ids(struct, 1) == [b"%012d" % n for n in (1, 3, 5)]
    events = struct.wait_events(timeout=5)
    assert [(e.list_number, e.state, e.seq) for e in events] == [
        (1, MonitorState.NONEMPTY, result.seqs[1])
    ]


def test_move_entries_naming_an_entry_again(struct: ListStructure) -> None:
    ids = [b"%012d" % i for i in range(4)]
    _write(struct, 0, list(zip(ids, [1, 2, 3, 4], strict=True)))
    moves = [
        BulkMove(ids[0], 1),
        BulkMove(ids[1], 1, new_secondary_key=b"t-1"),
        BulkMove(ids[0], 2, from_list=1, new_key=_key(9)),
        BulkMove(ids[2], 0, new_key=_key(0)),
        BulkMove(ids[0], 2, from_list=1),
    ]
    result = struct.move_entries(moves)
    assert (result.processed, len(result.seqs)) == (4, 4)
    assert result.error is not None and type(result.error).__name__ == "ListMismatch"
    assert _ids(struct, 0) == [ids[2], ids[3]]
    assert _ids(struct, 1) == [ids[1]]
    assert _ids(struct, 2) == [ids[0]]
    moved = struct.read(BySecondaryKey(2, b"s-" + ids[0]))
    assert moved is not None and moved.key == _key(9)
    assert struct.read(BySecondaryKey(1, b"s-" + ids[1])) is None
    assert struct.read(BySecondaryKey(1, b"t-1")) is not None
    assert struct.read(BySecondaryKey(0, b"s-" + ids[0])) is None
