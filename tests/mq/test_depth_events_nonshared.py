"""Depth events on a nonshared queue against a shared one: the seed's example (spec
§10.4 QD-T1, QD-T2; QD-9).

Shared queues toggle their event switches even when the detecting manager's PERFMEV
is disabled; nonshared queues (``Disposition.QMGR``) do not, until PERFMEV is enabled.
Each test runs on memory and on Redis (``make_qm``); on Redis the nonshared queue is
in the manager's own memory, the shared one on the server.
"""

from __future__ import annotations

import pytest

from sharedq.mq import (
    EVENT_QUEUE,
    DepthEvent,
    DepthEvents,
    Disposition,
    NoMessageAvailable,
    QueueManager,
    read_depth_event,
)
from sharedq.mq.event_broadcast import unanswered
from tests.mq.conftest import APP, MakeManager

MAX_DEPTH = 10
#: QDEPTHHI(80): a depth of 8 meets it.
HIGH_LIMIT = 80
#: Both queues start as the seed gives them: QDPHIEV(ENABLED) QDPLOEV(DISABLED)
#: QDPMAXEV(DISABLED).
SEED_SWITCHES = DepthEvents(
    high_limit=HIGH_LIMIT, high_enabled=True, low_enabled=False, full_enabled=False
)
#: After a High event (QD-2): QDPHIEV(DISABLED) QDPLOEV(ENABLED) QDPMAXEV(ENABLED).
AFTER_HIGH = DepthEvents(
    high_limit=HIGH_LIMIT, high_enabled=False, low_enabled=True, full_enabled=True
)
#: How long a get waits for an event message it expects (it is there already).
EXPECT_S = 20.0


def _seed_example(make_qm: MakeManager) -> QueueManager:
    """QD-T1's setup and action: QM1 PERFMEV(DISABLED), SQ1 shared and LQ1 nonshared,
    put until the depth meets QDEPTHHI on both."""
    qm1 = make_qm(1, performance_events=False)
    qm1.define_queue("SQ1", structure=APP, max_depth=MAX_DEPTH, depth_events=SEED_SWITCHES)
    qm1.define_queue(
        "LQ1", disposition=Disposition.QMGR, max_depth=MAX_DEPTH, depth_events=SEED_SWITCHES
    )
    for name in ("SQ1", "LQ1"):
        queue = qm1.open(name)
        for n in range(MAX_DEPTH * HIGH_LIMIT // 100):
            queue.put(f"{name}.{n}".encode())
    return qm1


def _event_messages(qm: QueueManager) -> list[DepthEvent]:
    """Every message on SYSTEM.ADMIN.PERFM.EVENT now (none if it was never defined)."""
    assert unanswered(qm.admin) == 0  # no broadcast is waiting for an answer
    if EVENT_QUEUE not in qm.queue_names():
        return []
    queue = qm.open(EVENT_QUEUE)
    found = []
    while True:
        try:
            found.append(read_depth_event(queue.get()))
        except NoMessageAvailable:
            return found


def test_qd_t1_shared_queue_toggles_with_perfmev_disabled_nonshared_does_not(
    make_qm: MakeManager,
) -> None:
    """QD-T1 (the seed's example): SQ1 toggled; LQ1 unchanged; no messages from QM1."""
    qm1 = _seed_example(make_qm)
    assert qm1.open("SQ1").depth() == qm1.open("LQ1").depth() == 8
    assert qm1.queue_definition("SQ1").depth_events == AFTER_HIGH
    assert qm1.queue_definition("LQ1").depth_events == SEED_SWITCHES
    assert _event_messages(qm1) == []  # none from QM1, the only manager


def test_qd_t2_enabling_perfmev_leaves_the_nonshared_queue_as_it_was(
    make_qm: MakeManager,
) -> None:
    """QD-T2: after QD-T1, PERFMEV ENABLED: LQ1 still has its original switches while
    SQ1's are toggled (the inconsistency the seed warns of), and no event is raised
    for what happened before.  The next put to LQ1 at a depth meeting QDEPTHHI raises
    a High event on LQ1, from QM1, and toggles it."""
    qm1 = _seed_example(make_qm)
    qm1.set_performance_events(True)
    assert qm1.performance_events is True
    assert qm1.queue_definition("LQ1").depth_events == SEED_SWITCHES
    assert qm1.queue_definition("SQ1").depth_events == AFTER_HIGH
    assert _event_messages(qm1) == []  # not raised retroactively

    qm1.open("LQ1").put(b"LQ1.8")  # depth 9 >= 8

    message = qm1.open(EVENT_QUEUE).get(wait=EXPECT_S)
    event = read_depth_event(message)
    assert (event.event, event.qmgr, event.queue, event.coordinator) == (
        "high",
        "QM1",
        "LQ1",
        "QM1",
    )
    assert message.correl_id == event.correl_id
    assert (event.depth, event.max_depth, event.enqueues) == (9, MAX_DEPTH, 9)
    assert qm1.queue_definition("LQ1").depth_events == AFTER_HIGH
    assert _event_messages(qm1) == []  # that one message only


def test_a_nonshared_queues_event_is_not_broadcast(make_qm: MakeManager) -> None:
    """QD-9: a nonshared queue's event is its manager's alone: another manager with
    PERFMEV enabled issues no message for it (it cannot see the queue)."""
    qm1 = make_qm(1, performance_events=True)
    qm2 = make_qm(2, performance_events=True)
    qm1.define_queue(
        "LQ1", disposition=Disposition.QMGR, max_depth=MAX_DEPTH, depth_events=SEED_SWITCHES
    )
    queue = qm1.open("LQ1")
    for n in range(8):
        queue.put(f"LQ1.{n}".encode())
    event = read_depth_event(qm2.open(EVENT_QUEUE).get(wait=EXPECT_S))
    assert (event.qmgr, event.queue, event.event) == ("QM1", "LQ1", "high")
    assert _event_messages(qm2) == []


@pytest.mark.parametrize("perfmev", [False, True])
def test_a_nonshared_queues_switches_stay_while_perfmev_is_disabled(
    make_qm: MakeManager, perfmev: bool
) -> None:
    """QD-9 over a full cycle: High, then Low, toggle a nonshared queue only with
    PERFMEV enabled."""
    qm1 = make_qm(1, performance_events=perfmev)
    qm1.define_queue(
        "LQ1",
        disposition=Disposition.QMGR,
        max_depth=MAX_DEPTH,
        depth_events=DepthEvents(high_limit=80, low_limit=20, high_enabled=True),
    )
    queue = qm1.open("LQ1")
    for n in range(8):
        queue.put(f"{n}".encode())
    high = qm1.queue_definition("LQ1").depth_events
    for _ in range(6):
        queue.get()
    low = qm1.queue_definition("LQ1").depth_events
    if perfmev:
        assert (high.high_enabled, high.low_enabled) == (False, True)
        assert (low.high_enabled, low.low_enabled) == (True, False)
        assert [e.event for e in _event_messages(qm1)] == ["high", "low"]
    else:
        assert high == low == DepthEvents(high_limit=80, low_limit=20, high_enabled=True)
        assert _event_messages(qm1) == []
