"""``take`` with ``wait``: a waiting consumer's sleep and its try in one request.

Run on every backend (``facility``): the take sleeps as ``wait_for_event`` does and
then takes as ``take`` does, woken by the change that queues the event (the writer
writes only once the taker sleeps: written before, the event would be queued already
and the test would not test a wake-up).
"""

from __future__ import annotations

import threading

from sharedq.cf import Compare, CouplingFacility, Head, MonitorSpec, MonitorState
from sharedq.cf.api import Taken
from sharedq.testing.conformance import MakeStructure
from sharedq.testing.waits import wait_asleep_in_wait_events

COMMITTED_COMPARATOR = b"\x0a" + b"\x00" * 15
COMMITTED = b"\x04" + b"\x00" * 15
RANGE = MonitorSpec(0, b"\x00" * 16, b"\x09" + b"\xff" * 15)
HEAD = Head(0, COMMITTED_COMPARATOR, Compare.LE)


def test_a_sleeping_take_is_woken_by_the_write_and_takes_it(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    name = make_structure()
    consumer, producer = facility.connect(name, "CONSUMER"), facility.connect(name, "PRODUCER")
    registration = consumer.take(HEAD, 1, monitor=RANGE).registration
    assert registration is not None and not registration.nonempty
    result: list[Taken] = []
    thread = threading.Thread(
        target=lambda: result.append(
            consumer.take(HEAD, 1, delete=True, take_events=True, wait=30.0)
        ),
        daemon=True,
    )
    thread.start()
    wait_asleep_in_wait_events(thread)
    producer.write(0, COMMITTED, b"woken")
    thread.join(30.0)
    (taken,) = result
    (event,) = taken.events
    assert event.monitor_id == registration.monitor_id and event.state is MonitorState.NONEMPTY
    assert taken.moved is not None and taken.moved.entry.data == b"woken"
    assert taken.deleted is not None and taken.deleted.seq == taken.moved.seq + 1
    assert consumer.events_nowait() == [] and list(consumer.scan(0)) == []


def test_an_event_already_queued_does_not_sleep(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    """An event queued before the request: it takes at once (a wait of an hour would
    hold the test, not fail it, if it slept)."""
    name = make_structure()
    consumer, producer = facility.connect(name, "CONSUMER"), facility.connect(name, "PRODUCER")
    consumer.register_monitor(RANGE)
    producer.write(0, COMMITTED, b"queued")
    taken = consumer.take(HEAD, 1, take_events=True, wait=3600.0)
    assert len(taken.events) == 1
    assert taken.moved is not None and taken.moved.entry.data == b"queued"


def test_a_wait_that_ends_without_an_event_still_takes(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    """No event (nobody watches): the wait passes, and the take is made all the same,
    as the try after a sleep would be, registering the monitor it was given."""
    name = make_structure()
    consumer, producer = facility.connect(name, "CONSUMER"), facility.connect(name, "PRODUCER")
    producer.write(0, COMMITTED, b"unwatched")
    taken = consumer.take(HEAD, 1, wait=0.05)
    assert taken.events == [] and taken.moved is not None
    assert taken.moved.entry.data == b"unwatched"
    taken = consumer.take(HEAD, 1, monitor=RANGE, take_events=True, wait=0.05)
    assert taken.moved is None and taken.registration is not None
    assert consumer.statistics().emcs == 1
