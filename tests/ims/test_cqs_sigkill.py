"""A CQS in a process of its own, SIGKILLed under its IMS (issues 17 and 20, redbook
§6.1): the IMS stays up, full-function input and Global Only Fast Path are refused
(``CQS_UNAVAILABLE``), Local Only and Local First Fast Path inputs are processed and
answered; the CQS process started again (warm: same name, the failed-persistent user),
``IMS.reconnect`` resolves the work in doubt and every message is processed once.
And the other way round (§6.2): an IMS process SIGKILLed while its CQS process lives
on; its next incarnation restarts through the same CQS and processes each input once.

On a private Redis only: the CQS and the IMS are different processes, and a memory
structure is one process's alone.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
from multiprocessing.queues import Queue

import pytest

from sharedq.cf.redis import RedisFacility
from sharedq.clock import retry_until
from sharedq.cqs import CQSError, CQSReason, RemoteCQS
from sharedq.ims import (
    DLI,
    IMS,
    SPC,
    FastPathDefinition,
    FPTransaction,
    IMSError,
    IMSReason,
    Lterm,
    Program,
    Region,
    SystemDefinition,
)
from sharedq.ims import Transaction as Tran
from sharedq.testing.redis_server import RedisServer
from tests.cqs.remote_server import ServedCQS

from .conftest import EMHQ, MSGQ
from .helpers import (
    WAIT_S,
    Gate,
    define,
    echo,
    gated,
    kill_holding,
    lockers,
    reply,
    take,
    until,
    where,
)

TRANA = Tran("TRANA", 1, "PGMA")
FP = (
    FPTransaction("FPLO", "PSBF", SPC.LOCAL_ONLY),
    FPTransaction("FPLF", "PSBF"),
    FPTransaction("FPGO", "PSBF", SPC.GLOBAL_ONLY),
)
FP_CODES = ("FPLO", "FPLF", "FPLO", "FPLF")


@pytest.fixture
def facility(redis_pair: RedisFacility) -> RedisFacility:
    """Redis only: the CQS runs in a process of its own, out of a memory structure's reach."""
    return redis_pair


def test_a_cqs_process_killed_under_its_ims(facility: RedisFacility, served: ServedCQS) -> None:
    gate = Gate()
    imsa = IMS(
        facility,
        define(
            "IMSA",
            regions=(Region("MPR1", (1,)), Region("MPR2", (1,))),
            transactions=(TRANA,),
            lterms=(Lterm("LTERMA", "NODE1"),),
        ),
        {"PGMA": gated(gate)},
        fastpath=FastPathDefinition(FP, {"IFP1": "PSBF"}, ("IMSA",)),
        ifp_programs={"PSBF": reply},
        cqs=served.client(),  # its CQS in the other process
    )
    front = SystemDefinition(  # IMSB routes TRANA to the group; IMSA processes it
        "IMSB",
        transactions=(Tran("TRANA", 1, "PGMA", remote=True),),
        programs=(Program("PGMA"),),
        lterms=(Lterm("LTERMB", "NODE2"),),
    )
    imsb = IMS(facility, front, {"PGMA": gated(gate)}, msgq=MSGQ)
    with contextlib.ExitStack() as stack:
        stack.callback(imsb.shutdown)
        stack.callback(imsa.shutdown)
        imsa.start()
        imsb.start()
        assert imsa.fastpath is not None
        node1, node2 = imsa.logon("NODE1"), imsb.logon("NODE2")
        assert node1.enter("TRANA ONE").routing == "local"
        assert take(node1, 1) == ["OUT TRANA ONE"]
        assert imsa.fastpath.enter("LTA", "FPGO", b"before") == "global"  # through the EMHQ
        assert imsa.fastpath.receive("LTA", WAIT_S) == "R before"
        # Work in progress: an output delivered, not acknowledged; an input in a region.
        assert node1.enter("TRANA TWO").routing == "local"
        unacked = node1.receive(WAIT_S)
        assert unacked is not None and unacked.text == "OUT TRANA TWO"
        assert node1.enter("TRANA HOLD").routing == "local"
        gate.wait_reached("TRANA HOLD")
        assert until(lambda: lockers(facility, MSGQ) == [b"CQSIMSA"] * 2)

        served.kill()  # SIGKILL: the CQS's process is gone, its IMS stays up

        for text in ("TRANA DOWN", "TRANA AGAIN"):
            with pytest.raises(IMSError, match="not available") as caught:
                node1.enter(text)
            assert caught.value.reason is IMSReason.CQS_UNAVAILABLE
        routes = [
            imsa.fastpath.enter("LTA", code, f"{n}".encode()) for n, code in enumerate(FP_CODES)
        ]
        assert routes == ["local"] * len(FP_CODES)
        got = sorted(imsa.fastpath.receive("LTA", WAIT_S) or "" for _ in FP_CODES)
        assert got == sorted(f"R {n}" for n in range(len(FP_CODES)))
        assert imsa.fastpath.counts["processed"] == 1 + len(FP_CODES)
        with pytest.raises(IMSError) as caught:  # Global Only needs the EMHQ
            imsa.fastpath.enter("LTA", "FPGO", b"global")
        assert caught.value.reason is IMSReason.CQS_UNAVAILABLE
        for n in range(2):  # entered at IMSB meanwhile: wait on the ready queue
            assert node2.enter(f"TRANA B{n}").routing == "global"
        node1.ack(unacked)  # accepted now: deleted at the resync
        gate.open("TRANA HOLD")  # its sync point: output kept, input in doubt
        assert until(lambda: imsa.counts["processed"] == 3)
        assert lockers(facility, MSGQ) == [b"CQSIMSA"] * 2  # still held by the dead CQS
        assert where(facility, MSGQ)["\x01TRANA"] == [b"TRANA B0", b"TRANA B1"]

        served.start()  # warm: the same name, the failed-persistent user
        report = imsa.reconnect()

        assert (report.deleted, report.requeued, report.emhq_requeued) == (2, 0, 0)
        assert take(node1, 1) == ["OUT TRANA HOLD"]  # the output kept during the outage
        assert sorted(take(node2, 2)) == ["OUT TRANA B0", "OUT TRANA B1"]  # interest again
        # full function again (local, or global if a region is still ending its last run)
        assert node1.enter("TRANA AFTER").routing in ("local", "global")
        assert take(node1, 1) == ["OUT TRANA AFTER"]
        assert imsa.fastpath.enter("LTA", "FPGO", b"after") == "global"
        assert imsa.fastpath.receive("LTA", WAIT_S) == "R after"
        # ONE, TWO, HOLD, B0, B1, AFTER: each processed once, nothing left anywhere
        assert until(lambda: imsa.counts["processed"] == 6)
        assert until(lambda: where(facility, MSGQ) == {}), where(facility, MSGQ)
        # the EMHQ: only IMSA's Fast Path PSB table entry, kept while it runs (§1.17)
        assert where(facility, EMHQ) == {"\x01PSBF    IMSA": [b"IMSA"]}
        assert node1.receive(timeout=0) is None and node2.receive(timeout=0) is None
        assert imsa.counts["processed"] == 6  # and not more
        assert imsa.fastpath.counts["processed"] == 2 + len(FP_CODES)
    assert where(facility, MSGQ) == {} and where(facility, EMHQ) == {}  # after shutdown


def test_an_ims_refuses_a_cqs_of_another_system(facility: RedisFacility, served: ServedCQS) -> None:
    remote = served.client()
    try:
        with pytest.raises(IMSError) as caught:
            IMS(
                facility, define("IMSB", transactions=(TRANA,)), {"PGMA": gated(Gate())}, cqs=remote
            )
        assert caught.value.reason is IMSReason.BAD_ARGUMENT
    finally:
        remote.close()


IN_FLIGHT, QUEUED = 3, 2


def back_end(regions: int) -> SystemDefinition:
    return define(
        "IMSB",
        regions=tuple(Region(f"MPR{n}", (1,)) for n in range(1, regions + 1)),
        transactions=(TRANA,),
    )


def held_forever(url: str, socket: str, key: bytes, reached: Queue[bytes]) -> None:
    """IMSB, its CQS in the server process: each region reads an input, says so and
    never reaches its sync point (the process is SIGKILLed)."""
    forever = threading.Event()

    def hold(dli: DLI) -> None:
        segment = dli.io.gu()
        assert segment is not None
        reached.put(segment)
        forever.wait()

    with RedisFacility.from_url(url) as facility:
        remote = RemoteCQS(socket, key)
        IMS(facility, back_end(IN_FLIGHT), {"PGMA": hold}, cqs=remote).start()
        forever.wait()


def client_of(served: ServedCQS) -> RemoteCQS | None:
    """A client, once the server let the killed one go (``None`` until then)."""
    try:
        return served.client()
    except CQSError as error:
        assert error.reason is CQSReason.ALREADY_CONNECTED
        return None


def test_an_ims_process_killed_while_its_cqs_process_lives(
    redis_server: RedisServer, facility: RedisFacility
) -> None:
    served = ServedCQS(redis_server.url, "CQSIMSB", "IMSB").start()
    front = SystemDefinition(
        "IMSA",
        transactions=(Tran("TRANA", 1, "PGMA", remote=True),),
        programs=(Program("PGMA"),),
        lterms=(Lterm("LTERMA", "NODE1"),),
    )
    context = multiprocessing.get_context("spawn")
    reached = context.Queue()
    doomed = context.Process(
        target=held_forever, args=(redis_server.url, served.socket, served.key, reached)
    )
    with contextlib.ExitStack() as stack:
        stack.callback(served.stop)
        imsa = stack.enter_context(IMS(facility, front, {"PGMA": echo()}, msgq=MSGQ))
        doomed.start()
        node1 = imsa.logon("NODE1")
        sent = kill_holding(node1, doomed, reached, IN_FLIGHT, QUEUED)

        # Its CQS lives on: it disconnects for its vanished client, the locks stay.
        remote = retry_until(lambda: client_of(served), timeout_s=WAIT_S, first_pause_s=0.01)
        assert remote is not None
        assert lockers(facility, MSGQ) == [b"CQSIMSB"] * IN_FLIGHT
        assert where(facility, MSGQ)["\x01TRANA"] == [t.encode() for t in sent[IN_FLIGHT:]]
        imsb = IMS(facility, back_end(1), {"PGMA": echo()}, cqs=remote)
        stack.callback(imsb.shutdown)
        imsb.start(restart="emergency")  # its next incarnation, through the same CQS

        assert imsb.restarted.requeued == IN_FLIGHT and imsb.restarted.deleted == 0
        assert sorted(take(node1, len(sent))) == sorted(f"OUT {t}" for t in sent)
        assert until(lambda: imsb.counts["processed"] == len(sent))  # each exactly once
        assert until(lambda: where(facility, MSGQ) == {})
        assert imsb.counts["processed"] == len(sent) and node1.receive(timeout=0) is None
