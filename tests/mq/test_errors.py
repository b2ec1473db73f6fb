"""Every error: its exception class, its reason code, and nothing changed.

"Nothing changed" is checked on the structures' sequence numbers: every change takes
one, so a failed call must leave them where they were.
"""

from __future__ import annotations

import pytest

from sharedq.cf import CouplingFacility
from sharedq.mq import (
    ConfigurationError,
    ConnectionBroken,
    IndexType,
    Inhibited,
    InvalidArgument,
    MessageTooBig,
    MQError,
    MQReason,
    NoMessageAvailable,
    QueueExists,
    QueueFull,
    QueueManager,
    StorageFull,
    UnknownQueue,
    structure_params,
)
from tests.mq.conftest import ADMIN, APP, MakeManager
from tests.mq.helpers import refused_unchanged


@pytest.fixture
def q(qm: QueueManager):
    qm.define_queue("Q", structure=APP, max_depth=3)
    queue = qm.open("Q")
    queue.put(b"one")
    return queue


def test_put_errors_change_nothing(qm: QueueManager, q, facility: CouplingFacility) -> None:
    refused_unchanged(facility, lambda: q.put(b"x", priority=10), InvalidArgument, 2050)
    refused_unchanged(facility, lambda: q.put(b"x", priority=True), InvalidArgument, 2050)
    refused_unchanged(facility, lambda: q.put(b"x", persistent=1), InvalidArgument, 2047)  # type: ignore[arg-type]
    refused_unchanged(facility, lambda: q.put(b"x", expiry=-1), InvalidArgument, 2013)
    refused_unchanged(facility, lambda: q.put(b"x", msg_id=b"m" * 25), InvalidArgument, 2026)
    refused_unchanged(facility, lambda: q.put("text"), InvalidArgument, 2906)  # type: ignore[arg-type]
    refused_unchanged(facility, lambda: q.put(b"x" * 70_000), MessageTooBig, 2031)
    q.put(b"two")
    q.put(b"three")
    refused_unchanged(facility, lambda: q.put(b"four"), QueueFull, 2053)
    uow = qm.unit_of_work()
    refused_unchanged(facility, lambda: q.put(b"four", uow=uow), QueueFull, 2053)
    assert uow.operation_count == 0
    uow.commit()


def test_inhibited(make_qm: MakeManager, facility: CouplingFacility) -> None:
    qm1, qm2 = make_qm(1), make_qm(2)
    qm1.define_queue("Q", structure=APP, put_inhibited=True, get_inhibited=True)
    q2 = qm2.open("Q")
    error = refused_unchanged(facility, lambda: q2.put(b"x"), Inhibited, 2051)
    assert error.reason is MQReason.PUT_INHIBITED
    refused_unchanged(facility, lambda: q2.get(), Inhibited, 2016)


def test_get_errors(qm: QueueManager, q, facility: CouplingFacility) -> None:
    refused_unchanged(facility, lambda: q.get(msg_id=b"id"), InvalidArgument, 2206)
    refused_unchanged(facility, lambda: q.get(correl_id=b"id"), InvalidArgument, 2207)
    refused_unchanged(facility, lambda: q.get(max_length=-1), InvalidArgument, 2906)
    refused_unchanged(facility, lambda: q.get(wait=-1), InvalidArgument, 2906)
    qm.define_queue("BYCORREL", structure=APP, index=IndexType.CORREL_ID)
    by_correl = qm.open("BYCORREL")
    refused_unchanged(facility, lambda: by_correl.get(msg_id=b"id"), InvalidArgument, 2206)
    with pytest.raises(NoMessageAvailable) as caught:
        by_correl.get(correl_id=b"id")
    assert caught.value.reason_code == 2033


def test_get_by_both_ids(qm: QueueManager) -> None:
    qm.define_queue("Q2", structure=APP, index=IndexType.MSG_ID)
    q = qm.open("Q2")
    q.put(b"a", msg_id=b"M", correl_id=b"C1")
    q.put(b"b", msg_id=b"M", correl_id=b"C2")
    assert q.get(msg_id=b"M", correl_id=b"C2").body == b"b"
    with pytest.raises(NoMessageAvailable):
        q.get(msg_id=b"M", correl_id=b"C2")
    assert q.get(msg_id=b"M", correl_id=b"C1").body == b"a"


def test_definition_errors(qm: QueueManager, facility: CouplingFacility) -> None:
    qm.define_queue("Q", structure=APP)
    refused_unchanged(facility, lambda: qm.define_queue("Q", structure=APP), QueueExists, 2100)
    refused_unchanged(facility, lambda: qm.define_queue("Q", structure=ADMIN), QueueExists, 2100)
    refused_unchanged(facility, lambda: qm.define_queue("bad name!"), InvalidArgument, 2906)
    refused_unchanged(facility, lambda: qm.define_queue("Z", max_depth=-1), InvalidArgument, 2906)
    refused_unchanged(facility, lambda: qm.define_queue("Z", colour="red"), InvalidArgument, 2906)
    refused_unchanged(
        facility, lambda: qm.define_queue("Z", structure="NOPE"), ConfigurationError, 2345
    )
    refused_unchanged(facility, lambda: qm.open("NOPE"), UnknownQueue, 2085)
    refused_unchanged(
        facility, lambda: qm.alter_queue("NOPE", put_inhibited=True), UnknownQueue, 2085
    )
    refused_unchanged(
        facility, lambda: qm.alter_queue("Q", default_priority=12), InvalidArgument, 2050
    )
    refused_unchanged(facility, lambda: qm.alter_queue("Q", structure=ADMIN), InvalidArgument, 2906)
    assert qm.queue_names() == ["Q"]
    assert qm.queue_definition("Q").max_depth == 5000


def test_no_free_list_header(facility: CouplingFacility, qm: QueueManager) -> None:
    # APP has 1 + 16 + 12 lists; the managers have claimed a few.
    n = 0
    with pytest.raises(ConfigurationError) as caught:
        for n in range(100):
            qm.define_queue(f"Q{n}", structure=APP)
    assert caught.value.reason is MQReason.NO_FREE_LIST
    assert len(qm.queue_names()) == n


def test_manager_identity_conflicts(make_qm: MakeManager) -> None:
    make_qm(1)
    with pytest.raises(ConfigurationError) as caught:
        make_qm(1, name="OTHER")
    assert caught.value.reason is MQReason.Q_MGR_NAME_ERROR
    with pytest.raises(ConfigurationError):
        make_qm(0)
    with pytest.raises(ConfigurationError):
        make_qm(255)


def test_structure_full(make_qm: MakeManager, facility: CouplingFacility) -> None:
    facility.create(structure_params("TINY", queues=1, managers=2, messages=10, message_bytes=100))
    qm = make_qm(1, structures=["TINY"])
    qm.define_queue("Q", structure="TINY", max_depth=100_000)
    q = qm.open("Q")
    with pytest.raises(StorageFull) as caught:
        for _ in range(10_000):
            q.put(b"x" * 100)
    assert caught.value.reason is MQReason.STORAGE_MEDIUM_FULL
    depth = q.depth()
    refused_unchanged(facility, lambda: q.put(b"x" * 100), StorageFull, 2192)
    assert q.depth() == depth


def test_declared_failed_manager_is_not_connected(make_qm: MakeManager) -> None:
    qm1, qm2 = make_qm(1), make_qm(2)
    qm1.define_queue("Q", structure=APP)
    q1 = qm1.open("Q")
    qm2.declare_failed("QM1")
    with pytest.raises(ConnectionBroken) as caught:
        q1.put(b"x")
    assert caught.value.reason is MQReason.CONNECTION_BROKEN
    with pytest.raises(InvalidArgument):
        qm2.declare_failed("QM2")


def test_every_reason_has_its_class() -> None:
    from sharedq.mq.errors import mq_error

    for reason in MQReason:
        assert 2000 <= reason.value <= 2999
        error = mq_error(reason, "detail")
        assert isinstance(error, MQError) and error.reason is reason
        assert str(error).startswith(f"{reason.name} ({reason.value})")
