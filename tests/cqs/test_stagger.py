"""Telling one client first (``stagger_s``): what it saves, and that work still
reaches every client when the first does not take it."""

from __future__ import annotations

import threading

import pytest

from sharedq.clock import retry_until
from sharedq.cqs import CQS, CQSReason, InvalidCQSRequest, Kind

from .conftest import MakeCQS
from .helpers import TRANA

SYSTEMS = ("IMSA", "IMSB", "IMSC")
MESSAGES = 10


def schedulers(make_cqs: MakeCQS, stagger_s: float | None) -> tuple[list[CQS], threading.Event]:
    """Three CQSs whose clients read and delete a message as soon as they are told."""
    taken = threading.Event()
    cqss: list[CQS] = []

    def client(cqs_of: list[CQS], index: int) -> object:
        def told(kind: Kind, queue: bytes) -> None:
            cqs = cqs_of[index]
            message = cqs.read(queue)
            if message is not None and message.token is not None:
                cqs.delete(message.token)
                taken.set()

        return told

    for index, system in enumerate(SYSTEMS):
        cqss.append(make_cqs(system, on_work=client(cqss, index), stagger_s=stagger_s))
    for cqs in cqss:
        cqs.register(TRANA)
    return cqss, taken


def settled(cqss: list[CQS], told: int, spared: int) -> bool:
    counts = [c.notifications() for c in cqss]
    return sum(n["told"] for n in counts) == told and sum(n["spared"] for n in counts) == spared


@pytest.mark.parametrize("stagger_s", [None, 3600.0])
def test_one_message_at_a_time_wakes_every_client_or_one(
    make_cqs: MakeCQS, stagger_s: float | None
) -> None:
    cqss, taken = schedulers(make_cqs, stagger_s)
    for n in range(MESSAGES):
        taken.clear()
        cqss[n % 3].put(TRANA, b"message %d" % n)
        assert taken.wait(30)  # some client read and deleted it
        # The seed's way: every registered client is told of every message (each wake-up
        # but one finds the queue empty).  Staggered: one is told, the two others hear
        # the queue go empty before their turn.
        told, spared = (n + 1, 2 * (n + 1)) if stagger_s else (3 * (n + 1), 0)
        assert retry_until(
            lambda t=told, s=spared: settled(cqss, t, s), timeout_s=30, first_pause_s=0.01
        )
    assert [c.query([TRANA])[0].ready for c in cqss[:1]] == [0]


def test_work_the_first_does_not_take_reaches_the_others_in_turn(make_cqs: MakeCQS) -> None:
    cqss = [make_cqs(s, stagger_s=0.05) for s in SYSTEMS]  # nobody reads
    for cqs in cqss:
        cqs.register(TRANA)
    cqss[0].put(TRANA, b"still here")
    for cqs in cqss:
        assert cqs.wait_for_work(30) == (Kind.MSGQ, TRANA)
    assert sum(c.notifications()["told"] for c in cqss) == 3


def test_stagger_must_be_a_positive_number_of_seconds(make_cqs: MakeCQS) -> None:
    for bad in (0, -1, True, "1", 4000):
        with pytest.raises(InvalidCQSRequest) as refused:
            make_cqs("IMSA", stagger_s=bad, connect=False)
        assert refused.value.reason is CQSReason.BAD_ARGUMENT
