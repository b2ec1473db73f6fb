"""Serial transactions' abend path (§9.6) and suspended non-serial transactions
(§9.7): U3303, USTOP and re-registration, the suspend queue and /DEQUEUE SUSPEND
through the move queue; on memory and Redis."""

from __future__ import annotations

import threading

import pytest

from sharedq.cf import CouplingFacility
from sharedq.ims import DLI, U3303, Lterm, Transaction
from sharedq.ims.dli import Program

from .conftest import MakeIMS
from .helpers import define, take, until, where

LTERMA = Lterm("LTERMA", "NODE1")


def failing_echo(failing: threading.Event) -> Program:
    def program(dli: DLI) -> None:
        while (segment := dli.io.gu()) is not None:
            if failing.is_set():
                dli.io.isrt(b"discarded")
                raise U3303("data unavailable")
            dli.io.isrt(b"OUT " + segment)

    return program


@pytest.mark.parametrize("command", ["dequeue_suspend", "start_transaction"])
def test_a_serial_abend_ustops_and_keeps_the_order(
    facility: CouplingFacility, make_ims: MakeIMS, command: str
) -> None:
    failing = threading.Event()
    failing.set()
    serial = Transaction("SERT", 1, "PGMS", serial=True)
    imsa = make_ims(
        define("IMSA", transactions=(serial,), lterms=(LTERMA,)), {"PGMS": failing_echo(failing)}
    )
    node1 = imsa.logon("NODE1")
    assert [node1.enter(f"SERT {n}").routing for n in (1, 2)] == ["serial", "serial"]
    # U3303: the message back at the front of the serial queue, the transaction
    # USTOPped (no interest), the PSB not stopped, nothing on a suspend queue
    assert until(lambda: imsa.counts["abends"] == 1 and "SERT" not in imsa.interests())
    assert until(lambda: where(facility) == {"\x04SERT    IMSA": [b"SERT 1", b"SERT 2"]})
    assert imsa.stopped_programs() == set()
    failing.clear()
    getattr(imsa, command)("SERT")  # registers again: scheduled at once
    assert take(node1, 2) == ["OUT SERT 1", "OUT SERT 2"]
    assert "SERT" in imsa.interests()
    assert until(lambda: where(facility) == {})


def test_a_non_serial_u3303_goes_to_the_suspend_queue_and_back(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    failing = threading.Event()
    failing.set()
    trana = Transaction("TRANA", 1, "PGMA")
    imsa = make_ims(
        define("IMSA", transactions=(trana,), lterms=(LTERMA,)), {"PGMA": failing_echo(failing)}
    )
    imsb = make_ims(define("IMSB", transactions=(trana,)), {"PGMA": failing_echo(failing)})
    node1 = imsa.logon("NODE1")
    assert node1.enter("TRANA 1").routing == "local"
    # the message is suspended (queue 03, which no IMS registers): nobody processes it
    assert until(lambda: where(facility) == {"\x03TRANA": [b"TRANA 1"]})
    assert imsa.counts["abends"] == 1 and imsa.stopped_programs() == set()
    assert imsa.interests() == ["TRANA"]  # not stopped: other messages go on
    failing.clear()
    assert node1.enter("TRANA 2").routing == "local"
    assert take(node1, 1) == ["OUT TRANA 2"]
    imsb.dequeue_suspend("TRANA")  # CQSMOVE to the ready queue: any IMS may take it
    assert take(node1, 1) == ["OUT TRANA 1"]
    assert until(lambda: where(facility) == {})
