"""The overflow structure full (redbook §1.13: "if the overflow structure fills, only
queues in it are affected; the primary continues"), on memory and on Redis.

The primary has 1,000 data elements of 512 bytes; a message of ``UNIT_BODY`` bytes
takes ten.  The overflow structure is allocated here, smaller than the primary (the
redbook's sample sizes: 100,000 and 40,000), so that it fills after a few puts; a CQS
connecting to a pair whose overflow structure exists uses it as it is.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sharedq.cf import CFError, CouplingFacility
from sharedq.cf.params import StructureParams
from sharedq.cqs import CQS, CQSError, CQSReason, Kind, StructurePair, make_name
from sharedq.cqs.errors import CapacityExceeded
from sharedq.cqs.overflow import OverflowOptions
from tests.cqs.conftest import MakeCQS
from tests.cqs.helpers import where

PRIMARY, OVERFLOW = "OVFQ01", "OVFQ02"
UNIT_BODY = 10 * 512 - 62  # ten elements with the CQS's 62-byte prefix
A, B, C, D, E, F = (make_name(1, f"TRAN{x}") for x in "ABCDEF")
PAIR = StructurePair(PRIMARY, OVERFLOW)

Sent = dict[bytes, list[bytes]]


def allocate(facility: CouplingFacility, name: str, *, elements: int, entries: int) -> None:
    params = StructureParams.for_capacity(
        name, list_count=192, entries=entries, elements=elements, element_size=512, lock_count=16
    )
    assert facility.create(params).max_elements == elements


def options(**kw: object) -> OverflowOptions:
    kw.setdefault("check_every", 10**6)
    kw.setdefault("refresh_s", 0.0)
    return OverflowOptions(**kw)  # type: ignore[arg-type]


def body(queue: bytes, i: int, size: int = UNIT_BODY) -> bytes:
    """A message that says which it is, ``size`` bytes (at least its tag)."""
    tag = b"%s #%04d" % (queue[1:9].rstrip(), i)
    return tag + b"x" * (size - len(tag))


def send(cqs: CQS, sent: Sent, queue: bytes, size: int = UNIT_BODY) -> None:
    """Put the queue's next message and remember it (only once it is accepted)."""
    message = body(queue, len(sent.setdefault(queue, [])), size)
    cqs.put(queue, message)
    sent[queue].append(message)


def fill_overflow(cqs: CQS, sent: Sent, queue: bytes, size: int, limit: int) -> CQSError:
    """Put to ``queue`` (in the overflow structure) until a put is refused; the error."""
    for _ in range(limit):
        try:
            send(cqs, sent, queue, size)
        except CQSError as error:
            return error
    raise AssertionError(f"{limit} puts to {queue!r} and the overflow structure not full")


def counts(facility: CouplingFacility) -> dict[str, object]:
    """Every message entry of both structures, by queue role, and their counts."""
    found: dict[str, object] = {}
    for name in (PRIMARY, OVERFLOW):
        with facility.connect(name, "COUNT") as conn:
            stats = conn.statistics()
        found[name] = (stats.entries, stats.elements, where(facility, name))
    return found


def drain(cqs: CQS, queue: bytes, count: int | None = None) -> list[bytes]:
    """Read and delete ``count`` messages of ``queue`` (all: ``None``); their bodies."""
    bodies: list[bytes] = []
    while count is None or len(bodies) < count:
        message = cqs.read(queue)
        if message is None:
            break
        assert message.token is not None
        bodies.append(message.body)
        cqs.delete(message.token)
    return bodies


def first_overflow(
    facility: CouplingFacility, make_cqs: MakeCQS, sent: Sent, **kw: object
) -> tuple[CQS, CQS]:
    """Two CQSs on the pair; A (30 of 70 %) moves to the overflow structure."""
    cqsa = make_cqs("IMSA", msgq=PAIR, overflow=options(**kw))
    cqsb = make_cqs("IMSB", msgq=PAIR, overflow=options())
    for queue, n in {A: 30, B: 20, C: 10, D: 10}.items():
        for _ in range(n):
            send(cqsa, sent, queue)
    cqsa.overflow[Kind.MSGQ].check()  # done already when it checks at every put
    assert in_overflow(cqsa) == [A]
    assert [key for key, _ in where(facility, OVERFLOW)["ready"]] == [A] * 30
    return cqsa, cqsb


def in_overflow(cqs: CQS) -> list[bytes]:
    queues = cqs.overflow[Kind.MSGQ].state()["queues"]
    assert isinstance(queues, list)
    return [q["queue"] for q in queues]


def read_back_everything(cqs: CQS, sent: Sent, facility: CouplingFacility) -> None:
    """Every message put and not yet read comes back, in order, once; then both
    structures hold no client message (ready, locked or moving)."""
    for queue, bodies in sent.items():
        assert drain(cqs, queue) == bodies, queue
    for name in (PRIMARY, OVERFLOW):
        left = where(facility, name)
        assert not any(left.get(role) for role in ("ready", "lock", "move", "staging")), name


@pytest.mark.parametrize(
    ("by", "elements", "entries", "size"),
    [("elements", 400, 800, UNIT_BODY), ("entries", 2000, 40, 100)],
)
def test_a_full_overflow_structure_refuses_only_its_queues_puts(
    facility: CouplingFacility, make_cqs: MakeCQS, by: str, elements: int, entries: int, size: int
) -> None:
    """Full of elements (big messages) or of list entries (small ones): a put to A,
    whose queue is in the overflow structure, is refused with the CQS's own
    STRUCTURE_FULL naming that structure, by either CQS, a multi-part one too, and
    nothing stored changes; puts to the primary's queues go on; once messages of A
    are read and deleted, puts to A are taken again; nothing is lost."""
    allocate(facility, PRIMARY, elements=1000, entries=1400)
    allocate(facility, OVERFLOW, elements=elements, entries=entries)
    sent: Sent = {}
    cqsa, cqsb = first_overflow(facility, make_cqs, sent)
    refused = fill_overflow(cqsa, sent, A, size, limit=200)
    assert isinstance(refused, CapacityExceeded) and not isinstance(refused, CFError)
    assert refused.reason is CQSReason.STRUCTURE_FULL
    assert OVERFLOW in str(refused) and "TRANA" in str(refused)
    assert ("entries" if by == "entries" else "elements") in str(refused)
    before = counts(facility)

    attempts: list[Callable[[], object]] = [
        lambda: cqsa.put(A, b"one more"),
        lambda: cqsb.put(A, b"from the other CQS"),
        lambda: cqsa.put(A, [b"part 1", b"part 2", b"part 3"]),
    ]
    for attempt in attempts:
        with pytest.raises(CapacityExceeded) as again:
            attempt()
        assert again.value.reason is CQSReason.STRUCTURE_FULL
    assert counts(facility) == before  # nothing stored changed by the refusals

    for cqs in (cqsa, cqsb):  # the primary's queues, old and new, go on
        for queue in (B, C, D, E):
            send(cqs, sent, queue)
    primary = where(facility, PRIMARY)["ready"]
    assert [key for key, _ in primary].count(E) == 2
    assert counts(facility)[OVERFLOW] == before[OVERFLOW]
    assert in_overflow(cqsa) == in_overflow(cqsb) == [A]

    assert drain(cqsb, A, 2) == sent[A][:2]  # room made on the overflow structure
    del sent[A][:2]
    send(cqsa, sent, A, size)
    send(cqsb, sent, A, size)
    assert [key for key, _ in where(facility, OVERFLOW)["ready"]].count(A) == len(sent[A])
    read_back_everything(cqsa, sent, facility)


def test_an_overflow_process_with_no_room_leaves_the_queue_in_the_primary(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    """The overflow structure full, the primary reaches the threshold again: the
    queue selected (E) does not fit, so it stays whole in the primary, where its puts
    go on; the put whose check ran the process is taken like any other (it used to
    fail with the list structure's own StructureFull after its message was stored,
    and left a message of E on the move queue, readable by no one)."""
    allocate(facility, PRIMARY, elements=1000, entries=1400)
    allocate(facility, OVERFLOW, elements=400, entries=800)
    told: list[tuple[str, tuple[bytes, ...]]] = []
    sent: Sent = {}
    cqsa, cqsb = first_overflow(
        facility, make_cqs, sent, check_every=1, notify=lambda s, e, q: told.append((e, q))
    )
    fill_overflow(cqsa, sent, A, UNIT_BODY, limit=20)
    for _ in range(30):  # the 30th takes the primary to 70 % again: E, the largest
        send(cqsa, sent, E)
    assert told[-1] == ("overflow", ())
    assert in_overflow(cqsa) == [A]
    assert [key for key, _ in where(facility, PRIMARY)["ready"]].count(E) == 30
    assert "move" not in where(facility, PRIMARY)
    send(cqsa, sent, E)  # E's puts go on (each check runs the process again: no room)
    send(cqsb, sent, B)
    with pytest.raises(CapacityExceeded):
        cqsb.put(A, b"still full")
    read_back_everything(cqsb, sent, facility)


def test_a_move_that_finds_the_overflow_structure_full_goes_back(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    """The room is counted under the quiesce, but puts to queues already in the
    overflow structure go on meanwhile: here another CQS fills it between the count
    and the moves, leaving room for ten of E's thirty messages.  Those ten move; the
    eleventh goes back to the head of E on the primary and the moves stop; the process
    ends normally, E is read whole and in order from both structures, and the next
    scan with room moves the rest."""
    allocate(facility, PRIMARY, elements=1000, entries=1400)
    allocate(facility, OVERFLOW, elements=1000, entries=1400)
    sent: Sent = {}
    armed: list[Callable[[], None]] = []

    def fault(point: str) -> None:
        if point == "recorded" and armed:
            armed.pop()()

    cqsa, cqsb = first_overflow(facility, make_cqs, sent, faults=fault)
    for _ in range(30):
        send(cqsa, sent, E)

    def fill_meanwhile() -> None:
        fill_overflow(cqsb, sent, A, UNIT_BODY, limit=100)
        assert drain(cqsb, A, 10) == sent[A][:10]
        del sent[A][:10]

    armed.append(fill_meanwhile)
    report = cqsa.overflow[Kind.MSGQ].check()
    assert not armed  # the other CQS filled the overflow structure during the process
    assert report is not None and report.approved == (E,) and report.full == ()
    assert report.moved == 10
    assert in_overflow(cqsa) == [A, E]
    assert [key for key, _ in where(facility, OVERFLOW)["ready"]].count(E) == 10
    assert [key for key, _ in where(facility, PRIMARY)["ready"]].count(E) == 20
    assert "move" not in where(facility, PRIMARY)
    with pytest.raises(CapacityExceeded) as refused:
        cqsa.put(E, b"E is in the full overflow structure now")
    assert refused.value.reason is CQSReason.STRUCTURE_FULL
    send(cqsa, sent, B)
    assert drain(cqsb, A, 20) == sent[A][:20]  # room for the rest of E
    del sent[A][:20]
    assert cqsa.overflow[Kind.MSGQ].scan(force=True) == ()
    assert [key for key, _ in where(facility, OVERFLOW)["ready"]].count(E) == 30
    assert E not in [key for key, _ in where(facility, PRIMARY)["ready"]]
    read_back_everything(cqsb, sent, facility)
