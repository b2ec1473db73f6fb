"""Structure recovery: a structure destroyed for real comes back, object for object.

Each test runs a workload of two managers with recovery logs, takes (or not) structure
checkpoints, lets the workload go quiet, snapshots the recoverable objects of every
structure, destroys the structures for real (memory: deleted; Redis: the private
server SIGKILLed and started empty), has a manager reconnect (which recovers them, as
the decision table says), and compares the recovered structures with the snapshot:
the same entries on the same lists in the same order, with the same keys, data,
adjuncts, secondary keys and versions, and the same limit and authority on every list.
"""

from __future__ import annotations

import threading
from contextlib import ExitStack

import pytest

from sharedq.log import RecordType
from sharedq.mq import BackedOut, ConnectionBroken, QueueManager
from sharedq.recovery import (
    CheckpointFailed,
    PairLayout,
    RecoveryReason,
    StructureUnrecoverable,
    newest_readable,
    slot_status,
)
from tests.mq.helpers import drain
from tests.recovery.conftest import ADMIN, APP, STRUCTURES, Group
from tests.recovery.helpers import PausingClock, define_queues, records, snapshot, workload


def _outcomes(qm: QueueManager) -> dict[str, str]:
    assert qm.recovery_log is not None
    return {o.structure: o.action for p in qm.recovery_log.pairs.values() for o in p.outcomes}


def test_recovery_from_the_srds_and_the_log_after_it_is_exact(group: Group) -> None:
    qm1, qm2 = group.start(1), group.start(2)
    define_queues(qm1)
    workload(qm1, qm2, 12, tag="before")
    for result in qm1.checkpoint():
        assert result is not None and result.entries > 0
    workload(qm1, qm2, 12, tag="after")
    before = snapshot(group.facility)
    assert any(e.data for e in before[APP].lists[next(iter(before[APP].lists))])

    group.lose(*STRUCTURES)
    with pytest.raises(ConnectionBroken) as lost:
        qm1.open("ORDERS").put(b"into the void", persistent=True)
    assert lost.value.reason_name == "CF_STRUC_FAILED"

    report = qm1.reconnect()
    assert _outcomes(qm1) == {ADMIN: "recovered", APP: "recovered"}
    assert report.start == "warm"
    assert snapshot(group.facility) == before
    # The others find the structures recovered, and carry on.
    qm2.reconnect()
    assert _outcomes(qm2) == {ADMIN: "in-use", APP: "in-use"}
    assert [u.status for u in qm2.indoubt()] == ["prepared", "prepared"]
    qm1.open("ORDERS").put(b"after recovery", persistent=True)
    assert b"after recovery" in [m.body for m in drain(qm2, "ORDERS")]


def test_the_older_srds_is_used_when_the_newest_cannot_be_read(group: Group) -> None:
    qm1, qm2 = group.start(1), group.start(2)
    define_queues(qm1)
    workload(qm1, qm2, 6, tag="one")
    first = qm1.checkpoint(APP)[0]
    workload(qm1, qm2, 6, tag="two")
    second = qm1.checkpoint(APP)[0]
    assert first is not None and second is not None and first.slot != second.slot
    workload(qm1, qm2, 6, tag="three")
    before = snapshot(group.facility, (APP,))
    layout = PairLayout(group.root, APP)
    newest = layout.srds / f"SRDS{second.slot}.parquet"
    damaged = bytearray(newest.read_bytes())
    damaged[len(damaged) // 2 : len(damaged) // 2 + 64] = b"\xde" * 64
    newest.write_bytes(bytes(damaged))

    group.lose(APP)
    if group.backend == "redis":
        group.lose(*STRUCTURES)
    qm1.reconnect()
    pair = qm1.recovery_log.pairs[APP] if qm1.recovery_log else None
    assert pair is not None
    (outcome,) = [o for o in pair.outcomes if o.structure == APP]
    assert (outcome.action, outcome.slot, outcome.image_seq) == ("recovered", first.slot, first.seq)
    assert any(f"SRDS{second.slot}" in problem for problem in outcome.problems)
    assert snapshot(group.facility, (APP,)) == before


def test_without_any_checkpoint_the_log_alone_rebuilds_the_structure(group: Group) -> None:
    qm1, qm2 = group.start(1), group.start(2)
    define_queues(qm1)
    workload(qm1, qm2, 10)
    before = snapshot(group.facility)
    assert not (PairLayout(group.root, APP).srds / "SRDS1.parquet").exists()

    group.lose(*STRUCTURES)
    qm2.reconnect()
    assert _outcomes(qm2) == {ADMIN: "recovered-from-log", APP: "recovered-from-log"}
    assert snapshot(group.facility) == before
    # A structure checkpoint follows a recovery.
    assert newest_readable(PairLayout(group.root, APP).srds)[0] is not None


@pytest.mark.parametrize("point", ["quiesced", "written"])
def test_a_structure_lost_during_its_checkpoint_is_recovered(group: Group, point: str) -> None:
    """Lost while quiesced (no SRDS written), or once its SRDS was written."""
    doomed = threading.Event()

    def faults(where: str) -> None:
        if where == point and doomed.is_set():
            group.lose(*STRUCTURES)

    qm1 = group.start(1, checkpoint_faults=faults)
    qm2 = group.start(2)
    define_queues(qm1)
    workload(qm1, qm2, 8, tag="one")
    assert qm1.checkpoint(APP)[0] is not None
    workload(qm1, qm2, 8, tag="two")
    before = snapshot(group.facility)
    doomed.set()
    with pytest.raises(CheckpointFailed) as failed:
        qm1.checkpoint(APP)
    assert failed.value.reason is RecoveryReason.CHECKPOINT_FAILED
    doomed.clear()
    qm2.reconnect()
    assert snapshot(group.facility) == before


def test_units_in_flight_at_the_loss_end_as_a_restart_ends_them(group: Group) -> None:
    qm1, qm2 = group.start(1), group.start(2)
    define_queues(qm1)
    orders = qm1.open("ORDERS")
    for n in range(4):
        orders.put(b"m%d" % n, persistent=True)
    qm1.checkpoint(APP)
    in_flight = qm2.unit_of_work()
    gotten = qm2.open("ORDERS").get(uow=in_flight)
    qm2.open("ORDERS").put(b"uncommitted", persistent=True, uow=in_flight)

    group.lose(*STRUCTURES)
    qm1.reconnect()
    report = qm2.reconnect()
    assert (report.puts_deleted, report.gets_returned) == (1, 1)
    with pytest.raises(BackedOut):
        in_flight.commit()
    bodies = sorted(m.body for m in drain(qm1, "ORDERS"))
    assert bodies == [b"m0", b"m1", b"m2", b"m3"] and gotten.body == b"m0"


def test_other_servers_wait_for_the_one_that_recovers(group: Group) -> None:
    clock = PausingClock()
    managers = [group.start(n, recovery=group.settings(clock=clock)) for n in (1, 2, 3)]
    define_queues(managers[0])
    workload(managers[0], managers[1], 6)
    before = snapshot(group.facility)
    group.lose(*STRUCTURES)
    errors: list[BaseException] = []

    def reconnect(qm: QueueManager) -> None:
        try:
            qm.reconnect()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=reconnect, args=(qm,)) for qm in managers]
    # Hold the recovery locks so that all three find the structures gone together.
    with ExitStack() as held:
        for name in STRUCTURES:
            held.enter_context(PairLayout(group.root, name).recovery_lock(5))
        for thread in threads:
            thread.start()
        clock.wait_paused(threads)  # each found a structure gone and waits for its lock
    for thread in threads:
        thread.join(60)
    assert errors == []
    # One server recovered each structure; the others waited for it (or, having been
    # busy with another structure meanwhile, found it recovered already).
    waited = 0
    for name in STRUCTURES:
        actions = [_outcomes(qm)[name] for qm in managers]
        assert sum(a.startswith("recovered") for a in actions) == 1, actions
        assert {a for a in actions if not a.startswith("recovered")} <= {"waited", "in-use"}
        waited += actions.count("waited")
    assert waited >= 2
    assert snapshot(group.facility) == before


def test_a_fresh_structure_is_initialised_and_its_allocation_logged(group: Group) -> None:
    qm = group.start(1)
    assert _outcomes(qm) == {ADMIN: "initialised", APP: "initialised"}
    (init,) = records(group.root, APP, RecordType.STRUCTURE_INITIALIZATION)
    assert init.payload_value()["params"]["name"] == APP
    second = group.start(2)
    assert _outcomes(second) == {ADMIN: "in-use", APP: "in-use"}


def test_no_readable_srds_and_a_deleted_log_is_refused_clearly(memory_group: Group) -> None:
    group = memory_group
    qm1, qm2 = group.start(1), group.start(2)
    define_queues(qm1)
    workload(qm1, qm2, 4)
    qm1.checkpoint(APP)
    qm1.checkpoint(APP)
    for status in slot_status(PairLayout(group.root, APP).srds):
        status.path.write_bytes(b"not a parquet file")
    group.lose(APP)
    with pytest.raises(StructureUnrecoverable) as refused:
        qm1.reconnect()
    assert refused.value.reason_code == 3520
    assert "SRDS" in str(refused.value) and "§7.4" in str(refused.value)


def test_a_recovery_that_died_half_way_is_done_again(memory_group: Group) -> None:
    group = memory_group
    qm1, qm2 = group.start(1), group.start(2)
    define_queues(qm1)
    workload(qm1, qm2, 6)
    qm1.checkpoint(APP)
    before = snapshot(group.facility, (APP,))
    group.lose(APP)
    # A recovering server died after allocating the structure and loading part of it.
    layout = PairLayout(group.root, APP)
    layout.write_json(layout.rebuilding_file, {"kind": "recovery", "by": "QM9"})
    from tests.recovery.conftest import params

    group.facility.create(params(APP))
    with group.facility.connect(APP, "QM9") as partial:
        partial.write(1, bytes(16), b"half loaded")
    qm1.reconnect()
    assert _outcomes(qm1)[APP] == "recovered"
    assert not layout.rebuilding_file.exists()
    assert snapshot(group.facility, (APP,)) == before
