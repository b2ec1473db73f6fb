"""Structure and system checkpoints: the CK rules of spec/patent.md §9 (CK-T1..T10).

Timestamps are log positions (structure seqs), as in the spec's table.
"""

from __future__ import annotations

import threading
import time

import pyarrow.parquet as pq
import pytest

from sharedq.log import LogFull, LogPosition, RecordType
from sharedq.mq import BackedOut, JournalFull, QueueManager
from sharedq.recovery import PairLayout, slot_status
from sharedq.recovery.control import KIND_POSITION, ControlArea, name_hash, read
from sharedq.testing import SimulatedFailure
from tests.mq.faults import CrashAt
from tests.mq.helpers import drain
from tests.recovery.conftest import APP, Group
from tests.recovery.helpers import define_queues, eventually, records


def _position(group: Group, server: str, structure: str = APP) -> LogPosition:
    value = PairLayout.read_json(PairLayout(group.root, structure).checkpoint_file(server))
    assert value is not None
    seq, op, writer, lsn = value["position"]
    return LogPosition(seq, op, writer, lsn)


def _retention(qm: QueueManager, structure: str = APP) -> int:
    assert qm.recovery_log is not None
    return qm.recovery_log.pairs[structure].stream.retention_points().get(structure, 0)


def test_checkpoints_alternate_slots_and_delete_the_log_before_the_older_srds(
    memory_group: Group,
) -> None:
    """CK-T3, CK-T4, CK-9: one valid SRDS: delete before it; two: before the older."""
    group = memory_group
    qm1 = group.start(1)
    group.start(2)  # active: its system checkpoints follow every structure checkpoint
    define_queues(qm1)
    orders = qm1.open("ORDERS")
    seqs, slots = [], []
    for round_ in range(3):
        for n in range(5):
            orders.put(b"r%d m%d" % (round_, n), persistent=True)
        (result,) = qm1.checkpoint(APP)
        assert result is not None
        seqs.append(result.seq)
        slots.append(result.slot)
        # Every active manager took a system checkpoint after it (CK-4).
        assert _position(group, "QM2").seq >= result.seq
        older = seqs[-2] if len(seqs) > 1 else seqs[-1]
        assert _retention(qm1) == older
        assert result.retention == {APP: older}
    assert slots == [1, 2, 1]
    first = next(r for r in records(group.root, APP, RecordType.STRUCTURE_CHECKPOINT))
    assert first.seq >= seqs[1]  # the first two checkpoints' records went with the log
    statuses = {s.slot: s.seq for s in slot_status(PairLayout(group.root, APP).srds)}
    assert statuses == {1: seqs[2], 2: seqs[1]}


def test_an_srds_holds_only_the_queue_and_unit_of_nonrecoverable_objects(
    memory_group: Group,
) -> None:
    """CK-T1: recoverable R1, R2 with data; nonrecoverable N1 with queue name and UOW."""
    group = memory_group
    qm = group.start(1)
    define_queues(qm)
    orders = qm.open("ORDERS")
    orders.put(b"R1", persistent=True)
    orders.put(b"R2", persistent=True)
    orders.put(b"N1", persistent=False)
    uow = qm.unit_of_work()
    orders.put(b"N2 uncommitted", persistent=False, uow=uow)
    (result,) = qm.checkpoint(APP)
    assert result is not None and result.entries > result.recoverable
    table = pq.read_table(PairLayout(group.root, APP).srds / f"SRDS{result.slot}.parquet")
    rows = [r for r in table.to_pylist() if r["queue"] == b"ORDERS"]
    kept = [r for r in rows if r["recoverable"]]
    dropped = [r for r in rows if not r["recoverable"]]
    assert sorted(r["data"][-2:] for r in kept) == [b"R1", b"R2"]
    assert len(dropped) == 2 and all(r["data"] is None for r in dropped)
    assert {r["uow"] for r in dropped} == {None, uow.uow_id}
    machinery = [r for r in table.to_pylist() if ControlArea().is_machinery(_entry_of(r))]
    assert machinery and not any(r["recoverable"] for r in machinery)
    uow.backout()


def _entry_of(row: dict[str, object]) -> object:
    from sharedq.cf import ListEntry

    return ListEntry(row["entry_id"], row["list_number"], row["key"], b"", b"", None, 0, 0)  # type: ignore[arg-type]


def test_a_put_during_the_copy_waits_and_then_succeeds(group: Group) -> None:
    """CK-T2 (CK-3): requests from every server are held, then complete; none fails."""
    quiesced, go = threading.Event(), threading.Event()
    quiesced_at: list[float] = []

    def faults(point: str) -> None:
        if point == "quiesced":
            quiesced_at.append(time.monotonic())
            quiesced.set()
            assert go.wait(30)

    qm1 = group.start(1, checkpoint_faults=faults)
    qm2 = group.start(2)
    define_queues(qm1)
    outcome: list[object] = []
    checkpoint = threading.Thread(target=lambda: outcome.append(qm1.checkpoint(APP)))
    checkpoint.start()
    assert quiesced.wait(30)
    gates = [qm.recovery_log.pairs[APP].gate for qm in (qm1, qm2) if qm.recovery_log is not None]
    held_before = [gate.held for gate in gates]
    puts = [
        threading.Thread(target=lambda qm=qm: qm.open("ORDERS").put(b"held", persistent=True))
        for qm in (qm1, qm2)  # the master's own manager is held too
    ]
    for put in puts:
        put.start()
    # Each put finds the quiesce lock held and waits at its manager's gate.
    eventually(lambda: all(g.held > n for g, n in zip(gates, held_before, strict=True)))
    assert all(put.is_alive() for put in puts), "a put went through a quiesced structure"
    # The copy holds the structure 0.4 s, which its result must count as quiesced.
    time.sleep(max(0.0, quiesced_at[0] + 0.4 - time.monotonic()))
    go.set()
    for put in puts:
        put.join(30)
    checkpoint.join(30)
    assert not any(put.is_alive() for put in puts)
    assert [m.body for m in drain(qm2, "ORDERS")] == [b"held", b"held"]
    assert all(qm.recovery_log and qm.recovery_log.pairs[APP].gate.held >= 1 for qm in (qm1, qm2))
    (result,) = outcome[0]  # type: ignore[misc]
    assert result.quiesced_seconds >= 0.4


def test_system_checkpoint_position_is_in_the_file_and_on_the_control_list(
    group: Group,
) -> None:
    qm = group.start(1)
    qm.system_checkpoint()
    for structure in (APP,):
        position = _position(group, "QM1", structure)
        assert qm.recovery_log is not None
        pair = qm.recovery_log.pairs[structure]
        found = read(pair.conns[structure], pair.area, KIND_POSITION, name_hash("QM1"))
        assert found is not None and found[1]["position"] == list(position)
        (record,) = [
            r
            for r in records(group.root, structure, RecordType.SYSTEM_CHECKPOINT)
            if (r.seq, r.op, r.writer, r.lsn) == position
        ]
        payload = record.payload_value()
        assert payload["reason"] == "request"
        assert payload["state"]["qmgr"] == "QM1" and payload["state"]["committing"] == []


def test_a_warm_restart_reads_the_restart_state_of_its_system_checkpoint(
    memory_group: Group,
) -> None:
    """A unit whose commit was decided before the last system checkpoint is committed
    at restart although its COMMIT record lies before the checkpoint."""
    group = memory_group
    crash = CrashAt(armed=False)
    qm1 = group.start(1, faults=crash)
    qm2 = group.start(2)
    define_queues(qm1)
    uow = qm1.unit_of_work()
    qm1.open("ORDERS").put(b"a", persistent=True, uow=uow)
    qm1.open("ADMIN.Q").put(b"b", persistent=True, uow=uow)

    def at_update(request: str, structure: str, before: bool) -> bool:
        if request == "update" and before:
            qm1.system_checkpoint()  # after the COMMIT record, before "in commit"
            return True
        return False

    crash.arm(1, at_update)
    with pytest.raises(SimulatedFailure):
        uow.commit()
    assert [u.status for u in qm2.indoubt("QM1")] == ["begin-commit"]
    group.kill(qm1)
    restarted = group.start(1)
    assert restarted.restart_report.start == "warm"
    assert restarted.restart_report.committed == 2  # in each of its two structures
    assert [m.body for m in drain(qm2, "ORDERS")] == [b"a"]
    assert [m.body for m in drain(qm2, "ADMIN.Q")] == [b"b"]


@pytest.mark.parametrize("while_down", [1, 2])
def test_a_manager_down_across_two_structure_checkpoints_cold_starts(
    group: Group, while_down: int, caplog: pytest.LogCaptureFixture
) -> None:
    """CK-T5 (down across one: warm) and CK-T6 (two: cold, its locked messages go to
    the cold queue and it is told which)."""
    qm1, qm2 = group.start(1), group.start(2)
    define_queues(qm1)
    orders = qm1.open("ORDERS")
    for n in range(3):
        orders.put(b"m%d" % n, persistent=True)
    qm1.checkpoint()  # both active: QM2's system checkpoint follows it
    held: list[bytes] = []

    def prepare() -> None:  # a unit left for its coordinator when QM2 dies
        uow = qm2.unit_of_work()
        held.append(qm2.open("ORDERS").get(uow=uow).body)
        qm2.open("ADMIN.Q").put(b"never committed", persistent=True, uow=uow)
        uow.prepare()

    worker = threading.Thread(target=prepare)
    worker.start()
    worker.join()
    group.kill(qm2)
    qm1.recover_failed()
    for _ in range(while_down):
        qm1.checkpoint()
    restarted = group.start(2)
    report = restarted.restart_report
    if while_down == 1:
        assert report.start == "warm" and report.cold_queued == []
        (unit,) = restarted.indoubt()
        restarted.resolve(unit.uow_id, commit=False)
        assert sorted(m.body for m in drain(restarted, "ORDERS")) == [b"m0", b"m1", b"m2"]
        return
    assert report.start == "cold"
    assert "down across two structure checkpoints" in report.start_reason
    assert "down across two structure checkpoints" in caplog.text
    assert [(c.structure, c.queue) for c in report.cold_queued] == [(APP, "ORDERS")]
    assert restarted.indoubt() == [] and drain(restarted, "ADMIN.Q") == []
    assert [m.body for m in restarted.cold_messages()] == held == [b"m0"]
    assert sorted(m.body for m in drain(restarted, "ORDERS")) == [b"m1", b"m2"]
    assert restarted.requeue_cold() == 1
    (back,) = drain(restarted, "ORDERS")
    assert (back.body, back.backout_count) == (b"m0", 1)


def test_a_manager_down_at_the_first_checkpoint_ever_cold_starts(memory_group: Group) -> None:
    """CK-T7: the first (only) valid SRDS deletes the log before it, restart records too."""
    group = memory_group
    qm1, qm2 = group.start(1), group.start(2)
    define_queues(qm1)
    group.kill(qm2)
    qm1.recover_failed()
    (result,) = qm1.checkpoint(APP)
    assert result is not None and _retention(qm1) == result.seq
    restarted = group.start(2)
    assert restarted.restart_report.start == "cold"
    assert "was deleted" in restarted.restart_report.start_reason


def test_a_cold_start_can_be_asked_for(memory_group: Group) -> None:
    group = memory_group
    qm = group.start(1)
    define_queues(qm)
    qm.close()
    again = group.start(1, recovery=group.settings(cold_start=True))
    assert again.restart_report.start == "cold"
    assert "cold start requested" in again.restart_report.start_reason


def test_checkpoint_triggers_take_one_checkpoint_each(memory_group: Group) -> None:
    """CK-T10: SYSCHKPT, STRCHKPT, on request, at shutdown only where asked beforehand."""
    group = memory_group
    settings = group.settings(syschkpt=40, strchkpt=150)
    qm1 = group.start(1, recovery=settings)
    qm2 = group.start(2, recovery=settings)
    define_queues(qm1)
    orders = qm1.open("ORDERS")
    for n in range(80):  # two records a put: 160 records of QM1 in RAPP
        orders.put(b"m%d" % n, persistent=True)
    eventually(lambda: _last(group, APP) == (1, "strchkpt", "QM1"))
    qm1.checkpoint(APP)
    assert _last(group, APP) == (2, "request", "QM1")
    qm2.set_shutdown_checkpoint()  # /CQSET SHUTDOWN SHAREDQ ON, on QM2 only
    qm1.close()
    assert _last(group, APP) == (2, "request", "QM1")
    system = [
        r.payload_value()["reason"]
        for r in records(group.root, APP, RecordType.SYSTEM_CHECKPOINT)
        if r.writer == "QM1"
    ]
    assert system[-1] == "shutdown"
    qm2.close()
    assert _last(group, APP) == (3, "shutdown", "QM2")


def test_a_system_checkpoint_every_syschkpt_records(memory_group: Group) -> None:
    group = memory_group
    qm = group.start(1, recovery=group.settings(syschkpt=40, strchkpt=None))
    define_queues(qm)
    before = qm.recovery_log.pairs[APP].writer.last_lsn  # type: ignore[union-attr]
    for n in range(80):
        qm.open("ORDERS").put(b"m%d" % n, persistent=True)
    assert qm.recovery_log is not None
    pair = qm.recovery_log.pairs[APP]
    assert pair.writer is not None
    written = [
        r
        for r in records(group.root, APP, RecordType.SYSTEM_CHECKPOINT)
        if r.writer == "QM1" and r.payload_value()["reason"] == "syschkpt"
    ]
    appended = pair.writer.last_lsn - before
    assert len(written) == appended // 41  # 40 records, then the checkpoint itself
    assert _position(group, "QM1") == tuple(written[-1][:4])


def _last(group: Group, structure: str) -> tuple[int, str, str] | None:
    """The last structure checkpoint: its number, why, by whom."""
    found = records(group.root, structure, RecordType.STRUCTURE_CHECKPOINT)
    if not found:
        return None
    payload = found[-1].payload_value()
    return payload["checkpoint"], payload["reason"], found[-1].writer


def _reasons(group: Group, structure: str) -> list[str]:
    return [
        r.payload_value()["reason"]
        for r in records(group.root, structure, RecordType.STRUCTURE_CHECKPOINT)
    ]


def test_the_log_keeps_taking_records_through_forced_checkpoints(memory_group: Group) -> None:
    """CK-T9, CK-8: at its maximum the log forces structure checkpoints and deletes."""
    group = memory_group
    limit = 384 << 10
    broken = threading.Event()

    def faults(point: str) -> None:
        if broken.is_set() and point == "claimed":
            raise RuntimeError("the checkpoint cannot run")

    qm = group.start(1, recovery=group.settings(max_log_bytes=limit), checkpoint_faults=faults)
    define_queues(qm)
    orders = qm.open("ORDERS")
    body = b"x" * 1000
    forced: set[int] = set()
    for n in range(1200):  # ~3.5 MB of records through a 384 KiB log
        orders.put(body, persistent=True)
        with qm.unit_of_work() as uow:
            orders.get(uow=uow)
        last = _last(group, APP) if n % 100 == 0 else None
        if last is not None and last[1].startswith("log-"):
            forced.add(last[0])
    assert qm.recovery_log is not None
    stream = qm.recovery_log.pairs[APP].stream
    assert stream.size_bytes() <= limit + (128 << 10)
    assert len(forced) >= 3
    # A checkpoint that cannot run cannot make room: the caller gets a clear error,
    # the manager's own (the request was undone, or the unit backed out), caused by
    # the log's.
    broken.set()
    with pytest.raises((JournalFull, BackedOut)) as full:
        for _ in range(5000):
            orders.put(body, persistent=True)
            with qm.unit_of_work() as uow:
                orders.get(uow=uow)
    cause = full.value.__cause__
    while cause is not None and not isinstance(cause, LogFull):
        cause = cause.__cause__
    assert isinstance(cause, LogFull) and cause.reason_code == 3020
    assert "log-full handler failed" in str(cause)
