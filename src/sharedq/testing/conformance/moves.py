"""Moving, updating and deleting entries."""

from __future__ import annotations

from sharedq.cf import (
    UNCHANGED,
    ById,
    ByKey,
    BySecondaryKey,
    Compare,
    Head,
    ListStructure,
    NoSuchEntry,
    Position,
    Tail,
)
from sharedq.cf.errors import InvalidRequest, ListMismatch
from sharedq.testing.conformance._registry import check, raises
from sharedq.testing.conformance.helpers import data_on, key, keys_on

COMMITTED_COMPARATOR = b"\x0a" + b"\x00" * 15


@check
def move_head_takes_the_lowest_key_to_another_list(struct: ListStructure) -> None:
    struct.write(0, key(2), b"second")
    struct.write(0, key(1), b"first")
    change = struct.move(Head(0), 1)
    assert change is not None
    assert change.entry.data == b"first"
    assert change.entry.list_number == 1
    assert data_on(struct, 0) == [b"second"]
    assert data_on(struct, 1) == [b"first"]


@check
def move_head_of_an_empty_list_returns_none(struct: ListStructure) -> None:
    assert struct.move(Head(0), 1) is None
    assert struct.statistics().entries == 0


@check
def key_range_checking_on_read(struct: ListStructure) -> None:
    """The patent's get: move the head only when its key is in the committed range."""
    uncommitted = b"\xf6" + b"\x04" + b"\x00" * 14
    committed = b"\x04" + b"\x00" * 15
    struct.write(0, uncommitted, b"invisible")
    assert struct.move(Head(0, key=COMMITTED_COMPARATOR, compare=Compare.LE), 1) is None
    assert data_on(struct, 0) == [b"invisible"]
    struct.write(0, committed, b"visible")
    change = struct.move(Head(0, key=COMMITTED_COMPARATOR, compare=Compare.LE), 1)
    assert change is not None and change.entry.data == b"visible"
    assert struct.move(Head(0, key=COMMITTED_COMPARATOR, compare=Compare.LE), 1) is None


@check
def move_keeps_id_data_adjunct_and_version_unless_told(struct: ListStructure) -> None:
    entry = struct.write(0, key(1), b"d", adjunct=b"adj", secondary_key=b"S", version=9).entry
    change = struct.move(ById(entry.entry_id), 3)
    assert change is not None
    assert change.entry == entry._replace(list_number=3)


@check
def move_can_set_a_new_key_and_version(struct: ListStructure) -> None:
    entry = struct.write(0, key(9), b"d", version=5).entry
    change = struct.move(ById(entry.entry_id), 0, new_key=key(1), set_version=0)
    assert change is not None
    assert (change.entry.key, change.entry.version) == (key(1), 0)
    assert keys_on(struct, 0) == [key(1)]


@check
def move_can_increment_the_version(struct: ListStructure) -> None:
    entry = struct.write(0, key(1), version=7).entry
    change = struct.move(ById(entry.entry_id), 1, increment_version=True)
    assert change is not None and change.entry.version == 8


@check
def set_and_increment_version_are_exclusive(struct: ListStructure) -> None:
    entry = struct.write(0, key(1)).entry
    with raises(InvalidRequest):
        struct.move(ById(entry.entry_id), 1, set_version=3, increment_version=True)
    assert struct.read(ById(entry.entry_id)) == entry


@check
def move_sets_or_removes_the_secondary_key(struct: ListStructure) -> None:
    entry = struct.write(0, key(1)).entry
    struct.move(ById(entry.entry_id), 0, new_secondary_key=b"ID1")
    assert struct.read(BySecondaryKey(0, b"ID1")) is not None
    struct.move(ById(entry.entry_id), 0, new_secondary_key=UNCHANGED)
    assert struct.read(BySecondaryKey(0, b"ID1")) is not None
    struct.move(ById(entry.entry_id), 0, new_secondary_key=None)
    assert struct.read(BySecondaryKey(0, b"ID1")) is None


@check
def move_within_the_same_list_repositions_at_the_new_key(struct: ListStructure) -> None:
    a = struct.write(0, key(1), b"a").entry
    struct.write(0, key(2), b"b")
    struct.write(0, key(3), b"c")
    struct.move(ById(a.entry_id), 0, new_key=key(2))
    assert data_on(struct, 0) == [b"b", b"a", b"c"]
    struct.move(ById(a.entry_id), 0, new_key=key(2), position=Position.HEAD)
    assert data_on(struct, 0) == [b"a", b"b", b"c"]


@check
def move_by_key_and_by_secondary_key(struct: ListStructure) -> None:
    struct.write(0, key(1), b"one")
    struct.write(0, key(2), b"two", secondary_key=b"X")
    struct.write(0, key(3), b"three")
    moved = struct.move(ByKey(0, key(3)), 1)
    assert moved is not None and moved.entry.data == b"three"
    moved = struct.move(BySecondaryKey(0, b"X"), 1)
    assert moved is not None and moved.entry.data == b"two"
    assert struct.move(BySecondaryKey(0, b"X"), 1) is None
    assert data_on(struct, 1) == [b"two", b"three"]


@check
def move_tail(struct: ListStructure) -> None:
    struct.write(0, key(1), b"one")
    struct.write(0, key(2), b"two")
    moved = struct.move(Tail(0), 2)
    assert moved is not None and moved.entry.data == b"two"


@check
def move_by_id_of_a_missing_entry_raises_and_changes_nothing(
    struct: ListStructure,
) -> None:
    struct.write(0, key(1))
    before = struct.statistics().seq
    with raises(NoSuchEntry):
        struct.move(ById(b"\x01" * 12), 1)
    assert struct.statistics().seq == before


@check
def move_conditional_on_the_source_list(struct: ListStructure) -> None:
    entry = struct.write(1, key(1)).entry
    with raises(ListMismatch):
        struct.move(ById(entry.entry_id, list_number=0), 2)
    assert struct.read(ById(entry.entry_id)) == entry


@check
def delete_returns_the_entry_as_it_was(struct: ListStructure) -> None:
    entry = struct.write(0, key(1), b"gone", version=4).entry
    change = struct.delete(ById(entry.entry_id))
    assert change is not None and change.entry == entry
    assert struct.statistics().entries == 0
    assert struct.statistics().elements == 0
    with raises(NoSuchEntry):
        struct.delete(ById(entry.entry_id))


@check
def delete_without_data_returns_the_entry_without_it(struct: ListStructure) -> None:
    entry = struct.write(0, key(1), b"gone", adjunct=b"adj", version=4).entry
    change = struct.delete(ById(entry.entry_id, 0), with_data=False)
    assert change is not None and change.entry == entry._replace(data=b"")
    assert change.entry.elements == 1
    assert struct.statistics().entries == 0
    assert struct.statistics().elements == 0
    struct.write(0, key(2), b"kept", version=1)
    change = struct.delete(Head(0), expect_version=1, with_data=False)
    assert change is not None and change.entry.data == b"" and change.entry.key == key(2)
    assert struct.statistics().entries == 0


@check
def delete_head(struct: ListStructure) -> None:
    assert struct.delete(Head(0)) is None
    struct.write(0, key(2), b"b")
    struct.write(0, key(1), b"a")
    change = struct.delete(Head(0))
    assert change is not None and change.entry.data == b"a"
    assert data_on(struct, 0) == [b"b"]


@check
def update_rewrites_data_and_adjunct_in_place(struct: ListStructure) -> None:
    entry = struct.write(0, key(1), b"small", adjunct=b"old").entry
    change = struct.update(ById(entry.entry_id), data=b"L" * 600, adjunct=b"new")
    assert change is not None
    assert (change.entry.data, change.entry.adjunct, change.entry.elements) == (
        b"L" * 600,
        b"new",
        3,
    )
    assert change.entry.key == entry.key and change.entry.entry_id == entry.entry_id
    assert struct.statistics().elements == 3
    assert struct.list_info(0).elements == 3
    struct.update(ById(entry.entry_id), data=b"")
    assert struct.statistics().elements == 0


@check
def update_version(struct: ListStructure) -> None:
    entry = struct.write(0, key(1), version=1).entry
    change = struct.update(ById(entry.entry_id), increment_version=True)
    assert change is not None and change.entry.version == 2
    change = struct.update(ById(entry.entry_id), set_version=100)
    assert change is not None and change.entry.version == 100


@check
def update_of_nothing_located_returns_none(struct: ListStructure) -> None:
    assert struct.update(Head(0), data=b"x") is None
