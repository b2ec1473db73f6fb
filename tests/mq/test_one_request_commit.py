"""A unit of work's commit in one request (``sharedq.mq.onecommit``), on both backends.

An active unit of one structure whose commit actions are puts (one bulk move), gets
(one bulk delete) or both (one ``move_and_delete_entries``: request/reply), within one
request's budget, commits with that request and no descriptors when its manager has no
recovery log; every other unit keeps the descriptor protocol.  Requests are counted
with a fault hook (one call per structure request), never timed.  The crash tests stop
the manager dead (in-process on memory, SIGKILL of a manager process on Redis) just
before and just after the one request: peer recovery, or the manager's restart, then
finds the unit all backed out or all committed.

This file is also the victim's program: ``python -m tests.mq.test_one_request_commit
URL KIND POINT`` runs one unit (``puts``, ``gets`` or ``mixed``) and kills itself with
SIGKILL ``before`` or ``after`` its commit request.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sharedq.cf import ById, CouplingFacility, open_facility
from sharedq.mq import (
    ConfigurationError,
    MQReason,
    OutcomePending,
    QueueManager,
    StorageFull,
    UnitOfWork,
    structure_params,
)
from sharedq.recovery import RecoverySettings
from sharedq.testing import SimulatedFailure
from sharedq.testing.redis_server import RedisServer
from sharedq.testing.waits import wait_asleep_in_wait_events
from tests.mq.conftest import ADMIN, APP, MakeManager
from tests.mq.crash_harness import wait_until_failed
from tests.mq.faults import CrashAt
from tests.mq.helpers import committed, descriptor_count, drain, get_list, put_list
from tests.mq.hook_at import ANY, At

ROOT = Path(__file__).resolve().parents[2]
#: Seconds a victim process's connections live without renewal (Redis).
LEASE = 1.0


class Counting:
    """A fault hook that records the structure requests a manager makes."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []

    def __call__(self, request: str, structure: str, before: bool) -> None:
        if before:
            self.requests.append((request, structure))

    def during(self, work: Callable[[], object]) -> list[str]:
        self.requests.clear()
        work()
        return [request for request, _ in self.requests]

    def to(self, structure: str) -> list[str]:
        return [request for request, where in self.requests if where == structure]


def _bodies(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}{n}".encode() for n in range(count)]


# -- one request ------------------------------------------------------------------------


def test_a_hundred_puts_commit_in_one_request(make_qm: MakeManager) -> None:
    counting = Counting()
    qm1, qm2 = make_qm(1, faults=counting), make_qm(2)
    qm1.define_queue("Q", structure=APP)
    queue = qm1.open("Q")
    bodies = _bodies("p", 100)
    with qm1.unit_of_work() as uow:
        requests = counting.during(lambda: queue.put_many(bodies, persistent=True, uow=uow))
        assert requests == ["write_entries"]
        assert qm2.open("Q").get_many(10) == []  # invisible until commit
        assert counting.during(uow.commit) == ["move_entries"]
    assert committed(qm2, "Q") == bodies
    assert [m.body for m in drain(qm2, "Q")] == bodies
    assert descriptor_count(qm2) == 0


def test_a_hundred_gets_commit_in_one_request(make_qm: MakeManager) -> None:
    counting = Counting()
    qm1, qm2 = make_qm(1), make_qm(2, faults=counting)
    qm1.define_queue("Q", structure=APP)
    bodies = _bodies("g", 100)
    qm1.open("Q").put_many(bodies)
    queue = qm2.open("Q")
    uow = qm2.unit_of_work()
    got: list[bytes] = []
    requests = counting.during(lambda: got.extend(m.body for m in queue.get_many(100, uow=uow)))
    assert requests == ["take_many"] and got == bodies
    assert counting.during(uow.commit) == ["delete_entries"]
    assert queue.depth() == 0 and drain(qm1, "Q") == []
    assert get_list(qm1, APP, of=qm2) == [] and descriptor_count(qm1) == 0


def test_puts_to_several_queues_of_a_structure_commit_in_one_request(
    make_qm: MakeManager,
) -> None:
    counting = Counting()
    qm = make_qm(1, faults=counting)
    for name in ("QA", "QB"):
        qm.define_queue(name, structure=APP)
    qa, qb = qm.open("QA"), qm.open("QB")
    uow = qm.unit_of_work()
    qa.put(b"a-low", priority=1, uow=uow)
    qb.put_many([b"b0", b"b1"], priority=4, uow=uow)
    qa.put(b"a-high", priority=8, uow=uow)
    qb.put(b"b-high", priority=9, uow=uow)
    assert counting.during(uow.commit) == ["move_entries"]
    assert [(m.body, m.priority) for m in drain(qm, "QA")] == [(b"a-high", 8), (b"a-low", 1)]
    assert [m.body for m in drain(qm, "QB")] == [b"b-high", b"b0", b"b1"]


def test_its_own_puts_it_got_are_deleted_in_one_request(make_qm: MakeManager) -> None:
    counting = Counting()
    qm = make_qm(1, faults=counting)
    qm.define_queue("Q", structure=APP)
    queue = qm.open("Q")
    uow = qm.unit_of_work()
    queue.put_many(_bodies("own", 20), uow=uow)
    assert [m.body for m in queue.get_many(20, uow=uow)] == _bodies("own", 20)
    assert counting.during(uow.commit) == ["delete_entries"]
    assert put_list(qm, "Q") == [] and queue.depth() == 0


def test_a_backed_out_unit_still_leaves_nothing(make_qm: MakeManager) -> None:
    qm = make_qm(1)
    qm.define_queue("Q", structure=APP)
    queue = qm.open("Q")
    queue.put_many(_bodies("keep", 5))
    uow = qm.unit_of_work()
    queue.put_many(_bodies("gone", 5), uow=uow)
    uow.backout()
    uow = qm.unit_of_work()
    assert len(queue.get_many(5, uow=uow)) == 5
    uow.backout()
    assert [(m.body, m.backout_count) for m in drain(qm, "Q")] == [
        (body, 1) for body in _bodies("keep", 5)
    ]


# -- puts and gets in one request: request/reply ------------------------------------------


def test_a_unit_of_puts_and_gets_commits_in_one_request(make_qm: MakeManager) -> None:
    counting = Counting()
    qm = make_qm(1, faults=counting)
    qm.define_queue("Q", structure=APP)
    queue = qm.open("Q")
    queue.put(b"old")
    uow = qm.unit_of_work()
    assert queue.get(uow=uow).body == b"old"
    queue.put_many([b"n1", b"n2"], uow=uow)
    assert counting.during(uow.commit) == ["move_and_delete_entries"]
    assert counting.to(ADMIN) == []  # no descriptors
    assert [m.body for m in drain(qm, "Q")] == [b"n1", b"n2"] and descriptor_count(qm) == 0


def test_request_reply_commits_in_one_request_and_backs_out_whole(make_qm: MakeManager) -> None:
    """The canonical unit: get a request, put its reply, commit.  The commit is one
    request; the reply is then visible to the requester and the request gone.  Backed
    out instead, the request is back (backout count 1) and no reply exists."""
    counting = Counting()
    requester, server = make_qm(1), make_qm(2, faults=counting)
    for name in ("REQ", "REPLY"):
        requester.define_queue(name, structure=APP)
    requester.open("REQ").put_many([b"req1", b"req2"], persistent=True)
    requests, replies = server.open("REQ"), server.open("REPLY")
    uow = server.unit_of_work()
    request = requests.get(uow=uow)
    replies.put(b"reply to " + request.body, persistent=True, uow=uow)
    assert requester.open("REPLY").get_many(10) == []  # invisible until commit
    assert counting.during(uow.commit) == ["move_and_delete_entries"]
    assert [m.body for m in drain(requester, "REPLY")] == [b"reply to req1"]
    assert committed(requester, "REQ") == [b"req2"] and descriptor_count(requester) == 0
    assert get_list(requester, APP, of=server) == []
    uow = server.unit_of_work()
    request = requests.get(uow=uow)
    replies.put(b"reply to " + request.body, uow=uow)
    counting.during(uow.backout)
    assert [(m.body, m.backout_count) for m in drain(requester, "REQ")] == [(b"req2", 1)]
    assert drain(requester, "REPLY") == [] and put_list(requester, "REPLY") == []
    assert get_list(requester, APP, of=server) == [] and descriptor_count(requester) == 0


def test_gets_own_puts_and_replies_of_several_queues_commit_in_one_request(
    make_qm: MakeManager,
) -> None:
    """Puts to two queues, gets of committed messages of two queues and one of the
    unit's own puts: one request, the puts moved and every get deleted."""
    counting = Counting()
    qm = make_qm(1, faults=counting)
    for name in ("QA", "QB"):
        qm.define_queue(name, structure=APP)
    qa, qb = qm.open("QA"), qm.open("QB")
    qa.put_many([b"a0", b"a1"])
    qb.put(b"b0")
    uow = qm.unit_of_work()
    assert qa.get(uow=uow).body == b"a0"
    qb.put_many([b"own", b"b-new"], uow=uow)
    assert qb.get(uow=uow).body == b"b0"  # older than the unit's puts
    assert qb.get(uow=uow).body == b"own"  # its own put, got back
    qa.put(b"a-new", priority=2, uow=uow)
    assert counting.during(uow.commit) == ["move_and_delete_entries"]
    assert [(m.body, m.priority) for m in drain(qm, "QA")] == [(b"a-new", 2), (b"a1", 0)]
    assert [m.body for m in drain(qm, "QB")] == [b"b-new"]
    uow = qm.unit_of_work()
    qb.put(b"mine", uow=uow)
    assert qb.get(uow=uow).body == b"mine"  # its own put, got back
    qa.put(b"also", uow=uow)
    assert counting.during(uow.commit) == ["move_and_delete_entries"]
    assert put_list(qm, "QB") == [] and [m.body for m in drain(qm, "QA")] == [b"also"]
    assert descriptor_count(qm) == 0


def test_a_waiting_getter_is_woken_by_a_reply_committed_in_one_request(
    make_qm: MakeManager,
) -> None:
    """The reply queue's monitor is told by the one request, as by a bulk move."""
    requester, server = make_qm(1), make_qm(2)
    for name in ("REQ", "REPLY"):
        requester.define_queue(name, structure=APP)
    requester.open("REQ").put(b"req")
    got: list[bytes] = []
    waiter = threading.Thread(target=lambda: got.append(requester.open("REPLY").get(wait=30).body))
    waiter.start()
    wait_asleep_in_wait_events(waiter)
    uow = server.unit_of_work()
    server.open("REPLY").put(b"reply", uow=uow)
    server.open("REQ").get(uow=uow)
    server.open("REPLY").put(b"more", uow=uow)
    uow.commit()
    waiter.join(30)
    assert got == [b"reply"]


def test_request_reply_commits_with_the_administrative_structure_full(
    make_qm: MakeManager,
) -> None:
    """No descriptors, so no room needed for them: a server drains its requests and
    replies even when the administrative structure is full."""
    qm = make_qm(1)
    for name in ("REQ", "REPLY"):
        qm.define_queue(name, structure=APP)
    qm.define_queue("FILLER", max_depth=100_000)  # in the administrative structure
    qm.open("REQ").put(b"req")
    filler = qm.open("FILLER")
    with pytest.raises(StorageFull):
        while True:
            filler.put(b"x" * 200)
    uow = qm.unit_of_work()
    assert qm.open("REQ").get(uow=uow).body == b"req"
    qm.open("REPLY").put_many([b"reply", b"more"], uow=uow)
    uow.commit()
    assert committed(qm, "REPLY") == [b"reply", b"more"] and committed(qm, "REQ") == []


def test_a_mixed_request_part_done_finishes_with_descriptors(
    make_qm: MakeManager, facility: CouplingFacility
) -> None:
    """A put of a request/reply unit moved away under it: the one request stops there,
    before its deletes; the rest (the other put, the get) is committed from descriptors
    "in commit"."""
    counting = Counting()
    qm = make_qm(1, faults=counting)
    for name in ("Q", "ASIDE"):
        qm.define_queue(name, structure=APP)
    queue = qm.open("Q")
    queue.put(b"request")
    uow = qm.unit_of_work()
    assert queue.get(uow=uow).body == b"request"
    queue.put_many([b"r1", b"r2", b"r3"], uow=uow)
    view = qm.view()
    where, aside = view.queue("Q"), view.queue("ASIDE")
    moved = [e for e in view.entries(APP, where.put_list) if e.data.endswith(b"r2")]
    with facility.connect(APP, "MOVER") as mover:
        mover.move(ById(moved[0].entry_id, where.put_list), aside.put_list)
    counting.during(uow.commit)
    assert counting.to(APP) == ["move_and_delete_entries", "move_entries", "delete_entries"]
    assert counting.to(ADMIN) == ["write", "delete_entries"]
    assert committed(qm, "Q") == [b"r1", b"r3"] and get_list(qm, APP) == []
    assert descriptor_count(qm) == 0


# -- the descriptor path kept -----------------------------------------------------------


def test_a_unit_over_the_budget_commits_with_descriptors(make_qm: MakeManager) -> None:
    counting = Counting()
    qm = make_qm(1, faults=counting)
    qm.define_queue("Q", structure=APP)
    queue = qm.open("Q")
    bodies = _bodies("big", 300)
    uow = qm.unit_of_work()
    queue.put_many(bodies, uow=uow)
    counting.during(uow.commit)
    assert "write" in counting.to(ADMIN) and "update" in counting.to(ADMIN)
    assert "move_entries" in counting.to(APP)  # one or more (the backend's budget)
    assert [m.body for m in drain(qm, "Q")] == bodies and descriptor_count(qm) == 0


def test_a_logged_manager_commits_with_descriptors(make_qm: MakeManager, tmp_path: Path) -> None:
    counting = Counting()
    qm = make_qm(1, faults=counting, recovery=RecoverySettings(tmp_path / "recovery"))
    qm.define_queue("Q", structure=APP)
    queue = qm.open("Q")
    uow = qm.unit_of_work()
    queue.put_many(_bodies("log", 10), uow=uow)
    counting.during(uow.commit)
    assert "write" in counting.to(ADMIN) and "update" in counting.to(ADMIN)
    assert [m.body for m in drain(qm, "Q")] == _bodies("log", 10)


def test_a_request_that_comes_back_part_done_finishes_with_descriptors(
    make_qm: MakeManager, facility: CouplingFacility
) -> None:
    """One put of the unit was moved away under it: the one request stops there
    (``ListMismatch``), the commit stands, and the rest is committed from descriptors
    "in commit"; the entry moved away is left where it is, as a redriven bulk move
    leaves it."""
    counting = Counting()
    qm = make_qm(1, faults=counting)
    for name in ("Q", "ASIDE"):
        qm.define_queue(name, structure=APP)
    queue = qm.open("Q")
    bodies = _bodies("p", 100)
    uow = qm.unit_of_work()
    queue.put_many(bodies, uow=uow)
    view = qm.view()
    where, aside = view.queue("Q"), view.queue("ASIDE")
    entries = list(view.entries(APP, where.put_list))
    moved = entries[len(entries) // 2]
    with facility.connect(APP, "MOVER") as mover:
        mover.move(ById(moved.entry_id, where.put_list), aside.put_list)
    counting.during(uow.commit)
    assert counting.to(APP) == ["move_entries", "move_entries"]
    assert counting.to(ADMIN) == ["write", "delete_entries"]
    expected = [body for body in bodies if not moved.data.endswith(body)]
    assert len(expected) == 99
    assert committed(qm, "Q") == expected and descriptor_count(qm) == 0
    assert [kind for kind, _ in put_list(qm, "ASIDE")] == ["U"]  # not committed


def _allow(server: RedisServer, allowed: bool) -> None:
    """Let the server run sharedq's requests (``FCALL``) for its default user, or not."""
    server.command("ACL", "SETUSER", "default", "+fcall" if allowed else "-fcall")


@pytest.mark.parametrize("then_back", [True, False], ids=["then-back", "refused-after"])
def test_a_part_done_request_whose_descriptors_are_refused(
    redis_servers: Callable[..., RedisServer], then_back: bool
) -> None:
    """The one request came back part done, and the server refuses the descriptors for
    the rest (an ACL taking ``FCALL`` away): the rest is carried out directly.  Refused
    that too, the unit ends with ``OutcomePending``: what the request did stands, and
    the manager's restart backs out the rest, left in flight."""
    server = redis_servers()
    facility = open_facility(f"{server.url}?retry=2")
    hook = At()
    try:
        for name in (ADMIN, APP):
            facility.create(structure_params(name, queues=8, managers=4, messages=2000))
        qm = QueueManager(facility, "QM1", 1, admin=ADMIN, structures=[APP], faults=hook)
        for name in ("Q", "ASIDE"):
            qm.define_queue(name, structure=APP)
        bodies = _bodies("p", 100)
        uow = qm.unit_of_work()
        qm.open("Q").put_many(bodies, uow=uow)
        view = qm.view()
        where, aside = view.queue("Q"), view.queue("ASIDE")
        moved = list(view.entries(APP, where.put_list))[40]
        with facility.connect(APP, "MOVER") as mover:
            mover.move(ById(moved.entry_id, where.put_list), aside.put_list)

        def refuse() -> None:
            _allow(server, False)
            if then_back:
                hook.arm(ANY, ANY, True, lambda: _allow(server, True))

        hook.arm("write", ADMIN, True, refuse)
        if then_back:
            uow.commit()
            assert committed(qm, "Q") == bodies[:40] + bodies[41:]
            assert descriptor_count(qm) == 0
            return
        with pytest.raises(OutcomePending):
            uow.commit()
        _allow(server, True)
        assert committed(qm, "Q") == bodies[:40]  # the request's part stands
        qm.close()
        with QueueManager(facility, "QM1", 1, admin=ADMIN, structures=[APP]) as restarted:
            assert committed(restarted, "Q") == bodies[:40]
            assert put_list(restarted, "Q") == [("C", body) for body in bodies[:40]]
            assert put_list(restarted, "ASIDE") == [] and descriptor_count(restarted) == 0
    finally:
        with contextlib.suppress(Exception):
            _allow(server, True)
        facility.close()


# -- stopped dead just before and just after the one request -----------------------------


def _setup(facility: CouplingFacility) -> None:
    for name in (ADMIN, APP):
        if not facility.exists(name):
            facility.create(structure_params(name, queues=8, managers=4, messages=2000))
    with QueueManager(facility, "SETUP", 9, admin=ADMIN, structures=[APP]) as qm:
        for name in ("QA", "QB"):
            qm.define_queue(name, structure=APP)
        qm.open("QA").put_many(_bodies("old", 60), persistent=True)


def _unit(qm: QueueManager, kind: str) -> UnitOfWork:
    """``puts``: 50 to QA and 50 to QB; ``gets``: QA's 60 messages; ``mixed`` (request
    and reply): QA's 60 messages got and 50 replies put to QB."""
    uow = qm.unit_of_work()
    if kind in ("gets", "mixed"):
        assert len(qm.open("QA").get_many(60, uow=uow)) == 60
    if kind == "puts":
        qm.open("QA").put_many(_bodies("newa", 50), persistent=True, uow=uow)
    if kind in ("puts", "mixed"):
        qm.open("QB").put_many(_bodies("newb", 50), persistent=True, uow=uow)
    return uow


#: The one request that commits each kind of unit.
_REQUEST = {"puts": "move_entries", "gets": "delete_entries", "mixed": "move_and_delete_entries"}


def _at_commit(kind: str, point: str) -> CrashAt:
    request = _REQUEST[kind]
    before = point == "before"
    return CrashAt(1, when=lambda r, s, b: r == request and s == APP and b == before)


def _check(qm: QueueManager, kind: str, point: str) -> None:
    """All backed out (killed before the request) or all committed (after it)."""
    old = _bodies("old", 60)
    contents = {q: [(m.body, m.backout_count) for m in drain(qm, q)] for q in ("QA", "QB")}
    new_b = [(b, 0) for b in _bodies("newb", 50)]
    if point == "before":
        count = 0 if kind == "puts" else 1
        assert contents == {"QA": [(b, count) for b in old], "QB": []}
    elif kind == "puts":
        new_a = [(b, 0) for b in _bodies("newa", 50)]
        assert contents == {"QA": [(b, 0) for b in old] + new_a, "QB": new_b}
    elif kind == "mixed":
        assert contents == {"QA": [], "QB": new_b}
    else:
        assert contents == {"QA": [], "QB": []}
    assert descriptor_count(qm) == 0
    for name in ("QA", "QB"):
        assert [kind for kind, _ in put_list(qm, name)] == []


@pytest.mark.parametrize("point", ["before", "after"])
@pytest.mark.parametrize("kind", ["puts", "gets", "mixed"])
def test_stopped_dead_at_the_one_request_in_process(kind: str, point: str) -> None:
    from sharedq.cf.memory import MemoryFacility

    facility = MemoryFacility()
    _setup(facility)
    crash = _at_commit(kind, point)
    victim = QueueManager(facility, "VICTIM", 1, admin=ADMIN, structures=[APP], faults=crash)
    uow = _unit(victim, kind)
    with pytest.raises(SimulatedFailure):
        uow.commit()
    assert crash.fired and crash.trace[0][2] is (point == "before")
    with QueueManager(facility, "PEER", 2, admin=ADMIN, structures=[APP]) as peer:
        assert descriptor_count(peer) == 0  # the one request's path: none written
        peer.declare_failed("VICTIM")
        peer.recover("VICTIM")
        assert get_list(peer, APP, of=victim) == []
        _check(peer, kind, point)


def _victim(url: str, kind: str, point: str) -> int:
    """The victim process: one unit, SIGKILL before or after its commit request."""
    crash = _at_commit(kind, point)
    crash.kill = True
    facility = open_facility(url)
    qm = QueueManager(facility, "VICTIM", 1, admin=ADMIN, structures=[APP], faults=crash)
    _unit(qm, kind).commit()
    return 1  # not reached: killed at the commit


def _restarted(facility: CouplingFacility) -> QueueManager:
    """The victim's next incarnation, once the dead one's leases have lapsed."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return QueueManager(facility, "VICTIM", 1, admin=ADMIN, structures=[APP])
        except ConfigurationError as error:
            if error.reason is not MQReason.Q_MGR_NAME_ERROR or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.mark.parametrize("recoverer", ["peer", "restart"])
@pytest.mark.parametrize("point", ["before", "after"])
@pytest.mark.parametrize("kind", ["puts", "gets", "mixed"])
def test_a_manager_process_killed_at_the_one_request(
    redis_servers: Callable[..., RedisServer], kind: str, point: str, recoverer: str
) -> None:
    """SIGKILL of the victim's process; its connections fail when their leases lapse,
    and a peer recovers it, or its next incarnation restarts and recovers itself."""
    server = redis_servers()
    facility = open_facility(server.url)
    try:
        _setup(facility)
        victim = subprocess.run(
            [
                sys.executable,
                "-m",
                "tests.mq.test_one_request_commit",
                f"{server.url}?lease={LEASE}",
                kind,
                point,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert victim.returncode == -9, victim.stderr
        if recoverer == "peer":
            with QueueManager(facility, "PEER", 2, admin=ADMIN, structures=[APP]) as peer:
                wait_until_failed(peer, "VICTIM")
                assert descriptor_count(peer) == 0  # the one request's path: none written
                peer.recover("VICTIM")
                _check(peer, kind, point)
        else:
            with _restarted(facility) as restarted:
                assert get_list(restarted, APP) == []
                _check(restarted, kind, point)
    finally:
        with contextlib.suppress(Exception):
            facility.close()


if __name__ == "__main__":
    sys.exit(_victim(*sys.argv[1:4]))
