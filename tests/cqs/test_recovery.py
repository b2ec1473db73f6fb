"""The CQS's log and structure recovery: a lost structure rebuilt object for object."""

from __future__ import annotations

from pathlib import Path

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cqs import CQS, CQSJournalFailed, CQSReason, make_name, structure_params
from sharedq.log import Durability, LogConfig, LogStream, RecordType
from sharedq.recovery import PairLayout, RecoverySettings

from .conftest import MSGQ, MakeCQS
from .helpers import LTERMA, TRANA, TRANB, snapshot, where


def log_records(root: Path) -> list:  # type: ignore[type-arg]
    layout = PairLayout(root, MSGQ)
    return list(LogStream(layout.log, name=f"{MSGQ}.LOG", structure=MSGQ).records())


def workload(a: CQS, b: CQS, tag: bytes) -> None:
    """Puts (one and several parts, recoverable or not), reads, deletes, unlocks, moves."""
    for n in range(6):
        a.put(TRANA, tag + b" order %d" % n, recoverable=n % 3 != 0)
        b.put(LTERMA, [tag + b" reply %d" % n, b"part 2", b"part 3"])
    first = b.read(TRANA)
    assert first is not None and first.token is not None
    b.delete(first.token)
    second = a.read(TRANA)
    assert second is not None and second.token is not None
    a.unlock(second.token, first=False)
    third = a.read(LTERMA)
    assert third is not None and third.token is not None
    a.move(third.token, TRANB)
    a.put(TRANB, tag + b" local", local=True)
    b.read(LTERMA)  # left locked by CQSIMSB


def test_a_lost_structure_comes_back_object_for_object(
    facility: CouplingFacility, make_cqs: MakeCQS, tmp_path: Path
) -> None:
    settings = RecoverySettings(tmp_path / "recovery")
    a = make_cqs("IMSA", recovery=settings)
    b = make_cqs("IMSB", recovery=settings)
    workload(a, b, b"before")
    a.checkpoint("structure")  # to the SRDS
    workload(a, b, b"after")  # and more, only in the log
    before = snapshot(facility)
    lists = where(facility, MSGQ)
    assert len(lists["ready"]) > 10 and lists["lock"] and lists["staging"]
    a.disconnect()
    b.disconnect()

    facility.delete(MSGQ, force=True)  # the structure is lost
    assert not facility.exists(MSGQ)
    c = make_cqs("IMSA", recovery=settings)  # connecting recovers it first
    assert c.recovery_log is not None and c.recovery_log.rebuilt() == [MSGQ]
    after = snapshot(facility)
    assert after == before
    # Nonrecoverable messages are not in it; every recoverable one reads back whole.
    bodies = [m.body for m in c.browse(TRANA)]
    assert all(b" order 0" not in body and b" order 3" not in body for body in bodies)
    replies = c.browse(LTERMA)
    assert replies and all(m.parts[1:] == (b"part 2", b"part 3") for m in replies)


def test_the_log_has_the_cqs_records_with_uow_and_queue(
    facility: CouplingFacility, make_cqs: MakeCQS, tmp_path: Path
) -> None:
    root = tmp_path / "recovery"
    a = make_cqs("IMSA", recovery=RecoverySettings(root))
    uow = a.new_uow()
    a.put(TRANA, b"hello", uow=uow)
    message = a.read(TRANA)
    assert message is not None and message.token is not None
    a.unlock(message.token)
    message = a.read(TRANA)
    assert message is not None and message.token is not None
    a.move(message.token, TRANB)
    message = a.read(TRANB)
    assert message is not None and message.token is not None
    a.delete(message.token)
    a.disconnect()

    records = [r for r in log_records(root) if r.writer == "CQSIMSA"]
    types = [RecordType(r.type) for r in records]
    for expected in (
        RecordType.CONNECT,
        RecordType.PUT,
        RecordType.READ,
        RecordType.UNLOCK,
        RecordType.MOVE,
        RecordType.DELETE,
        RecordType.SYSTEM_CHECKPOINT,
        RecordType.STATISTICS,
        RecordType.DISCONNECT,
        RecordType.SHUTDOWN,
    ):
        assert expected in types, expected
    message_records = [r for r in records if RecordType(r.type).carries_uow]
    assert message_records and all(r.uow == bytes(uow) for r in message_records)
    assert {r.queue for r in message_records} == {TRANA, TRANB}
    assert types.index(RecordType.CONNECT) < types.index(RecordType.PUT)


def test_with_interval_durability_requests_do_not_wait_yet_all_is_logged(
    facility: CouplingFacility, make_cqs: MakeCQS, tmp_path: Path
) -> None:
    root = tmp_path / "recovery"
    settings = RecoverySettings(root, durability=Durability.interval(50))
    a = make_cqs("IMSA", recovery=settings)
    for n in range(5):
        a.put(TRANA, b"m%d" % n)
    message = a.read(TRANA)
    assert message is not None and message.token is not None
    a.delete(message.token)
    before = snapshot(facility)
    a.disconnect()
    types = [RecordType(r.type) for r in log_records(root) if r.writer == "CQSIMSA"]
    assert types.count(RecordType.PUT) == 5 and RecordType.DELETE in types
    facility.delete(MSGQ, force=True)
    make_cqs("IMSB", recovery=settings)
    assert snapshot(facility) == before


def test_nonrecoverable_messages_are_not_logged(
    facility: CouplingFacility, make_cqs: MakeCQS, tmp_path: Path
) -> None:
    root = tmp_path / "recovery"
    a = make_cqs("IMSA", recovery=RecoverySettings(root))
    queue = make_name(1, "SCRATCH")
    a.put(queue, b"gone after a loss", recoverable=False)
    message = a.read(queue)
    assert message is not None and message.token is not None
    a.delete(message.token)
    a.disconnect()
    assert not [r for r in log_records(root) if r.queue == queue]


def test_structure_params_make_192_lists_of_512_byte_elements() -> None:
    params = structure_params("X1", messages=10)
    assert (params.list_count, params.element_size) == (192, 512)


def test_a_full_log_refuses_a_put_and_takes_back_what_it_wrote(
    facility: CouplingFacility, make_cqs: MakeCQS, tmp_path: Path
) -> None:
    small = LogConfig(segment_bytes=64 << 10, staging_bytes=128 << 10)
    settings = RecoverySettings(
        tmp_path / "recovery",
        max_log_bytes=200_000,
        chknearfull=False,
        strchkpt=None,
        log_config=small,
    )
    facility.create(structure_params("BIGQ", messages=3000))
    cqs = make_cqs("IMSA", recovery=settings, msgq="BIGQ")
    put = 0
    with pytest.raises(CQSJournalFailed) as full:
        while put < 1000:
            cqs.put(TRANA, [b"x" * 600, b"y" * 600])
            put += 1
    assert full.value.reason is CQSReason.JOURNAL_FAILED and "LOG_FULL" in str(full.value)
    lists = where(facility, "BIGQ")
    # The refused put left nothing: every message on the queue is whole and was logged.
    assert len(lists["ready"]) == put and len(lists["staging"]) == put
