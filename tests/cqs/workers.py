"""CQSs in processes of their own, on a shared Redis: each function is a process's life.

Top-level functions, so that ``multiprocessing``'s spawn start method can import them.
Each opens its own facility on the URL it is given, as a CQS on another host would.
"""

from __future__ import annotations

from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event

from sharedq.cf import open_facility
from sharedq.cqs import CQS, make_name

TRANA = make_name(1, "TRANA")
MSGQ = "MSGQ01"


def bidder(url: str, system: str, ready: Queue[str], results: Queue[object]) -> None:
    """Register on TRANA, say so, wait to be told of work, read once; report what it got
    (its system, whether it was told, the body or ``None``), then delete it."""
    with (
        open_facility(url) as facility,
        CQS(facility, f"CQS{system}", system=system, msgq=MSGQ) as cqs,
    ):
        cqs.register(TRANA)
        ready.put(system)
        told = cqs.wait_for_work(60)
        message = cqs.read(TRANA)
        results.put((system, told is not None, None if message is None else message.body))
        if message is not None and message.token is not None:
            cqs.delete(message.token)


def reader(url: str, system: str, done: Event, ready: Queue[str], results: Queue[object]) -> None:
    """Read TRANA until the putter is done and the queue is empty, waking on work;
    report every message's parts."""
    got: list[tuple[bytes, ...]] = []
    with (
        open_facility(url) as facility,
        CQS(facility, f"CQS{system}", system=system, msgq=MSGQ) as cqs,
    ):
        cqs.register(TRANA)
        ready.put(system)
        while True:
            finished = done.is_set()
            message = cqs.read(TRANA)
            if message is not None:
                got.append(message.parts)
                assert message.token is not None
                cqs.delete(message.token)
            elif finished:
                break
            else:
                cqs.wait_for_work(0.5)
    results.put((system, got))
