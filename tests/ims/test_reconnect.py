"""An IMS reconnecting to its CQS after the CQS failed under it (redbook §6.1
"Reconnect"): the work the IMS finished during the outage is resolved by the resync
(deleted, not done again), what it had not finished is requeued, interest is
registered again and full-function input is accepted again."""

from __future__ import annotations

import pytest

from sharedq.cf import CouplingFacility
from sharedq.ims import IMSError, IMSReason, Lterm, Program, Region, SystemDefinition
from sharedq.ims import Transaction as Tran

from .conftest import MSGQ, MakeIMS
from .helpers import WAIT_S, Gate, define, gated, take, until, where

TRANA = Tran("TRANA", 1, "PGMA")


def test_reconnect_resolves_in_doubt_work_and_resumes(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    gate = Gate()
    imsa = make_ims(
        define(
            "IMSA",
            regions=(Region("MPR1", (1,)), Region("MPR2", (1,))),
            transactions=(TRANA,),
            lterms=(Lterm("LTERMA", "NODE1"),),
        ),
        {"PGMA": gated(gate)},
    )
    front = SystemDefinition(  # IMSB routes TRANA to the group; IMSA processes it
        "IMSB",
        transactions=(Tran("TRANA", 1, "PGMA", remote=True),),
        programs=(Program("PGMA"),),
        lterms=(Lterm("LTERMB", "NODE2"),),
    )
    imsb = make_ims(front, {"PGMA": gated(gate)})
    node1, node2 = imsa.logon("NODE1"), imsb.logon("NODE2")
    assert node1.enter("TRANA ONE").routing == "local"
    unacked = node1.receive(WAIT_S)  # delivered, acknowledged only during the outage
    assert unacked is not None and unacked.text == "OUT TRANA ONE"
    assert node1.enter("TRANA HOLD").routing == "local"
    gate.wait_reached("TRANA HOLD")
    imsa.cqs.stop_dead()  # the CQS fails; the IMS stays up
    assert len(where(facility, MSGQ)["lock"]) == 2  # the output in flight, the input
    with pytest.raises(IMSError) as caught:
        node1.enter("TRANA DOWN")
    assert caught.value.reason is IMSReason.CQS_UNAVAILABLE
    for n in range(2):  # entered elsewhere during the outage: wait on the ready queue
        assert node2.enter(f"TRANA B{n}").routing == "global"
    node1.ack(unacked)  # accepted: deleted at the resync
    gate.open("TRANA HOLD")  # its sync point: output kept, input in doubt
    report = imsa.reconnect()
    assert (report.deleted, report.requeued) == (2, 0)  # both resolved as completed
    assert take(node1, 1) == ["OUT TRANA HOLD"]  # the output kept during the outage
    assert sorted(take(node2, 2)) == ["OUT TRANA B0", "OUT TRANA B1"]  # interest again
    assert node1.enter("TRANA AFTER").routing == "local"  # FF input accepted again
    assert take(node1, 1) == ["OUT TRANA AFTER"]
    assert until(lambda: imsa.counts["processed"] == 5)  # each once
    assert until(lambda: where(facility, MSGQ) == {})
    assert node1.receive(timeout=0) is None and node2.receive(timeout=0) is None
    assert imsa.counts["processed"] == 5  # and not more
    with pytest.raises(IMSError) as caught:  # connected: nothing to reconnect
        imsa.reconnect()
    assert caught.value.reason is IMSReason.BAD_ARGUMENT


def test_reconnect_requeues_what_was_not_finished(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    imsa = make_ims(
        define("IMSA", transactions=(TRANA,), lterms=(Lterm("LTERMA", "NODE1"),)),
        {"PGMA": gated(Gate())},
    )
    node1 = imsa.logon("NODE1")
    node1.enter("TRANA ONE")
    first = node1.receive(WAIT_S)  # in flight when the CQS fails, never acknowledged
    assert first is not None
    imsa.cqs.stop_dead()
    assert len(where(facility, MSGQ)["lock"]) == 1
    report = imsa.reconnect()
    assert (report.deleted, report.requeued) == (0, 1)
    with pytest.raises(IMSError):  # the stale delivery: its message went back
        node1.ack(first)
    assert take(node1, 1) == ["OUT TRANA ONE"]  # sent again, acknowledged once
    assert until(lambda: imsa.counts["processed"] == 1)  # counted after the delete
    assert until(lambda: where(facility, MSGQ) == {})
