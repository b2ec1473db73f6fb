"""Requests across the two structures of a pair in overflow (issue 18's gaps), on
memory and on Redis: ``move`` and ``unlock(to_queue=...)`` between a queue in overflow
and one in the primary, each stopped before each of its three steps; reads of a queue
that a CQS's stale table routes to the structure that does not hold its messages."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cf.types import HIGHEST_KEY, LOWEST_KEY
from sharedq.cqs import CQS, CQSError, CQSJournalFailed, CQSReason, Kind, make_name
from sharedq.cqs.layout import Private
from sharedq.recovery import RecoverySettings
from sharedq.testing import SimulatedFailure
from tests.cqs.conftest import MakeCQS
from tests.cqs.helpers import MSGQ_LAYOUT
from tests.cqs.test_interrupted import Crasher
from tests.cqs.test_overflow import OVERFLOW, PRIMARY, A, B, C, D, allocate, fill, options, pair

E = make_name(1, "TRANE")  # a queue of the primary


def overflowed(make_cqs: MakeCQS, **kw: object) -> CQS:
    """A CQS on a pair whose queue A (30 messages) is in the overflow structure (the
    pair allocated first)."""
    cqs = make_cqs("IMSA", msgq=pair(True), overflow=options(), **kw)
    fill(cqs, {A: 30, B: 20, C: 10, D: 10})
    report = cqs.overflow[Kind.MSGQ].check()
    assert report is not None and report.approved == (A,)
    return cqs


def on(facility: CouplingFacility, structure: str, queue: bytes) -> list[bytes]:
    """The bodies' last bytes of ``queue``'s messages on one structure, in order."""
    header = MSGQ_LAYOUT.header(queue)
    with facility.connect(structure, "LOOK") as conn:
        return [e.data[-6:] for e in conn.scan(header, queue, queue)]


def moving(facility: CouplingFacility) -> int:
    """Entries on either structure's move queues."""
    with facility.connect(PRIMARY, "L1") as one, facility.connect(OVERFLOW, "L2") as two:
        return sum(
            len(list(conn.scan(via, LOWEST_KEY, HIGHEST_KEY)))
            for conn in (one, two)
            for via in Private.MOVE.headers()
        )


def test_move_by_name_primary_to_overflow(facility: CouplingFacility, make_cqs: MakeCQS) -> None:
    allocate(facility)
    cqs = overflowed(make_cqs)
    cqs.put(E, b"from E")
    assert cqs.move(E, A) is not None
    assert on(facility, PRIMARY, A) == [] and on(facility, PRIMARY, E) == []
    assert on(facility, OVERFLOW, A)[-1] == b"from E"  # at the tail, as a move
    assert cqs.move(E, A) is None  # empty: not an error


def test_move_and_unlock_overflow_to_primary(facility: CouplingFacility, make_cqs: MakeCQS) -> None:
    allocate(facility)
    cqs = overflowed(make_cqs)
    cqs.put(A, b"last A")
    assert cqs.move(A, E) is not None  # by name: A's first
    message = cqs.read(A)
    assert message is not None
    cqs.move(message.token, E)  # a lock of the overflow structure to a primary queue
    message = cqs.read(A)
    assert message is not None
    cqs.unlock(message.token, to_queue=E)  # at the head, the default
    assert cqs.query([A, E])[0].ready == 28 and cqs.query([E])[0].ready == 3
    assert len(on(facility, PRIMARY, E)) == 3 and on(facility, OVERFLOW, E) == []
    assert on(facility, OVERFLOW, A)[-1] == b"last A"
    assert moving(facility) == 0


def test_unlock_primary_lock_to_a_queue_in_overflow(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    allocate(facility)
    cqs = overflowed(make_cqs)
    cqs.put(E, b"from E")
    message = cqs.read(E)
    assert message is not None
    cqs.unlock(message.token, to_queue=A, first=False)
    assert on(facility, OVERFLOW, A)[-1] == b"from E" and len(on(facility, OVERFLOW, A)) == 31
    assert cqs.read(E) is None


def test_a_multi_part_message_does_not_cross(facility: CouplingFacility, make_cqs: MakeCQS) -> None:
    allocate(facility)
    cqs = overflowed(make_cqs)
    cqs.put(E, [b"part 1", b"part 2"])
    with pytest.raises(CQSError) as caught:
        cqs.move(E, A)
    assert caught.value.reason == CQSReason.QUEUE_IN_OVERFLOW
    assert len(cqs.browse(E)) == 1  # untouched


def restart(facility: CouplingFacility, dead: CQS, make_cqs: MakeCQS) -> CQS:
    dead.stop_dead()
    for structure in (PRIMARY, OVERFLOW):  # a peer declares it failed on both
        with facility.connect(structure, "INSPECT") as peer:
            [user] = [u.user_id for u in peer.users() if u.name == dead.name]
            peer.mark_failed(user)
    return make_cqs(dead.system, msgq=pair(True), overflow=options())


STEPS: dict[str, Callable[[CQS], object]] = {
    "move E to A": lambda cqs: cqs.move(E, A),
    "move A to E": lambda cqs: cqs.move(A, E),
    "move A's lock to E": lambda cqs: cqs.move(cqs.read(A).token, E),  # type: ignore[union-attr]
    "unlock A's lock to E": lambda cqs: cqs.unlock(cqs.read(A).token, to_queue=E),  # type: ignore[union-attr]
    "unlock E's lock to A": lambda cqs: cqs.unlock(cqs.read(E).token, to_queue=A),  # type: ignore[union-attr]
}


@pytest.mark.parametrize("at", [1, 2, 3, None])
@pytest.mark.parametrize("step", list(STEPS))
def test_a_crossing_stopped_at_any_step(
    facility: CouplingFacility, make_cqs: MakeCQS, step: str, at: int | None
) -> None:
    """Stopped before its first, second or third change: after the CQS connects again
    the message is once on its target, nothing on a move queue, nothing lost."""
    allocate(facility)
    crasher = Crasher()
    cqs = overflowed(make_cqs, faults=crasher)
    cqs.put(E, b"from E")
    reads = "lock" in step  # the read that takes the lock is a change of its own
    crasher.arm(None if at is None else at + reads)
    try:
        STEPS[step](cqs)
        stopped = False
    except SimulatedFailure:
        stopped = True
        cqs = restart(facility, cqs, make_cqs)
    crasher.arm(None)
    assert stopped is (at is not None)
    to_e = step.endswith("to E")
    counts = {q: c.ready + c.locked for q, c in zip((A, E), cqs.query([A, E]), strict=True)}
    if at == 1:  # stopped before anything changed: the request failed, nothing moved
        assert counts == {A: 30, E: 1}
    else:
        assert counts == ({A: 29, E: 2} if to_e else {A: 31, E: 0})
        assert cqs.query([A, E])[0].locked == cqs.query([E])[0].locked == 0
    assert moving(facility) == 0
    assert on(facility, PRIMARY, A) == [] and on(facility, OVERFLOW, E) == []


def test_a_read_through_a_stale_table_finds_the_overflow(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    """A CQS that has not read the table since A moved routes A to the primary, finds
    it empty, reads the table again and takes A's first message from the overflow."""
    allocate(facility)
    late = make_cqs("IMSB", msgq=pair(True), overflow=options(refresh_s=3600.0))
    master = overflowed(make_cqs)
    assert late.overflow[Kind.MSGQ].table.mode is False  # stale
    message = late.read(A)
    assert message is not None and len(on(facility, OVERFLOW, A)) == 29
    late.delete(message.token)  # where the lock is: the overflow structure
    assert master.query([A])[0].ready == 29


def test_a_late_put_on_the_primary_is_read_after_the_overflow(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    """A late CQS's put to the primary of a queue in overflow: reads take the overflow's
    messages first, then, finding it empty, the primary's, before any scan; browse
    and query see both."""
    allocate(facility)
    late = make_cqs("IMSB", msgq=pair(True), overflow=options(refresh_s=3600.0))
    master = overflowed(make_cqs)
    late.put(A, b"late A")
    assert master.query([A])[0].ready == 31  # both structures, in overflow mode
    assert master.browse(A)[-1].body == b"late A"  # in the order reads take them
    assert len(master.browse(A, limit=30)) == 30
    for _ in range(30):
        message = master.read(A)
        assert message is not None and message.body != b"late A"
        master.delete(message.token)
    message = master.read(A)
    assert message is not None and message.body == b"late A"
    master.delete(message.token)
    assert master.read(A) is None


def test_a_client_restart_finds_its_locks_in_the_overflow_structure(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    """CQSRSYNC and the client's cold start see the locks of both structures."""
    allocate(facility)
    cqs = overflowed(make_cqs)
    cqs.put(E, b"from E")
    done, again, cold = cqs.read(A), cqs.read(A), cqs.read(E)
    assert done is not None and again is not None and cold is not None
    assert len(cqs.locks()) == 3
    report = cqs.resync([done.uow])
    assert [m.entry_id for m in report.deleted] == [done.entry_id]
    assert {m.queue for m in report.requeued} == {A, E}
    assert cqs.query([A])[0].ready == 29 and cqs.locks() == []
    cqs.read(A), cqs.read(E)
    assert {m.queue for m in cqs.cold_start_client()} == {A, E}
    assert {m.queue for m in cqs.cold_queue()} == {A, E} and cqs.locks() == []


def test_a_move_by_name_that_loses_the_race_moves_the_next(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    """Another CQS reads E's first message between this CQS's look and its move: the
    crossing takes the next one, not an error."""
    allocate(facility)
    other = make_cqs("IMSB", msgq=pair(True), overflow=options())
    taken: list[object] = []

    def race(request: str, structure: str, before: bool) -> None:
        if request == "move" and before and not taken and armed:
            taken.append(other.read(E))

    armed = False
    cqs = overflowed(make_cqs, faults=race)
    cqs.put(E, b"e1"), cqs.put(E, b"e2")
    armed = True
    assert cqs.move(E, A) is not None
    assert [m.body for m in taken] == [b"e1"]  # type: ignore[attr-defined]
    assert cqs.browse(A)[-1].body == b"e2" and cqs.query([E])[0].locked == 1


@pytest.mark.parametrize(
    ("step", "source"), [("move A's lock to E", OVERFLOW), ("move E to A", PRIMARY)]
)
def test_a_crossing_whose_first_record_fails_is_taken_back(
    facility: CouplingFacility, make_cqs: MakeCQS, tmp_path: Path, step: str, source: str
) -> None:
    """JOURNAL_FAILED at step 1 (the source structure's record): the message is back
    where it was, with its lock, and nothing is on a move queue."""
    allocate(facility)
    settings = RecoverySettings(tmp_path / "recovery", strchkpt=None)
    cqs = overflowed(make_cqs, recovery=settings)
    cqs.put(E, b"from E")
    token = cqs.read(A).token if "lock" in step else None  # type: ignore[union-attr]
    assert cqs.recovery_log is not None
    listeners = cqs.recovery_log.journal.listeners
    original, seen = listeners[source], [0]

    def listener() -> None:
        seen[0] += 1
        if seen[0] == 1:
            raise OSError("journal fault injected by the test")
        original()

    listeners[source] = listener
    with pytest.raises(CQSJournalFailed):
        cqs.move(token, E) if token else cqs.move(E, A)
    assert moving(facility) == 0
    assert [(c.ready, c.locked) for c in cqs.query([A, E])] == (
        [(29, 1), (1, 0)] if token else [(30, 0), (1, 0)]
    )
