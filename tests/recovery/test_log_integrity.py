"""A recovery that cannot read everything it needs refuses, naming what is missing.

Each test runs a real queue manager with a recovery log, damages or deletes files of
the log (or of its checkpoints) on disk, destroys the structures for real, and has the
manager reconnect: either recovery refuses with ``LOG_INCOMPLETE`` (changing nothing:
the structure is still gone) and names the writer, the range and the file, or it
recovers and every committed message is there, counted one by one.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from sharedq.log import LogDamaged, LogStream, RecordType
from sharedq.log.segment import read_segment
from sharedq.mq import ConnectionBroken, QueueManager
from sharedq.recovery import (
    LogIncomplete,
    LogMismatch,
    PairLayout,
    RecoveryReason,
    StructureOutcome,
    accept_loss,
    check_pair,
)
from tests.log.helpers import flip
from tests.mq.helpers import drain
from tests.recovery.conftest import APP, STRUCTURES, Group
from tests.recovery.helpers import define_queues

BODY = b"." * 300


def _put(qm: QueueManager, first: int, count: int) -> list[bytes]:
    orders = qm.open("ORDERS")
    bodies = [b"m%05d" % n + BODY for n in range(first, first + count)]
    for body in bodies:
        orders.put(body, persistent=True)
    return bodies


def _stream(qm: QueueManager) -> LogStream:
    assert qm.recovery_log is not None
    return qm.recovery_log.pairs[APP].stream


def _outcome(qm: QueueManager, structure: str = APP) -> StructureOutcome:
    assert qm.recovery_log is not None
    pairs = qm.recovery_log.pairs.values()
    [found] = [o for p in pairs for o in p.outcomes if o.structure == structure]
    return found


def _bodies(qm: QueueManager) -> list[bytes]:
    return sorted(m.body for m in drain(qm, "ORDERS"))


def _messages_by_lsn(stream: LogStream, writer: str) -> dict[bytes, set[int]]:
    """Each message's entry id and the lsns of its writer's records of it."""
    found: dict[bytes, set[int]] = defaultdict(set)
    for record in stream.records(structures={APP}):
        if record.writer == writer and record.type in (RecordType.PUT, RecordType.MOVE):
            assert record.entry_id is not None
            found[record.entry_id].add(record.lsn)
    return found


def _body_of(stream: LogStream) -> dict[bytes, bytes]:
    bodies = {}
    for record in stream.records(structures={APP}):
        if record.type == RecordType.PUT and record.entry_id and record.data:
            bodies[record.entry_id] = record.data
    return bodies


def _payload_body(data: bytes) -> bytes:
    """A message's body from its entry data (the body is the tail of the data)."""
    start = data.find(b"m0")
    return data[start:]


def test_a_missing_segment_refuses_recovery_until_the_loss_is_accepted(group: Group) -> None:
    # Given a manager that logged a few hundred puts after its structure checkpoint
    qm = group.start(1)
    define_queues(qm)
    qm.checkpoint()
    bodies = _put(qm, 0, 400)
    stream = _stream(qm)
    segments = stream.layout.segments("QM1")
    assert len(segments) >= 4
    first, victim = segments[1]
    lost = {r.lsn for r in read_segment(victim).records}
    by_entry = _messages_by_lsn(stream, "QM1")
    body_of = _body_of(stream)
    survivors = sorted(_payload_body(body_of[e]) for e, lsns in by_entry.items() if not lsns & lost)
    assert 0 < len(survivors) < len(bodies)
    # When one of its staging segments is deleted and the structures are lost
    victim.unlink()
    group.lose(*STRUCTURES)
    # Then recovery refuses, naming the writer, the range and the file, and changes
    # nothing: the structure is still gone
    with pytest.raises(LogIncomplete) as refused:
        qm.reconnect()
    assert refused.value.reason is RecoveryReason.LOG_INCOMPLETE
    text = str(refused.value)
    assert f"writer QM1: lsns {first}..{max(lost)}" in text and victim.name in text
    assert "accept-loss" in text
    assert not group.facility.exists(APP)
    # When the operator accepts exactly that loss
    check = check_pair(group.root, APP)
    [gap] = check.unaccepted
    assert (gap.writer, gap.first_lsn, gap.last_lsn) == ("QM1", first, max(lost))
    assert accept_loss(group.root, APP) == [gap]
    assert check_pair(group.root, APP).unaccepted == []
    # Then recovery goes on, reports the loss, and every message outside it is there
    qm.reconnect()
    outcome = _outcome(qm)
    assert outcome.action == "recovered" and outcome.log is not None
    assert outcome.log.lost == [str(gap)] and not outcome.log.clean
    assert _bodies(qm) == survivors


def test_damage_in_records_the_srds_covers_loses_nothing(group: Group) -> None:
    # Given forty committed messages in one segment, half of them before a checkpoint
    qm = group.start(1)
    define_queues(qm)
    before = _put(qm, 0, 20)
    qm.checkpoint(APP)
    after = _put(qm, 20, 20)
    stream = _stream(qm)
    [(_, path), *_] = [s for s in stream.layout.segments("QM1") if s[0] > 1] or [
        stream.layout.segments("QM1")[-1]
    ]
    records = read_segment(path).records
    srds_position = max(r.lsn for r in records if r.type == RecordType.STRUCTURE_CHECKPOINT)
    assert records[0].lsn < srds_position < records[-1].lsn
    # When a byte flips in a record the SRDS covers, and the structures are lost
    flip(path, 2)
    group.lose(*STRUCTURES)
    qm.reconnect()
    # Then all forty are there, and the report says what was passed over and why
    assert _bodies(qm) == sorted(before + after)
    outcome = _outcome(qm)
    assert outcome.log is not None and outcome.log.clean
    assert any("QM1" in note and "before lsn" in note for note in outcome.log.skipped)


def _damage_after_checkpoint(qm: QueueManager) -> tuple[Path, list[bytes]]:
    """Messages before and after a checkpoint; a byte flipped in a record after it."""
    define_queues(qm)
    before = _put(qm, 0, 10)
    qm.checkpoint(APP)
    after = _put(qm, 10, 30)
    _, path = _stream(qm).layout.segments("QM1")[-1]
    flip(path, len(read_segment(path).records) - 5)
    return path, before + after


def test_damage_after_the_srds_refuses_recovery_naming_the_file(group: Group) -> None:
    qm = group.start(1)
    path, _ = _damage_after_checkpoint(qm)
    group.lose(*STRUCTURES)
    with pytest.raises(LogIncomplete) as refused:
        qm.reconnect()
    assert str(path) in str(refused.value) and "bad checksum" in str(refused.value)
    assert not group.facility.exists(APP)


def test_with_dual_logging_damage_after_the_srds_loses_nothing(
    group: Group, tmp_path: Path
) -> None:
    qm = group.start(1, recovery=group.settings(dual_log_root=tmp_path / "second-disk"))
    path, bodies = _damage_after_checkpoint(qm)
    group.lose(*STRUCTURES)
    qm.reconnect()
    outcome = _outcome(qm)
    assert outcome.log is not None and outcome.log.clean
    assert any(str(path) in item for item in outcome.log.repaired)
    assert _bodies(qm) == sorted(bodies)


def test_a_damaged_data_set_is_refused_naming_it(group: Group) -> None:
    qm = group.start(1)
    define_queues(qm)
    qm.checkpoint(APP)
    _put(qm, 0, 300)
    assert qm.recovery_log is not None
    writer = qm.recovery_log.pairs[APP].writer
    assert writer is not None
    writer.offload()
    stream = _stream(qm)
    [(_, dataset)] = [d for d in stream.layout.dataset_files() if d[0].writer == "QM1"]
    raw = bytearray(dataset.read_bytes())
    raw[len(raw) // 2] ^= 0x10
    dataset.write_bytes(bytes(raw))
    group.lose(*STRUCTURES)
    with pytest.raises(LogIncomplete) as refused:
        qm.reconnect()
    assert str(dataset) in str(refused.value) and "unreadable" in str(refused.value)
    assert not group.facility.exists(APP)


def test_restoring_an_older_srds_is_refused_when_the_log_after_it_is_gone(
    group: Group, tmp_path: Path
) -> None:
    # Given a backup of an SRDS, and two later checkpoints that let the log go
    qm = group.start(1)
    define_queues(qm)
    _put(qm, 0, 30)
    first = qm.checkpoint(APP)[0]
    assert first is not None
    layout = PairLayout(group.root, APP)
    backup = tmp_path / "backup.parquet"
    shutil.copy(layout.srds / f"SRDS{first.slot}.parquet", backup)
    for n in range(2):
        _put(qm, 100 + 100 * n, 120)
        with qm.unit_of_work() as uow:
            for _ in range(50):
                qm.open("ORDERS").get(uow=uow)
        qm.checkpoint(APP)
    # When both SRDS are damaged, the backup is put back in their place, and the
    # structures are lost
    for slot in (1, 2):
        (layout.srds / f"SRDS{slot}.parquet").write_bytes(b"damaged beyond use")
    shutil.copy(backup, layout.srds / f"SRDS{first.slot}.parquet")
    group.lose(*STRUCTURES)
    # Then recovery refuses: the records after the backup were deleted by retention
    with pytest.raises(LogIncomplete) as refused:
        qm.reconnect()
    assert "deleted by retention" in str(refused.value)
    assert not group.facility.exists(APP)


def test_a_garbage_retention_file_is_refused_with_its_name(group: Group) -> None:
    qm = group.start(1)
    define_queues(qm)
    _put(qm, 0, 20)
    qm.checkpoint(APP)
    _put(qm, 20, 20)
    layout = PairLayout(group.root, APP)
    retention = layout.log / "RETENTION"
    assert retention.exists()
    retention.write_bytes(b"\x00garbage{")
    group.lose(*STRUCTURES)
    with pytest.raises(LogDamaged) as refused:
        qm.reconnect()
    assert str(retention) in str(refused.value)
    assert not group.facility.exists(APP)


def test_managers_pointed_at_two_logs_for_one_structure_are_refused(
    group: Group, tmp_path: Path
) -> None:
    qm1 = group.start(1)
    define_queues(qm1)
    _put(qm1, 0, 10)
    elsewhere = group.settings(root=tmp_path / "another-recovery-root")
    with pytest.raises(LogMismatch) as refused:
        group.start(2, recovery=elsewhere)
    assert refused.value.reason is RecoveryReason.LOG_MISMATCH
    assert str(tmp_path / "another-recovery-root") in str(refused.value)
    # The first manager's messages are untouched
    assert len(drain(qm1, "ORDERS")) == 10


def test_the_operator_check_lists_damage_repaired_and_skipped(group: Group) -> None:
    qm = group.start(1)
    define_queues(qm)
    _put(qm, 0, 40)
    qm.checkpoint(APP)
    check = check_pair(group.root, APP)
    assert check.slot is not None and check.gaps == []
    assert check.lines()[-1] == "every record a recovery needs is in the log"


def test_a_redis_server_back_from_an_old_snapshot_is_rebuilt_not_used(
    redis_group: Group,
) -> None:
    # Given a group whose Redis server took an RDB snapshot, then acknowledged more work
    group = redis_group
    assert group.server is not None
    qm1, qm2 = group.start(1), group.start(2)
    define_queues(qm1)
    first = _put(qm1, 0, 40)
    qm1.checkpoint(APP)
    second = _put(qm1, 40, 40)
    group.server.save()
    third = _put(qm1, 80, 60)
    orders = qm2.open("ORDERS")
    with qm2.unit_of_work() as uow:  # consumed after the snapshot: must not come back
        consumed = [orders.get(uow=uow).body for _ in range(25)]
    expected = sorted(set(first + second + third) - set(consumed))
    # When the server is killed and comes back from that snapshot (older than the log)
    group.server.restart()
    # Then no request reaches the stale structure, and the manager that reconnects
    # finds it behind its log and rebuilds it from the SRDS and the log
    with pytest.raises(ConnectionBroken):
        qm1.open("ORDERS").put(b"into the stale structure", persistent=True)
    qm1.reconnect()
    outcome = _outcome(qm1)
    assert outcome.action == "recovered"
    assert outcome.replaced is not None and "behind its log" in outcome.replaced
    qm2.reconnect()
    assert _bodies(qm2) == expected
    # And the log holds no sequence number twice: a later loss recovers exactly
    fourth = _put(qm1, 200, 30)
    group.lose(*STRUCTURES)
    qm1.reconnect()
    assert _outcome(qm1).action == "recovered"
    assert _bodies(qm1) == sorted(fourth)


def test_a_redis_restart_that_lost_nothing_is_used_as_it_is(redis_group: Group) -> None:
    group = redis_group
    assert group.server is not None
    qm = group.start(1)
    define_queues(qm)
    bodies = _put(qm, 0, 30)
    qm.checkpoint(APP)
    group.server.save()  # the snapshot holds everything acknowledged
    group.server.restart()
    with pytest.raises(ConnectionBroken):
        qm.open("ORDERS").put(b"after the restart", persistent=True)
    qm.reconnect()
    assert _outcome(qm).action == "in-use"
    assert _bodies(qm) == sorted(bodies)
