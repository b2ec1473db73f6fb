"""CQSMOVE, CQSDEL, CQSUNLCK, CQSBROWSE and CQSQUERY, with the lists after each."""

from __future__ import annotations

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cqs import CQSReason, Kind, LockToken, NotLocked, make_name
from sharedq.testing import ManualClock

from .conftest import MSGQ, MakeCQS
from .helpers import SUSPEND_A, TRANA, TRANB, where


def test_unlock_puts_it_back_first_by_default_or_last_or_elsewhere(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    cqs = make_cqs("IMSA")
    for body in (b"m1", b"m2", b"m3"):
        cqs.put(TRANA, body)
    m1 = cqs.read(TRANA)
    assert m1 is not None and m1.token is not None
    cqs.unlock(m1.token)
    assert where(facility, MSGQ)["ready"] == [(TRANA, b"m1"), (TRANA, b"m2"), (TRANA, b"m3")]

    m1 = cqs.read(TRANA)
    assert m1 is not None and m1.token is not None
    cqs.unlock(m1.token, first=False)
    assert where(facility, MSGQ)["ready"] == [(TRANA, b"m2"), (TRANA, b"m3"), (TRANA, b"m1")]

    m2 = cqs.read(TRANA)
    assert m2 is not None and m2.token is not None
    cqs.unlock(m2.token, to_queue=TRANB)
    assert sorted(where(facility, MSGQ)["ready"]) == sorted(
        [(TRANA, b"m3"), (TRANA, b"m1"), (TRANB, b"m2")]
    )


def test_only_the_holder_unlocks_or_deletes_unless_forced(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    cqsa, cqsb = make_cqs("IMSA"), make_cqs("IMSB")
    cqsa.put(TRANA, b"mine")
    message = cqsa.read(TRANA)
    assert message is not None and message.token is not None
    for request in (cqsb.delete, cqsb.unlock, cqsb.browse_locked):
        with pytest.raises(NotLocked) as refused:
            request(message.token)
        assert refused.value.reason is CQSReason.NOT_LOCKED_BY_YOU
    assert where(facility, MSGQ) == {"lock": [(TRANA, b"CQSIMSA")]}

    # IMSA failed: IMSB forces the lock back to the queue.
    assert cqsb.locks(owner="CQSIMSA") == [message.token]
    cqsb.unlock(message.token, force=True)
    assert where(facility, MSGQ) == {"ready": [(TRANA, b"mine")]}
    with pytest.raises(NotLocked) as gone:
        cqsa.delete(message.token)
    assert gone.value.reason is CQSReason.NOT_LOCKED


def test_move_goes_through_the_move_queue_to_its_target(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    steps: list[str] = []

    def hook(request: str, structure: str, before: bool) -> None:
        if not before and request == "move":
            steps.append(",".join(sorted(where(facility, MSGQ))))

    cqs = make_cqs("IMSA", faults=hook)
    cqs.put(TRANA, [b"part1", b"part2"])
    # The first message of a queue, moved to another (the seed's suspend queue).
    moved = cqs.move(TRANA, SUSPEND_A)
    assert moved is not None
    assert steps == ["move,staging", "ready,staging"]
    lists = where(facility, MSGQ)
    assert lists["ready"] == [(SUSPEND_A, b"part1")]
    [message] = cqs.browse(SUSPEND_A)
    assert message.parts == (b"part1", b"part2")
    assert cqs.move(TRANA, SUSPEND_A) is None  # nothing left to move

    # A locked message moved: it leaves the lock queue for the target's ready queue.
    locked = cqs.read(SUSPEND_A)
    assert locked is not None and locked.token is not None
    cqs.move(locked.token, TRANB)
    assert where(facility, MSGQ)["ready"] == [(TRANB, b"part1")]


def test_delete_takes_the_staging_parts_with_it_through_the_delete_queue(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    seen: list[str] = []

    def hook(request: str, structure: str, before: bool) -> None:
        if not before and request in ("move", "delete"):
            seen.append(",".join(sorted(where(facility, MSGQ))))

    cqs = make_cqs("IMSA", faults=hook)
    cqs.put(TRANA, [b"a", b"b", b"c"])
    message = cqs.read(TRANA)
    assert message is not None and message.token is not None
    seen.clear()
    cqs.delete(message.token)
    assert seen == ["delete,staging", "delete,staging", "delete", ""]
    assert where(facility, MSGQ) == {}


def test_query_counts_ready_and_locked_and_ages_the_oldest(
    make_cqs: MakeCQS, clock: ManualClock
) -> None:
    cqs = make_cqs("IMSA")
    cqs.put(TRANA, b"old")
    clock.advance_s(2.0)
    cqs.put(TRANA, b"new")
    cqs.put(TRANA, b"local", local=True)
    [counts, empty] = cqs.query([TRANA, TRANB])
    assert (counts.ready, counts.locked) == (2, 1)
    assert counts.oldest_age_s is not None and 2.0 <= counts.oldest_age_s < 2.1
    assert (empty.ready, empty.locked, empty.oldest_age_s) == (0, 0, None)
    stats = cqs.statistics()
    assert stats.entries == 3 and stats.list_count == 192 and stats.element_size == 512


def test_browse_leaves_messages_where_they_are(make_cqs: MakeCQS) -> None:
    cqs = make_cqs("IMSA")
    cqs.put(TRANA, b"one")
    cqs.put(TRANA, [b"tw", b"o"])
    assert [m.body for m in cqs.browse(TRANA)] == [b"one", b"two"]
    assert [m.body for m in cqs.browse(TRANA, limit=1)] == [b"one"]
    assert all(m.token is None for m in cqs.browse(TRANA))
    assert [c.ready for c in cqs.query([TRANA])] == [2]


def test_a_large_body_is_split_into_parts_and_read_back_whole(make_cqs: MakeCQS) -> None:
    cqs = make_cqs("IMSA")
    body = bytes(range(256)) * 600  # 153,600 bytes: three entries
    cqs.put(TRANA, body)
    message = cqs.read(TRANA)
    assert message is not None and message.body == body and len(message.parts) == 3


def test_emhq_queues_are_their_own(facility: CouplingFacility, make_cqs: MakeCQS) -> None:
    cqs = make_cqs("IMSA", emhq="EMHQ01")
    program = make_name(1, "PSBA")
    cqs.put(program, b"fast path", kind=Kind.EMHQ)
    assert cqs.read(program) is None  # the MSGQ queue of that name is empty
    message = cqs.read(program, kind=Kind.EMHQ)
    assert message is not None and message.token is not None
    assert message.token.kind is Kind.EMHQ
    cqs.delete(message.token)
    assert where(facility, "EMHQ01") == {}
    assert isinstance(message.token, LockToken)
