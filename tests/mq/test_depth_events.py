"""Queue depth events on shared queues (seed 004, spec §10): QD-T1 and QD-T3..QD-T10.

Every test runs on memory and on Redis (``make_qm``: the managers are objects of
this process; ``test_depth_events_processes.py`` runs them as processes), counts the
messages on ``SYSTEM.ADMIN.PERFM.EVENT`` and checks what each carries.  A message is
waited for with a get-wait (the structure wakes the waiter); that no more come is
known once no broadcast request is left unanswered (``event_broadcast.unanswered``),
since a manager deletes a request only after it has issued its message.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from sharedq.clock import retry_until
from sharedq.log import LogStream, RecordType, unpack_payload
from sharedq.mq import (
    EVENT_QUEUE,
    DepthEvent,
    DepthEvents,
    InvalidArgument,
    LogJournal,
    Message,
    NoMessageAvailable,
    QueueFull,
    QueueManager,
    read_depth_event,
)
from sharedq.mq.definitions import PendingEvent
from sharedq.mq.event_broadcast import unanswered
from sharedq.testing import ManualClock, SimulatedFailure
from tests.mq.conftest import ADMIN, APP, MakeManager

HIGH_ONLY = DepthEvents(high_enabled=True)
#: How long a test waits for a message it expects (it comes much sooner).
EXPECT_S = 20.0


def _events(qm: QueueManager, count: int) -> list[DepthEvent]:
    """The next ``count`` event messages, then none: every request was answered."""
    queue = qm.open(EVENT_QUEUE)
    found = [_decoded(queue.get(wait=EXPECT_S)) for _ in range(count)]
    assert retry_until(lambda: unanswered(qm.admin) == 0, timeout_s=EXPECT_S, first_pause_s=0.005)
    with pytest.raises(NoMessageAvailable):
        queue.get()
    return found


def _decoded(message: Message) -> DepthEvent:
    event = read_depth_event(message)
    assert message.correl_id == event.correl_id  # the MQMD's CorrelId
    return event


def _no_events(qm: QueueManager) -> None:
    assert unanswered(qm.admin) == 0
    if EVENT_QUEUE in qm.queue_names():
        with pytest.raises(NoMessageAvailable):
            qm.open(EVENT_QUEUE).get()


def _group(make_qm: MakeManager, *enabled: bool) -> list[QueueManager]:
    return [make_qm(n + 1, performance_events=on) for n, on in enumerate(enabled)]


def _by_qmgr(events: list[DepthEvent]) -> dict[str, DepthEvent]:
    assert len({e.qmgr for e in events}) == len(events), "one message per manager"
    return {e.qmgr: e for e in events}


# -- attributes -----------------------------------------------------------------------------


def test_every_depth_event_is_disabled_by_default(make_qm: MakeManager) -> None:
    qm = make_qm(1)
    qm.define_queue("Q", structure=APP, max_depth=10)
    assert qm.queue_definition("Q").depth_events == DepthEvents(80, 20, False, False, False)
    assert qm.performance_events is False
    queue = qm.open("Q")
    for _ in range(10):
        queue.put(b"m")
    with pytest.raises(QueueFull):
        queue.put(b"one too many")
    for _ in range(10):
        queue.get()
    assert qm.queue_definition("Q").depth_events == DepthEvents()
    _no_events(qm)


def test_bad_depth_event_attributes_are_refused(make_qm: MakeManager) -> None:
    qm = make_qm(1)
    for bad in (
        DepthEvents(high_limit=101),
        DepthEvents(low_limit=-1),
        DepthEvents(high_enabled=1),  # type: ignore[arg-type]
        "high",
    ):
        with pytest.raises(InvalidArgument):
            qm.define_queue("Q", structure=APP, depth_events=bad)
    qm.define_queue("Q", structure=APP)
    with pytest.raises(InvalidArgument):
        qm.alter_queue("Q", depth_events=DepthEvents(full_enabled="yes"))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        qm.alter_queue("Q", pending_event=None)
    with pytest.raises(InvalidArgument):
        qm.set_performance_events(1)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        make_qm(2, performance_events="ENABLED")
    altered = qm.alter_queue("Q", depth_events=DepthEvents(50, 10, True, True, True))
    assert qm.queue_definition("Q").depth_events == altered.depth_events


def test_perfmev_is_set_at_construction_and_at_runtime(make_qm: MakeManager) -> None:
    qm1, qm2 = make_qm(1, performance_events=True), make_qm(2)
    assert (qm1.performance_events, qm2.performance_events) == (True, False)
    qm2.set_performance_events(True)
    qm1.set_performance_events(False)
    assert (qm1.performance_events, qm2.performance_events) == (False, True)
    qm1.define_queue("SQ", structure=APP, max_depth=10, depth_events=HIGH_ONLY)
    sq = qm1.open("SQ")
    for _ in range(8):
        sq.put(b"m")
    (only,) = _events(qm2, 1)
    assert (only.qmgr, only.coordinator) == ("QM2", "QM1")


def test_read_depth_event_refuses_other_messages() -> None:
    for body in (b"", b"not msgpack \xc1", b"\x80", Message(b"\x81\xa6format\xa1x")):
        with pytest.raises(InvalidArgument):
            read_depth_event(body)


# -- the seed's cases ---------------------------------------------------------------------------


def test_qd_t1_shared_queue_toggles_with_perfmev_disabled(make_qm: MakeManager) -> None:
    """QM1 PERFMEV(DISABLED): SQ1 toggles at QDEPTHHI all the same; no message."""
    (qm1,) = _group(make_qm, False)
    qm1.define_queue("SQ1", structure=APP, max_depth=10, depth_events=HIGH_ONLY)
    sq1 = qm1.open("SQ1")
    for _ in range(8):
        sq1.put(b"m")
    events = qm1.queue_definition("SQ1").depth_events
    assert (events.high_enabled, events.low_enabled, events.full_enabled) == (False, True, True)
    assert qm1.queue_definition("SQ1").pending_event is None
    _no_events(qm1)


def test_qd_t3_three_managers_three_messages_one_correlid(make_qm: MakeManager) -> None:
    """QM2's put makes depth 80 of 100: it coordinates; three messages share its
    CorrelId, each with its own manager's statistics."""
    qm1, qm2, qm3 = _group(make_qm, True, True, True)
    qm1.define_queue("SQ", structure=APP, max_depth=100, depth_events=HIGH_ONLY)
    for qm, puts in ((qm1, 30), (qm3, 20), (qm2, 30)):
        queue = qm.open("SQ")
        for _ in range(puts):
            queue.put(b"m")
    events = qm1.queue_definition("SQ").depth_events
    assert (events.high_enabled, events.low_enabled, events.full_enabled) == (False, True, True)
    found = _by_qmgr(_events(qm1, 3))
    assert set(found) == {"QM1", "QM2", "QM3"}
    assert len({e.correl_id for e in found.values()}) == 1
    correl = found["QM2"].correl_id
    assert len(correl) == 24 and correl.startswith(b"QDEV\x02")  # made by QM2 (id 2)
    for event in found.values():
        assert (event.event, event.queue, event.coordinator) == ("high", "SQ", "QM2")
        assert (event.depth, event.max_depth) == (80, 100)
    assert [found[q].enqueues for q in ("QM1", "QM2", "QM3")] == [30, 30, 20]
    assert [found[q].high_depth for q in ("QM1", "QM2", "QM3")] == [30, 80, 50]
    assert all(e.dequeues == 0 and not e.null for e in found.values())


def test_qd_t4_idle_manager_issues_a_null_message(make_qm: MakeManager) -> None:
    qm1, qm2, _ = _group(make_qm, True, True, True)
    qm1.define_queue("SQ", structure=APP, max_depth=100, depth_events=HIGH_ONLY)
    sq = qm2.open("SQ")
    for _ in range(80):
        sq.put(b"m")
    found = _by_qmgr(_events(qm1, 3))
    assert found["QM3"].null and found["QM1"].null and not found["QM2"].null
    assert (found["QM3"].enqueues, found["QM3"].dequeues, found["QM3"].high_depth) == (0, 0, None)
    assert found["QM3"].time_since_reset_s >= 0


def test_qd_t5_a_disabled_peer_issues_nothing(make_qm: MakeManager) -> None:
    qm1, qm2, _ = _group(make_qm, True, True, False)
    qm1.define_queue("SQ", structure=APP, max_depth=100, depth_events=HIGH_ONLY)
    sq = qm2.open("SQ")
    for _ in range(80):
        sq.put(b"m")
    found = _by_qmgr(_events(qm1, 2))
    assert set(found) == {"QM1", "QM2"}
    assert found["QM1"].correl_id == found["QM2"].correl_id


def test_qd_t6_a_manager_that_is_down_gets_nothing(make_qm: MakeManager) -> None:
    qm1, qm2, qm3 = _group(make_qm, True, True, True)
    qm1.define_queue("SQ", structure=APP, max_depth=100, depth_events=HIGH_ONLY)
    qm3.close()
    sq = qm2.open("SQ")
    for _ in range(80):
        sq.put(b"m")
    found = _by_qmgr(_events(qm1, 2))
    assert set(found) == {"QM1", "QM2"}
    # Back, it issues nothing for the event it missed (spec §10.3), and takes part in
    # the next: its gets make the Low event the High one enabled.
    qm3 = make_qm(3, performance_events=True)
    sq3 = qm3.open("SQ")
    for _ in range(60):
        sq3.get()
    low = _by_qmgr(_events(qm1, 3))
    assert {e.event for e in low.values()} == {"low"}
    assert {e.coordinator for e in low.values()} == {"QM3"}


def test_qd_t7_a_disabled_coordinator_toggles_and_broadcasts_but_issues_nothing(
    make_qm: MakeManager,
) -> None:
    qm1, qm2, _ = _group(make_qm, True, False, True)
    qm1.define_queue("SQ", structure=APP, max_depth=100, depth_events=HIGH_ONLY)
    sq = qm2.open("SQ")
    for _ in range(80):
        sq.put(b"m")
    assert qm1.queue_definition("SQ").depth_events.high_enabled is False
    found = _by_qmgr(_events(qm1, 2))
    assert set(found) == {"QM1", "QM3"}
    assert {e.coordinator for e in found.values()} == {"QM2"}
    assert found["QM1"].correl_id == found["QM3"].correl_id
    assert found["QM1"].correl_id.startswith(b"QDEV\x02")


def test_qd_t8_two_managers_crossing_at_once_make_one_event(make_qm: MakeManager) -> None:
    """QM2's put takes the queue to its High limit, and stops before looking at the
    depth it got back; QM1's put crosses too and toggles first.  QM2's toggle then
    fails its compare-and-swap: it re-reads, finds High disabled, and has no event."""
    paused, resume = threading.Event(), threading.Event()
    putter: list[threading.Thread] = []

    def hold_after_put(request: str, structure: str, before: bool) -> None:
        if request == "write_and_rekey" and not before and threading.current_thread() in putter:
            paused.set()
            assert resume.wait(EXPECT_S)

    qm1 = make_qm(1, performance_events=True)
    qm2 = make_qm(2, performance_events=True, faults=hold_after_put)
    qm3 = make_qm(3, performance_events=True)
    qm1.define_queue("SQ", structure=APP, max_depth=100, depth_events=HIGH_ONLY)
    sq1, sq2 = qm1.open("SQ"), qm2.open("SQ")
    for _ in range(79):
        sq1.put(b"m")
    thread = threading.Thread(target=lambda: sq2.put(b"QM2 crosses"))
    putter.append(thread)
    thread.start()
    assert paused.wait(EXPECT_S)
    sq1.put(b"QM1 crosses too")  # depth 81: QM1 toggles, coordinates, broadcasts
    resume.set()
    thread.join(EXPECT_S)
    found = _by_qmgr(_events(qm3, 3))
    assert {e.coordinator for e in found.values()} == {"QM1"}
    assert len({e.correl_id for e in found.values()}) == 1
    assert qm3.queue_definition("SQ").pending_event is None


def test_qd_t9_gets_to_the_low_limit_make_a_low_event_with_a_new_coordinator(
    make_qm: MakeManager,
) -> None:
    qm1, qm2, qm3 = _group(make_qm, True, True, True)
    qm1.define_queue("SQ", structure=APP, max_depth=100, depth_events=HIGH_ONLY)
    sq2, sq3 = qm2.open("SQ"), qm3.open("SQ")
    for _ in range(80):
        sq2.put(b"m")
    high = _by_qmgr(_events(qm1, 3))
    for _ in range(60):
        sq3.get()  # depth 20: QDEPTHLO
    events = qm1.queue_definition("SQ").depth_events
    assert (events.high_enabled, events.low_enabled, events.full_enabled) == (True, False, True)
    low = _by_qmgr(_events(qm1, 3))
    assert {e.event for e in low.values()} == {"low"}
    assert {e.coordinator for e in low.values()} == {"QM3"}
    assert len({e.correl_id for e in low.values()}) == 1
    assert low["QM3"].correl_id != high["QM3"].correl_id
    assert low["QM3"].depth == 20
    # Each window covers only what its manager did since its High message.
    assert (low["QM2"].enqueues, low["QM2"].dequeues) == (0, 0)
    assert (low["QM3"].enqueues, low["QM3"].dequeues, low["QM3"].high_depth) == (0, 60, 79)


def test_qd_t10_a_put_refused_for_max_depth_is_a_full_event(make_qm: MakeManager) -> None:
    """Full enables Low and disables itself (our decision: docs/depth-events.md)."""
    qm1, qm2 = _group(make_qm, True, True)
    qm1.define_queue("SQ", structure=APP, max_depth=5, depth_events=DepthEvents(full_enabled=True))
    sq = qm2.open("SQ")
    for _ in range(5):
        sq.put(b"m")
    for _ in range(2):  # the second refusal is no event: Full disabled itself
        with pytest.raises(QueueFull):
            sq.put(b"one too many")
    events = qm1.queue_definition("SQ").depth_events
    assert (events.high_enabled, events.low_enabled, events.full_enabled) == (False, True, False)
    found = _by_qmgr(_events(qm1, 2))
    assert {e.event for e in found.values()} == {"full"}
    assert found["QM2"].depth == found["QM2"].max_depth == 5


# -- what depth means (QD-11) ---------------------------------------------------------------------


def test_uncommitted_puts_count_and_the_event_fires_at_the_put(make_qm: MakeManager) -> None:
    """Depth is the put list less its LHQC: the 8th put of a unit not yet committed
    makes 8 of 10, and the High event is raised then, not at commit."""
    (qm1,) = _group(make_qm, True)
    qm1.define_queue("SQ", structure=APP, max_depth=10, depth_events=HIGH_ONLY)
    sq = qm1.open("SQ")
    uow = qm1.unit_of_work()
    for _ in range(8):
        sq.put(b"m", uow=uow)
    (high,) = _events(qm1, 1)
    assert (high.event, high.depth) == ("high", 8)
    uow.backout()  # the depth falls back to 0: a backout is no get, so no Low event
    _events(qm1, 0)
    assert qm1.queue_definition("SQ").depth_events.low_enabled is True


def test_a_get_in_syncpoint_lowers_the_depth_at_the_get(make_qm: MakeManager) -> None:
    (qm1,) = _group(make_qm, True)
    qm1.define_queue("SQ", structure=APP, max_depth=10, depth_events=DepthEvents(low_enabled=True))
    sq = qm1.open("SQ")
    for _ in range(3):
        sq.put(b"m")
    with qm1.unit_of_work() as uow:
        sq.get(uow=uow)  # depth 2 = 20 % of 10, uncommitted
        (low,) = _events(qm1, 1)
        assert (low.event, low.depth, low.dequeues) == ("low", 2, 1)


def test_a_message_found_expired_counts_as_a_get(make_qm: MakeManager, clock: ManualClock) -> None:
    (qm1,) = _group(make_qm, True)
    qm1.define_queue("SQ", structure=APP, max_depth=10, depth_events=DepthEvents(low_enabled=True))
    sq = qm1.open("SQ")
    sq.put(b"short-lived", expiry=1.0)
    for _ in range(4):
        sq.put(b"m")
    clock.advance_s(2.0)
    assert sq.get().body == b"m"  # found the expired one first: depth 4, then 3
    _events(qm1, 0)
    sq.get()  # depth 2
    (low,) = _events(qm1, 1)
    assert (low.depth, low.dequeues) == (2, 3)


def test_batches_raise_events_too(make_qm: MakeManager) -> None:
    (qm1,) = _group(make_qm, True)
    qm1.define_queue("SQ", structure=APP, max_depth=10, depth_events=HIGH_ONLY)
    sq = qm1.open("SQ")
    sq.put_many([b"m"] * 9)
    (high,) = _events(qm1, 1)
    assert (high.event, high.depth, high.enqueues) == ("high", 9, 9)
    sq.get_many(8)  # the 7th message makes depth 2: 20 % of 10
    (low,) = _events(qm1, 1)
    assert (low.event, low.depth, low.dequeues) == ("low", 2, 7)


# -- a coordinator that dies ----------------------------------------------------------------------


def _dead_after_its_toggle(make_qm: MakeManager, qm1: QueueManager) -> PendingEvent:
    """QM2 makes the crossing put of ``SQ`` (defined by ``qm1``), toggles the queue and
    stops dead before its next request: no message of its own, no broadcast."""
    toggled: list[bool] = []

    def die_after_the_toggle(request: str, structure: str, before: bool) -> None:
        if toggled and before:
            raise SimulatedFailure(f"dead before {request}")
        if request == "update" and not before:
            toggled.append(True)

    qm2 = make_qm(2, performance_events=True, faults=die_after_the_toggle)
    sq = qm2.open("SQ")
    for _ in range(7):
        sq.put(b"m")
    with pytest.raises(SimulatedFailure):
        sq.put(b"the crossing put")
    qm2.stop_dead()
    pending = qm1.queue_definition("SQ").pending_event
    assert pending is not None and pending.coordinator == "QM2"
    assert qm1.queue_definition("SQ").depth_events.high_enabled is False
    return pending


def test_a_coordinator_dead_before_its_broadcast_is_finished_by_its_recoverer(
    make_qm: MakeManager,
) -> None:
    """The pending event stays in the LHQC; QM1, recovering QM2, issues its message
    and asks QM3 for its own, with QM2's CorrelId, and clears it."""
    qm1 = make_qm(1, performance_events=True)
    qm3 = make_qm(3, performance_events=True)
    qm1.define_queue("SQ", structure=APP, max_depth=10, depth_events=HIGH_ONLY)
    pending = _dead_after_its_toggle(make_qm, qm1)
    qm1.declare_failed("QM2")
    qm1.recover("QM2")
    found = _by_qmgr(_events(qm3, 2))
    assert set(found) == {"QM1", "QM3"}
    assert {e.correl_id for e in found.values()} == {pending.correl_id}
    assert {e.coordinator for e in found.values()} == {"QM2"}
    assert qm1.queue_definition("SQ").pending_event is None


# -- the log ---------------------------------------------------------------------------------


def test_the_log_has_one_record_per_toggle_and_per_message(
    make_qm: MakeManager, tmp_path: Path
) -> None:
    streams = {s: LogStream(tmp_path / s, name=f"{s}.LOG", structure=s) for s in (ADMIN, APP)}
    qm1 = make_qm(1, performance_events=True, journal=LogJournal("QM1", streams))
    qm2 = make_qm(2, performance_events=False, journal=LogJournal("QM2", streams))
    qm3 = make_qm(3, performance_events=True, journal=LogJournal("QM3", streams))
    qm1.define_queue("SQ", structure=APP, max_depth=10, depth_events=HIGH_ONLY)
    sq = qm2.open("SQ")
    for _ in range(8):
        sq.put(b"m")
    found = _by_qmgr(_events(qm3, 2))
    correl = found["QM1"].correl_id
    records = [r for r in streams[APP].records() if r.type == RecordType.DEPTH_EVENT]
    by_writer = {r.writer: (r, unpack_payload(r.payload)) for r in records}
    assert len(records) == 3 and set(by_writer) == {"QM1", "QM2", "QM3"}
    for record, payload in by_writer.values():
        assert (record.queue, record.correl_id, record.structure) == (b"SQ", correl, APP)
        assert (payload["event"], payload["depth"], payload["max_depth"]) == ("high", 8, 10)
    coordinator = by_writer["QM2"][1]
    assert (coordinator["role"], coordinator["issued"], coordinator["enqueues"]) == (
        "coordinator",
        False,
        None,
    )
    for peer in ("QM1", "QM3"):
        payload = by_writer[peer][1]
        assert (payload["role"], payload["issued"], payload["enqueues"]) == ("peer", True, 0)
    assert {k for k in coordinator} == {
        "event",
        "role",
        "issued",
        "depth",
        "max_depth",
        "high_depth",
        "enqueues",
        "dequeues",
        "since_reset_s",
    }


def test_a_get_under_a_browse_cursor_is_a_get(make_qm: MakeManager) -> None:
    (qm1,) = _group(make_qm, True)
    qm1.define_queue("SQ", structure=APP, max_depth=10, depth_events=DepthEvents(low_enabled=True))
    sq = qm1.open("SQ")
    for _ in range(3):
        sq.put(b"m")
    browser = sq.browser()
    browser.next()
    browser.get()  # depth 2 = 20 % of 10
    (low,) = _events(qm1, 1)
    assert (low.event, low.depth, low.dequeues) == ("low", 2, 1)


def test_a_coordinator_dead_before_its_broadcast_finishes_it_when_it_restarts(
    make_qm: MakeManager,
) -> None:
    """No peer recovers QM2: its next incarnation, opening the queue, finds the event
    its previous one toggled and did not broadcast, and coordinates it, CorrelId and
    all."""
    qm1 = make_qm(1, performance_events=True)
    qm1.define_queue("SQ", structure=APP, max_depth=10, depth_events=HIGH_ONLY)
    pending = _dead_after_its_toggle(make_qm, qm1)
    qm1.declare_failed("QM2")
    restarted = make_qm(2, performance_events=True)
    restarted.open("SQ")
    found = _by_qmgr(_events(qm1, 2))
    assert set(found) == {"QM1", "QM2"}
    assert {e.correl_id for e in found.values()} == {pending.correl_id}
    assert qm1.queue_definition("SQ").pending_event is None
