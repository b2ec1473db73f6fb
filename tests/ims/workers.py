"""IMS systems in processes of their own, on a shared Redis: each function is a
process's life (top level, so that the spawn start method can import it)."""

from __future__ import annotations

from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event

from sharedq.cf import open_facility
from sharedq.ims import DLI, IMS, Program, Region, SystemDefinition, Transaction

MSGQ = "MSGQ01"
TRANA = Transaction("TRANA", 1, "PGMA")


def answer(dli: DLI) -> None:
    """Reply to each message with the system that processed it."""
    while (segment := dli.io.gu()) is not None:
        dli.io.isrt(segment + b" by " + dli.imsid.encode())


def back_end(url: str, imsid: str, ready: Queue[str], stop: Event, results: Queue[object]) -> None:
    """A back-end IMS with two regions for TRANA: start, say so, process until told to
    stop, shut down, report its counts."""
    definition = SystemDefinition(
        imsid,
        transactions=(TRANA,),
        programs=(Program("PGMA"),),
        regions=(Region("MPR1", (1,)), Region("MPR2", (1,))),
    )
    programs: dict[str, Program] = {"PGMA": answer}
    with open_facility(url) as facility:
        ims = IMS(facility, definition, programs, msgq=MSGQ).start()
        try:
            ready.put(imsid)
            stop.wait(120)
        finally:
            ims.shutdown()
        results.put((imsid, dict(ims.counts)))
