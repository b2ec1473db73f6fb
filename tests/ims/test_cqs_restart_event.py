"""The CQS restart event (redbook §6.1 "Reconnect", issue 20): a CQS in a process of its
own is SIGKILLed under its IMS and started again; the IMS's ``RemoteCQS`` sees the
server back on its socket and the IMS (``reconnect_on_restart``) reconnects by itself:
the work in doubt resolved, every held message processed exactly once, full function
and Global Only Fast Path working again, with no ``reconnect()`` call by the test.

On a private Redis only: the CQS and the IMS are different processes.
"""

from __future__ import annotations

import contextlib
import threading

import pytest

from sharedq.cf.memory import MemoryFacility
from sharedq.cf.redis import RedisFacility
from sharedq.cqs import CQSError, CQSReason, structure_params
from sharedq.ims import (
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
from sharedq.ims.failure import declare_failed
from tests.cqs.remote_server import ServedCQS

from .conftest import EMHQ, MSGQ
from .helpers import WAIT_S, Gate, define, gated, lockers, reply, take, until, where

TRANA = Tran("TRANA", 1, "PGMA")
FP = (
    FPTransaction("FPLO", "PSBF", SPC.LOCAL_ONLY),
    FPTransaction("FPGO", "PSBF", SPC.GLOBAL_ONLY),
)


@pytest.fixture
def facility(redis_pair: RedisFacility) -> RedisFacility:
    """Redis only: the CQS runs in a process of its own, out of a memory structure's reach."""
    return redis_pair


def test_the_client_sees_a_restarted_server(facility: RedisFacility, served: ServedCQS) -> None:
    back = threading.Event()
    remote = served.client()
    remote.on_restart = back.set
    try:
        remote.connect()
        token = remote.put(b"\x01TRANA".ljust(16), b"held", local=True)
        served.kill()
        with pytest.raises(CQSError) as caught:
            remote.statistics()
        assert caught.value.reason is CQSReason.NOT_CONNECTED
        assert declare_failed(facility, "CQSIMSA", [MSGQ, EMHQ]) == 2  # as reconnect does
        served.start()
        assert back.wait(WAIT_S)  # the link is open again: no connect call made
        assert remote.restarts_seen == 1
        with pytest.raises(CQSError) as caught:  # linked, the CQS not yet connected
            remote.statistics()
        assert caught.value.reason is CQSReason.NOT_CONNECTED
        remote.connect()
        assert not isinstance(token, bytes)
        remote.delete(token)  # its lock is its own again
        assert where(facility, MSGQ) == {}
    finally:
        remote.disconnect()


def test_a_restarted_cqs_process_is_reconnected_by_the_ims(
    facility: RedisFacility, served: ServedCQS
) -> None:
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
        cqs=served.client(),
        reconnect_on_restart=True,
    )
    front = SystemDefinition(
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
        # Work in progress: an output delivered, not acknowledged; an input in a region.
        assert node1.enter("TRANA TWO").routing == "local"
        unacked = node1.receive(WAIT_S)
        assert unacked is not None and unacked.text == "OUT TRANA TWO"
        assert node1.enter("TRANA HOLD").routing == "local"
        gate.wait_reached("TRANA HOLD")
        assert until(lambda: lockers(facility, MSGQ) == [b"CQSIMSA"] * 2)

        served.kill()

        with pytest.raises(IMSError) as caught:
            node1.enter("TRANA DOWN")
        assert caught.value.reason is IMSReason.CQS_UNAVAILABLE
        assert imsa.fastpath.enter("LTA", "FPLO", b"local") == "local"
        assert imsa.fastpath.receive("LTA", WAIT_S) == "R local"
        for n in range(2):  # entered at IMSB meanwhile: wait on the ready queue
            assert node2.enter(f"TRANA B{n}").routing == "global"
        node1.ack(unacked)
        gate.open("TRANA HOLD")
        assert until(lambda: imsa.counts["processed"] == 3)
        assert imsa.events.reconnects == 0  # nothing to reconnect to yet

        served.start()  # no reconnect() call: the restart is the event

        assert until(lambda: imsa.events.reconnects == 1)
        report = imsa.restarted
        assert (report.deleted, report.requeued, report.emhq_requeued) == (2, 0, 0)
        assert take(node1, 1) == ["OUT TRANA HOLD"]
        assert sorted(take(node2, 2)) == ["OUT TRANA B0", "OUT TRANA B1"]
        assert node1.enter("TRANA AFTER").routing in ("local", "global")
        assert take(node1, 1) == ["OUT TRANA AFTER"]
        assert imsa.fastpath.enter("LTA", "FPGO", b"after") == "global"
        assert imsa.fastpath.receive("LTA", WAIT_S) == "R after"
        # ONE, TWO, HOLD, B0, B1, AFTER: each once
        assert until(lambda: imsa.counts["processed"] == 6)
        assert until(lambda: where(facility, MSGQ) == {}), where(facility, MSGQ)

        served.kill()  # a second outage: the watch is armed again
        served.start()
        assert until(lambda: imsa.events.reconnects == 2)
        assert imsa.restarted.deleted == 0 and imsa.restarted.requeued == 0
        assert node1.enter("TRANA LAST").routing in ("local", "global")
        assert take(node1, 1) == ["OUT TRANA LAST"]
        assert until(lambda: imsa.counts["processed"] == 7)
        assert until(lambda: where(facility, MSGQ) == {})
        assert node1.receive(timeout=0) is None and node2.receive(timeout=0) is None
        assert imsa.counts["processed"] == 7  # and not more
        assert imsa.fastpath.counts["processed"] == 2
    assert where(facility, MSGQ) == {} and where(facility, EMHQ) == {}


def test_reconnect_on_restart_wants_a_remote_cqs() -> None:
    with MemoryFacility() as memory:
        memory.create(structure_params(MSGQ, messages=20))
        with pytest.raises(IMSError) as caught:
            IMS(
                memory,
                define("IMSA", transactions=(TRANA,)),
                {"PGMA": gated(Gate())},
                reconnect_on_restart=True,
            )
        assert caught.value.reason is IMSReason.BAD_ARGUMENT
