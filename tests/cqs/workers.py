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


SUSPEND = make_name(3, "TRANA")
PARTS = [b"part 1", b"part 2", b"part 3"]
_CHANGES = ("write", "move", "delete")


def doomed(url: str, action: str, at: int) -> None:
    """As CQSIMSA: a three-part message put and read (for ``move`` and ``delete``),
    then ``action``, killed by SIGKILL just before its ``at``-th structure change."""
    import os
    import signal

    seen = [0]
    armed = [False]

    def hook(request: str, structure: str, before: bool) -> None:
        if armed[0] and before and request in _CHANGES:
            seen[0] += 1
            if seen[0] == at:
                os.kill(os.getpid(), signal.SIGKILL)

    with open_facility(url) as facility:
        cqs = CQS(facility, "CQSIMSA", system="IMSA", msgq=MSGQ, faults=hook).connect()
        token = None
        if action != "put":
            cqs.put(TRANA, PARTS)
            message = cqs.read(TRANA)
            assert message is not None
            token = message.token
        armed[0] = True
        if action == "put":
            cqs.put(TRANA, PARTS)
        elif action == "move":
            assert token is not None
            cqs.move(token, SUSPEND)
        else:
            assert token is not None
            cqs.delete(token)
        os.kill(os.getpid(), signal.SIGKILL)  # finished: die all the same


def logged_and_killed(url: str, root: str, overflow: str | None, kill_at: str) -> None:
    """As CQSIMSA with a recovery log under ``root``: four messages put, two of them
    read (left locked), then SIGKILL; or, with ``kill_at`` a structure checkpoint's
    point (``quiesced``, ``written``), killed there while it is the checkpoint's master."""
    import os
    import signal
    from pathlib import Path

    from sharedq.cqs import StructurePair
    from sharedq.recovery import RecoverySettings

    def faults(point: str) -> None:
        if point == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    settings = RecoverySettings(Path(root), poll_seconds=0.05)
    with open_facility(url) as facility:
        cqs = CQS(
            facility,
            "CQSIMSA",
            system="IMSA",
            msgq=StructurePair(MSGQ, overflow),
            recovery=settings,
            checkpoint_faults=faults,
        ).connect()
        for n in range(4):
            cqs.put(TRANA, b"message %d" % n)
        cqs.read(TRANA)
        cqs.read(TRANA)
        if kill_at != "now":
            cqs.checkpoint("structure")
        os.kill(os.getpid(), signal.SIGKILL)
