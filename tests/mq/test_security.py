"""Who may do what on a queue manager: every check, on memory and on Redis.

Each manager acts for a user named in its ``SecuritySettings``; the profiles are a
real file.  A refusal is ``NotAuthorized`` (2035) naming the user, the profile and the
access, and each test shows that nothing changed: the queue's depth and messages, the
definitions, the peer still active, the manager never connected or registered.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest

from sharedq.cf import CouplingFacility, UserState
from sharedq.mq import (
    ConfigurationError,
    InvalidArgument,
    MQReason,
    NotAuthorized,
    NotOpenFor,
    OpenFor,
    QueueManager,
    structure_params,
)
from sharedq.recovery import RecoverySettings
from sharedq.security import SecuritySettings

from .conftest import ADMIN, APP, MakeManager

PROFILES = f"""
[groups]
APPS = ["alice"]
OPERATORS = ["carol"]

# Anyone may connect to {APP} but mallory; only carol may copy it.  {ADMIN} has no
# profile: it is not protected, as the seeds say of CQSSTR.
[CQSSTR."CQSSTR.{APP}"]
uacc = "UPDATE"
permit = {{ carol = "ALTER", mallory = "NONE" }}

[MQQUEUE."{ADMIN}.**"]
permit = {{ APPS = "UPDATE", OPERATORS = "ALTER", bob = "READ" }}

# A manager's own profile comes before the group's (MQ's order).
[MQQUEUE."QM9.ORDERS"]
permit = {{ alice = "READ" }}

[MQQUEUE."QSG1.**"]
permit = {{ dave = "UPDATE" }}

[MQADMIN."{ADMIN}.**"]
permit = {{ OPERATORS = "CONTROL" }}
"""


@pytest.fixture
def profiles(tmp_path: Path) -> Path:
    path = tmp_path / "profiles.toml"
    path.write_text(dedent(PROFILES))
    path.chmod(0o600)
    return path


@pytest.fixture
def start(make_qm: MakeManager, profiles: Path) -> MakeManager:
    """``start(qm_id, user, **options)``: a manager acting for ``user``."""

    def make(qm_id: int, user: str, qsg: str | None = None, **options: object) -> QueueManager:
        settings = SecuritySettings(profiles, user=user, qsg=qsg)
        return make_qm(qm_id, security=settings, **options)

    return make


@pytest.fixture
def orders(start: MakeManager) -> QueueManager:
    """carol's QM1, with ORDERS defined and holding one message."""
    carol = start(1, "carol")
    carol.define_queue("ORDERS", structure=APP)
    carol.open("ORDERS").put(b"order 1")
    return carol


def refused(error: pytest.ExceptionInfo[NotAuthorized], *words: str) -> None:
    """The refusal is 2035 and its message and context name who, what and how much."""
    exc = error.value
    assert exc.reason is MQReason.NOT_AUTHORIZED and exc.reason_code == 2035
    for word in words:
        assert word in str(exc), (word, str(exc))
    assert set(exc.context) == {"user", "resource_class", "profile", "access"}
    assert exc.context["user"] in str(exc) and exc.context["profile"] in str(exc)
    assert exc.context["access"] in str(exc)


def users(qm: QueueManager, structure: str) -> dict[str, UserState]:
    return {u.name: u.state for u in qm.view().users(structure)}


def bodies(qm: QueueManager, queue: str) -> list[bytes]:
    return [m.body for m in qm.open(queue, OpenFor.BROWSE).browser()]


def test_without_settings_nothing_is_checked_and_handles_do_everything(
    make_qm: MakeManager,
) -> None:
    qm = make_qm(1)
    qm.define_queue("Q")
    queue = qm.open("Q")
    assert queue.opened_for is OpenFor.ALL
    queue.put(b"a")
    assert [m.body for m in queue.browser()] == [b"a"] and queue.get().body == b"a"


def test_connecting_to_a_structure_needs_update_and_a_refusal_connects_nothing(
    orders: QueueManager, start: MakeManager, tmp_path: Path
) -> None:
    root = tmp_path / "mallory-log"
    with pytest.raises(NotAuthorized) as info:
        start(2, "mallory", recovery=RecoverySettings(root))
    refused(info, "mallory", f"CQSSTR.{APP}", "UPDATE", f"connect to {APP}")
    assert info.value.context["resource_class"] == "CQSSTR"
    # Nothing was made: no connection to either structure, no registration, no log.
    assert "QM2" not in users(orders, ADMIN) and "QM2" not in users(orders, APP)
    with pytest.raises(ConfigurationError, match="no queue manager QM2"):
        orders.indoubt("QM2")
    assert not root.exists()
    # An unprotected structure (no CQSSTR profile) is open to anyone.
    alone = start(3, "mallory", structures=[])
    assert alone.structures == [ADMIN]


def test_open_checks_the_highest_access_its_intents_need(
    orders: QueueManager, start: MakeManager
) -> None:
    bob = start(2, "bob")  # READ on every queue of the group
    with pytest.raises(NotAuthorized) as info:
        bob.open("ORDERS")
    refused(info, "bob", f"{ADMIN}.ORDERS", "UPDATE", "gives bob READ", "open ORDERS")
    with pytest.raises(NotAuthorized):
        bob.open("ORDERS", OpenFor.PUT)
    with pytest.raises(NotAuthorized):
        bob.open("ORDERS", OpenFor.GET | OpenFor.BROWSE)
    # Refused before the queue is looked up: a refusal tells nothing of what exists.
    with pytest.raises(NotAuthorized):
        bob.open("NO.SUCH.QUEUE", OpenFor.GET)
    assert bodies(bob, "ORDERS") == [b"order 1"]
    assert orders.open("ORDERS").depth() == 1
    alice = start(3, "alice")  # UPDATE
    alice.open("ORDERS").put(b"order 2")
    assert bodies(orders, "ORDERS") == [b"order 1", b"order 2"]


def test_a_handle_does_only_what_it_was_opened_for(
    orders: QueueManager, start: MakeManager
) -> None:
    alice = start(2, "alice")
    put_only = alice.open("ORDERS", OpenFor.PUT)
    with pytest.raises(NotOpenFor) as info:
        put_only.get()
    assert info.value.reason is MQReason.NOT_OPEN_FOR_INPUT and info.value.reason_code == 2037
    with pytest.raises(NotOpenFor) as info:
        put_only.browser()
    assert info.value.reason is MQReason.NOT_OPEN_FOR_BROWSE and info.value.reason_code == 2036
    with pytest.raises(NotOpenFor) as info:
        alice.open("ORDERS", OpenFor.GET).put(b"no")
    assert info.value.reason is MQReason.NOT_OPEN_FOR_OUTPUT and info.value.reason_code == 2039
    assert "opened for get, not put" in str(info.value)
    cursor = alice.open("ORDERS", OpenFor.BROWSE).browser()
    assert cursor.first().body == b"order 1"
    with pytest.raises(NotOpenFor) as info:
        cursor.get()  # get under cursor: a get
    assert info.value.reason is MQReason.NOT_OPEN_FOR_INPUT
    assert bodies(orders, "ORDERS") == [b"order 1"]
    both = alice.open("ORDERS", OpenFor.BROWSE | OpenFor.GET).browser()
    both.first()
    assert both.get().body == b"order 1"
    with pytest.raises(InvalidArgument):
        alice.open("ORDERS", OpenFor(0))
    not_a_flag: Any = "put"
    with pytest.raises(InvalidArgument):
        alice.open("ORDERS", not_a_flag)


def test_define_and_alter_need_alter(orders: QueueManager, start: MakeManager) -> None:
    alice = start(2, "alice")
    before = orders.queue_definition("ORDERS")
    with pytest.raises(NotAuthorized) as info:
        alice.define_queue("NEW", max_depth=10)
    refused(info, "alice", f"{ADMIN}.NEW", "ALTER", "gives alice UPDATE", "define NEW")
    with pytest.raises(NotAuthorized) as info:
        alice.alter_queue("ORDERS", max_depth=1, put_inhibited=True)
    refused(info, "alice", f"{ADMIN}.ORDERS", "ALTER", "alter ORDERS")
    assert orders.queue_names() == ["ORDERS"]
    assert orders.queue_definition("ORDERS") == before
    assert orders.alter_queue("ORDERS", max_depth=7).max_depth == 7  # carol may


def test_declaring_a_peer_failed_needs_control(orders: QueueManager, start: MakeManager) -> None:
    alice = start(2, "alice")
    with pytest.raises(NotAuthorized) as info:
        alice.declare_failed("QM1")
    refused(info, "alice", f"{ADMIN}.DECLARE.QM1", "CONTROL", "declare QM1 failed")
    assert info.value.context["resource_class"] == "MQADMIN"
    for structure in (ADMIN, APP):
        assert users(orders, structure)["QM1"] is UserState.ACTIVE
    assert bodies(alice, "ORDERS") == [b"order 1"]  # QM1 works on
    orders.declare_failed("QM2")  # carol may
    assert users(orders, ADMIN)["QM2"] is UserState.FAILED


def test_resolving_an_in_doubt_unit_needs_control(orders: QueueManager, start: MakeManager) -> None:
    alice = start(2, "alice")

    def prepare() -> None:  # in a thread of its own: a unit belongs to its thread
        uow = alice.unit_of_work()
        alice.open("ORDERS").put(b"in doubt", uow=uow)
        uow.prepare()

    worker = threading.Thread(target=prepare)
    worker.start()
    worker.join()
    alice.close()  # a prepared unit stays in doubt
    again = start(2, "alice")
    (unit,) = again.indoubt()
    with pytest.raises(NotAuthorized) as info:
        again.resolve(unit.uow_id, commit=True)
    refused(info, "alice", f"{ADMIN}.RESOLVE.INDOUBT", "CONTROL")
    assert again.indoubt() == [unit]
    assert bodies(orders, "ORDERS") == [b"order 1"]
    again.close()
    operator = start(2, "carol")  # the same manager, run by its operator
    operator.resolve(unit.uow_id, commit=True)
    assert operator.indoubt() == []
    assert bodies(orders, "ORDERS") == [b"order 1", b"in doubt"]


def test_the_cold_queue_needs_read_to_list_and_control_to_requeue(
    make_qm: MakeManager, profiles: Path, tmp_path: Path
) -> None:
    settings = RecoverySettings(tmp_path / "recovery", max_wait_seconds=30)

    def start(qm_id: int, user: str, cold: bool = False) -> QueueManager:
        security = SecuritySettings(profiles, user=user)
        recovery = replace(settings, cold_start=cold)
        return make_qm(qm_id, security=security, recovery=recovery)

    carol = start(1, "carol")
    carol.define_queue("ORDERS", structure=APP)
    carol.open("ORDERS").put(b"held", persistent=True)
    alice = start(2, "alice")
    worker = threading.Thread(target=lambda: alice.open("ORDERS").get(uow=alice.unit_of_work()))
    worker.start()
    worker.join()
    alice.stop_dead()  # dies holding the message in a unit of work
    carol.declare_failed("QM2")
    again = start(2, "alice", cold=True)  # a cold start: what it held goes to the cold queue
    assert [c.queue for c in again.restart_report.cold_queued] == ["ORDERS"]
    with pytest.raises(NotAuthorized) as info:
        again.cold_messages()
    refused(info, "alice", f"{ADMIN}.COLDQ", "READ", "read the cold queues")
    with pytest.raises(NotAuthorized) as info:
        again.requeue_cold()
    refused(info, "alice", f"{ADMIN}.COLDQ", "CONTROL", "requeue cold-queue messages")
    assert [m.body for m in carol.cold_messages()] == [b"held"]
    assert bodies(carol, "ORDERS") == []
    assert carol.requeue_cold() == 1  # carol may
    assert bodies(carol, "ORDERS") == [b"held"]


def test_a_managers_own_profile_comes_before_the_groups(
    orders: QueueManager, start: MakeManager
) -> None:
    on_qm9 = start(9, "alice")  # QM9.ORDERS gives alice READ only
    with pytest.raises(NotAuthorized) as info:
        on_qm9.open("ORDERS", OpenFor.PUT)
    refused(info, "QM9.ORDERS", "UPDATE", "gives alice READ")
    assert bodies(on_qm9, "ORDERS") == [b"order 1"]
    start(2, "alice").open("ORDERS", OpenFor.PUT).put(b"from QM2")  # the group's profile


def test_a_queue_no_profile_covers_is_refused_and_qsg_names_the_group(
    orders: QueueManager, start: MakeManager
) -> None:
    dave = start(2, "dave", qsg="OTHER")  # no profile covers QM2.* or OTHER.*
    with pytest.raises(NotAuthorized) as info:
        dave.open("ORDERS", OpenFor.BROWSE)
    refused(info, "dave", "QM2.ORDERS or OTHER.ORDERS", "no profile protects them", "READ")
    with pytest.raises(NotAuthorized):
        start(4, "dave").open("ORDERS", OpenFor.BROWSE)  # QSGADMIN.** gives him NONE
    named = start(3, "dave", qsg="QSG1")
    named.open("ORDERS").put(b"dave's")
    assert bodies(orders, "ORDERS") == [b"order 1", b"dave's"]


def test_copying_a_structure_needs_alter(
    make_qm: MakeManager, profiles: Path, tmp_path: Path, facility: CouplingFacility
) -> None:
    def start(qm_id: int, user: str) -> QueueManager:
        return make_qm(
            qm_id,
            security=SecuritySettings(profiles, user=user),
            recovery=RecoverySettings(tmp_path / "recovery", max_wait_seconds=30),
        )

    carol = start(1, "carol")
    carol.define_queue("ORDERS", structure=APP)
    carol.open("ORDERS").put(b"order 1", persistent=True)
    alice = start(2, "alice")
    bigger = structure_params(APP, queues=16, managers=4, messages=4000)
    size = carol.view().list_info(APP, 0).entries
    with pytest.raises(NotAuthorized) as info:
        alice.copy_structure(bigger)
    refused(info, "alice", f"CQSSTR.{APP}", "ALTER", f"copy {APP}", "gives alice UPDATE")
    assert carol.view().list_info(APP, 0).entries == size
    assert users(carol, APP) == {"QM1": UserState.ACTIVE, "QM2": UserState.ACTIVE}
    assert bodies(alice, "ORDERS") == [b"order 1"]
    assert carol.copy_structure(bigger).structure == APP
    assert bodies(alice, "ORDERS") == [b"order 1"]


def test_deleting_a_structure_needs_alter_and_one_no_manager_uses(
    start: MakeManager, facility: CouplingFacility
) -> None:
    """MQ's DELETE CFSTRUCT: checked as a copy is, refused while the structure is used."""
    spare = "SPARE1"
    facility.create(structure_params(spare, queues=4, managers=4, messages=100))
    carol = start(1, "carol", structures=[APP])
    alice = start(2, "alice", structures=[APP])
    # carol may alter APP1 but uses it; no one may delete the group's admin structure.
    for name, words in ((APP, "QM1 uses APP1"), (ADMIN, "administrative structure")):
        with pytest.raises(ConfigurationError) as in_use:
            carol.delete_structure(name)
        assert in_use.value.reason is MQReason.CF_STRUC_IN_USE and words in str(in_use.value)
    # alice has UPDATE on APP1, not ALTER: refused before anything else is looked at.
    with pytest.raises(NotAuthorized) as info:
        alice.delete_structure(APP)
    refused(info, "alice", f"CQSSTR.{APP}", "ALTER", f"delete {APP}")
    assert facility.exists(APP)
    # A manager connected to it: in use, and the structure stays.
    user = facility.connect(spare, "OTHER")
    with pytest.raises(ConfigurationError) as connected:
        carol.delete_structure(spare)
    assert connected.value.reason is MQReason.CF_STRUC_IN_USE
    assert facility.exists(spare)
    user.disconnect()
    with pytest.raises(InvalidArgument):
        carol.delete_structure("..")
    carol.delete_structure(spare)
    assert not facility.exists(spare)
    with pytest.raises(ConfigurationError) as gone:
        carol.delete_structure(spare)
    assert gone.value.reason is MQReason.CF_NOT_AVAILABLE
