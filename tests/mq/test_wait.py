"""Get with wait (§5.10, S4-S6): woken by a commit or backout, not by polling."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from sharedq.cf import CouplingFacility, ListStructure
from sharedq.clock import retry_until
from sharedq.mq import ID_LENGTH, IndexType, Inhibited, Message, MQReason, NoMessageAvailable
from sharedq.testing.waits import wait_asleep_in_wait_events
from tests.mq.conftest import APP, MakeManager

#: Seconds a test waits for a signal before it fails (it comes in milliseconds).
SIGNAL_TIMEOUT = 10


class Waiter(threading.Thread):
    """Runs one get in a thread and keeps what it returned or raised."""

    def __init__(self, get: Callable[[], Message]) -> None:
        super().__init__(daemon=True)
        self._get = get
        self.result: Message | BaseException | None = None
        self.elapsed = 0.0

    def run(self) -> None:
        started = time.monotonic()
        try:
            self.result = self._get()
        except BaseException as error:  # handed to the test
            self.result = error
        self.elapsed = time.monotonic() - started


class Counting:
    """A fault hook that only counts the requests a manager makes."""

    def __init__(self) -> None:
        self.requests: list[str] = []

    def __call__(self, request: str, structure: str, before: bool) -> None:
        if before:
            self.requests.append(request)


class Sleeping:
    """A fault hook that tells when a thread of its manager goes to sleep: it calls
    ``wait_events`` once its get found nothing and its monitor is registered, so a
    change made after :meth:`wait` returned can only reach it as an event."""

    def __init__(self) -> None:
        self.asleep = threading.Event()
        self.sleeps = 0

    def __call__(self, request: str, structure: str, before: bool) -> None:
        if request == "wait_events" and before:
            self.sleeps += 1
            self.asleep.set()

    def wait(self) -> None:
        assert self.asleep.wait(SIGNAL_TIMEOUT), "the waiter never went to sleep"


@pytest.fixture
def observer(facility: CouplingFacility) -> Iterator[ListStructure]:
    """A connection of the test's own to APP: what the structure holds and queues."""
    conn = facility.connect(APP, "OBSERVER")
    yield conn
    conn.disconnect()


def test_commit_wakes_a_waiting_get(make_qm: MakeManager) -> None:
    """S4: the waiter is woken by another manager's commit."""
    sleeping = Sleeping()
    qm1, qm2 = make_qm(1), make_qm(2, faults=sleeping)
    qm1.define_queue("Q", structure=APP)
    waiter = Waiter(lambda: qm2.open("Q").get(wait=10))
    waiter.start()
    sleeping.wait()
    with qm1.unit_of_work() as uow:
        qm1.open("Q").put(b"wake", uow=uow)
    waiter.join(5)
    assert isinstance(waiter.result, Message) and waiter.result.body == b"wake"
    assert waiter.elapsed < 5


def test_uncommitted_put_does_not_wake(make_qm: MakeManager) -> None:
    qm1, qm2 = make_qm(1), make_qm(2)
    qm1.define_queue("Q", structure=APP)
    waiter = Waiter(lambda: qm2.open("Q").get(wait=0.4))
    waiter.start()
    uow = qm1.unit_of_work()
    qm1.open("Q").put(b"pending", uow=uow)
    waiter.join(5)
    assert isinstance(waiter.result, NoMessageAvailable)
    assert waiter.elapsed >= 0.35
    uow.backout()


def test_backout_of_a_get_wakes_a_waiter(make_qm: MakeManager) -> None:
    sleeping = Sleeping()
    qm1, qm2 = make_qm(1), make_qm(2, faults=sleeping)
    qm1.define_queue("Q", structure=APP)
    qm1.open("Q").put(b"only")
    uow = qm1.unit_of_work()
    qm1.open("Q").get(uow=uow)
    waiter = Waiter(lambda: qm2.open("Q").get(wait=10))
    waiter.start()
    sleeping.wait()
    uow.backout()
    waiter.join(5)
    assert isinstance(waiter.result, Message) and waiter.result.backout_count == 1


def test_waiting_does_not_poll(make_qm: MakeManager) -> None:
    """A wait that times out makes a handful of requests, however long it waits: the
    try that registers the monitor as it finds nothing, the sleep, and the try the
    sleep ends with (``take`` with ``wait``: one request on a plain connection, two
    under a fault hook, as here).  The monitor stays registered, so the next wait on
    the queue registers nothing."""
    counting = Counting()
    qm = make_qm(1, faults=counting)
    qm.define_queue("Q", structure=APP)
    queue = qm.open("Q")
    counting.requests.clear()
    with pytest.raises(NoMessageAvailable):
        queue.get(wait=0.5)
    assert counting.requests == ["take", "wait_events", "take"]
    counting.requests.clear()
    with pytest.raises(NoMessageAvailable):
        queue.get(wait=0.2)
    assert counting.requests == ["take", "wait_events", "take"]


def test_a_waiting_get_is_three_requests_a_message(
    make_qm: MakeManager, observer: ListStructure
) -> None:
    """A consumer waiting again and again: per message delivered, the try that finds
    nothing (and, the first time only, registers the monitor), the sleep, and the try
    that takes the events and the message.  One monitor for all the waits."""
    counting, sleeping = Counting(), Sleeping()

    def hooks(request: str, structure: str, before: bool) -> None:
        counting(request, structure, before)
        sleeping(request, structure, before)

    qm1, qm2 = make_qm(1), make_qm(2, faults=hooks)
    qm1.define_queue("Q", structure=APP)
    producer, consumer = qm1.open("Q"), qm2.open("Q")
    emcs = observer.statistics().emcs
    for n in range(3):
        counting.requests.clear()
        sleeping.asleep.clear()
        waiter = Waiter(lambda: consumer.get(wait=30))
        waiter.start()
        sleeping.wait()
        producer.put(b"m%d" % n)
        waiter.join(SIGNAL_TIMEOUT)
        assert isinstance(waiter.result, Message) and waiter.result.body == b"m%d" % n
        # The sleep may end once for nothing on Redis (it blocks in slices): each
        # extra wake-up is one more sleep and one more try, never more.
        takes = counting.requests.count("take")
        assert counting.requests == ["take", "wait_events"] * (takes - 1) + ["take"]
        assert observer.statistics().emcs == emcs + 1


def test_indexed_wait_wakes_only_for_its_id(make_qm: MakeManager, observer: ListStructure) -> None:
    """S5: a get by correl id X sleeps through a commit of Y, wakes on a commit of X."""
    sleeping = Sleeping()
    qm1, qm2 = make_qm(1), make_qm(2, faults=sleeping)
    qm1.define_queue("Q", structure=APP, index=IndexType.CORREL_ID)
    # The observer watches what the waiter watches: the put list's entries whose
    # secondary key is correl id X.  Events are queued by the change itself, so what
    # it has not been sent when a put returns, the waiter has not either.
    put_list = qm2.view().queue("Q").put_list
    observer.monitor_sublist(put_list, b"X".ljust(ID_LENGTH, b"\x00"), secondary=True)
    waiter = Waiter(lambda: qm2.open("Q").get(correl_id=b"X", wait=10))
    waiter.start()
    sleeping.wait()
    qm1.open("Q").put(b"for Y", correl_id=b"Y")
    uow = qm1.unit_of_work()
    qm1.open("Q").put(b"for X, uncommitted", correl_id=b"X", uow=uow)
    assert observer.events_nowait() == []  # nothing to wake the waiter: it sleeps on
    assert waiter.result is None and sleeping.sleeps == 1
    uow.commit()
    assert len(observer.events_nowait()) == 1
    waiter.join(5)
    assert isinstance(waiter.result, Message) and waiter.result.body == b"for X, uncommitted"
    assert sleeping.sleeps == 1  # woken once, by the commit of X


def test_commit_between_failed_get_and_monitor_is_not_missed(make_qm: MakeManager) -> None:
    """S6: a message committed just before the monitor starts is found at once."""
    qm2 = make_qm(2)
    qm2.define_queue("Q", structure=APP)
    other = qm2.open("Q")

    def race(request: str, structure: str, before: bool) -> None:
        # The try that finds nothing registers the monitor in the same request (take):
        # the put lands just before it, which is as late as a race can come now.
        if request in ("register_monitor", "take") and before and not raced:
            raced.append(True)
            other.put(b"raced")

    raced: list[bool] = []
    qm1 = make_qm(1, faults=race)
    started = time.monotonic()
    assert qm1.open("Q").get(wait=10).body == b"raced"
    assert time.monotonic() - started < 5


def test_threads_of_one_manager_wait_on_different_queues(
    make_qm: MakeManager, observer: ListStructure
) -> None:
    """One manager's events are shared out to the right waiting threads."""
    qm1, qm2 = make_qm(1), make_qm(2)
    for name in ("QA", "QB", "QC"):
        qm1.define_queue(name, structure=APP)
    waiters = {name: Waiter(lambda n=name: qm2.open(n).get(wait=10)) for name in ("QA", "QB")}
    short = Waiter(lambda: qm2.open("QC").get(wait=0.2))
    monitors = observer.statistics().emcs
    for waiter in waiters.values():
        waiter.start()
    # Each waiter registers its monitor (an EMC of the structure) once its get found
    # nothing; one of them sleeps in wait_events, the other on the dispatcher.
    assert retry_until(
        lambda: observer.statistics().emcs == monitors + 2,
        timeout_s=SIGNAL_TIMEOUT,
        first_pause_s=0.001,
        longest_pause_s=0.05,
    ), "the waiters on QA and QB did not both register their monitors"
    short.start()  # a third waiter beside them, whose wait ends first
    short.join(5)
    assert isinstance(short.result, NoMessageAvailable)
    qm1.open("QB").put(b"b")
    waiters["QB"].join(5)
    assert isinstance(waiters["QB"].result, Message) and waiters["QB"].result.body == b"b"
    qm1.open("QA").put(b"a")
    waiters["QA"].join(5)
    assert isinstance(waiters["QA"].result, Message) and waiters["QA"].result.body == b"a"


def test_wait_timeout(make_qm: MakeManager) -> None:
    qm = make_qm(1)
    qm.define_queue("Q", structure=APP)
    started = time.monotonic()
    with pytest.raises(NoMessageAvailable):
        qm.open("Q").get(wait=0.2)
    assert 0.15 <= time.monotonic() - started < 3


def test_a_get_inhibited_while_waiting_fails_and_leaves_the_message(
    make_qm: MakeManager,
) -> None:
    """The alter increments the queue's authority: the waiter's try after the put (on a
    plain connection, the one request that slept) fails its authority check, re-reads
    the definition and fails with GET_INHIBITED; the message stays on the queue."""
    qm1, qm2 = make_qm(1), make_qm(2)
    qm1.define_queue("Q", structure=APP)
    waiter = Waiter(lambda: qm2.open("Q").get(wait=30))
    waiter.start()
    wait_asleep_in_wait_events(waiter)
    qm1.alter_queue("Q", get_inhibited=True)
    qm1.open("Q").put(b"kept")
    waiter.join(SIGNAL_TIMEOUT)
    assert isinstance(waiter.result, Inhibited)
    assert waiter.result.reason is MQReason.GET_INHIBITED
    qm1.alter_queue("Q", get_inhibited=False)
    assert qm1.open("Q").get().body == b"kept"
