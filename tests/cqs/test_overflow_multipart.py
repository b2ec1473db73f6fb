"""A multi-part message moves to the overflow structure whole or not at all, on memory
and on Redis (docs/cqs.md, "The overflow structure full").

The overflow structure is not quiesced during the overflow process: another CQS's
puts to queues already there can fill it between the count of room and the moves.
A multi-part message (part 1 on its queue, parts 2..n on its own staging queue) whose
move then finds no room, for one of its parts or for part 1, must stay whole on the
primary, its parts in order: the old code left the parts moved so far on the overflow
structure, and a read of the message then returned part 1 and only the parts left on
the primary.  A master stopped at any step of such a move is replaced by a peer whose
takeover leaves the message whole, on one structure, read once.

Sizes as in ``test_overflow_full``: a part of ``UNIT_BODY`` bytes takes ten elements.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cqs import CQS, Kind
from sharedq.testing import SimulatedFailure
from tests.cqs.conftest import MakeCQS
from tests.cqs.helpers import where
from tests.cqs.test_overflow_full import (
    OVERFLOW,
    PRIMARY,
    UNIT_BODY,
    A,
    B,
    E,
    Sent,
    allocate,
    body,
    drain,
    fill_overflow,
    first_overflow,
    in_overflow,
    read_back_everything,
    send,
)

#: The multi-part message of E: part 1 and four staged parts, ten elements each.
PARTS = 5


def parts_of(i: int) -> list[bytes]:
    """The parts of E's message ``i``, each saying which it is."""
    return [body(E, i, 11) + b" part %d " % k + b"p" * (UNIT_BODY - 19) for k in range(PARTS)]


def ready(facility: CouplingFacility, name: str, queue: bytes) -> int:
    return [key for key, _ in where(facility, name).get("ready", [])].count(queue)


def staged(facility: CouplingFacility, name: str) -> list[bytes]:
    """The bodies of the staged parts on structure ``name``, in list order."""
    return [part for _, part in where(facility, name).get("staging", [])]


def setup(
    facility: CouplingFacility, make_cqs: MakeCQS, fault: Callable[[str], None]
) -> tuple[CQS, CQS, Sent]:
    """A (30 messages) in the overflow structure, 300 of its 1,000 elements used; then
    E: one single-part message, the multi-part one (50 elements), 29 single-part ones:
    the largest queue of the primary, over the threshold, so the next check selects it."""
    allocate(facility, PRIMARY, elements=1000, entries=1400)
    allocate(facility, OVERFLOW, elements=1000, entries=1400)
    sent: Sent = {}
    cqsa, cqsb = first_overflow(facility, make_cqs, sent, faults=fault)
    send(cqsa, sent, E)
    cqsa.put(E, parts_of(1))
    sent[E].append(b"".join(parts_of(1)))
    for _ in range(29):
        send(cqsa, sent, E)
    assert sent[E][1] != body(E, 1)
    return cqsa, cqsb, sent


def leave_room(cqsb: CQS, sent: Sent, units: int) -> None:
    """The other CQS fills the overflow structure with A's messages, then reads and
    deletes ``units`` of them: room for that many ten-element entries."""
    fill_overflow(cqsb, sent, A, UNIT_BODY, limit=100)
    assert drain(cqsb, A, units) == sent[A][:units]
    del sent[A][:units]


@pytest.mark.parametrize(
    ("units", "what"),
    [(3, "after two of its staged parts moved"), (5, "for part 1, all its staged parts moved")],
)
def test_a_multipart_message_that_finds_no_room_stays_whole_on_the_primary(
    facility: CouplingFacility, make_cqs: MakeCQS, units: int, what: str
) -> None:
    """Room for ``units`` entries: E's first message moves, then the multi-part one
    finds the overflow structure full part-way.  Its moved parts come back to its
    staging queue on the primary, in order; the process ends normally; E is read
    whole, once, in order (the old code returned part 1 with only the parts left on
    the primary); the next scan with room moves the message whole."""
    armed: list[Callable[[], None]] = []

    def fault(point: str) -> None:
        if point == "recorded" and armed:
            armed.pop()()

    cqsa, cqsb, sent = setup(facility, make_cqs, fault)
    armed.append(lambda: leave_room(cqsb, sent, units))
    report = cqsa.overflow[Kind.MSGQ].check()
    assert not armed, what
    assert report is not None and report.approved == (E,) and report.full == ()
    assert report.moved == 1
    assert in_overflow(cqsa) == [A, E]
    assert [m.parts for m in cqsb.browse(E)][1] == tuple(parts_of(1))
    assert ready(facility, OVERFLOW, E) == 1 and ready(facility, PRIMARY, E) == 30
    assert staged(facility, OVERFLOW) == []
    assert staged(facility, PRIMARY) == parts_of(1)[1:]
    assert "move" not in where(facility, PRIMARY) and "move" not in where(facility, OVERFLOW)
    assert [m.body for m in cqsb.browse(E)] == sent[E]
    read_back_everything(cqsb, sent, facility)


def test_the_next_scan_with_room_moves_it_whole(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    """No room for the whole multi-part message during the process; room made later:
    the next scan moves it whole, its parts on the overflow structure's staging
    queue in order, none left on the primary."""
    armed: list[Callable[[], None]] = []

    def fault(point: str) -> None:
        if point == "recorded" and armed:
            armed.pop()()

    cqsa, cqsb, sent = setup(facility, make_cqs, fault)
    armed.append(lambda: leave_room(cqsb, sent, 3))
    cqsa.overflow[Kind.MSGQ].check()
    assert staged(facility, PRIMARY) == parts_of(1)[1:]
    assert drain(cqsb, A, 40) == sent[A][:40]  # room for the rest of E
    del sent[A][:40]
    assert cqsa.overflow[Kind.MSGQ].scan(force=True) == ()
    assert ready(facility, OVERFLOW, E) == 31 and ready(facility, PRIMARY, E) == 0
    assert staged(facility, OVERFLOW) == parts_of(1)[1:]
    assert staged(facility, PRIMARY) == []
    read_back_everything(cqsb, sent, facility)


def stop_dead(facility: CouplingFacility, master: CQS) -> None:
    """The master stopped as a killed process would be, and declared failed."""
    master.stop_dead()
    with facility.connect(PRIMARY, "INSPECT") as conn:
        [user] = [u.user_id for u in conn.users() if u.name == master.name]
        conn.mark_failed(user)


def whole_on_one_structure(facility: CouplingFacility) -> None:
    """E's multi-part message has its staged parts, in order, on exactly one
    structure, and nothing is left on either move queue."""
    here = {name: staged(facility, name) for name in (PRIMARY, OVERFLOW)}
    assert sorted(here.values(), key=len) == [[], parts_of(1)[1:]], here
    assert "move" not in where(facility, PRIMARY) and "move" not in where(facility, OVERFLOW)


@pytest.mark.parametrize(
    ("point", "nth", "units", "room_later"),
    [
        ("on-move-queue", 2, None, True),  # part 1 on the move queue, no part moved
        ("on-move-queue", 2, 3, False),
        ("part-written", 1, None, True),  # a part on both structures
        ("part-written", 2, 3, False),
        ("part-written", 2, 3, True),
        ("part-written", 4, 5, False),  # every part over, part 1 will not fit
        ("written", 2, None, True),  # part 1 written, still on the move queue
        ("part-back", 1, 3, False),  # taking the parts back: one back, on both
        ("part-back", 2, 3, True),
    ],
)
def test_a_master_stopped_in_a_multipart_move_leaves_it_whole(
    facility: CouplingFacility,
    make_cqs: MakeCQS,
    point: str,
    nth: int,
    units: int | None,
    room_later: bool,
) -> None:
    """The master stops at a step of the multi-part message's move (``units``: the
    room the other CQS leaves on the overflow structure, ``None``: no filling); until
    a peer takes over, no reader sees part of the message (part 1 is on the move
    queue, or, once written, the message is whole on the overflow structure);
    the takeover, with room (``room_later``) or without, leaves it whole on one
    structure, its parts in order, and every message is read back once, in order."""
    armed: list[Callable[[], None]] = []
    seen: list[str] = []  # the steps of E's move (A's, in the setup, are not counted)

    def fault(at: str) -> None:
        if at == "recorded" and armed:
            armed.pop()()
            seen.append(at)
        elif seen:
            seen.append(at)
            if at == point and seen.count(at) == nth:
                raise SimulatedFailure(f"master stopped at {at} #{nth}")

    cqsa, cqsb, sent = setup(facility, make_cqs, fault)
    armed.append(lambda: units and leave_room(cqsb, sent, units))
    with pytest.raises(SimulatedFailure):
        cqsa.overflow[Kind.MSGQ].check()
    stop_dead(facility, cqsa)
    seen_now = [m.body for m in cqsb.browse(E)]  # E's message 1 whole, or not at all
    assert len(set(seen_now)) == len(seen_now) and set(seen_now) <= set(sent[E])
    if room_later:
        assert drain(cqsb, A, 40) == sent[A][:40]
        del sent[A][:40]
    assert cqsb.overflow[Kind.MSGQ].take_over()
    whole_on_one_structure(facility)
    if room_later:
        assert ready(facility, OVERFLOW, E) == 31 and ready(facility, PRIMARY, E) == 0
        assert staged(facility, OVERFLOW) == parts_of(1)[1:]
    else:
        assert staged(facility, PRIMARY) == parts_of(1)[1:]
    assert [m.body for m in cqsb.browse(E)] == sent[E]
    read_back_everything(cqsb, sent, facility)


def test_no_room_on_either_structure_keeps_it_off_the_queues_until_there_is(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    """A scan (not quiesced) moves the multi-part message; after its second part is
    written the other CQS fills the primary (the overflow structure is full already),
    so the third part finds no room and the first cannot go back to the primary
    either: part 1 stays on the primary's move queue, where no reader takes it.  The
    next scan with room on the primary takes the parts back (the message whole on the
    primary), and the one after it, with room on the overflow structure, moves it
    whole."""
    armed: list[Callable[[], None]] = []
    seen: list[str] = []

    def fault(at: str) -> None:
        if at == "recorded" and armed:
            armed.pop()()
        elif at == "part-written" and armed:
            seen.append(at)
            if len(seen) == 2:
                armed.pop()()

    cqsa, cqsb, sent = setup(facility, make_cqs, fault)
    armed.append(lambda: leave_room(cqsb, sent, 3))
    cqsa.overflow[Kind.MSGQ].check()
    assert staged(facility, PRIMARY) == parts_of(1)[1:]  # as in the first test
    armed.append(lambda: fill_overflow(cqsb, sent, B, UNIT_BODY, limit=100) and None)
    assert cqsa.overflow[Kind.MSGQ].scan(force=True) == ()
    assert not armed and len(seen) == 2
    assert [key for key, _ in where(facility, PRIMARY)["move"]] == [E]
    assert staged(facility, OVERFLOW) == parts_of(1)[1:2]  # the second went back
    assert staged(facility, PRIMARY) == parts_of(1)[2:]  # to the room it left
    assert sent[E][1] not in [m.body for m in cqsb.browse(E)]

    assert drain(cqsb, B, 10) == sent[B][:10]  # room on the primary
    del sent[B][:10]
    assert cqsa.overflow[Kind.MSGQ].scan(force=True) == ()
    assert staged(facility, PRIMARY) == parts_of(1)[1:]
    assert staged(facility, OVERFLOW) == []
    assert "move" not in where(facility, PRIMARY)
    assert [m.body for m in cqsb.browse(E)] == sent[E]

    assert drain(cqsb, A, 40) == sent[A][:40]  # room on the overflow structure
    del sent[A][:40]
    assert cqsa.overflow[Kind.MSGQ].scan(force=True) == ()
    assert ready(facility, OVERFLOW, E) == 31 and staged(facility, OVERFLOW) == parts_of(1)[1:]
    whole_on_one_structure(facility)
    read_back_everything(cqsb, sent, facility)


@pytest.mark.parametrize(
    ("nth", "then"), [(2, "locked"), (2, "deleted"), (2, "moved"), (1, "locked")]
)
def test_a_message_read_before_the_takeover_is_not_written_again(
    facility: CouplingFacility, make_cqs: MakeCQS, nth: int, then: str
) -> None:
    """The master stops once part 1 of E's ``nth`` message (2: the multi-part one, 1:
    the one-part one before it) is written to the overflow structure, before it is off
    the primary's move queue; a reader takes the message there before a peer takes
    over, and holds it (``locked``), deletes it or moves it to A.  The takeover finds
    it was written (its bytes on the lock or delete queue, its parts gone, or part 1
    elsewhere naming them) and does not write it again: read once, whole.  (A
    one-part message deleted or moved meanwhile cannot be told from one never
    written: docs/cqs.md, "Not done".)"""
    seen: list[str] = []  # the steps of E's move (A's, in the setup, are not counted)

    def fault(at: str) -> None:
        if seen and at == "written":
            seen.append(at)
            if seen.count(at) == nth:
                raise SimulatedFailure("master stopped once part 1 was written")

    cqsa, cqsb, sent = setup(facility, make_cqs, fault)
    seen.append("set up")
    with pytest.raises(SimulatedFailure):
        cqsa.overflow[Kind.MSGQ].check()
    stop_dead(facility, cqsa)
    assert drain(cqsb, E, nth - 1) == sent[E][: nth - 1]
    message = cqsb.read(E)
    assert message is not None and message.body == sent[E][nth - 1]
    assert message.token is not None
    del sent[E][:nth]
    if then == "deleted":
        cqsb.delete(message.token)
    elif then == "moved":
        cqsb.move(message.token, A)
        sent[A].append(message.body)
    assert cqsb.overflow[Kind.MSGQ].take_over()
    if then == "locked":
        cqsb.delete(message.token)
    assert "move" not in where(facility, PRIMARY)
    read_back_everything(cqsb, sent, facility)
