"""The queue manager's recovery log: every recoverable change logged, and only those.

The strongest check there is: after a varied workload with the log journal on, each
structure rebuilt from its log alone equals the structure, object for object, in
every recoverable object (all but nonpersistent messages).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sharedq.cf import CouplingFacility
from sharedq.log import LogStream, RecordType, unpack_payload
from sharedq.mq import (
    IndexType,
    LogJournal,
    QueueManager,
    Truncated,
    structure_params,
)
from sharedq.mq.classify import recoverable_contents
from sharedq.recovery import contents, rebuild
from sharedq.testing import ManualClock, SimulatedFailure
from tests.mq.conftest import ADMIN, APP, MakeManager
from tests.mq.faults import CrashAt
from tests.mq.helpers import drain

STRUCTURES = (ADMIN, APP)


@pytest.fixture
def streams(tmp_path: Path) -> dict[str, LogStream]:
    return {s: LogStream(tmp_path / s, name=f"{s}.LOG", structure=s) for s in STRUCTURES}


def _workload(qm1: QueueManager, qm2: QueueManager, clock: ManualClock) -> None:
    """Every kind of change, each leaving an effect that later changes do not hide."""
    qm1.define_queue("ORDERS", structure=APP, max_depth=100)
    qm1.define_queue("RETRY", structure=APP)
    qm1.define_queue("BY.ID", structure=APP, index=IndexType.MSG_ID)
    qm2.define_queue("ADMIN.Q", structure=ADMIN)
    orders, retry, by_id = qm1.open("ORDERS"), qm1.open("RETRY"), qm1.open("BY.ID")
    for n in range(6):
        orders.put(b"order %d" % n, priority=n % 10, persistent=n % 2 == 0)
    by_id.put(b"indexed", persistent=True, msg_id=b"M1")
    by_id.put(b"indexed too", persistent=True, msg_id=b"M2")
    qm2.open("ADMIN.Q").put(b"admin", persistent=True)
    orders.put(b"short-lived", persistent=True, expiry=1.0, priority=9)
    with qm1.unit_of_work() as uow:  # commit-puts, across two structures
        orders.put(b"in unit", persistent=True, uow=uow)
        qm1.open("ADMIN.Q").put(b"in unit too", persistent=True, uow=uow)
    retry.put(b"retry 1", persistent=True)
    retry.put(b"retry 2", persistent=True)
    uow = qm2.unit_of_work()  # backout-gets: both back, backout count 1, and stay there
    qm2.open("RETRY").get(uow=uow)
    qm2.open("RETRY").get(uow=uow)
    uow.backout()
    with qm2.unit_of_work() as uow, pytest.raises(Truncated):  # backout-last
        qm2.open("BY.ID").get(uow=uow, msg_id=b"M2", max_length=1)
    with qm2.unit_of_work() as uow:  # get, commit-gets
        qm2.open("BY.ID").get(uow=uow, msg_id=b"M1")
    clock.advance_s(5.0)
    with qm1.unit_of_work() as uow:  # the expired message goes to the expiry list
        orders.get(uow=uow)
    qm1.alter_queue("ORDERS", put_inhibited=True)
    qm1.alter_queue("ORDERS", put_inhibited=False)
    prepared = qm2.unit_of_work()  # left in doubt: descriptors and entries must come back
    qm2.open("ADMIN.Q").put(b"prepared", persistent=True, uow=prepared)
    qm2.open("ORDERS").get(uow=prepared)
    prepared.prepare()


#: The kinds of change the workload makes, every one of which must reach the log.
WORKLOAD_KINDS = {
    "put",
    "sync-put",
    "commit-puts",
    "get",
    "commit-gets",
    "backout-gets",
    "backout-last",
    "expire",
    "descriptor",
    "definition",
    "control",
}


def test_each_structure_rebuilt_from_its_log_alone_is_whole(
    facility: CouplingFacility,
    make_qm: MakeManager,
    streams: dict[str, LogStream],
    clock: ManualClock,
) -> None:
    journals = [LogJournal("QM1", streams), LogJournal("QM2", streams)]
    qm1 = make_qm(1, journal=journals[0], structures=[APP])
    qm2 = make_qm(2, journal=journals[1], structures=[APP])
    _workload(qm1, qm2, clock)
    for journal in journals:
        journal.close()
    logged = {
        unpack_payload(r.payload)["mq"]
        for stream in streams.values()
        for r in stream.records()
        if r.payload is not None
    }
    assert logged >= WORKLOAD_KINDS
    for name in STRUCTURES:
        with facility.connect(name, "AUDITOR") as auditor:
            before = recoverable_contents(contents(auditor))
            nonpersistent = sum(len(e) for e in contents(auditor).lists.values()) - sum(
                len(e) for e in before.lists.values()
            )
        if name == APP:
            assert nonpersistent > 0  # the workload left nonpersistent messages behind
        facility.delete(name, force=True)
        rebuild(
            facility,
            structure_params(name, queues=16, managers=4, messages=2000),
            image=None,
            records=streams[name].records(structures={name}),
            sequence_floor=streams[name].last_seq(name),
        )
        with facility.connect(name, "AUDITOR") as auditor:
            assert contents(auditor) == before, name


def test_nonpersistent_messages_are_never_logged(
    make_qm: MakeManager, streams: dict[str, LogStream]
) -> None:
    journal = LogJournal("QM1", streams)
    qm = make_qm(1, journal=journal)
    qm.define_queue("Q", structure=APP)
    q = qm.open("Q")
    q.put(b"light", msg_id=b"LIGHT")
    q.put(b"heavy", msg_id=b"HEAVY", persistent=True)
    with qm.unit_of_work() as uow:
        q.get(uow=uow)
        q.get(uow=uow)
    journal.close()
    ids = {r.message_id for r in streams[APP].records() if r.message_id is not None}
    assert ids == {b"HEAVY".ljust(24, b"\x00")}


def test_records_say_what_each_change_meant(
    make_qm: MakeManager, streams: dict[str, LogStream]
) -> None:
    journal = LogJournal("QM1", streams)
    qm = make_qm(1, journal=journal)
    qm.define_queue("Q", structure=APP)
    q = qm.open("Q")
    q.put(b"x", persistent=True, priority=7, correl_id=b"C1")
    with qm.unit_of_work() as uow:
        q.get(uow=uow)
    journal.close()
    records = [r for r in streams[APP].records() if r.queue == b"Q"]
    kinds = [(RecordType(r.type).name, unpack_payload(r.payload)) for r in records if r.message_id]
    assert kinds == [
        ("PUT", {"mq": "put"}),
        ("MOVE", {"mq": "sync-put"}),
        ("READ", {"mq": "get"}),
        ("DELETE", {"mq": "commit-gets"}),
    ]
    put = next(r for r in records if r.type == RecordType.PUT)
    assert (put.priority, put.persistent, put.correl_id) == (7, True, b"C1".ljust(24, b"\0"))
    assert put.data is not None and b"x" in put.data


def test_a_logged_commit_decision_commits_a_begin_commit_unit_at_restart(
    make_qm: MakeManager, streams: dict[str, LogStream]
) -> None:
    """The owner dies after deciding to commit but before its descriptors say so."""
    crash = CrashAt(armed=False)
    qm1 = make_qm(1, journal=LogJournal("QM1", streams), faults=crash)
    qm2 = make_qm(2)
    qm1.define_queue("QA", structure=APP)
    qm1.define_queue("QB", structure=APP)
    qa, qb = qm1.open("QA"), qm1.open("QB")
    uow = qm1.unit_of_work()
    qa.put(b"a", persistent=True, uow=uow)
    qb.put(b"b", persistent=True, uow=uow)
    # The status update to "in commit" is the first update of the commit.
    crash.arm(1, lambda request, structure, before: request == "update" and before)
    with pytest.raises(SimulatedFailure):
        uow.commit()
    assert [u.status for u in qm2.indoubt("QM1")] == ["begin-commit"]
    qm2.declare_failed("QM1")
    restarted = make_qm(1, journal=LogJournal("QM1.RESTART", streams))
    assert restarted.restart_report.committed == 1
    assert [m.body for m in drain(qm2, "QA")] == [b"a"]
    assert [m.body for m in drain(qm2, "QB")] == [b"b"]
