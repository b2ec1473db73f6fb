"""``write_and_rekey``: a write and the move of its entry to a new key, as one request."""

from __future__ import annotations

from typing import Any

from sharedq.cf import (
    ById,
    BySecondaryKey,
    CouplingFacility,
    EntryExists,
    ListFull,
    ListStructure,
    MonitorState,
    StructureStats,
)
from sharedq.cf.errors import AuthorityMismatch, InvalidRequest
from sharedq.testing.conformance._registry import MakeStructure, check, raises
from sharedq.testing.conformance.helpers import data_on, eid, keys_on

UNCOMMITTED = b"\xf6" + b"\x04" + b"\x00" * 14
COMMITTED = b"\x04" + b"\x00" * 15
LOW = b"\x00" * 16
COMMITTED_HIGH = b"\x09" + b"\xff" * 15
UNCOMMITTED_LOW = b"\xf6" + b"\x00" * 15
UNCOMMITTED_HIGH = b"\xf6" + b"\xff" * 15


def _counts(stats: StructureStats) -> tuple[int, int, int]:
    return stats.entries, stats.elements, stats.seq


@check
def it_is_a_write_then_a_move_with_consecutive_seqs(struct: ListStructure) -> None:
    written, moved = struct.write_and_rekey(
        2,
        UNCOMMITTED,
        b"body",
        adjunct=b"adj",
        entry_id=eid(7),
        version=99,
        new_key=COMMITTED,
        new_secondary_key=b"ID7",
        set_version=0,
    )
    rekeyed = written.entry._replace(key=COMMITTED, secondary_key=b"ID7", version=0)
    assert moved.seq == written.seq + 1
    assert written.entry == (eid(7), 2, UNCOMMITTED, b"body", b"adj", None, 99, 1)
    assert moved.entry == rekeyed
    assert struct.read(ById(eid(7), 2)) == moved.entry
    assert struct.read(BySecondaryKey(2, b"ID7")) == moved.entry
    assert struct.statistics().seq == moved.seq
    assert struct.list_info(2).entries == 1


@check
def it_leaves_what_write_and_move_leave(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    """Two structures, one by two requests and one by the one: the same in the end."""
    one = facility.connect(make_structure(), "U1")
    two = facility.connect(make_structure(), "U1")
    one.write(0, COMMITTED, b"before")
    two.write(0, COMMITTED, b"before")
    pair = one.write_and_rekey(0, UNCOMMITTED, b"new", new_key=COMMITTED, version=5)
    written = two.write(0, UNCOMMITTED, b"new", version=5)
    moved = two.move(ById(written.entry.entry_id), 0, new_key=COMMITTED)
    assert moved is not None
    assert pair == (written, moved)  # generated ids are seqs: the same on both
    assert list(one.scan(0)) == list(two.scan(0))
    assert data_on(one, 0) == [b"before", b"new"]  # the tail of the new key's sublist
    assert _counts(one.statistics()) == _counts(two.statistics())


@check
def unchanged_secondary_key_and_version_are_kept(struct: ListStructure) -> None:
    _, moved = struct.write_and_rekey(
        0, UNCOMMITTED, b"d", secondary_key=b"S", version=3, new_key=COMMITTED
    )
    assert (moved.entry.secondary_key, moved.entry.version) == (b"S", 3)
    _, moved = struct.write_and_rekey(
        0, UNCOMMITTED, b"e", secondary_key=b"S", new_key=COMMITTED, new_secondary_key=None
    )
    assert moved.entry.secondary_key is None
    assert [e.data for e in struct.scan(0)] == [b"d", b"e"]
    found = struct.read(BySecondaryKey(0, b"S"))
    assert found is not None and found.data == b"d"


_BAD_MOVES: dict[str, dict[str, Any]] = {
    "short new key": {"new_key": b"short"},
    "empty new secondary key": {"new_key": COMMITTED, "new_secondary_key": b""},
    "negative version": {"new_key": COMMITTED, "set_version": -1},
    "version too big": {"new_key": COMMITTED, "set_version": 2**64},
}


@check(cases={name: {"bad": bad} for name, bad in _BAD_MOVES.items()})
def a_bad_move_argument_changes_nothing(struct: ListStructure, bad: dict[str, Any]) -> None:
    before = _counts(struct.statistics())
    with raises(InvalidRequest):
        struct.write_and_rekey(0, UNCOMMITTED, b"d", **bad)
    assert _counts(struct.statistics()) == before
    assert keys_on(struct, 0) == []


@check
def the_writes_errors_change_nothing(struct: ListStructure) -> None:
    struct.write(0, COMMITTED, entry_id=eid(1))
    struct.set_list_controls(1, limit=1)
    struct.write(1, COMMITTED)
    before = _counts(struct.statistics())
    with raises(EntryExists):
        struct.write_and_rekey(0, UNCOMMITTED, entry_id=eid(1), new_key=COMMITTED)
    with raises(ListFull):
        struct.write_and_rekey(1, UNCOMMITTED, b"d", new_key=COMMITTED)
    with raises(AuthorityMismatch):
        struct.write_and_rekey(0, UNCOMMITTED, b"d", expect_authority=4, new_key=COMMITTED)
    with raises(InvalidRequest):
        struct.write_and_rekey(0, b"bad", b"d", new_key=COMMITTED)
    assert _counts(struct.statistics()) == before
    assert keys_on(struct, 0) == [COMMITTED]
    assert struct.read(ById(eid(1))) is not None


@check
def monitors_see_both_changes(facility: CouplingFacility, make_structure: MakeStructure) -> None:
    """A get's monitor wakes at the move; one on the uncommitted range sees the entry
    come and go, with the write's and the move's seqs, as with two requests."""
    name = make_structure()
    watcher, worker = facility.connect(name, "WATCHER"), facility.connect(name, "WORKER")
    committed = watcher.monitor_key_range(0, LOW, COMMITTED_HIGH)
    uncommitted = watcher.monitor_key_range(0, UNCOMMITTED_LOW, UNCOMMITTED_HIGH, notify_empty=True)
    written, moved = worker.write_and_rekey(0, UNCOMMITTED, b"m", new_key=COMMITTED)
    events = [(e.monitor_id, e.state, e.seq) for e in watcher.events_nowait()]
    assert sorted(events, key=lambda e: (e[2], e[0])) == sorted(
        [
            (uncommitted.monitor_id, MonitorState.NONEMPTY, written.seq),
            (uncommitted.monitor_id, MonitorState.EMPTY, moved.seq),
            (committed.monitor_id, MonitorState.NONEMPTY, moved.seq),
        ],
        key=lambda e: (e[2], e[0]),
    )
