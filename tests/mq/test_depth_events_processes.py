"""Queue depth events with managers in separate processes on Redis (QD-T3..QD-T8),
and a coordinator killed with SIGKILL between its toggle and its broadcast.

Each manager under test is a process (``python -m tests.mq.depth_event_worker``) on a
private Redis server, as managers on other hosts would be: its event messages are
written by its own process, woken by the structure (its responder sleeps in Redis's
blocking read).  This process has a manager of its own, ``QM9``, with PERFMEV
disabled (it issues nothing and is asked for nothing): it defines the queues, reads
``SYSTEM.ADMIN.PERFM.EVENT`` and recovers a killed coordinator.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sharedq.cf import CouplingFacility, UserState
from sharedq.cf.redis import RedisFacility
from sharedq.clock import retry_until
from sharedq.mq import (
    EVENT_QUEUE,
    DepthEvent,
    DepthEvents,
    NoMessageAvailable,
    QueueManager,
    read_depth_event,
    structure_params,
)
from sharedq.mq.event_broadcast import unanswered
from sharedq.testing.redis_server import RedisServer
from tests.mq.depth_event_worker import ADMIN, APP

ROOT = Path(__file__).resolve().parents[2]
#: Seconds a worker's connections live without renewal: how long a death takes to see.
LEASE = 1.0
EXPECT_S = 30.0


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with RedisServer() as started:
        yield started


@pytest.fixture
def facility(server: RedisServer) -> Iterator[CouplingFacility]:
    server.flush()
    with RedisFacility.from_url(server.url) as opened:
        opened.create(structure_params(ADMIN, queues=16, managers=10, messages=2000))
        opened.create(structure_params(APP, queues=16, managers=10, messages=2000))
        yield opened


class Worker:
    """A manager process, driven line by line."""

    def __init__(self, server: RedisServer, qm_id: int, *options: str) -> None:
        self.name = f"QM{qm_id}"
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.mq.depth_event_worker",
                *("--facility", f"{server.url}?lease={LEASE}"),
                *("--name", self.name, "--id", str(qm_id)),
                *options,
            ],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.line() == "ready"

    def line(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def send(self, command: str) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.line()

    def do(self, command: str) -> None:
        assert self.send(command) == "ok", f"{self.name}: {command} failed"

    def exit(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.write("exit\n")
            self.process.stdin.flush()
            assert self.process.wait(EXPECT_S) == 0


Start = Callable[..., Worker]


@pytest.fixture
def start(server: RedisServer) -> Iterator[Start]:
    started: list[Worker] = []

    def make(qm_id: int, *, perfmev: bool = True, kill_after_toggle: bool = False) -> Worker:
        options = ["--perfmev"] if perfmev else []
        if kill_after_toggle:
            options.append("--kill-after-toggle")
        worker = Worker(server, qm_id, *options)
        started.append(worker)
        return worker

    yield make
    for worker in started:
        if worker.process.poll() is None:
            worker.process.kill()
        worker.process.wait()


@pytest.fixture
def observer(facility: CouplingFacility) -> Iterator[QueueManager]:
    with QueueManager(facility, "QM9", 9, admin=ADMIN, structures=[APP]) as qm:
        qm.define_queue(
            "SQ", structure=APP, max_depth=100, depth_events=DepthEvents(high_enabled=True)
        )
        yield qm


def _events(qm: QueueManager, count: int) -> dict[str, DepthEvent]:
    """The next ``count`` event messages by issuer, then none."""
    queue = qm.open(EVENT_QUEUE)
    found = [read_depth_event(queue.get(wait=EXPECT_S)) for _ in range(count)]
    assert retry_until(lambda: unanswered(qm.admin) == 0, timeout_s=EXPECT_S, first_pause_s=0.01)
    with pytest.raises(NoMessageAvailable):
        queue.get()
    by_qmgr = {event.qmgr: event for event in found}
    assert len(by_qmgr) == count
    assert len({event.correl_id for event in found}) == 1
    return by_qmgr


def _toggled_high(qm: QueueManager) -> bool:
    events = qm.queue_definition("SQ").depth_events
    return (events.high_enabled, events.low_enabled, events.full_enabled) == (False, True, True)


def test_qd_t3_three_processes_three_messages_one_correlid(
    observer: QueueManager, start: Start
) -> None:
    qm1, qm2, qm3 = start(1), start(2), start(3)
    qm1.do("put SQ 30")
    qm3.do("put SQ 20")
    qm2.do("put SQ 30")  # depth 80 of 100
    found = _events(observer, 3)
    assert set(found) == {"QM1", "QM2", "QM3"}
    assert {e.coordinator for e in found.values()} == {"QM2"}
    assert [found[q].enqueues for q in ("QM1", "QM2", "QM3")] == [30, 30, 20]
    assert _toggled_high(observer)


def test_qd_t4_an_idle_process_issues_a_null_message(observer: QueueManager, start: Start) -> None:
    start(1), start(3)
    start(2).do("put SQ 80")
    found = _events(observer, 3)
    assert found["QM3"].null and found["QM1"].null and found["QM2"].enqueues == 80


def test_qd_t5_a_disabled_process_issues_nothing(observer: QueueManager, start: Start) -> None:
    start(1), start(3, perfmev=False)
    start(2).do("put SQ 80")
    assert set(_events(observer, 2)) == {"QM1", "QM2"}


def test_qd_t6_a_process_that_is_down_gets_nothing(observer: QueueManager, start: Start) -> None:
    start(1)
    start(3).exit()
    start(2).do("put SQ 80")
    assert set(_events(observer, 2)) == {"QM1", "QM2"}


def test_qd_t7_a_disabled_coordinator_broadcasts_all_the_same(
    observer: QueueManager, start
) -> None:
    start(1), start(3)
    start(2, perfmev=False).do("put SQ 80")
    found = _events(observer, 2)
    assert set(found) == {"QM1", "QM3"}
    assert {e.coordinator for e in found.values()} == {"QM2"}
    assert _toggled_high(observer)


def test_qd_t8_two_processes_putting_at_once_make_one_event(
    observer: QueueManager, start: Start
) -> None:
    qm1, qm2, qm3 = start(1), start(2), start(3)
    for worker in (qm1, qm2):
        assert worker.process.stdin is not None
        worker.process.stdin.write("put SQ 45\n")  # both at once: 90 in all
        worker.process.stdin.flush()
    for worker in (qm1, qm2):
        assert worker.line() == "ok"
    found = _events(observer, 3)
    assert len({e.coordinator for e in found.values()}) == 1
    assert {e.coordinator for e in found.values()} <= {"QM1", "QM2"}
    assert found["QM1"].enqueues + found["QM2"].enqueues <= 90
    del qm3


def test_a_coordinator_killed_after_its_toggle_is_finished_by_its_recoverer(
    observer: QueueManager, start
) -> None:
    """QM2 is SIGKILLed right after its toggle: no message of its own, no broadcast.
    The toggle and the pending event are in the LHQC; QM9, recovering QM2 once its
    lease lapsed, broadcasts with QM2's CorrelId: QM1 and QM3 issue their messages."""
    start(1), start(3)
    victim = start(2, kill_after_toggle=True)
    assert victim.send("put SQ 80") == ""  # killed: no answer
    assert victim.process.wait(EXPECT_S) == -signal.SIGKILL
    pending = observer.queue_definition("SQ").pending_event
    assert pending is not None and pending.coordinator == "QM2"
    assert _toggled_high(observer)

    def failed() -> bool:  # its connections' leases lapsed: the manager's, the responder's
        users = {u.name: u.state for u in observer.admin.users()}
        return users.get("QM2") is users.get("QM2@EVENTS") is UserState.FAILED

    assert retry_until(failed, timeout_s=EXPECT_S, first_pause_s=0.05)
    observer.recover_failed()
    found = _events(observer, 2)
    assert set(found) == {"QM1", "QM3"}
    assert {e.correl_id for e in found.values()} == {pending.correl_id}
    assert {e.coordinator for e in found.values()} == {"QM2"}
    assert observer.queue_definition("SQ").pending_event is None
    assert {u.name for u in observer.admin.users()}.isdisjoint({"QM2", "QM2@EVENTS"})
