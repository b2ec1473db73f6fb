"""Duplicate LTERM names (redbook §9.10, the worked example of seed §9.4): LTERMA in
session on IMSA and on IMSB, TRANA entered on IMSA, TRANB on IMSB; both responses go
to the one LTERMA ready queue, both IMSs registered it, and either may deliver either:
nothing correlates a response with the session whose input caused it, and nothing
refuses the second LTERMA ("a restriction ... that is not enforced")."""

from __future__ import annotations

from sharedq.cf import CouplingFacility
from sharedq.clock import retry_until
from sharedq.cqs import Kind
from sharedq.ims import Lterm, Transaction
from sharedq.ims.queues import lterm_ready

from .conftest import MakeIMS
from .helpers import WAIT_S, define, echo, where


def test_either_ims_delivers_either_response_to_the_duplicate_lterm(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    imsa = make_ims(
        define(
            "IMSA",
            transactions=(Transaction("TRANA", 1, "PGMA"),),
            lterms=(Lterm("LTERMA", "NODEA"),),
        ),
        {"PGMA": echo()},
    )
    imsb = make_ims(
        define(
            "IMSB",
            transactions=(Transaction("TRANB", 1, "PGMB"),),
            lterms=(Lterm("LTERMA", "NODEB"),),
        ),
        {"PGMB": echo()},
    )
    nodea = imsa.logon("NODEA")
    nodea.enter("TRANA FIRST")
    first = nodea.receive(WAIT_S)  # held, not acknowledged: IMSA's LTERMA is busy
    assert first is not None and first.text == "OUT TRANA FIRST"
    nodeb = imsb.logon("NODEB")  # the same LTERM name on another IMS: not refused
    queue = (Kind.MSGQ, lterm_ready("LTERMA"))
    assert queue in imsa.cqs.registered() and queue in imsb.cqs.registered()

    # The region ends its program after the response went out: wait for it, or the
    # next input finds no region free and goes global.
    assert retry_until(
        lambda: set(imsa.display_active().values()) == {"WAITING"},
        timeout_s=WAIT_S,
        first_pause_s=0.01,
    )
    assert nodea.enter("TRANA SECOND").routing == "local"  # entered on IMSA ...
    second = nodeb.receive(WAIT_S)  # ... its response delivered by IMSB, to NODEB
    assert second is not None and second.text == "OUT TRANA SECOND"
    assert second.uow.origin.rstrip() == b"IMSA" and second.lterm == "LTERMA"

    nodea.ack(first)  # IMSA's LTERMA free; NODEB keeps SECOND unacknowledged
    assert nodeb.enter("TRANB THIRD").routing == "local"  # entered on IMSB ...
    third = nodea.receive(WAIT_S)  # ... its response delivered by IMSA, to NODEA
    assert third is not None and third.text == "OUT TRANB THIRD"
    assert third.uow.origin.rstrip() == b"IMSB"

    nodeb.ack(second)
    nodea.ack(third)
    assert imsa.counts["delivered"] == 2 and imsb.counts["delivered"] == 1
    assert where(facility) == {}


def test_display_active_shows_each_region_waiting_when_idle(make_ims: MakeIMS) -> None:
    imsa = make_ims(
        define("IMSA", transactions=(Transaction("TRANA", 1, "PGMA"),)), {"PGMA": echo()}
    )
    shown = imsa.display_active()
    assert shown and set(shown.values()) == {"WAITING"}
