"""Response mode (redbook §6.1 "Users", issue 20: "response mode holds the terminal
until the reply"): after a response-mode transaction the terminal takes no input until
that transaction's reply is delivered to it; another output does not release it."""

from __future__ import annotations

import pytest

from sharedq.cf import CouplingFacility
from sharedq.ims import DLI, IMSError, IMSReason, Lterm, Program, Region, SystemDefinition
from sharedq.ims import Transaction as Tran

from .conftest import MakeIMS
from .helpers import WAIT_S, Gate, define, echo, take, until, where

TRANR = Tran("TRANR", 1, "PGMA", response=True)
TRANA = Tran("TRANA", 1, "PGMA")


def gated(gate: Gate) -> Program:
    def program(dli: DLI) -> None:
        while (segment := dli.io.gu()) is not None:
            gate.stop_at(segment.decode())
            dli.io.isrt(b"OUT " + segment)

    return program


def refused(terminal_enter: object, text: str) -> IMSError:
    assert callable(terminal_enter)
    with pytest.raises(IMSError) as caught:
        terminal_enter(text)
    assert caught.value.reason is IMSReason.RESPONSE_MODE
    return caught.value


def test_the_terminal_is_held_until_its_reply_is_delivered(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    gate = Gate()
    ims = make_ims(
        define(
            "IMSA",
            regions=(Region("MPR1", (1,)), Region("MPR2", (1,))),
            transactions=(TRANR, TRANA),
            lterms=(Lterm("LTERMA", "NODE1"),),
        ),
        {"PGMA": gated(gate)},
    )
    node1 = ims.logon("NODE1")
    first, second = node1.enter("TRANA EARLY"), node1.enter("TRANA OTHER")  # not held
    assert not first.response and not second.response and not node1.response_mode
    gate.open("TRANA OTHER")
    assert take(node1, 1) == ["OUT TRANA OTHER"]
    routed = node1.enter("TRANR HOLD")
    assert routed.response and node1.response_mode
    gate.wait_reached("TRANR HOLD")
    error = refused(node1.enter, "TRANA MORE")
    assert "response mode" in str(error) and "TRANR" in str(error)
    refused(node1.enter, "TRANR AGAIN")
    gate.open("TRANA EARLY")  # another output arrives: not the reply, still held
    assert take(node1, 1) == ["OUT TRANA EARLY"]
    assert node1.response_mode
    refused(node1.enter, "TRANA MORE")
    gate.open("TRANR HOLD")
    reply = node1.receive(WAIT_S)
    assert reply is not None and reply.text == "OUT TRANR HOLD"
    assert reply.uow.origin_id == routed.uow.origin_id
    assert not node1.response_mode  # delivered: input again
    node1.ack(reply)
    gate.open("TRANA AFTER")
    node1.enter("TRANA AFTER")
    assert take(node1, 1) == ["OUT TRANA AFTER"]
    assert until(lambda: ims.counts["processed"] == 4)  # counted after the delete
    assert where(facility) == {}


def test_a_remote_response_transaction_and_the_operators_reset(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    gate = Gate()
    front = SystemDefinition(
        "IMSA",
        transactions=(Tran("TRANR", 1, "PGMA", remote=True, response=True),),
        programs=(Program("PGMA"),),
        lterms=(Lterm("LTERMA", "NODE1"),),
    )
    imsa = make_ims(front, {"PGMA": echo()})
    imsb = make_ims(define("IMSB", transactions=(TRANR,)), {"PGMA": gated(gate)})
    node1 = imsa.logon("NODE1")
    assert node1.enter("TRANR ONE").routing == "global"
    gate.open("TRANR ONE")  # processed on IMSB, the reply delivered here: released
    assert take(node1, 1) == ["OUT TRANR ONE"] and not node1.response_mode
    node1.enter("TRANR TWO")
    gate.wait_reached("TRANR TWO")
    refused(node1.enter, "TRANR THREE")
    node1.reset()  # the master terminal operator resets the terminal
    assert not node1.response_mode
    node1.enter("TRANR THREE")
    for text in ("TRANR TWO", "TRANR THREE"):
        gate.open(text)
    assert sorted(take(node1, 2)) == ["OUT TRANR THREE", "OUT TRANR TWO"]
    assert not node1.response_mode
    assert until(lambda: imsb.counts["processed"] == 3)  # counted after the delete
