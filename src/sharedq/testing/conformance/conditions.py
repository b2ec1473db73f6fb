"""Conditions on changes: version, list authority, list limit, lock-table entries."""

from __future__ import annotations

from sharedq.cf import (
    AuthorityMismatch,
    BulkMove,
    ById,
    CouplingFacility,
    Head,
    ListFull,
    ListStructure,
    LockHeld,
    LockNotHeld,
    VersionMismatch,
)
from sharedq.cf.errors import InvalidRequest
from sharedq.testing.conformance._registry import MakeStructure, check, raises
from sharedq.testing.conformance.helpers import key


@check
def version_comparison_guards_move_delete_and_update(struct: ListStructure) -> None:
    entry = struct.write(0, key(1), version=3).entry
    with raises(VersionMismatch) as info:
        struct.move(ById(entry.entry_id), 1, expect_version=2)
    assert info.value.reason_name == "VERSION_MISMATCH"
    with raises(VersionMismatch):
        struct.delete(ById(entry.entry_id), expect_version=4)
    with raises(VersionMismatch):
        struct.update(ById(entry.entry_id), data=b"x", expect_version=0)
    assert struct.read(ById(entry.entry_id)) == entry
    assert struct.update(ById(entry.entry_id), data=b"x", expect_version=3) is not None
    assert struct.delete(ById(entry.entry_id), expect_version=3) is not None


@check
def list_authority_protocol_of_a_control_entry(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    """The patent's LHQC example: QM1 put-inhibits; QM2's stale put then fails."""
    name = make_structure()
    qm1, qm2 = facility.connect(name, "QM1"), facility.connect(name, "QM2")
    control = qm1.write(0, b"\xff" * 16, b"put-enabled").entry
    authority_qm1 = qm1.list_info(0).authority
    authority_qm2 = qm2.list_info(0).authority
    assert authority_qm1 == authority_qm2 == 0
    # QM2 puts with the authority it remembers: fine.
    qm2.write(0, key(1), b"m1", expect_authority=authority_qm2)
    # QM1 rewrites the control entry, asking for the authority to be bumped.
    qm1.update(
        ById(control.entry_id),
        data=b"put-inhibited",
        expect_authority=authority_qm1,
        increment_authority=True,
    )
    assert qm1.list_info(0).authority == 1
    # QM2 still holds 0: its next put fails and writes nothing.
    with raises(AuthorityMismatch) as info:
        qm2.write(0, key(2), b"m2", expect_authority=authority_qm2)
    assert info.value.context["authority"] == 1
    assert qm2.list_info(0).entries == 2
    # It re-reads the control entry and sees the new state.
    reread = qm2.read(ById(control.entry_id))
    assert reread is not None and reread.data == b"put-inhibited"


@check
def a_stale_authority_fails_the_control_rewrite_itself(struct: ListStructure) -> None:
    control = struct.write(0, b"\xff" * 16, b"v0").entry
    struct.set_list_controls(0, increment_authority=True)
    with raises(AuthorityMismatch):
        struct.update(
            ById(control.entry_id), data=b"v1", expect_authority=0, increment_authority=True
        )
    assert struct.list_info(0).authority == 1
    entry = struct.read(ById(control.entry_id))
    assert entry is not None and entry.data == b"v0"


@check
def list_limit_refuses_writes_beyond_it(struct: ListStructure) -> None:
    """Patent §7.9 L1: MAXDEPTH 10 -> limit 11 with the control entry."""
    struct.set_list_controls(0, limit=11)
    struct.write(0, b"\xff" * 16, b"LHQC")
    for n in range(10):
        struct.write(0, key(n))
    with raises(ListFull) as info:
        struct.write(0, key(99))
    assert info.value.reason_code == 1041
    assert struct.list_info(0).entries == 11


@check
def lowering_the_limit_below_the_count_keeps_the_entries(struct: ListStructure) -> None:
    """Patent §7.9 L2."""
    for n in range(10):
        struct.write(0, key(n))
    struct.set_list_controls(0, limit=5)
    assert struct.list_info(0).entries == 10
    with raises(ListFull):
        struct.write(0, key(50))
    for _ in range(6):
        struct.move(Head(0), 1)
    struct.write(0, key(51))  # count 4 -> 5
    with raises(ListFull):
        struct.write(0, key(52))


@check
def limit_applies_to_moves_between_lists_not_within_one(struct: ListStructure) -> None:
    struct.set_list_controls(1, limit=1)
    struct.write(1, key(1))
    entry = struct.write(0, key(2)).entry
    with raises(ListFull):
        struct.move(ById(entry.entry_id), 1)
    assert struct.read(ById(entry.entry_id)) == entry
    inside = struct.read(Head(1))
    assert inside is not None
    assert struct.move(ById(inside.entry_id), 1, new_key=key(9)) is not None


@check
def ignore_limit_overrides_the_list_limit(struct: ListStructure) -> None:
    """Patent §7.9 L3: backed-out gets go back whatever the depth."""
    struct.set_list_controls(0, limit=2)
    struct.write(0, key(1))
    struct.write(0, key(2))
    gotten = struct.write(1, key(3)).entry
    assert struct.move(ById(gotten.entry_id), 0, ignore_limit=True) is not None
    assert struct.write(0, key(4), ignore_limit=True).entry.list_number == 0
    assert struct.list_info(0).entries == 4
    with raises(ListFull):
        struct.write(0, key(5))


@check
def limit_none_removes_the_limit(struct: ListStructure) -> None:
    struct.set_list_controls(0, limit=0)
    with raises(ListFull):
        struct.write(0, key(1))
    struct.set_list_controls(0, limit=None)
    struct.write(0, key(1))
    assert struct.list_info(0).limit is None


@check
def bad_limit_is_refused(struct: ListStructure) -> None:
    with raises(InvalidRequest):
        struct.set_list_controls(0, limit=-1)
    assert struct.list_info(0).limit is None


@check
def a_change_conditioned_on_a_lock_is_refused_while_another_holds_it(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    name = make_structure()
    a, b = facility.connect(name, "A"), facility.connect(name, "B")
    a.lock(3)
    assert a.lock_holder(3) == a.user_id == b.lock_holder(3)
    with raises(LockHeld) as info:
        b.write(0, key(1), not_locked=[3])
    assert info.value.context["holder"] == a.user_id
    # The holder itself is not refused; an unrelated lock does not matter.
    a.write(0, key(1), not_locked=[3])
    b.write(0, key(2), not_locked=[4])
    entry = b.read(Head(0))
    assert entry is not None
    for request in (
        lambda: b.move(ById(entry.entry_id), 1, not_locked=[3]),
        lambda: b.delete(ById(entry.entry_id), not_locked=[3]),
        lambda: b.update(ById(entry.entry_id), data=b"x", not_locked=[3]),
        lambda: b.set_list_controls(0, limit=5, not_locked=[3]),
        lambda: b.move_entries([BulkMove(entry.entry_id, 1)], not_locked=[3]),
        lambda: b.delete_entries([entry.entry_id], not_locked=[3]),
    ):
        with raises(LockHeld):
            request()
    assert b.list_info(0).entries == 2
    a.unlock(3)
    assert b.lock_holder(3) is None
    b.write(0, key(3), not_locked=[3])


@check
def locks_are_exclusive_and_reentrant_for_the_holder(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    name = make_structure()
    a, b = facility.connect(name, "A"), facility.connect(name, "B")
    a.lock(0)
    a.lock(0)
    with raises(LockHeld):
        b.lock(0)
    with raises(LockNotHeld):
        b.unlock(0)
    a.unlock(0)
    with raises(LockNotHeld):
        a.unlock(0)
    b.lock(0)
    assert a.lock_holder(0) == b.user_id


@check
def bad_lock_number_is_refused(struct: ListStructure) -> None:
    with raises(InvalidRequest) as info:
        struct.lock(16)
    assert info.value.reason_name == "BAD_LOCK_NUMBER"
    with raises(InvalidRequest):
        struct.write(0, key(1), not_locked=[-1])
    assert struct.statistics().entries == 0
