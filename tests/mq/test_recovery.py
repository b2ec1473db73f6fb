"""Recovery of a failed manager's units of work (spec §7.15, §5.21).

Each test stops a manager dead at a chosen structure request (``CrashAt`` raises
``SimulatedFailure`` there; the manager object is then abandoned, as a dead process
would be), declares it failed, and lets a peer, or the manager's next incarnation,
finish its work.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sharedq.cf import CouplingFacility, UserState
from sharedq.log import LogStream
from sharedq.mq import (
    LogJournal,
    QueueManager,
    RecoveryInProgress,
    UowError,
    keys,
    structure_params,
)
from sharedq.mq import descriptors as d
from sharedq.mq.units import Status
from sharedq.seam import Journal
from sharedq.testing import SimulatedFailure
from tests.mq.conftest import ADMIN, APP, MakeManager
from tests.mq.faults import CrashAt, after_request
from tests.mq.helpers import committed, get_list, put_list


def declare_dead(facility: CouplingFacility, name: str) -> None:
    """What a backend does when a process vanishes: its users become failed."""
    for structure in facility.structure_names():
        with facility.connect(structure, "OPERATOR") as operator:
            for user in operator.users():
                if user.name == name and user.state is UserState.ACTIVE:
                    operator.mark_failed(user.user_id)


#: A journal that records nothing.  QM1 has one (or a log) so that its units of several
#: operations commit through descriptors, which these tests recover from: with no
#: journal at all, a unit of one structure commits in one request, none written
#: (``sharedq.mq.onecommit``, tests/mq/test_one_request_commit.py).
SILENT = Journal()


def _setup(make_qm: MakeManager, crash: CrashAt, journal: Journal | None = None):
    qm1 = make_qm(1, faults=crash, journal=journal or SILENT)
    qm2 = make_qm(2)
    qm1.define_queue("QA", structure=APP)
    qm1.define_queue("QB", structure=APP)
    qa, qb = qm1.open("QA"), qm1.open("QB")
    qa.put(b"a-old1")
    qa.put(b"a-old2")
    qb.put(b"b-old")
    return qm1, qm2, qa, qb


def _work(qm1: QueueManager, qa, qb):
    uow = qm1.unit_of_work()
    qa.put(b"a-new", uow=uow)
    qa.get(uow=uow)
    qb.put(b"b-new", uow=uow)
    qb.get(uow=uow)
    return uow


def test_peer_completes_in_commit(make_qm: MakeManager) -> None:
    """R1: QM1 dies after "in commit" and part of the commit actions; QM2 finishes."""
    crash = CrashAt(armed=False)
    qm1, qm2, qa, qb = _setup(make_qm, crash)
    uow = _work(qm1, qa, qb)
    crash.arm(1, after_request("move_entries"))  # QA's puts committed, nothing else
    with pytest.raises(SimulatedFailure):
        uow.commit()
    assert committed(qm2, "QA") == [b"a-old2", b"a-new"]
    qm2.declare_failed("QM1")
    report = qm2.recover("QM1")
    assert report.committed == 1 and report.in_doubt == []
    assert committed(qm2, "QA") == [b"a-old2", b"a-new"]
    assert committed(qm2, "QB") == [b"b-new"]
    assert get_list(qm2, APP, of=qm1) == []
    assert _descriptors_of(qm2, 1) == 0
    # Recovery again is harmless.
    qm2.recover("QM1")
    assert committed(qm2, "QB") == [b"b-new"]


def test_peer_completes_in_abort(make_qm: MakeManager) -> None:
    """R2: QM1 dies part-way through a backout; QM2 finishes it."""
    crash = CrashAt(armed=False)
    qm1, qm2, qa, qb = _setup(make_qm, crash)
    uow = _work(qm1, qa, qb)
    crash.arm(1, after_request("delete_entries"))  # QA's put deleted
    with pytest.raises(SimulatedFailure):
        uow.backout()
    qm2.declare_failed("QM1")
    report = qm2.recover("QM1")
    assert report.backed_out == 1
    assert committed(qm2, "QA") == [b"a-old1", b"a-old2"]
    assert committed(qm2, "QB") == [b"b-old"]
    assert put_list(qm2, "QA") == [("C", b"a-old1"), ("C", b"a-old2")]
    assert _descriptors_of(qm2, 1) == 0


def test_in_flight_unit_is_backed_out(make_qm: MakeManager) -> None:
    """U4: no descriptors: the peer deletes the uncommitted puts, returns the gets."""
    crash = CrashAt(armed=False)
    qm1, qm2, qa, qb = _setup(make_qm, crash)
    _work(qm1, qa, qb)
    crash.arm(1)
    with pytest.raises(SimulatedFailure):
        qa.put(b"never")
    qm2.declare_failed("QM1")
    report = qm2.recover("QM1")
    assert (report.puts_deleted, report.gets_returned) == (2, 2)
    assert put_list(qm2, "QA") == [("C", b"a-old1"), ("C", b"a-old2")]
    assert put_list(qm2, "QB") == [("C", b"b-old")]
    assert qm2.open("QA").get().backout_count == 1


def test_out_of_syncpoint_put_killed_before_sync(make_qm: MakeManager, tmp_path: Path) -> None:
    """C7: killed between the write and the sync: recovery deletes the entry.  (With a
    recovery log the put is two requests, each logged before the next; without one it
    is one request, never half done.)"""
    crash = CrashAt(armed=False)
    streams = {s: LogStream(tmp_path / s, name=f"{s}.LOG", structure=s) for s in (ADMIN, APP)}
    _qm1, qm2, qa, _ = _setup(make_qm, crash, LogJournal("QM1", streams))
    crash.arm(1, after_request("write"))
    with pytest.raises(SimulatedFailure):
        qa.put(b"half")
    assert put_list(qm2, "QA")[-1] == ("U", b"half")
    qm2.declare_failed("QM1")
    qm2.recover("QM1")
    assert put_list(qm2, "QA") == [("C", b"a-old1"), ("C", b"a-old2")]


def test_begin_commit_is_left_for_the_owner(
    make_qm: MakeManager, facility: CouplingFacility
) -> None:
    """R3: "begin commit" is the owner's; its restart backs it out (no log)."""
    crash = CrashAt(armed=False)
    qm1, qm2, qa, qb = _setup(make_qm, crash)
    uow = _work(qm1, qa, qb)
    uow_id = uow.uow_id
    crash.arm(1, after_request("write"))  # the descriptor, status "begin commit"
    with pytest.raises(SimulatedFailure):
        uow.commit()
    qm2.declare_failed("QM1")
    report = qm2.recover("QM1")
    assert report.in_doubt == [uow_id]
    assert [u.status for u in qm2.indoubt("QM1")] == ["begin-commit"]
    assert put_list(qm2, "QA") == [("C", b"a-old2"), ("U", b"a-new")]
    assert get_list(qm2, APP, of=qm1) == [b"a-old1", b"b-old"]
    restarted = make_qm(1)
    assert restarted.restart_report.backed_out == 1
    assert put_list(qm2, "QA") == [("C", b"a-old1"), ("C", b"a-old2")]
    assert put_list(qm2, "QB") == [("C", b"b-old")]
    assert qm2.indoubt("QM1") == []


def test_begin_commit_committed_when_the_journal_says_so(make_qm: MakeManager) -> None:
    class CommittedLog(Journal):
        def begin_commit_outcome(self, qm_name: str, uow_id: bytes) -> bool | None:
            return True

    crash = CrashAt(armed=False)
    qm1, qm2, qa, qb = _setup(make_qm, crash)
    uow = _work(qm1, qa, qb)
    crash.arm(1, after_request("write"))
    with pytest.raises(SimulatedFailure):
        uow.commit()
    qm2.declare_failed("QM1")
    restarted = make_qm(1, journal=CommittedLog())
    assert restarted.restart_report.committed == 1
    assert committed(qm2, "QA") == [b"a-old2", b"a-new"]
    assert committed(qm2, "QB") == [b"b-new"]


def test_prepared_unit_survives_and_is_resolved_at_restart(
    make_qm: MakeManager, facility: CouplingFacility
) -> None:
    """R3: "in prepare": peers leave it; the restarted owner lists and resolves it."""
    crash = CrashAt(armed=False)
    qm1, qm2, qa, qb = _setup(make_qm, crash)
    uow = _work(qm1, qa, qb)
    uow.prepare()
    uow_id = uow.uow_id
    crash.arm(1)
    with pytest.raises(SimulatedFailure):
        qa.put(b"x")
    qm2.declare_failed("QM1")
    assert qm2.recover("QM1").in_doubt == [uow_id]
    assert put_list(qm2, "QA") == [("C", b"a-old2"), ("U", b"a-new")]
    restarted = make_qm(1)
    [unit] = restarted.indoubt()
    assert (unit.uow_id, unit.status, unit.operations) == (uow_id, "prepared", 4)
    with pytest.raises(UowError):
        restarted.resolve(b"\x01" * 8, commit=True)
    restarted.resolve(uow_id, commit=True)
    assert restarted.indoubt() == []
    assert committed(qm2, "QA") == [b"a-old2", b"a-new"]
    assert committed(qm2, "QB") == [b"b-new"]
    assert get_list(restarted, APP) == []


def test_prepared_unit_resolved_by_backout(make_qm: MakeManager) -> None:
    crash = CrashAt(armed=False)
    qm1, qm2, qa, qb = _setup(make_qm, crash)
    uow = _work(qm1, qa, qb)
    uow.prepare()
    declare_dead_via(qm2, "QM1")
    restarted = make_qm(1)
    restarted.resolve(uow.uow_id, commit=False)
    assert committed(qm2, "QA") == [b"a-old1", b"a-old2"]
    assert committed(qm2, "QB") == [b"b-old"]


def declare_dead_via(peer: QueueManager, name: str) -> None:
    peer.declare_failed(name)


def test_partial_descriptor_set_is_backed_out(make_qm: MakeManager) -> None:
    """R4: part 0 says 3 parts, the writer died after writing 2: backed out."""
    crash = CrashAt(armed=False)
    qm1, qm2, qa, qb = _setup(make_qm, crash)
    uow = qm1.unit_of_work()
    for i in range(150):
        qa.put(b"p%d" % i, uow=uow)
    qb.get(uow=uow)  # puts and a get: committed with descriptors
    writes = CrashAt()
    crash.arm(2, lambda r, s, b: r == "write" and s == ADMIN and not b)
    with pytest.raises(SimulatedFailure):
        uow.commit()
    del writes
    records = d.load(qm2.admin, qm1.descriptor_list)
    [record] = records.values()
    assert record.expected_parts()[qm1.view().structure_number(APP)] == 3
    assert not record.is_complete()
    qm2.declare_failed("QM1")
    report = qm2.recover("QM1")
    assert report.in_doubt == [] and report.backed_out == 1
    assert put_list(qm2, "QA") == [("C", b"a-old1"), ("C", b"a-old2")]
    assert _descriptors_of(qm2, 1) == 0


def test_rolling_recovery(make_qm: MakeManager) -> None:
    """R5: QM2 dies while recovering QM1; QM3 finishes both."""
    crash1, crash2 = CrashAt(armed=False), CrashAt(armed=False)
    qm1 = make_qm(1, faults=crash1, journal=SILENT)
    qm2 = make_qm(2, faults=crash2)
    qm3 = make_qm(3)
    qm1.define_queue("Q", structure=APP)
    q1 = qm1.open("Q")
    for i in range(5):
        q1.put(b"m%d" % i)
    uow = qm1.unit_of_work()
    for _ in range(5):
        q1.get(uow=uow)
    q1.put(b"new", uow=uow)
    crash1.arm(1, after_request("update"))  # status "in commit" written
    with pytest.raises(SimulatedFailure):
        uow.commit()
    qm2.declare_failed("QM1")
    crash2.arm(1, after_request("move_entries"))
    with pytest.raises(SimulatedFailure):
        qm2.recover("QM1")
    with pytest.raises(RecoveryInProgress):
        # QM1's next incarnation waits while QM2, active as far as anyone knows,
        # holds the recovery claim.
        make_qm(1, restart_wait=0.05)
    qm3.declare_failed("QM2")
    reports = [qm3.recover("QM1"), qm3.recover("QM2")]
    assert reports[0].committed == 1 and APP in reports[0].structures
    assert committed(qm3, "Q") == [b"new"]
    assert get_list(qm3, APP) == []
    assert _descriptors_of(qm3, 1) == 0


def test_multi_structure_unit_muse(make_qm: MakeManager, facility: CouplingFacility) -> None:
    """U1/U3: a unit on two structures with two parts each: keys, MUSE, LIFO deletes;
    then one peer connected to one structure recovers it, a second the other."""
    facility.create(structure_params("APP2", queues=4, managers=4, messages=1000))
    crash = CrashAt(armed=False)
    qm1 = make_qm(1, structures=[APP, "APP2"], faults=crash)
    qm2 = make_qm(2, structures=[APP])
    qm3 = make_qm(3, structures=["APP2"])
    qm1.define_queue("Q1", structure=APP)
    qm1.define_queue("Q2", structure="APP2")
    q1, q2 = qm1.open("Q1"), qm1.open("Q2")
    uow = qm1.unit_of_work()
    for i in range(80):
        q1.put(b"one%d" % i, uow=uow)
        q2.put(b"two%d" % i, uow=uow)
    crash.arm(1, after_request("update"))
    with pytest.raises(SimulatedFailure):
        uow.commit()
    records = d.load(qm2.admin, qm1.descriptor_list)
    [record] = records.values()
    n1, n2 = qm1.view().structure_number(APP), qm1.view().structure_number("APP2")
    assert record.muse is not None and record.muse.key == keys.muse_key(uow.uow_id)
    assert record.status() is Status.IN_COMMIT
    assert sorted(record.parts) == sorted([n1, n2])
    for number in (n1, n2):
        assert sorted(record.parts[number]) == [0, 1]
        for part, entry in record.parts[number].items():
            assert entry.key == keys.euowd_key(number, uow.uow_id, part)
            assert d.decode_part(entry.data).muse == record.muse.key
    qm2.declare_failed("QM1")
    qm3.declare_failed("QM1")
    qm2.recover("QM1")
    assert len(committed(qm2, "Q1")) == 80
    remaining = d.load(qm2.admin, qm1.descriptor_list)
    assert list(remaining) == [uow.uow_id] and remaining[uow.uow_id].muse is not None
    qm3.recover("QM1")
    assert len(committed(qm3, "Q2")) == 80
    assert d.load(qm2.admin, qm1.descriptor_list) == {}


def test_single_structure_descriptor_names_no_muse(make_qm: MakeManager) -> None:
    crash = CrashAt(armed=False)
    qm1, qm2, qa, qb = _setup(make_qm, crash)
    uow = _work(qm1, qa, qb)
    uow.prepare()
    [record] = d.load(qm2.admin, qm1.descriptor_list).values()
    [entry] = record.parts[qm1.view().structure_number(APP)].values()
    assert d.decode_part(entry.data).muse == keys.NO_MUSE
    assert entry.adjunct == bytes((Status.IN_PREPARE,))
    uow.backout()


def test_peer_does_not_recover_an_active_manager(make_qm: MakeManager) -> None:
    qm1, qm2 = make_qm(1), make_qm(2)
    qm1.define_queue("Q", structure=APP)
    uow = qm1.unit_of_work()
    qm1.open("Q").put(b"mine", uow=uow)
    report = qm2.recover("QM1")
    assert sorted(report.skipped) == sorted([ADMIN, APP])
    assert put_list(qm2, "Q") == [("U", b"mine")]
    uow.commit()


def _descriptors_of(peer: QueueManager, qm_id: int) -> int:
    from sharedq.mq import directory

    lists = directory.read_manager_lists(peer.admin, qm_id)
    assert lists is not None and lists.descriptor_list is not None
    return len(d.load(peer.admin, lists.descriptor_list))
