"""Every bad input to the queue manager is its ``InvalidArgument``, and changes nothing.

Names (of managers, structures, queues), waits, lifetimes, unit-of-work ids, peers
to declare failed and sizes: each refused with its reason code and a message that
names the argument, before anything is looked at.  "Nothing changed" is checked on
the structures' sequence numbers (every change takes one), on the queue's depth and
on the files under the recovery root.  Every test runs on the memory backend and on
a private Redis server (``facility`` in ``conftest.py``).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import sharedq
from sharedq.cf import CouplingFacility, InvalidRequest, UserState
from sharedq.mq import (
    ConfigurationError,
    InvalidArgument,
    MQError,
    QueueManager,
    structure_params,
)
from sharedq.mq.arguments import MAX_WAIT_SECONDS, UOW_ID_LENGTH
from sharedq.recovery import RecoverySettings
from tests.mq.conftest import ADMIN, APP, MakeManager
from tests.mq.helpers import structure_seqs


def _users(facility: CouplingFacility, structure: str) -> dict[str, UserState]:
    """The users of ``structure`` and their states, as a watcher sees them."""
    with facility.connect(structure, "WATCHER") as watcher:
        return {u.name: u.state for u in watcher.users() if u.name != "WATCHER"}


def refused(
    facility: CouplingFacility,
    call: Callable[[], object],
    code: int,
    *words: str,
    cls: type[MQError] = InvalidArgument,
) -> MQError:
    """``call`` raises ``cls`` with ``code``, naming ``words``, and no structure changed."""
    before = structure_seqs(facility)
    started = time.monotonic()
    with pytest.raises(cls) as caught:
        call()
    assert time.monotonic() - started < 5, "refused at once, not after a wait"
    after = structure_seqs(facility)
    # Each watcher connect/disconnect takes two numbers per structure; nothing else may.
    assert {n: after[n] - before[n] for n in after} == {n: 2 for n in after}
    error = caught.value
    assert error.reason_code == code, error
    assert isinstance(error, sharedq.InvalidArgument) and isinstance(error, ValueError)
    for word in words:
        assert word in str(error), (word, str(error))
    return error


BAD_MANAGER_NAMES = [
    ("../x", "starts with '.'"),
    ("..", "names a directory"),
    ("QM1\n", "not allowed: '\\n'"),
    ("QM 1", "not allowed: ' '"),
    ("QM/1", "not allowed: '/'"),
    ("ÄQM", "outside ASCII"),
    ("", "is empty"),
    ("Q" * 49, "more than 48"),
    (None, "must be a string"),
]


# -- construction --------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "words"), BAD_MANAGER_NAMES)
def test_a_manager_name_that_cannot_be_a_file_name_is_refused_at_construction(
    facility: CouplingFacility, make_qm: MakeManager, name: Any, words: str
) -> None:
    make_qm(2)

    def construct() -> QueueManager:
        return QueueManager(facility, name, 1, admin=ADMIN, structures=[APP])

    error = refused(facility, construct, 2906, words, "queue-manager name")
    assert "queue-manager names are 1 to 48 of" in str(error)
    for structure in (ADMIN, APP):  # the running manager alone, untouched
        assert _users(facility, structure) == {"QM2": UserState.ACTIVE}


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"admin": ".."}, "structure name '..'"),
        ({"admin": "QSG\n"}, "structure name 'QSG\\n'"),
        ({"structures": ["ÄPP"]}, "structure name 'ÄPP'"),
        ({"structures": [APP, "../APP"]}, "structure name '../APP'"),
        ({"restart_wait": math.nan}, "restart_wait nan"),
        ({"restart_wait": math.inf}, "restart_wait inf"),
        ({"restart_wait": -1}, "restart_wait -1"),
        ({"restart_wait": 1e12}, "restart_wait 1000000000000.0"),
        ({"restart_wait": True}, "restart_wait True"),
    ],
)
def test_structures_and_waits_are_checked_at_construction(
    facility: CouplingFacility, make_qm: MakeManager, options: dict[str, Any], words: str
) -> None:
    refused(facility, lambda: make_qm(1, **options), 2906, words)


def test_a_generator_of_structures_is_read_once(
    facility: CouplingFacility, make_qm: MakeManager
) -> None:
    qm = make_qm(1, structures=(name for name in [APP]))
    assert sorted(qm.structures) == sorted([ADMIN, APP])
    bad = (name for name in [APP, "../APP"])
    refused(facility, lambda: make_qm(2, structures=bad), 2906, "'../APP'")


def test_a_bad_structure_name_writes_nothing_above_the_recovery_root(
    facility: CouplingFacility, make_qm: MakeManager, tmp_path: Path
) -> None:
    root = tmp_path / "recovery"
    settings = RecoverySettings(root=root)
    for options in ({"admin": ".."}, {"admin": "."}, {"name": "../QM1"}):
        refused(facility, partial(make_qm, 1, recovery=settings, **options), 2906, "'.")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # not even the root


# -- queues ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("SYSTEM.COLD.QUEUE", "starts with SYSTEM."),
        ("SYSTEM.ADMIN.QUEUE", "cannot be defined"),
        ("Q\n", "not allowed: '\\n'"),
        ("Q 1", "not allowed: ' '"),
        ("QÄ", "outside ASCII"),
        ("..", "names a directory"),
        ("Q" * 49, "more than 48"),
    ],
)
def test_reserved_and_malformed_queue_names_are_refused(
    facility: CouplingFacility, qm: QueueManager, name: str, words: str
) -> None:
    qm.define_queue("Q", structure=APP)
    qm.open("Q").put(b"kept")
    refused(facility, lambda: qm.define_queue(name, structure=APP), 2906, words, "queue name")
    assert qm.queue_names() == ["Q"]
    assert qm.open("Q").depth() == 1


@pytest.fixture
def q(qm: QueueManager) -> Any:
    qm.define_queue("Q", structure=APP)
    queue = qm.open("Q")
    queue.put(b"one")
    return queue


@pytest.mark.parametrize(
    ("wait", "words"),
    [
        (math.nan, "wait nan"),
        (math.inf, "wait inf"),
        (-math.inf, "wait -inf"),
        (1e12, "wait 1000000000000.0"),
        (MAX_WAIT_SECONDS + 1, "wait 86401"),
        (-1, "wait -1"),
        (True, "wait True"),
        ("1", "wait '1'"),
    ],
)
def test_a_wait_that_is_no_number_of_seconds_up_to_a_day_is_refused(
    facility: CouplingFacility, qm: QueueManager, q: Any, wait: Any, words: str
) -> None:
    uow = qm.unit_of_work()
    error = refused(facility, lambda: q.get(wait=wait, uow=uow), 2906, words)
    assert "seconds from 0 to 86400" in str(error)
    assert q.depth() == 1 and uow.operation_count == 0
    uow.backout()


def test_the_longest_wait_is_accepted(qm: QueueManager, q: Any) -> None:
    assert q.get(wait=MAX_WAIT_SECONDS).body == b"one"  # there was one: no wait at all
    assert q.depth() == 0


@pytest.mark.parametrize(
    ("expiry", "words"),
    [
        (math.inf, "expiry inf"),
        (math.nan, "expiry nan"),
        (-1, "expiry -1"),
        (0, "expiry 0"),
        (True, "expiry True"),
        (1e10, "too long: at most 429496729.4"),
    ],
)
def test_an_expiry_that_is_no_finite_lifetime_is_refused(
    facility: CouplingFacility, q: Any, expiry: Any, words: str
) -> None:
    refused(facility, lambda: q.put(b"x", expiry=expiry), 2013, words)
    assert q.depth() == 1


# -- units of work and peers -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("uow_id", "commit", "words"),
    [
        ("zz", True, "not str"),
        ("00" * UOW_ID_LENGTH, True, "not str"),
        (b"\x01" * 7, True, "not 7 bytes"),
        (b"\x01" * 9, False, "not 9 bytes"),
        (None, True, "not NoneType"),
        (b"\x01" * UOW_ID_LENGTH, "yes", "commit must be True or False, not 'yes'"),
        (b"\x01" * UOW_ID_LENGTH, 1, "commit must be True or False, not 1"),
    ],
)
def test_resolve_takes_an_id_of_eight_bytes_and_a_bool(
    facility: CouplingFacility, qm: QueueManager, q: Any, uow_id: Any, commit: Any, words: str
) -> None:
    refused(facility, lambda: qm.resolve(uow_id, commit=commit), 2906, words)
    assert q.depth() == 1


def test_declaring_failed_a_manager_the_group_never_knew_is_refused(
    facility: CouplingFacility, make_qm: MakeManager
) -> None:
    qm1, qm2 = make_qm(1), make_qm(2)
    error = refused(facility, lambda: qm1.declare_failed("NOBODY"), 2906, "NOBODY")
    assert "no queue manager NOBODY is known to the group" in str(error)
    for name, words in BAD_MANAGER_NAMES:
        refused(facility, partial(qm1.declare_failed, name), 2906, words)
    assert _users(facility, ADMIN)["QM2"] is UserState.ACTIVE  # nobody was declared failed
    qm1.declare_failed("QM2")  # a peer the group knows still can be
    assert _users(facility, ADMIN)["QM2"] is UserState.FAILED
    assert qm2.name == "QM2"


@pytest.mark.parametrize(("name", "words"), BAD_MANAGER_NAMES)
def test_recover_and_indoubt_check_the_name(
    facility: CouplingFacility, qm: QueueManager, name: Any, words: str
) -> None:
    refused(facility, lambda: qm.recover(name), 2906, words)
    if name is not None:  # indoubt(None) is this manager's own
        refused(facility, lambda: qm.indoubt(name), 2906, words)


# -- sizing ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counts", "words"),
    [
        ({"queues": -1}, "queues -1"),
        ({"managers": 0}, "managers 0"),
        ({"managers": 255}, "managers 255"),
        ({"messages": -10}, "messages -10"),
        ({"message_bytes": -1}, "message_bytes -1"),
        ({"message_bytes": 70_000}, "message_bytes 70000"),
        ({"queues": 2.5}, "queues 2.5"),
        ({"messages": True}, "messages True"),
    ],
)
def test_structure_params_refuses_negative_and_absurd_sizes(
    counts: dict[str, Any], words: str
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        structure_params("QSG1", **counts)
    assert caught.value.reason_code == 2906
    assert words in str(caught.value) and "whole number" in str(caught.value)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"element_size": 100}, "element size 100"),
        ({"emc_percent": -1}, "emc_percent -1"),
        ({"growth": math.nan}, "growth nan"),
    ],
)
def test_structure_params_leaves_the_structure_layer_to_check_its_own(
    options: dict[str, Any], words: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        structure_params("QSG1", **options)
    assert words in str(caught.value)
    with pytest.raises(InvalidRequest):
        structure_params("..")


def test_a_refused_get_does_not_hang_another_waiter(qm: QueueManager, q: Any) -> None:
    """A ``nan`` wait used to hang its thread; now it is refused, and a real waiter in
    another thread is woken as before."""
    q.get()  # empty the queue
    got: list[bytes] = []
    waiter = threading.Thread(target=lambda: got.append(q.get(wait=10).body))
    waiter.start()
    with pytest.raises(InvalidArgument):
        q.get(wait=math.nan)
    q.put(b"two")
    waiter.join(10)
    assert got == [b"two"]


def test_recovering_a_manager_the_group_never_knew_is_refused(
    facility: CouplingFacility, make_qm: MakeManager
) -> None:
    """A mistyped name gets an error naming it, not an empty report that reads as a
    recovery done; a peer the group knows is still recovered."""
    qm1 = make_qm(1)
    make_qm(2)
    error = refused(facility, lambda: qm1.recover("NOBODY"), 2906, "NOBODY")
    assert "no queue manager NOBODY is known to the group" in str(error)
    qm1.declare_failed("QM2")
    assert qm1.recover("QM2").manager == "QM2"


def test_a_manager_on_an_admin_structure_nobody_allocated_is_refused_by_name(
    facility: CouplingFacility,
) -> None:
    """MQRC_CF_NOT_AVAILABLE naming the structure, not UNEXPECTED_ERROR."""
    with pytest.raises(ConfigurationError) as caught:
        QueueManager(facility, "QM9", 9, admin="NOSUCH")
    assert caught.value.reason_code == 2345, caught.value
    assert "NO_SUCH_STRUCTURE" in str(caught.value) and "NOSUCH" in str(caught.value)
    assert not facility.exists("NOSUCH")
