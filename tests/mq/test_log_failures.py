"""A recovery log on a disk that fills up: a failed log write takes back what the request
wrote, and a commit that fails ends its unit of work.

Each test puts the logs of both structures on a small tmpfs of its own
(:mod:`tests.mq.small_disk`) and fills it, so that the log writer fails for real
(``IO_FAILED``, ``ENOSPC``), during a put, a get or a commit, in and out of syncpoint,
on every backend.  Then: the call raised the queue manager's error (``JournalFull``,
2192, the log's error its cause; ``BackedOut`` or ``OutcomePending`` for a commit), the
queue and the structure hold exactly what they held before, the thread can begin a
new unit of work, and once the disk has room again every message acknowledged before
is there exactly once.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sharedq import SharedqError
from sharedq.cf import CouplingFacility
from sharedq.log import LogConfig, LogError, LogFull, LogReason, LogStream
from sharedq.mq import (
    BackedOut,
    ChangeKind,
    JournalFull,
    LogJournal,
    MQReason,
    OutcomePending,
    QueueFull,
    QueueManager,
    StorageFull,
    UnitOfWork,
    UowState,
    structure_params,
)
from sharedq.mq.classify import recoverable_contents
from sharedq.recovery import contents, rebuild
from tests.mq.conftest import ADMIN, APP, MakeManager
from tests.mq.helpers import descriptor_count, drain, get_list, put_list, versions
from tests.mq.hook_at import At
from tests.mq.small_disk import SmallDisk, small_disk

STRUCTURES = (ADMIN, APP)


@dataclass
class Logged:
    """A manager (QM1) whose recovery log is on a small disk."""

    facility: CouplingFacility
    make_qm: MakeManager
    disk: SmallDisk
    streams: dict[str, LogStream]
    journal: LogJournal
    qm: QueueManager
    hook: At

    def full(self) -> None:
        """Fill the disk: the next log write of either structure fails."""
        self.disk.fill((s, self.journal.writer_for(n)) for n, s in self.streams.items())

    def restart(self) -> QueueManager:
        """Close QM1 and start its next incarnation on the same logs."""
        self.qm.close()
        self.journal.close()
        self.journal = LogJournal("QM1", self.streams)
        self.qm = self.make_qm(1, journal=self.journal)
        return self.qm

    def assert_log_rebuilds(self) -> None:
        """Each structure rebuilt from its log alone is the structure (every recoverable
        object): the log and the structure never parted."""
        self.qm.close()
        self.journal.close()
        for name in STRUCTURES:
            with self.facility.connect(name, "AUDITOR") as auditor:
                before = recoverable_contents(contents(auditor))
            self.facility.delete(name, force=True)
            rebuild(
                self.facility,
                structure_params(name, queues=16, managers=4, messages=2000),
                image=None,
                records=self.streams[name].records(structures={name}),
                sequence_floor=self.streams[name].last_seq(name),
            )
            with self.facility.connect(name, "AUDITOR") as auditor:
                assert recoverable_contents(contents(auditor)) == before, name


@pytest.fixture
def logged(facility: CouplingFacility, make_qm: MakeManager) -> Iterator[Logged]:
    with small_disk() as disk:
        streams = {s: LogStream(disk.path / s, name=f"{s}.LOG", structure=s) for s in STRUCTURES}
        journal = LogJournal("QM1", streams)
        hook = At()
        qm = make_qm(1, journal=journal, faults=hook)
        found = Logged(facility, make_qm, disk, streams, journal, qm, hook)
        try:
            yield found
        finally:
            found.disk.free()
            found.qm.close()
            found.journal.close()


def entries(facility: CouplingFacility) -> dict[str, int]:
    """Every structure's entry count, read by a watcher."""
    found = {}
    for name in STRUCTURES:
        with facility.connect(name, "WATCHER") as watcher:
            found[name] = watcher.statistics().entries
    return found


def assert_disk_full(error: BaseException) -> None:
    """The queue manager's 2192, caused by the log writer's IO_FAILED on ENOSPC."""
    assert isinstance(error, JournalFull) and isinstance(error, StorageFull)
    assert error.reason is MQReason.STORAGE_MEDIUM_FULL and error.reason_code == 2192
    cause = error.__cause__
    assert isinstance(cause, LogError) and cause.reason is LogReason.IO_FAILED
    assert isinstance(cause.__cause__, OSError) and cause.__cause__.errno == errno.ENOSPC


def bodies(qm: QueueManager, queue: str) -> list[bytes]:
    return sorted(m.body for m in drain(qm, queue))


# -- puts --------------------------------------------------------------------------------


@pytest.mark.parametrize("syncpoint", [False, True], ids=["out-of-syncpoint", "in-unit"])
def test_a_put_the_log_cannot_record_leaves_nothing_behind(
    logged: Logged, facility: CouplingFacility, syncpoint: bool
) -> None:
    qm = logged.qm
    qm.define_queue("Q", structure=APP, max_depth=10)
    q = qm.open("Q")
    empty = entries(facility)
    acked = [b"m0", b"m1", b"m2"]
    for body in acked:
        q.put(body, persistent=True)
    uow = qm.unit_of_work() if syncpoint else None
    if uow is not None:
        q.put(b"in unit", persistent=True, uow=uow)
        acked.append(b"in unit")
    listed, depth, counted = put_list(qm, "Q"), q.depth(), entries(facility)

    logged.full()
    with pytest.raises(SharedqError) as caught:
        q.put(b"p" * 6000, persistent=True, uow=uow)
    assert q.depth() == depth
    assert put_list(qm, "Q") == listed  # no stray entry, committed or not
    assert entries(facility) == counted
    assert_disk_full(caught.value)
    # A nonpersistent message is not logged: it goes on.
    q.put(b"not logged", persistent=False, uow=uow)
    acked.append(b"not logged")
    if uow is not None:
        assert uow.state is UowState.ACTIVE and uow.operation_count == 2

    logged.disk.free()
    if uow is not None:
        uow.commit()
    q.put(b"after", persistent=True)
    acked.append(b"after")
    assert bodies(qm, "Q") == sorted(acked)
    assert q.depth() == 0 and get_list(qm, APP) == []
    assert entries(facility) == empty
    logged.assert_log_rebuilds()


def test_failed_puts_do_not_fill_the_queue(logged: Logged, facility: CouplingFacility) -> None:
    """max_depth failed puts (and more) leave room for max_depth puts."""
    qm = logged.qm
    qm.define_queue("Q", structure=APP, max_depth=3)
    q = qm.open("Q")
    counted = entries(facility)
    logged.full()
    uow = qm.unit_of_work()
    failures = []
    for n in range(8):
        with pytest.raises(SharedqError) as caught:
            q.put(b"refused %d" % n, persistent=True, uow=uow if n % 2 else None)
        failures.append(caught.value)
    logged.disk.free()
    for n in range(3):  # room for max_depth messages: no QueueFull (2053)
        q.put(b"kept %d" % n, persistent=True)
    with pytest.raises(QueueFull):
        q.put(b"one too many", persistent=True)
    uow.commit()  # nothing in it
    assert bodies(qm, "Q") == [b"kept 0", b"kept 1", b"kept 2"]
    assert entries(facility) == counted
    for failure in failures:
        assert_disk_full(failure)


def test_a_put_whose_sync_the_log_cannot_record_is_taken_back(
    logged: Logged, facility: CouplingFacility
) -> None:
    """Out of syncpoint: the write is logged, the disk fills, the sync is not logged:
    the message, committed for a moment, is deleted again."""
    qm = logged.qm
    qm.define_queue("Q", structure=APP)
    q = qm.open("Q")
    q.put(b"old", persistent=True)
    listed, counted = put_list(qm, "Q"), entries(facility)
    logged.hook.arm("move", APP, True, logged.full)  # between the write and the sync
    with pytest.raises(SharedqError) as caught:
        q.put(b"new", persistent=True)
    assert put_list(qm, "Q") == listed and entries(facility) == counted
    assert_disk_full(caught.value)
    assert caught.value.meaning is ChangeKind.SYNC_PUT  # type: ignore[attr-defined]
    logged.disk.free()
    q.put(b"after", persistent=True)
    assert bodies(qm, "Q") == [b"after", b"old"]


# -- gets ---------------------------------------------------------------------------------


@pytest.mark.parametrize("syncpoint", [False, True], ids=["out-of-syncpoint", "in-unit"])
def test_a_get_the_log_cannot_record_leaves_the_message_on_the_queue(
    logged: Logged, facility: CouplingFacility, syncpoint: bool
) -> None:
    qm = logged.qm
    qm.define_queue("Q", structure=APP)
    q = qm.open("Q")
    for body in (b"first", b"second"):
        q.put(body, persistent=True)
    listed, counted, held = put_list(qm, "Q"), entries(facility), versions(qm, "Q")
    logged.full()
    uow = qm.unit_of_work() if syncpoint else None
    with pytest.raises(SharedqError) as caught:
        q.get(uow=uow)
    assert put_list(qm, "Q") == listed and get_list(qm, APP) == []
    assert versions(qm, "Q") == held  # no backout counted: nobody had it
    assert entries(facility) == counted
    assert_disk_full(caught.value)
    if uow is not None:
        assert uow.operation_count == 0
        uow.backout()
    logged.disk.free()
    first = q.get()
    assert (first.body, first.backout_count) == (b"first", 0)
    assert bodies(qm, "Q") == [b"second"]


def test_a_get_whose_delete_the_log_cannot_record_puts_the_message_back(
    logged: Logged, facility: CouplingFacility
) -> None:
    """Out of syncpoint: the move to the get list is logged, the disk fills, the delete
    is not logged: the message is written back on its queue, as it was."""
    qm = logged.qm
    qm.define_queue("Q", structure=APP)
    q = qm.open("Q")
    for body in (b"first", b"second"):
        q.put(body, persistent=True)
    listed, counted, held = put_list(qm, "Q"), entries(facility), versions(qm, "Q")
    logged.hook.arm("delete", APP, True, logged.full)
    with pytest.raises(SharedqError) as caught:
        q.get()
    assert put_list(qm, "Q") == listed and get_list(qm, APP) == []
    assert versions(qm, "Q") == held
    assert entries(facility) == counted
    assert_disk_full(caught.value)
    logged.disk.free()
    assert [(m.body, m.backout_count) for m in drain(qm, "Q")] == [(b"first", 0), (b"second", 0)]


# -- commits: the unit of work ends, the thread goes on ------------------------------------


@pytest.mark.parametrize("operation", ["put", "get"])
def test_a_one_operation_commit_the_log_cannot_record_is_backed_out(
    logged: Logged, facility: CouplingFacility, operation: str
) -> None:
    qm = logged.qm
    qm.define_queue("Q", structure=APP)
    q = qm.open("Q")
    q.put(b"old", persistent=True)
    listed = put_list(qm, "Q")
    with pytest.raises(SharedqError) as caught, qm.unit_of_work() as uow:
        if operation == "put":
            q.put(b"new", persistent=True, uow=uow)
        else:
            assert q.get(uow=uow).body == b"old"
        logged.full()
    retry = qm.unit_of_work()  # the thread goes on (UOW_IN_PROGRESS, 2128, before)
    assert uow.state is UowState.ENDED
    assert put_list(qm, "Q") == listed and get_list(qm, APP) == []
    assert isinstance(caught.value, BackedOut)
    assert caught.value.reason is MQReason.BACKED_OUT and caught.value.reason_code == 2003
    assert_disk_full(caught.value.__cause__)  # type: ignore[arg-type]
    logged.disk.free()
    q.put(b"retried", persistent=True, uow=retry)
    retry.commit()
    gotten = drain(qm, "Q")
    assert [m.body for m in gotten] == [b"old", b"retried"]
    assert gotten[0].backout_count == (1 if operation == "get" else 0)


def _unit_over_two_queues(qm: QueueManager) -> UnitOfWork:
    """A unit that puts to QA and QB and gets from QC: three operations, descriptors."""
    uow = qm.unit_of_work()
    qm.open("QA").put(b"a-new", persistent=True, uow=uow)
    qm.open("QB").put(b"b-new", persistent=True, uow=uow)
    assert qm.open("QC").get(uow=uow).body == b"c-old"
    return uow


def _three_queues(qm: QueueManager) -> None:
    for name in ("QA", "QB", "QC"):
        qm.define_queue(name, structure=APP)
    qm.open("QA").put(b"a-old", persistent=True)
    qm.open("QC").put(b"c-old", persistent=True)


@pytest.mark.parametrize("where", ["descriptors", "decision"])
def test_a_commit_failing_before_its_decision_is_logged_is_backed_out(
    logged: Logged, facility: CouplingFacility, where: str
) -> None:
    """The disk is full when the commit writes its descriptors, or fills right after
    (the COMMIT record cannot be written): backed out, 2003, the thread goes on."""
    qm = logged.qm
    _three_queues(qm)
    uow = _unit_over_two_queues(qm)
    if where == "descriptors":
        logged.full()
    else:
        logged.hook.arm("write", ADMIN, False, logged.full)  # after the descriptor
    with pytest.raises(SharedqError) as caught:
        uow.commit()
    retry = qm.unit_of_work()  # the thread goes on (UOW_IN_PROGRESS, 2128, before)
    assert uow.state is UowState.ENDED
    assert put_list(qm, "QA") == [("C", b"a-old")] and put_list(qm, "QB") == []
    assert put_list(qm, "QC") == [("C", b"c-old")] and get_list(qm, APP) == []
    assert descriptor_count(qm) == 0
    assert isinstance(caught.value, BackedOut) and caught.value.reason_code == 2003
    logged.disk.free()
    qm.open("QB").put(b"b-retried", persistent=True, uow=retry)
    retry.commit()
    assert bodies(qm, "QA") == [b"a-old"] and bodies(qm, "QB") == [b"b-retried"]
    assert [(m.body, m.backout_count) for m in drain(qm, "QC")] == [(b"c-old", 1)]


def test_a_commit_failing_after_its_decision_is_pending_and_completed_at_restart(
    logged: Logged, facility: CouplingFacility
) -> None:
    """The COMMIT record is logged, then the disk fills: "in commit" cannot be logged.
    Never backed out: OUTCOME_PENDING (2124), the thread goes on, and the restart of
    the manager commits the unit."""
    qm = logged.qm
    _three_queues(qm)
    uow = _unit_over_two_queues(qm)
    logged.hook.arm("update", ADMIN, True, logged.full)  # the status "in commit"
    with pytest.raises(SharedqError) as caught:
        uow.commit()
    retry = qm.unit_of_work()  # the thread goes on (UOW_IN_PROGRESS, 2128, before)
    assert uow.state is UowState.ENDED
    assert isinstance(caught.value, OutcomePending)
    assert caught.value.reason is MQReason.OUTCOME_PENDING and caught.value.reason_code == 2124
    # Left as the failure found it, for the restart: uncommitted puts, the get held.
    assert put_list(qm, "QB") == [("U", b"b-new")]
    assert get_list(qm, APP) == [b"c-old"]
    logged.disk.free()
    qm.open("QB").put(b"b-retried", persistent=True, uow=retry)
    retry.commit()
    restarted = logged.restart()
    assert restarted.restart_report.committed == 1
    assert bodies(restarted, "QA") == [b"a-new", b"a-old"]
    assert bodies(restarted, "QB") == [b"b-new", b"b-retried"]
    assert bodies(restarted, "QC") == [] and get_list(restarted, APP) == []
    assert descriptor_count(restarted) == 0


def test_a_backout_the_log_cannot_record_still_backs_out(
    logged: Logged, facility: CouplingFacility
) -> None:
    """Nothing of a backout is undone: recovery backs out whatever the log lacks."""
    qm = logged.qm
    _three_queues(qm)
    uow = _unit_over_two_queues(qm)
    logged.full()
    uow.backout()
    assert uow.state is UowState.ENDED
    assert put_list(qm, "QB") == [] and get_list(qm, APP) == []
    assert descriptor_count(qm) == 0
    logged.disk.free()
    assert bodies(qm, "QA") == [b"a-old"] and bodies(qm, "QB") == []
    assert [(m.body, m.backout_count) for m in drain(qm, "QC")] == [(b"c-old", 1)]


def test_a_put_refused_by_a_log_at_its_maximum_leaves_nothing_behind(
    facility: CouplingFacility, make_qm: MakeManager, tmp_path: Path
) -> None:
    """The log at its ``max_bytes`` with nothing to free (``LOG_FULL``): the same."""
    config = LogConfig(staging_bytes=1 << 20, segment_bytes=64 << 10, max_bytes=128 << 10)
    streams = {
        s: LogStream(tmp_path / s, name=f"{s}.LOG", structure=s, config=config) for s in STRUCTURES
    }
    journal = LogJournal("QM1", streams)
    try:
        qm = make_qm(1, journal=journal)
        qm.define_queue("Q", structure=APP)
        q = qm.open("Q")
        acked: list[bytes] = []
        for n in range(1000):
            listed, counted = put_list(qm, "Q"), entries(facility)
            try:
                q.put(b"%04d" % n + bytes(2000), persistent=True)
            except SharedqError as error:
                refused = error
                break
            acked.append(b"%04d" % n + bytes(2000))
        assert put_list(qm, "Q") == listed and entries(facility) == counted
        assert isinstance(refused, JournalFull) and refused.reason_code == 2192
        assert isinstance(refused.__cause__, LogFull) and refused.__cause__.reason_code == 3020
        assert len(acked) > 10
        uow = qm.unit_of_work()
        with pytest.raises(JournalFull):
            # Larger than the put refused above: the log's slack is less than that.
            q.put(b"in a unit" + bytes(3000), persistent=True, uow=uow)
        assert put_list(qm, "Q") == listed and uow.operation_count == 0
        uow.backout()
        assert [body for kind, body in put_list(qm, "Q") if kind == "C"] == acked
    finally:
        journal.close()


def test_a_definition_the_log_cannot_record_is_taken_back(
    logged: Logged, facility: CouplingFacility
) -> None:
    """A queue defined, or altered, while the log is full: as if never asked."""
    qm = logged.qm
    qm.define_queue("OLD", structure=APP, max_depth=2)
    counted = entries(facility)
    logged.full()
    with pytest.raises(JournalFull):
        qm.define_queue("NEW", structure=APP)
    with pytest.raises(JournalFull):
        qm.alter_queue("OLD", max_depth=1, put_inhibited=True)
    assert qm.queue_names() == ["OLD"]
    definition = qm.queue_definition("OLD")
    assert (definition.max_depth, definition.put_inhibited) == (2, False)
    assert entries(facility) == counted
    logged.disk.free()
    qm.define_queue("NEW", structure=APP)  # not "exists already" (2100)
    old = qm.open("OLD")
    old.put(b"one", persistent=True)
    old.put(b"two", persistent=True)  # the old limit holds
    with pytest.raises(QueueFull):
        old.put(b"three", persistent=True)
    assert sorted(qm.queue_names()) == ["NEW", "OLD"]


def test_a_commit_decision_logged_in_one_stream_of_two_is_never_backed_out(
    facility: CouplingFacility, make_qm: MakeManager
) -> None:
    """A unit over both structures logs its COMMIT record to each one's stream; the
    first is written, the second's disk is full.  A restart may find the first: the
    unit counts as decided, is never backed out (2124), and the restart commits it."""
    with small_disk() as app_disk, small_disk() as admin_disk:
        disks = {APP: app_disk, ADMIN: admin_disk}
        streams = {
            s: LogStream(disks[s].path / s, name=f"{s}.LOG", structure=s) for s in STRUCTURES
        }
        journal = LogJournal("QM1", streams)
        hook = At()
        qm = make_qm(1, journal=journal, faults=hook)
        try:
            qm.define_queue("QA", structure=APP)
            qm.define_queue("QADMIN", structure=ADMIN)
            qm.open("QADMIN").put(b"admin-old", persistent=True)
            uow = qm.unit_of_work()
            qm.open("QA").put(b"a-new", persistent=True, uow=uow)
            assert qm.open("QADMIN").get(uow=uow).body == b"admin-old"

            def fill_admin_disk() -> None:
                admin_disk.fill([(streams[ADMIN], journal.writer_for(ADMIN))])

            # The MUSE and a part per structure are written: then the admin log fills.
            hook.arm("write", ADMIN, False, fill_admin_disk, nth=3)
            with pytest.raises(SharedqError) as caught:
                uow.commit()
            retry = qm.unit_of_work()  # the thread goes on
            assert isinstance(caught.value, OutcomePending) and caught.value.reason_code == 2124
            assert "partly logged" in str(caught.value)
            assert put_list(qm, "QA") == [("U", b"a-new")]
            assert get_list(qm, ADMIN) == [b"admin-old"]
            admin_disk.free()
            retry.commit()
            qm.close()
            journal.close()
            journal = LogJournal("QM1", streams)
            restarted = make_qm(1, journal=journal)
            assert restarted.restart_report.committed == 2  # once in each structure
            assert bodies(restarted, "QA") == [b"a-new"]
            assert bodies(restarted, "QADMIN") == [] and get_list(restarted, ADMIN) == []
            assert descriptor_count(restarted) == 0
        finally:
            admin_disk.free()
            qm.close()
            journal.close()
