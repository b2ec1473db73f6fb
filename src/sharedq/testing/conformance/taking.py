"""``take``, ``take_many`` and ``wait_for_event``: a consumer's round trips; and the
producer's batch, ``write_entries`` with ``expect_authority``.

``take`` is events taken, then a move and a delete (or a monitor registered when there
is nothing to move), as one request; these checks hold it to the requests it stands
for, and ``wait_for_event`` to sleeping without taking.
"""

from __future__ import annotations

import threading

from sharedq.cf import (
    BulkWrite,
    ById,
    BySecondaryKey,
    Compare,
    CouplingFacility,
    EmcAreaFull,
    Head,
    ListFull,
    ListStructure,
    MonitorSpec,
    MonitorState,
    StructureStats,
)
from sharedq.cf.errors import AuthorityMismatch, InvalidRequest
from sharedq.testing.conformance._registry import MakeStructure, check, raises
from sharedq.testing.conformance.helpers import data_on, key

COMMITTED_COMPARATOR = b"\x0a" + b"\x00" * 15
COMMITTED = b"\x04" + b"\x00" * 15
UNCOMMITTED = b"\xf6" + b"\x04" + b"\x00" * 14
COMMITTED_LOW = b"\x00" * 16
COMMITTED_HIGH = b"\x09" + b"\xff" * 15
RANGE = MonitorSpec(0, COMMITTED_LOW, COMMITTED_HIGH)


def _counts(stats: StructureStats) -> tuple[int, int, int, int]:
    return stats.entries, stats.elements, stats.emcs, stats.seq


def _pair(
    facility: CouplingFacility, make_structure: MakeStructure
) -> tuple[ListStructure, ListStructure]:
    name = make_structure()
    return facility.connect(name, "CONSUMER"), facility.connect(name, "PRODUCER")


@check
def take_moves_like_move(facility: CouplingFacility, make_structure: MakeStructure) -> None:
    """Two structures, one by ``move`` and one by ``take``: the same in the end."""
    one = facility.connect(make_structure(), "U1")
    two = facility.connect(make_structure(), "U1")
    for struct in (one, two):
        struct.write(0, COMMITTED, b"first", adjunct=b"adj", secondary_key=b"S", version=4)
        struct.write(0, COMMITTED, b"second")
    taken = one.take(Head(0, COMMITTED_COMPARATOR, Compare.LE), 3)
    moved = two.move(Head(0, COMMITTED_COMPARATOR, Compare.LE), 3)
    assert taken.moved == moved
    assert (taken.events, taken.deleted, taken.registration) == ([], None, None)
    assert list(one.scan(3)) == list(two.scan(3)) and data_on(one, 0) == [b"second"]
    assert _counts(one.statistics()) == _counts(two.statistics())


@check
def take_with_delete_is_a_move_then_a_delete(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    one = facility.connect(make_structure(), "U1")
    two = facility.connect(make_structure(), "U1")
    for struct in (one, two):
        struct.write(0, COMMITTED, b"body", adjunct=b"adj", secondary_key=b"S", version=4)
    taken = one.take(BySecondaryKey(0, b"S"), 3, delete=True)
    moved = two.move(BySecondaryKey(0, b"S"), 3)
    assert moved is not None
    deleted = two.delete(ById(moved.entry.entry_id, 3))
    assert taken.moved == moved and taken.deleted == deleted
    assert taken.deleted is not None and taken.deleted.seq == taken.moved.seq + 1
    assert taken.deleted.entry.data == b"body" and taken.deleted.entry.list_number == 3
    assert one.statistics().entries == 0 and one.list_info(3).entries == 0
    assert _counts(one.statistics()) == _counts(two.statistics())


@check
def take_of_nothing_changes_nothing(struct: ListStructure) -> None:
    struct.write(0, UNCOMMITTED, b"not yet")
    before = _counts(struct.statistics())
    taken = struct.take(Head(0, COMMITTED_COMPARATOR, Compare.LE), 1, delete=True)
    assert taken == ([], None, None, None)
    assert _counts(struct.statistics()) == before
    assert data_on(struct, 0) == [b"not yet"]


@check
def take_of_nothing_registers_the_monitor(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    """Found nothing: the monitor watches from that instant, and the first commit wakes it."""
    consumer, producer = _pair(facility, make_structure)
    producer.write(0, UNCOMMITTED, b"not yet")
    taken = consumer.take(Head(0, COMMITTED_COMPARATOR, Compare.LE), 1, monitor=RANGE)
    registration = taken.registration
    assert registration is not None and taken.moved is None
    assert not registration.nonempty and registration.list_number == 0
    assert registration.seq == consumer.statistics().seq
    assert consumer.statistics().emcs == 1
    producer.write(0, COMMITTED, b"now")
    (event,) = consumer.events_nowait()
    assert (event.monitor_id, event.state) == (registration.monitor_id, MonitorState.NONEMPTY)


@check
def take_that_finds_an_entry_registers_nothing(struct: ListStructure) -> None:
    struct.write(0, COMMITTED, b"here")
    taken = struct.take(Head(0, COMMITTED_COMPARATOR, Compare.LE), 1, monitor=RANGE)
    assert taken.moved is not None and taken.registration is None
    assert struct.statistics().emcs == 0


@check
def take_takes_the_events_first(facility: CouplingFacility, make_structure: MakeStructure) -> None:
    consumer, producer = _pair(facility, make_structure)
    registration = consumer.register_monitor(RANGE)
    producer.write(0, COMMITTED, b"one")
    taken = consumer.take(Head(0, COMMITTED_COMPARATOR, Compare.LE), 1, take_events=True)
    (event,) = taken.events
    assert event.monitor_id == registration.monitor_id and event.state is MonitorState.NONEMPTY
    assert taken.moved is not None and taken.moved.entry.data == b"one"
    assert consumer.events_nowait() == []
    # Taken, the event is queued again at the next transition to non-empty.
    producer.write(0, COMMITTED, b"two")
    assert [e.monitor_id for e in consumer.events_nowait()] == [registration.monitor_id]


@check
def take_tells_the_monitors_of_both_changes(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    """A watcher of the target list sees the moved entry come (and, deleted, go)."""
    consumer, producer = _pair(facility, make_structure)
    watcher = producer.register_monitor(MonitorSpec(1, notify_empty=True))
    consumer.write(0, COMMITTED, b"x")
    taken = consumer.take(Head(0), 1, delete=True)
    assert taken.moved is not None and taken.deleted is not None
    events = [(e.monitor_id, e.state, e.seq) for e in producer.events_nowait()]
    assert events == [
        (watcher.monitor_id, MonitorState.NONEMPTY, taken.moved.seq),
        (watcher.monitor_id, MonitorState.EMPTY, taken.deleted.seq),
    ]


@check
def a_failed_take_changes_nothing_and_keeps_the_events(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    consumer, producer = _pair(facility, make_structure)
    consumer.register_monitor(RANGE)
    producer.write(0, COMMITTED, b"x")
    authority = consumer.list_info(0).authority
    producer.set_list_controls(1, limit=0)
    before = _counts(consumer.statistics())
    with raises(AuthorityMismatch):
        consumer.take(Head(0), 1, expect_authority=authority + 1, take_events=True)
    with raises(ListFull):
        consumer.take(Head(0), 1, take_events=True)
    with raises(InvalidRequest):
        consumer.take(Head(0), 99, take_events=True)
    assert _counts(consumer.statistics()) == before
    assert len(consumer.events_nowait()) == 1  # still queued


@check
def take_with_no_emc_left_changes_nothing(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    struct = facility.connect(make_structure(emc_percent=1), "U1")
    while True:
        try:
            struct.register_monitor(RANGE)
        except EmcAreaFull:
            break
    before = _counts(struct.statistics())
    with raises(EmcAreaFull):
        struct.take(Head(0), 1, monitor=RANGE)
    assert _counts(struct.statistics()) == before


@check
def wait_for_event_returns_on_an_event_and_takes_nothing(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    consumer, producer = _pair(facility, make_structure)
    consumer.take(Head(0, COMMITTED_COMPARATOR, Compare.LE), 1, monitor=RANGE)
    woke = threading.Event()

    def sleeper() -> None:
        consumer.wait_for_event(30.0)
        woke.set()

    thread = threading.Thread(target=sleeper, daemon=True)
    thread.start()
    producer.write(0, key(1), b"x")
    thread.join(30.0)
    assert woke.is_set()
    consumer.wait_for_event(30.0)  # still queued: returns at once
    taken = consumer.take(Head(0), 1, take_events=True)
    assert len(taken.events) == 1 and taken.moved is not None


@check
def take_many_is_that_many_takes(facility: CouplingFacility, make_structure: MakeStructure) -> None:
    """Two structures, one by ``take_many`` and one by single takes: the same."""
    one = facility.connect(make_structure(), "U1")
    two = facility.connect(make_structure(), "U1")
    for struct in (one, two):
        for n in range(5):
            struct.write(0, key(n), b"m%d" % n, secondary_key=b"S%d" % n)
        struct.write(0, UNCOMMITTED, b"not yet")
    head = Head(0, COMMITTED_COMPARATOR, Compare.LE)
    for delete in (False, True):
        many = one.take_many(head, 1 + delete, 2, delete=delete)
        single = [two.take(head, 1 + delete, delete=delete) for _ in range(2)]
        assert many == [(t.moved, t.deleted) for t in single]
    rest = one.take_many(head, 1, 1000)
    assert [m.entry.data for m, d in rest] == [b"m4"] and rest[0][1] is None
    assert one.take_many(head, 1, 10) == []
    two.take(head, 1)
    for n in range(4):
        assert list(one.scan(n)) == list(two.scan(n))
    assert _counts(one.statistics()) == _counts(two.statistics())


@check
def take_many_stops_at_a_full_target(struct: ListStructure) -> None:
    for n in range(4):
        struct.write(0, key(n), b"m%d" % n)
    struct.set_list_controls(1, limit=2)
    taken = struct.take_many(Head(0), 1, 4)
    assert [m.entry.data for m, _ in taken] == [b"m0", b"m1"]
    with raises(ListFull):
        struct.take_many(Head(0), 1, 4)
    assert data_on(struct, 0) == [b"m2", b"m3"]
    # Deleted at once, the entries do not stay on the target: its limit never binds.
    struct.set_list_controls(2, limit=0)
    with raises(ListFull):
        struct.take_many(Head(0), 2, 4, delete=True)


@check
def a_bad_take_many_changes_nothing(struct: ListStructure) -> None:
    struct.write(0, key(1), b"x")
    authority = struct.list_info(0).authority
    before = _counts(struct.statistics())
    for count in (0, 1001, "2"):
        with raises(InvalidRequest):
            struct.take_many(Head(0), 1, count)  # type: ignore[arg-type]
    with raises(InvalidRequest):
        struct.take_many(ById(b"\x01" * 12), 1, 1)  # type: ignore[arg-type]
    with raises(AuthorityMismatch):
        struct.take_many(Head(0), 1, 5, expect_authority=authority + 1)
    assert _counts(struct.statistics()) == before


@check
def write_entries_checks_the_authority_first(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    """``expect_authority``: a batch conditioned as each write of it would be."""
    one = facility.connect(make_structure(), "U1")
    two = facility.connect(make_structure(), "U1")
    authority = one.list_info(0).authority
    assert authority == two.list_info(0).authority
    writes = [BulkWrite(0, key(n), b"w%d" % n, entry_id=b"\x01" * 11 + bytes([n])) for n in (2, 1)]
    before = _counts(one.statistics())
    with raises(AuthorityMismatch):
        one.write_entries(writes, expect_authority=authority + 1)
    with raises(AuthorityMismatch):  # every list the batch writes to is checked
        one.write_entries([*writes, BulkWrite(3, key(9))], expect_authority=authority + 7)
    assert _counts(one.statistics()) == before
    result = one.write_entries(writes, expect_authority=authority)
    assert result.processed == 2 and result.error is None
    plain = two.write_entries(writes)
    assert result.seqs == plain.seqs
    assert list(one.scan(0)) == list(two.scan(0))
    assert data_on(one, 0) == [b"w1", b"w2"]
    # Stopped by the list's limit as any bulk write is, keeping what it wrote.
    one.set_list_controls(1, limit=1)
    authority = one.list_info(1).authority
    stopped = one.write_entries(
        [BulkWrite(1, key(1)), BulkWrite(1, key(2))], expect_authority=authority
    )
    assert stopped.processed == 1 and isinstance(stopped.error, ListFull)


@check
def wait_for_event_with_nothing_queued_returns_after_its_timeout(struct: ListStructure) -> None:
    struct.register_monitor(RANGE)
    struct.wait_for_event(0.01)
    struct.wait_for_event(0.0)
    assert struct.events_nowait() == []


@check
def writes_moves_and_takes_say_how_many_entries_their_list_holds(struct: ListStructure) -> None:
    """``Change.entries``: the count of the list written to, or left, after the change.

    A queue manager reads a queue's depth from the put or get that changed it (queue
    depth events), so every backend gives it for write, ``write_and_rekey``, move and
    take, and it equals what ``list_info`` says at that instant.
    """
    for n in range(3):
        assert struct.write(0, COMMITTED, b"m%d" % n).entries == n + 1
    written, rekeyed = struct.write_and_rekey(0, UNCOMMITTED, b"r", new_key=COMMITTED)
    assert written.entries == rekeyed.entries == 4 == struct.list_info(0).entries
    moved = struct.move(Head(0), 1)
    assert moved is not None and moved.entries == 3 == struct.list_info(0).entries
    within = struct.move(Head(0), 0, new_key=COMMITTED)
    assert within is not None and within.entries == 3
    taken = struct.take(Head(0, COMMITTED_COMPARATOR, Compare.LE), 1)
    assert taken.moved is not None and taken.moved.entries == 2
    gone = struct.take(Head(0), 1, delete=True)
    assert gone.moved is not None and gone.moved.entries == 1 == struct.list_info(0).entries
    assert struct.write(2, COMMITTED, b"alone").entries == 1
