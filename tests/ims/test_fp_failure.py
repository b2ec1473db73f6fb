"""A failed IMS's Fast Path (§1.17, §6.1-6.2): its PSB table entry stays on the EMHQ
and the EMHQ message its IFP region held stays locked by its CQS; a peer told of the
failure drops it from its global table; the restart resynchronizes the EMHQ too
(emergency: requeued and processed once; cold: to the cold queue) and leaves exactly
one table entry of its own."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cqs import structure_params
from sharedq.ims import (
    IMS,
    SPC,
    FastPathDefinition,
    FPTransaction,
    IMSError,
    IMSReason,
)
from sharedq.ims.restart import Restart

from .conftest import EMHQ, MSGQ, MakeIMS
from .helpers import WAIT_S, Gate, define, reply, until, where

FP = (FPTransaction("FPGO", "PSBF", SPC.GLOBAL_ONLY),)
GROUP = ("IMSA", "IMSB")
ENTRY_A = "\x01PSBF    IMSA"


def fastpath(regions: dict[str, str]) -> FastPathDefinition:
    return FastPathDefinition(FP, regions, GROUP)


@contextmanager
def failed_with_fp_work(
    facility: CouplingFacility, make_ims: MakeIMS, mode: Restart
) -> Iterator[tuple[IMS, IMS]]:
    """IMSA's only IFP region holds one EMHQ input (from LTA) when IMSA fails; one
    more (from LTB on IMSB) waits on the program ready queue.  IMSB (no IFP region)
    is told of the failure; then IMSA restarts with ``mode``.  Yields IMSB and the
    new IMSA."""
    facility.create(structure_params(EMHQ, messages=200))
    gate = Gate()
    returned = threading.Event()

    def held(data: bytes) -> bytes:
        gate.stop_at(data.decode())
        returned.set()
        return reply(data)

    options = {"emhq": EMHQ}
    imsa = make_ims(
        define("IMSA"),
        {},
        fastpath=fastpath({"IFP1": "PSBF"}),
        ifp_programs={"PSBF": held},
        **options,
    )
    imsb = make_ims(
        define("IMSB"), {}, fastpath=fastpath({}), ifp_programs={"PSBF": reply}, **options
    )
    assert imsa.fastpath is not None and imsb.fastpath is not None
    assert imsb.fastpath.global_table("PSBF") == ["IMSA"]
    assert imsa.fastpath.enter("LTA", "FPGO", b"held") == "global"
    gate.wait_reached("held")
    assert imsb.fastpath.enter("LTB", "FPGO", b"queued") == "global"
    imsa.stop_dead()
    on = where(facility, EMHQ)
    assert len(on["lock"]) == 1  # the input IFP1 held, locked by the dead IMS's CQS
    assert on["\x01PSBF"] == [b"LTB     FPGO    queued"]
    assert len(on[ENTRY_A]) == 1  # its table entry: stale
    assert imsb.fastpath.global_table("PSBF") == ["IMSA"]
    assert imsb.peer_failed("IMSA") == 1
    assert imsb.fastpath.global_table("PSBF") == []
    with pytest.raises(IMSError) as caught:  # nobody serves PSBF now: DFS2533
        imsb.fastpath.enter("LTB", "FPGO", b"refused")
    assert caught.value.reason is IMSReason.ROUTING_NOT_ACTIVE
    gate.open("held")  # the dead region's program returns: nothing reaches the EMHQ
    assert returned.wait(WAIT_S)
    assert len(where(facility, EMHQ)["lock"]) == 1
    again = IMS(
        facility,
        define("IMSA"),
        {},
        msgq=MSGQ,
        fastpath=fastpath({"IFP1": "PSBF"}),
        ifp_programs={"PSBF": reply},
        **options,
    )
    try:
        again.start(restart=mode)
        assert len(where(facility, EMHQ)[ENTRY_A]) == 1  # its own entry, once
        assert imsb.fastpath.global_table("PSBF") == ["IMSA"]
        yield imsb, again
    finally:
        again.shutdown()


def test_emergency_restart_requeues_the_fast_path_input_and_refreshes_the_table(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    with failed_with_fp_work(facility, make_ims, "emergency") as (imsb, imsa):
        assert imsa.fastpath is not None and imsb.fastpath is not None
        assert imsa.restarted.emhq_requeued == 1 and imsa.restarted.requeued == 0
        assert imsb.fastpath.receive("LTB", WAIT_S) == "R queued"
        assert imsa.fastpath.enter("LTA", "FPGO", b"again") == "global"  # LTA registered
        got = sorted(imsa.fastpath.receive("LTA", WAIT_S) or "" for _ in range(2))
        assert got == ["R again", "R held"]
        assert imsa.fastpath.counts["processed"] == 3  # held, queued, again: once each
        assert until(lambda: where(facility, EMHQ) == {ENTRY_A: [b"IMSA"]})
        assert imsa.fastpath.receive("LTA", 0) is None  # no third reply: not twice


def test_cold_start_sends_the_fast_path_input_to_the_cold_queue(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    with failed_with_fp_work(facility, make_ims, "cold") as (imsb, imsa):
        assert imsa.fastpath is not None and imsb.fastpath is not None
        [record] = imsa.cold_messages
        assert (record.queue, record.source, record.first_segment) == ("PSBF", "LTA", b"held")
        assert imsb.fastpath.receive("LTB", WAIT_S) == "R queued"
        assert imsa.fastpath.counts["processed"] == 1
        assert until(lambda: set(where(facility, EMHQ)) == {"cold", ENTRY_A})
