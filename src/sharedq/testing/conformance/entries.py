"""Writing, reading and ordering entries."""

from __future__ import annotations

from sharedq.cf import (
    ById,
    ByKey,
    BySecondaryKey,
    Compare,
    EntryExists,
    Head,
    ListStructure,
    NoSuchEntry,
    Position,
    Tail,
)
from sharedq.cf.errors import ListMismatch
from sharedq.testing.conformance._registry import check, raises
from sharedq.testing.conformance.helpers import data_on, eid, key, keys_on


@check
def entries_are_kept_in_ascending_key_order(struct: ListStructure) -> None:
    for n in (5, 1, 9, 3, 7):
        struct.write(0, key(n), b"m%d" % n)
    assert keys_on(struct, 0) == [key(n) for n in (1, 3, 5, 7, 9)]


@check
def keys_compare_as_unsigned_bytes(struct: ListStructure) -> None:
    struct.write(0, b"\xf6" + b"\x00" * 15)
    struct.write(0, b"\x09" + b"\xff" * 15)
    struct.write(0, b"\x0a" + b"\x00" * 15)
    assert [k[0] for k in keys_on(struct, 0)] == [0x09, 0x0A, 0xF6]


@check
def equal_keys_go_to_the_tail_of_their_sublist_by_default(struct: ListStructure) -> None:
    for payload in (b"a", b"b", b"c"):
        struct.write(0, key(1), payload)
    assert data_on(struct, 0) == [b"a", b"b", b"c"]


@check
def head_position_puts_an_entry_before_its_equal_keys(struct: ListStructure) -> None:
    struct.write(0, key(1), b"a")
    struct.write(0, key(1), b"b")
    struct.write(0, key(1), b"first", position=Position.HEAD)
    struct.write(0, key(0), b"lower")
    struct.write(0, key(2), b"higher", position=Position.HEAD)
    assert data_on(struct, 0) == [b"lower", b"first", b"a", b"b", b"higher"]


@check
def write_returns_the_entry_as_stored(struct: ListStructure) -> None:
    change = struct.write(2, key(7), b"x" * 300, adjunct=b"adj", secondary_key=b"MSGID", version=42)
    entry = change.entry
    assert entry.list_number == 2
    assert entry.key == key(7)
    assert entry.data == b"x" * 300
    assert entry.adjunct == b"adj"
    assert entry.secondary_key == b"MSGID"
    assert entry.version == 42
    assert entry.elements == 2  # 300 bytes in 256-byte elements
    assert len(entry.entry_id) == 12
    assert struct.read(ById(entry.entry_id)) == entry


@check
def a_reserve_write_is_a_write_held_to_the_structure_s_counts(
    struct: ListStructure,
) -> None:
    plain = struct.write(3, key(1), b"d" * 10, adjunct=b"\x01")
    reserved = struct.write(3, key(1), b"d" * 10, adjunct=b"\x01", reserve=True)
    assert reserved.seq == plain.seq + 1
    assert reserved.entry._replace(entry_id=plain.entry.entry_id) == plain.entry
    assert [e.entry_id for e in struct.scan(3)] == [plain.entry.entry_id, reserved.entry.entry_id]
    with raises(EntryExists):
        struct.write(3, key(2), entry_id=reserved.entry.entry_id, reserve=True)


@check
def generated_entry_ids_are_unique(struct: ListStructure) -> None:
    ids = {struct.write(n % 8, key(n)).entry.entry_id for n in range(100)}
    assert len(ids) == 100


@check
def program_assigned_entry_id_is_kept(struct: ListStructure) -> None:
    change = struct.write(0, key(1), b"d", entry_id=eid(77))
    assert change.entry.entry_id == eid(77)
    assert struct.read(ById(eid(77))) == change.entry


@check
def program_assigned_entry_id_must_be_unique(struct: ListStructure) -> None:
    struct.write(0, key(1), b"first", entry_id=eid(1))
    with raises(EntryExists) as info:
        struct.write(3, key(2), b"second", entry_id=eid(1))
    assert info.value.reason_name == "ENTRY_EXISTS"
    assert data_on(struct, 0) == [b"first"]
    assert struct.list_info(3).entries == 0


@check
def empty_data_takes_no_elements(struct: ListStructure) -> None:
    entry = struct.write(0, key(1)).entry
    assert entry.elements == 0
    assert struct.statistics().elements == 0
    assert struct.statistics().entries == 1


@check
def elements_are_counted_per_list_and_structure(struct: ListStructure) -> None:
    struct.write(0, key(1), b"a" * 256)  # 1 element
    struct.write(0, key(2), b"a" * 257)  # 2 elements
    struct.write(1, key(3), b"a" * 1000)  # 4 elements
    assert struct.list_info(0).elements == 3
    assert struct.list_info(1).elements == 4
    assert struct.statistics().elements == 7


@check
def read_head_and_tail(struct: ListStructure) -> None:
    assert struct.read(Head(0)) is None
    assert struct.read(Tail(0)) is None
    for n in (4, 2, 6):
        struct.write(0, key(n), b"%d" % n)
    head, tail = struct.read(Head(0)), struct.read(Tail(0))
    assert head is not None and head.key == key(2)
    assert tail is not None and tail.key == key(6)


@check
def read_head_only_when_its_key_compares(struct: ListStructure) -> None:
    struct.write(0, key(5))
    assert struct.read(Head(0, key=key(4), compare=Compare.LE)) is None
    found = struct.read(Head(0, key=key(5), compare=Compare.LE))
    assert found is not None and found.key == key(5)
    assert struct.read(Head(0, key=key(6), compare=Compare.GE)) is None
    assert struct.read(Head(0, key=key(5), compare=Compare.EQ)) is not None


@check
def read_by_key_with_each_comparison(struct: ListStructure) -> None:
    for n, payload in ((2, b"two"), (4, b"four-a"), (4, b"four-b"), (8, b"eight")):
        struct.write(0, key(n), payload)

    def found(k: int, compare: Compare) -> bytes | None:
        entry = struct.read(ByKey(0, key(k), compare))
        return None if entry is None else entry.data

    assert found(4, Compare.EQ) == b"four-a"  # first of the sublist
    assert found(5, Compare.EQ) is None
    assert found(3, Compare.GE) == b"four-a"  # first entry with key >= 3
    assert found(4, Compare.GE) == b"four-a"
    assert found(9, Compare.GE) is None
    assert found(5, Compare.LE) == b"four-b"  # last entry with key <= 5
    assert found(4, Compare.LE) == b"four-b"
    assert found(1, Compare.LE) is None
    assert found(100, Compare.LE) == b"eight"


@check
def read_by_secondary_key_finds_the_first_in_list_order(struct: ListStructure) -> None:
    struct.write(0, key(9), b"late", secondary_key=b"CORREL")
    struct.write(0, key(3), b"early", secondary_key=b"CORREL")
    struct.write(0, key(1), b"other", secondary_key=b"ELSE")
    struct.write(1, key(0), b"elsewhere", secondary_key=b"CORREL")
    entry = struct.read(BySecondaryKey(0, b"CORREL"))
    assert entry is not None and entry.data == b"early"
    assert struct.read(BySecondaryKey(0, b"NONE")) is None


@check
def read_by_id_of_a_missing_entry_raises(struct: ListStructure) -> None:
    with raises(NoSuchEntry) as info:
        struct.read(ById(eid(404)))
    assert info.value.reason_code == 1020


@check
def read_by_id_on_the_wrong_list_raises(struct: ListStructure) -> None:
    entry = struct.write(1, key(1)).entry
    assert struct.read(ById(entry.entry_id, list_number=1)) == entry
    with raises(ListMismatch):
        struct.read(ById(entry.entry_id, list_number=2))


@check
def scan_a_key_range(struct: ListStructure) -> None:
    for n in range(10):
        struct.write(0, key(n), b"%d" % n)
    assert [e.key for e in struct.scan(0, key(3), key(6))] == [key(n) for n in (3, 4, 5, 6)]
    assert list(struct.scan(0, key(20), key(30))) == []
    assert list(struct.scan(5)) == []


@check
def scan_without_data_keeps_everything_else(struct: ListStructure) -> None:
    struct.write(0, key(1), b"payload", adjunct=b"a", secondary_key=b"s", version=3)
    (entry,) = struct.scan(0, with_data=False)
    assert entry.data == b""
    assert (entry.adjunct, entry.secondary_key, entry.version, entry.elements) == (
        b"a",
        b"s",
        3,
        1,
    )


@check
def scan_pages_through_a_long_list(struct: ListStructure, facility: object) -> None:
    for n in range(180):
        struct.write(4, key(n), n.to_bytes(4, "big"))
    entries = list(struct.scan(4))
    assert [e.key for e in entries] == [key(n) for n in range(180)]
    assert entries[-1].data == (179).to_bytes(4, "big")


@check
def data_is_binary_safe(struct: ListStructure) -> None:
    payload = bytes(range(256)) * 3
    entry = struct.write(0, b"\x00" * 15 + b"\xff", payload, adjunct=b"\x00\xff\x00").entry
    again = struct.read(ById(entry.entry_id))
    assert again is not None
    assert again.data == payload
    assert again.adjunct == b"\x00\xff\x00"
