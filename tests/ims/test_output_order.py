"""Committed output the structure had no room for keeps the order it was made in.

The IMS keeps such output in a pending list; its dispatcher retries it (b8410ec).  Two
races put output out of order before that fix, and each is driven here the same way
every time, through the CQS's fault hook (called before and after each structure
request on the thread making it): the dispatcher's retries and the region's sync point
are held at chosen requests until the other has reached its own.

* The dispatcher took the whole list and put a refused output back *after* one a sync
  point had queued meanwhile (CI under load: ``['OUT 2', 'OUT 1']``).
* A sync point put its output straight to the structure while older output was still
  waiting for room.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass

from sharedq.cf import CouplingFacility
from sharedq.cqs import CQS
from sharedq.ims import DLI, Lterm, Transaction
from sharedq.testing import ManualClock

from .conftest import MSGQ, MakeIMS
from .helpers import WAIT_S, Gate, define, drain, fill, take, until

TRANA = Transaction("TRANA", 1, "PGMA")
LTERMA = Lterm("LTERMA", "NODE1")


@dataclass(frozen=True)
class Step:
    """At the ``nth`` call of ``who``'s ``request`` (``before`` it, or after it was
    made): say ``says`` has happened, then wait until ``waits`` has."""

    who: str  # "region" (the program's thread) or "dispatcher" (the IMS's)
    request: str  # "put" (any write request) or a structure request's name
    before: bool
    nth: int
    says: str | None = None
    waits: str | None = None


class Interleaving:
    """A CQS fault hook that plays :class:`Step` s.  The region is the thread the
    program runs on (it says so: :meth:`region_is_here`); a put from a thread that is
    neither the region nor the test is the dispatcher's retry of kept output, the only
    puts it makes.  A wait that times out is noted in :attr:`stuck` and let go."""

    def __init__(self, *steps: Step) -> None:
        self._steps = steps
        self._test = threading.current_thread()
        self._region: threading.Thread | None = None
        self._calls: Counter[tuple[str, str, bool]] = Counter()
        self._events: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self.stuck: list[str] = []

    def region_is_here(self) -> None:
        with self._lock:
            self._region = threading.current_thread()

    def event(self, name: str) -> threading.Event:
        with self._lock:
            return self._events.setdefault(name, threading.Event())

    def __call__(self, request: str, structure: str, before: bool) -> None:
        thread = threading.current_thread()
        with self._lock:
            if thread is self._region:
                who = "region"
            elif thread is not self._test and request.startswith("write"):
                who = "dispatcher"
            else:
                return
            what = "put" if request.startswith("write") else request
            self._calls[who, what, before] += 1
            nth = self._calls[who, what, before]
        for step in self._steps:
            if (step.who, step.request, step.before, step.nth) != (who, what, before, nth):
                continue
            if step.says is not None:
                self.event(step.says).set()
            if step.waits is not None and not self.event(step.waits).wait(WAIT_S):
                self.stuck.append(f"{step}: {step.waits} never happened")


def _cqs(facility: CouplingFacility, clock: ManualClock, hook: Interleaving) -> CQS:
    return CQS(facility, "CQSIMSA", system="IMSA", msgq=MSGQ, faults=hook, clock=clock)


def test_a_retry_refused_again_keeps_its_place_before_output_queued_meanwhile(
    facility: CouplingFacility, make_ims: MakeIMS, clock: ManualClock
) -> None:
    """One sync point, two outputs, the structure full.  OUT 1 is refused and kept;
    the dispatcher's retry of it waits until the sync point has dealt with OUT 2 and
    reached the delete of its input, and is refused again (that delete, which frees
    the room one output needs, waits for the dispatcher's next put).  Before the fix
    the dispatcher had taken the list, so OUT 1 went back behind OUT 2, which then
    took the room: ``['OUT 2', 'OUT 1']``."""
    hook = Interleaving(
        Step("dispatcher", "put", True, 1, waits="sync point at its delete"),
        Step("region", "delete", True, 1, says="sync point at its delete", waits="retried"),
        Step("dispatcher", "put", True, 2, says="retried", waits="input deleted"),
        Step("region", "delete", False, 1, says="input deleted"),
    )
    gate = Gate()

    def pgma(dli: DLI) -> None:
        hook.region_is_here()
        while dli.io.gu() is not None:
            assert dli.io.isrt(b"OUT 1") == "  "
            dli.io.purg()
            assert dli.io.isrt(b"OUT 2") == "  "
            gate.stop_at("inserted")

    definition = define("IMSA", transactions=(TRANA,), lterms=(LTERMA,))
    imsa = make_ims(definition, {"PGMA": pgma}, cqs=_cqs(facility, clock, hook))
    node1 = imsa.logon("NODE1")
    node1.enter("TRANA kept")
    gate.wait_reached("inserted")
    filler = fill(facility)
    gate.open("inserted")
    assert until(lambda: imsa.counts["processed"] == 1 and imsa.counts["outputs"] == 1)
    drain(filler)  # room again: the IMS puts the output still kept
    assert take(node1, 2) == ["OUT 1", "OUT 2"]
    assert imsa.counts["outputs"] == 2
    assert hook.stuck == []


def test_a_sync_point_queues_its_output_behind_output_kept_for_room(
    facility: CouplingFacility, make_ims: MakeIMS, clock: ManualClock
) -> None:
    """Two sync points, the structure full at the first: OUT 1 is refused and kept,
    and the dispatcher's retry of it waits until the second sync point has deleted its
    input.  The first input's delete left room for one output, so before the fix the
    second sync point put OUT 2 there, ahead of OUT 1: ``['OUT 2', 'OUT 1']``."""
    hook = Interleaving(
        Step("dispatcher", "put", True, 1, says="retrying", waits="second input deleted"),
        Step("region", "delete", False, 2, says="second input deleted"),
    )
    gate = Gate()

    def pgma(dli: DLI) -> None:
        hook.region_is_here()
        while (segment := dli.io.gu()) is not None:
            number = segment.split()[-1]
            gate.stop_at(f"got {number.decode()}")
            assert dli.io.isrt(b"OUT " + number) == "  "

    definition = define("IMSA", transactions=(TRANA,), lterms=(LTERMA,))
    imsa = make_ims(definition, {"PGMA": pgma}, cqs=_cqs(facility, clock, hook))
    node1 = imsa.logon("NODE1")
    assert node1.enter("TRANA 1").routing == "local"
    gate.wait_reached("got 1")
    assert node1.enter("TRANA 2").routing == "global"  # read at the first sync point's GU
    filler = fill(facility)
    gate.open("got 1")
    gate.wait_reached("got 2")  # OUT 1 refused and kept, the first input deleted
    assert hook.event("retrying").wait(WAIT_S)  # the dispatcher holds OUT 1's retry
    gate.open("got 2")
    assert until(lambda: imsa.counts["processed"] == 2 and imsa.counts["outputs"] == 2)
    drain(filler)
    assert take(node1, 2) == ["OUT 1", "OUT 2"]
    assert hook.stuck == []
