"""A commit (or backout) that fails ends its unit of work: the thread goes on.

Real failures on a private Redis server of each test's own, at a chosen request of the
commit (a fault hook picks the moment; the failure itself is the server's):

* the server refusing the update that changes the unit's descriptors to "in commit"
  (or "in abort"): an ACL that takes ``FCALL`` away from the manager's user, as an
  operator's mistake would (at ``maxmemory`` that update runs all the same: it leaves
  the data as it is, see ``docs/redis.md``);
* the server killed (SIGKILL) mid-commit, the manager's recovery log then rebuilding
  the structures on a new server (``reconnect``).

Before the decision to commit is durable the unit is backed out (``BackedOut``,
2003); after it, it is never backed out: ``OutcomePending`` (2124), and the manager's
restart (or reconnect) completes it.  Either way a new unit of work begins on the same
thread at once, and every message is counted afterwards, exactly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sharedq import SharedqError
from sharedq.cf import CouplingFacility, open_facility
from sharedq.log import LogStream
from sharedq.mq import (
    BackedOut,
    LogJournal,
    MQReason,
    OutcomePending,
    QueueManager,
    UnitOfWork,
    UowState,
    structure_params,
)
from sharedq.recovery import RecoverySettings
from sharedq.seam import Journal
from sharedq.testing import ManualClock
from sharedq.testing.redis_server import RedisServer
from tests.mq.helpers import descriptor_count, drain, get_list, put_list
from tests.mq.hook_at import ANY, At

ADMIN = "QSGADMIN"
APP = "APP1"
STRUCTURES = (ADMIN, APP)


def allow_requests(server: RedisServer, allowed: bool) -> None:
    """Let the server run sharedq's requests (``FCALL``) for its default user, or not."""
    server.command("ACL", "SETUSER", "default", "+fcall" if allowed else "-fcall")


class Group:
    """QM1 (with a fault hook) on a private Redis server."""

    def __init__(self, server: RedisServer, url: str, tmp: Path) -> None:
        self.server = server
        self.tmp = tmp
        self.facility: CouplingFacility = open_facility(url)
        for name in STRUCTURES:
            self.facility.create(structure_params(name, queues=16, managers=4, messages=2000))
        self.hook = At()
        self.managers: list[QueueManager] = []
        self.journals: list[Journal] = []
        self.clock = ManualClock(tick_s=0.000_01)

    def start(self, *, journal: Journal | None = None, **options: object) -> QueueManager:
        qm = QueueManager(
            self.facility,
            "QM1",
            1,
            admin=ADMIN,
            structures=[APP],
            clock=self.clock,
            journal=journal,
            faults=self.hook,
            **options,  # type: ignore[arg-type]
        )
        self.managers.append(qm)
        return qm

    def log_journal(self) -> LogJournal:
        """A recovery log of QM1 on an ordinary disk (the tmp directory)."""
        streams = {
            s: LogStream(self.tmp / "log" / s, name=f"{s}.LOG", structure=s) for s in STRUCTURES
        }
        journal = LogJournal("QM1", streams)
        self.journals.append(journal)
        return journal

    def refused_at(self, request: str, *, then_back: bool) -> None:
        """At QM1's next ``request`` to the administrative structure, the server refuses
        every request; ``then_back``: it takes them again at the request after that."""

        def back() -> None:
            allow_requests(self.server, True)

        def out() -> None:
            allow_requests(self.server, False)
            if then_back:
                self.hook.arm(ANY, ANY, True, back)

        self.hook.arm(request, ADMIN, True, out)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            allow_requests(self.server, True)
        for qm in self.managers:
            with contextlib.suppress(Exception):
                qm.close()
        for journal in self.journals:
            with contextlib.suppress(Exception):
                journal.close()  # type: ignore[attr-defined]
        self.facility.close()


@pytest.fixture
def group(redis_servers: Callable[..., RedisServer], tmp_path: Path) -> Iterator[Group]:
    server = redis_servers()
    found = Group(server, f"{server.url}?retry=2", tmp_path)
    try:
        yield found
    finally:
        found.close()


def setup_queues(qm: QueueManager) -> None:
    for name in ("QA", "QB", "QC", "QR"):
        qm.define_queue(name, structure=APP)
    qm.open("QA").put(b"a-old", persistent=True)
    qm.open("QC").put(b"c-old", persistent=True)


def unit(qm: QueueManager) -> UnitOfWork:
    """Puts to QA and QB, a get from QC: a unit with descriptors."""
    uow = qm.unit_of_work()
    qm.open("QA").put(b"a-new", persistent=True, uow=uow)
    qm.open("QB").put(b"b-new", persistent=True, uow=uow)
    assert qm.open("QC").get(uow=uow).body == b"c-old"
    return uow


def counts(qm: QueueManager) -> dict[str, list[tuple[bytes, int]]]:
    """Every message of QA, QB and QC, gotten: body and backout count."""
    return {q: [(m.body, m.backout_count) for m in drain(qm, q)] for q in ("QA", "QB", "QC")}


BACKED_OUT = {"QA": [(b"a-old", 0)], "QB": [], "QC": [(b"c-old", 1)]}
COMMITTED = {"QA": [(b"a-old", 0), (b"a-new", 0)], "QB": [(b"b-new", 0)], "QC": []}


def the_thread_goes_on(qm: QueueManager) -> None:
    """A new unit of work on this thread works (UOW_IN_PROGRESS, 2128, before)."""
    with qm.unit_of_work() as retry:
        qm.open("QR").put(b"retried", persistent=True, uow=retry)
    assert [m.body for m in drain(qm, "QR")] == [b"retried"]


# -- the server refusing the status update -------------------------------------------------


def test_in_commit_refused_without_a_logged_decision_backs_out(group: Group) -> None:
    """No log: the decision is durable only in "in commit", which the server refuses.
    (A put to a queue of a second structure as well: an unlogged unit of one structure
    commits in one request, without descriptors.)"""
    qm = group.start()
    setup_queues(qm)
    qm.define_queue("QX", structure=ADMIN)
    uow = unit(qm)
    qm.open("QX").put(b"x-new", persistent=True, uow=uow)
    group.refused_at("update", then_back=True)
    with pytest.raises(SharedqError) as caught:
        uow.commit()
    the_thread_goes_on(qm)
    assert uow.state is UowState.ENDED
    assert isinstance(caught.value, BackedOut) and caught.value.reason_code == 2003
    assert descriptor_count(qm) == 0 and get_list(qm, APP) == []
    assert counts(qm) == BACKED_OUT and drain(qm, "QX") == [] and put_list(qm, "QX") == []


def test_in_commit_refused_after_the_log_decided_is_pending_until_restart(group: Group) -> None:
    qm = group.start(journal=group.log_journal())
    setup_queues(qm)
    uow = unit(qm)
    group.refused_at("update", then_back=False)
    with pytest.raises(SharedqError) as caught:
        uow.commit()
    allow_requests(group.server, True)
    the_thread_goes_on(qm)
    assert uow.state is UowState.ENDED
    assert isinstance(caught.value, OutcomePending)
    assert caught.value.reason is MQReason.OUTCOME_PENDING and caught.value.reason_code == 2124
    # Never backed out; left as it was, for the restart.
    assert put_list(qm, "QB") == [("U", b"b-new")] and get_list(qm, APP) == [b"c-old"]
    qm.close()
    group.journals[-1].close()  # type: ignore[attr-defined]
    restarted = group.start(journal=group.log_journal())
    assert restarted.restart_report.committed == 1
    assert counts(restarted) == COMMITTED
    assert descriptor_count(restarted) == 0


@pytest.mark.parametrize("outcome", ["commit", "backout"])
def test_a_prepared_unit_whose_outcome_is_refused_stays_in_doubt(
    group: Group, outcome: str
) -> None:
    """The coordinator's outcome cannot be recorded: never carried out half-way, the
    unit is in doubt again at the restart, for the coordinator to resolve."""
    qm = group.start()
    setup_queues(qm)
    uow = unit(qm)
    uow.prepare()
    group.refused_at("update", then_back=False)
    with pytest.raises(SharedqError) as caught:
        uow.commit() if outcome == "commit" else uow.backout()
    allow_requests(group.server, True)
    the_thread_goes_on(qm)
    assert uow.state is UowState.ENDED
    assert isinstance(caught.value, OutcomePending) and caught.value.reason_code == 2124
    uow_id = uow.uow_id
    qm.close()
    restarted = group.start()
    assert [u.uow_id for u in restarted.indoubt()] == [uow_id]
    restarted.resolve(uow_id, commit=outcome == "commit")
    assert counts(restarted) == (COMMITTED if outcome == "commit" else BACKED_OUT)
    assert descriptor_count(restarted) == 0


# -- the server killed mid-commit ----------------------------------------------------------


@pytest.mark.parametrize(
    ("point", "expected"),
    [(("write", ADMIN), BACKED_OUT), (("move_entries", APP), COMMITTED)],
    ids=["before-the-descriptors", "after-in-commit"],
)
def test_a_server_killed_mid_commit(
    group: Group, point: tuple[str, str], expected: dict[str, list[tuple[bytes, int]]]
) -> None:
    """Killed as the commit writes its descriptors: backed out.  Killed once "in
    commit" is logged: pending, and completed when the manager reconnects."""
    settings = RecoverySettings(group.tmp / "recovery", poll_seconds=0.05, max_wait_seconds=30)
    qm = group.start(recovery=settings)
    setup_queues(qm)
    uow = unit(qm)
    group.hook.arm(*point, True, group.server.kill)
    with pytest.raises(SharedqError) as caught:
        uow.commit()
    retry = qm.unit_of_work()  # at once, even with the server gone
    assert uow.state is UowState.ENDED
    if expected is BACKED_OUT:
        assert isinstance(caught.value, BackedOut) and caught.value.reason_code == 2003
    else:
        assert isinstance(caught.value, OutcomePending) and caught.value.reason_code == 2124
    group.server.start()  # empty: every structure is lost
    qm.reconnect()
    with pytest.raises(SharedqError):  # the unit begun before the loss ended with it
        retry.commit()
    the_thread_goes_on(qm)
    assert counts(qm) == expected
    assert descriptor_count(qm) == 0 and get_list(qm, APP) == []


def test_a_server_killed_mid_backout(group: Group) -> None:
    """Killed after the backout's descriptors ("in abort"): the unit ends, the
    structure's error is raised, and the reconnect finishes the backout."""
    settings = RecoverySettings(group.tmp / "recovery", poll_seconds=0.05, max_wait_seconds=30)
    qm = group.start(recovery=settings)
    setup_queues(qm)
    uow = unit(qm)
    group.hook.arm("delete_entries", APP, True, group.server.kill)  # the puts' delete
    with pytest.raises(SharedqError) as caught:
        uow.backout()
    qm.unit_of_work().backout()  # at once, even with the server gone
    assert uow.state is UowState.ENDED
    assert caught.value.reason is MQReason.CF_STRUC_FAILED
    group.server.start()
    qm.reconnect()
    the_thread_goes_on(qm)
    assert counts(qm) == BACKED_OUT
    assert descriptor_count(qm) == 0 and get_list(qm, APP) == []
