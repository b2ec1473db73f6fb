"""An IMS that fails in process (``IMS.stop_dead``, redbook §6.1): the messages its
regions held stay locked by its CQS, no sync point or backout is made, and its next
incarnation's emergency restart processes each of them exactly once."""

from __future__ import annotations

import threading

import pytest

from sharedq.cf import CouplingFacility
from sharedq.ims import DLI, IMS, IMSError, IMSReason, Lterm, Program, Region, SystemDefinition
from sharedq.ims import Transaction as Tran

from .conftest import MSGQ, MakeIMS
from .helpers import WAIT_S, Gate, define, echo, take, until, where

TRANA = Tran("TRANA", 1, "PGMA")
HELD = 3
QUEUED = 2


def front_end() -> SystemDefinition:
    return SystemDefinition(
        "IMSA",
        transactions=(Tran("TRANA", 1, "PGMA", remote=True),),
        programs=(Program("PGMA"),),
        lterms=(Lterm("LTERMA", "NODE1"),),
    )


def back_end() -> SystemDefinition:
    regions = tuple(Region(f"MPR{n}", (1,)) for n in range(1, HELD + 1))
    return define("IMSB", regions=regions, transactions=(TRANA,))


class Holder:
    """A program that reads one message, waits at a gate named by it, then inserts a
    reply and asks for the next (a sync point): what it does after its IMS died."""

    def __init__(self) -> None:
        self.gate = Gate()
        self.after: list[bytes | None] = []
        self.done = threading.Semaphore(0)

    def __call__(self, dli: DLI) -> None:
        segment = dli.io.gu()
        if segment is None:  # another region read it first: QC
            return
        self.gate.stop_at(segment.decode())
        dli.io.isrt(b"LATE " + segment)
        self.after.append(dli.io.gu())
        self.done.release()


def test_stop_dead_then_emergency_restart_processes_each_held_message_once(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    imsa = make_ims(front_end(), {"PGMA": echo()})
    holder = Holder()
    dead = make_ims(back_end(), {"PGMA": holder})
    node1 = imsa.logon("NODE1")
    sent = [f"TRANA {n:02}" for n in range(HELD + QUEUED)]
    for text in sent[:HELD]:
        assert node1.enter(text).routing == "global"
        holder.gate.wait_reached(text)
    for text in sent[HELD:]:
        node1.enter(text)
    dead.stop_dead()
    on = where(facility, MSGQ)
    assert len(on["lock"]) == HELD  # locked by the dead IMS's CQS
    assert on["\x01TRANA"] == [t.encode() for t in sent[HELD:]]
    with pytest.raises(IMSError) as caught:
        dead.logon("NODE9")
    assert caught.value.reason is IMSReason.NOT_STARTED
    for text in sent[:HELD]:  # the dead IMS's programs go on: nothing reaches the structure
        holder.gate.open(text)
    for _ in range(HELD):
        assert holder.done.acquire(timeout=WAIT_S)
    assert holder.after == [None] * HELD  # QC: the IMS is gone
    assert len(where(facility, MSGQ)["lock"]) == HELD
    again = IMS(facility, back_end(), {"PGMA": echo()}, msgq=MSGQ)
    try:
        again.start(restart="emergency")
        assert again.restarted.requeued == HELD
        replies = take(node1, len(sent))
        assert sorted(replies) == sorted(f"OUT {t}" for t in sent)
        assert until(lambda: again.counts["processed"] == len(sent))  # each exactly once
        assert until(lambda: where(facility, MSGQ) == {})
        assert again.counts["processed"] == len(sent)  # and not more
        assert node1.receive(timeout=0) is None
    finally:
        again.shutdown()
