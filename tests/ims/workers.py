"""IMS systems in processes of their own, on a shared Redis: each function is a
process's life (top level, so that the spawn start method can import it)."""

from __future__ import annotations

import threading
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event

from sharedq.cf import open_facility
from sharedq.ims import DLI, IMS, Lterm, Program, Region, SystemDefinition, Transaction

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


def held_forever(url: str, imsid: str, regions: int, reached: Queue[bytes]) -> None:
    """A back-end IMS whose program reads a message, says so and never reaches its
    sync point: the process is killed (SIGKILL) with every region's input in flight."""
    forever = threading.Event()

    def hold(dli: DLI) -> None:
        segment = dli.io.gu()
        assert segment is not None
        reached.put(segment)
        forever.wait()

    definition = SystemDefinition(
        imsid,
        transactions=(TRANA,),
        programs=(Program("PGMA"),),
        regions=tuple(Region(f"MPR{n}", (1,)) for n in range(1, regions + 1)),
    )
    with open_facility(url) as facility:
        IMS(facility, definition, {"PGMA": hold}, msgq=MSGQ).start()
        forever.wait()


#: A conversational transaction: a 16-byte SPA whose first byte counts the iterations.
TRANC = Transaction("TRANC", 1, "PGMC", spa=16)


def converse(dli: DLI) -> None:
    """TRANC: count the iterations in the SPA; ``END`` ends the conversation."""
    while (spa := dli.io.gu()) is not None:
        text = dli.io.gn() or b""
        if b"END" in text:
            dli.io.isrt(b" " * 8 + spa[8:])
            dli.io.isrt(b"BYE")
            continue
        count = spa[8] + 1
        dli.io.isrt(b"TRANC   " + bytes([count]) + spa[9:])
        dli.io.isrt(b"STEP %d %s" % (count, text))


def conversing_front_end(url: str, said: Queue[str]) -> None:
    """IMSA with a terminal in conversation: one iteration answered and acknowledged
    (its response held on the lock queue), then it says so and waits to be killed."""
    definition = SystemDefinition(
        "IMSA",
        transactions=(TRANC,),
        programs=(Program("PGMC"),),
        regions=(Region("MPR1", (1,)),),
        lterms=(Lterm("LTERMA", "NODE1"),),
    )
    with open_facility(url) as facility:
        ims = IMS(facility, definition, {"PGMC": converse}, msgq=MSGQ).start()
        node1 = ims.logon("NODE1")
        node1.enter("TRANC ONE")
        out = node1.receive(30)
        assert out is not None
        node1.ack(out)
        said.put(out.text)
        threading.Event().wait()  # until SIGKILL
