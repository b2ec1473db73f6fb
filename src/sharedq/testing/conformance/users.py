"""Connecting, disconnecting, failed users and cleanup by a peer."""

from __future__ import annotations

import threading

from sharedq.cf import (
    CouplingFacility,
    ListStructure,
    MonitorState,
    NoSuchStructure,
    NotConnected,
    UserError,
    UserState,
)
from sharedq.cf.errors import LockHeld, StructureLost
from sharedq.testing.conformance._registry import MakeStructure, check, raises
from sharedq.testing.conformance.helpers import key


@check
def users_get_distinct_ids_from_1_to_32(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    name = make_structure()
    conns = [facility.connect(name, f"U{n}") for n in range(32)]
    assert sorted(c.user_id for c in conns) == list(range(1, 33))
    with raises(UserError) as info:
        facility.connect(name, "U33")
    assert info.value.reason_name == "TOO_MANY_USERS"
    conns[5].disconnect()
    again = facility.connect(name, "U33")
    assert again.user_id == 6


@check
def a_name_can_be_connected_once(facility: CouplingFacility, make_structure: MakeStructure) -> None:
    name = make_structure()
    facility.connect(name, "QM1")
    with raises(UserError) as info:
        facility.connect(name, "QM1")
    assert info.value.reason_name == "USER_ACTIVE"


@check
def connect_to_a_missing_structure(facility: CouplingFacility) -> None:
    with raises(NoSuchStructure):
        facility.connect("NOSUCH", "U")


@check
def requests_after_disconnect_raise_not_connected(struct: ListStructure) -> None:
    struct.write(0, key(1))
    struct.disconnect()
    assert not struct.connected
    with raises(NotConnected) as info:
        struct.write(0, key(2))
    assert info.value.reason_code == 1030


@check
def structure_persists_with_nobody_connected(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    name = make_structure()
    with facility.connect(name, "A") as a:
        a.write(3, key(1), b"kept")
    assert facility.exists(name)
    with facility.connect(name, "B") as b:
        (entry,) = b.scan(3)
        assert entry.data == b"kept"
        assert [u.name for u in b.users()] == ["B"]


@check
def normal_disconnect_releases_locks_and_monitors(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    name = make_structure()
    a, b = facility.connect(name, "A"), facility.connect(name, "B")
    a.lock(1)
    a.monitor_list(0)
    a.disconnect()
    assert b.lock_holder(1) is None
    assert b.statistics().emcs == 0
    assert [u.name for u in b.users()] == ["B"]


@check
def failed_user_keeps_its_resources_until_cleanup(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    name = make_structure()
    qm1, qm2 = facility.connect(name, "QM1"), facility.connect(name, "QM2")
    qm1.lock(2)
    qm1.monitor_list(0)
    qm2.mark_failed(qm1.user_id)
    with raises(NotConnected):
        qm1.write(0, key(1))
    assert [(u.name, u.state) for u in qm2.users()] == [
        ("QM1", UserState.FAILED),
        ("QM2", UserState.ACTIVE),
    ]
    # Its lock still holds against others; its EMC is still in use.
    with raises(LockHeld):
        qm2.lock(2)
    assert qm2.statistics().emcs == 1
    with raises(UserError) as info:
        qm2.cleanup_user(qm2.user_id)
    assert info.value.reason_name == "USER_NOT_FAILED"
    qm2.cleanup_user(qm1.user_id)
    assert qm2.lock_holder(2) is None
    assert qm2.statistics().emcs == 0
    assert [u.name for u in qm2.users()] == ["QM2"]


@check
def a_failed_user_reconnects_and_finds_events_queued_meanwhile(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    name = make_structure()
    qm1, qm2 = facility.connect(name, "QM1"), facility.connect(name, "QM2")
    reg = qm1.monitor_list(4)
    qm1.lock(0)
    qm2.mark_failed(qm1.user_id)
    change = qm2.write(4, key(1))
    again = facility.connect(name, "QM1")
    assert again.user_id == qm1.user_id
    assert again.lock_holder(0) == again.user_id
    events = again.events_nowait()
    assert [(e.monitor_id, e.state, e.seq) for e in events] == [
        (reg.monitor_id, MonitorState.NONEMPTY, change.seq)
    ]
    with raises(NotConnected):
        qm1.events_nowait()  # the old handle stays dead


@check
def mark_failed_wakes_the_failed_users_waiter(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    name = make_structure()
    qm1, qm2 = facility.connect(name, "QM1"), facility.connect(name, "QM2")
    qm1.monitor_list(0)
    outcome: list[BaseException] = []

    def wait() -> None:
        try:
            qm1.wait_events(timeout=30)
        except NotConnected as exc:
            outcome.append(exc)

    thread = threading.Thread(target=wait)
    thread.start()
    qm2.mark_failed(qm1.user_id)
    thread.join(timeout=10)
    assert not thread.is_alive() and len(outcome) == 1


@check
def deleting_a_structure_with_users_needs_force(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    name = make_structure()
    user = facility.connect(name, "U")
    user.write(0, key(1))
    with raises(UserError):
        facility.delete(name)
    assert facility.exists(name)
    facility.delete(name, force=True)
    assert not facility.exists(name)
    assert name not in facility.structure_names()
    with raises(StructureLost) as info:
        user.write(0, key(2))
    assert info.value.reason_name == "STRUCTURE_LOST"


@check
def delete_without_users(facility: CouplingFacility, make_structure: MakeStructure) -> None:
    name = make_structure()
    facility.connect(name, "U").disconnect()
    facility.delete(name)
    assert not facility.exists(name)
    with raises(NoSuchStructure):
        facility.delete(name)
