"""``write_and_rekey_entries`` and ``delete_seq``: requests answering only a count or a seq.

Every backend: the same request as ``write_and_rekey`` (the same structure after it,
the same seqs, the same errors changing nothing), returning ``[1].entries``.
"""

from __future__ import annotations

import pytest

from sharedq.cf import (
    UNCHANGED,
    ById,
    BySecondaryKey,
    CouplingFacility,
    EntryExists,
    Head,
    ListFull,
    ListMismatch,
    ListStructure,
    NoSuchEntry,
)
from sharedq.cf.errors import AuthorityMismatch, InvalidRequest
from sharedq.testing.conformance import MakeStructure
from sharedq.testing.conformance.helpers import eid

UNCOMMITTED = b"\xf6" + b"\x04" + b"\x00" * 14
COMMITTED = b"\x04" + b"\x00" * 15


def test_it_leaves_what_write_and_rekey_leaves(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    one = facility.connect(make_structure(), "U1")
    two = facility.connect(make_structure(), "U1")
    for conn in (one, two):
        conn.write(3, COMMITTED, b"before")
    counts = [
        one.write_and_rekey_entries(
            3, UNCOMMITTED, b"body", b"adj", eid(7), 99, None, COMMITTED, b"ID7", 0
        ),
        one.write_and_rekey_entries(
            3, UNCOMMITTED, b"next", b"", None, 5, None, COMMITTED, UNCHANGED, None
        ),
    ]
    pairs = [
        two.write_and_rekey(
            3,
            UNCOMMITTED,
            b"body",
            adjunct=b"adj",
            entry_id=eid(7),
            version=99,
            new_key=COMMITTED,
            new_secondary_key=b"ID7",
            set_version=0,
        ),
        two.write_and_rekey(3, UNCOMMITTED, b"next", version=5, new_key=COMMITTED),
    ]
    assert counts == [pair[1].entries for pair in pairs] == [2, 3]
    assert list(one.scan(3)) == list(two.scan(3))
    assert one.read(ById(eid(7), 3)) == pairs[0][1].entry
    assert one.read(BySecondaryKey(3, b"ID7")) == pairs[0][1].entry
    assert one.statistics().seq == two.statistics().seq == pairs[1][1].seq


def test_its_errors_are_write_and_rekeys_and_change_nothing(struct: ListStructure) -> None:
    struct.write(0, COMMITTED, entry_id=eid(1))
    struct.set_list_controls(1, limit=1)
    struct.write(1, COMMITTED)
    before = struct.statistics()
    cases: list[tuple[type[Exception], tuple[object, ...]]] = [
        (EntryExists, (0, UNCOMMITTED, b"", b"", eid(1), 0, None, COMMITTED, UNCHANGED, 0)),
        (ListFull, (1, UNCOMMITTED, b"d", b"", None, 0, None, COMMITTED, UNCHANGED, 0)),
        (AuthorityMismatch, (0, UNCOMMITTED, b"d", b"", None, 0, 4, COMMITTED, UNCHANGED, 0)),
        (InvalidRequest, (0, b"bad", b"d", b"", None, 0, None, COMMITTED, UNCHANGED, 0)),
        (InvalidRequest, (0, UNCOMMITTED, b"d", b"", None, 0, None, b"short", UNCHANGED, 0)),
        (InvalidRequest, (0, UNCOMMITTED, b"d", b"", None, 0, None, COMMITTED, b"", 0)),
        (InvalidRequest, (0, UNCOMMITTED, b"d", b"", None, 0, None, COMMITTED, UNCHANGED, -1)),
    ]
    for error, args in cases:
        with pytest.raises(error):
            struct.write_and_rekey_entries(*args)  # type: ignore[arg-type]
    after = struct.statistics()
    assert (after.entries, after.elements, after.seq) == (
        before.entries,
        before.elements,
        before.seq,
    )


def test_delete_seq_is_delete_without_data_answering_its_seq(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    one = facility.connect(make_structure(), "U1")
    two = facility.connect(make_structure(), "U1")
    for conn in (one, two):
        conn.write(2, COMMITTED, b"a", entry_id=eid(1))
        conn.write(2, COMMITTED, b"b", entry_id=eid(2))
    seq = one.delete_seq(ById(eid(1), 2))
    change = two.delete(ById(eid(1), 2), with_data=False)
    assert change is not None and seq == change.seq == one.statistics().seq
    assert list(one.scan(2)) == list(two.scan(2))
    head = two.delete(Head(2), with_data=False)
    assert head is not None and one.delete_seq(Head(2)) == head.seq
    assert one.delete_seq(Head(2)) is None is two.delete(Head(2))
    before = one.statistics()
    with pytest.raises(NoSuchEntry):
        one.delete_seq(ById(eid(9), 2))
    with pytest.raises(ListMismatch):
        one.write(3, COMMITTED, entry_id=eid(3))
        one.delete_seq(ById(eid(3), 2))
    assert one.statistics().seq == before.seq + 1  # the write alone
