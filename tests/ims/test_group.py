"""A shared-queues group of IMS systems: first reader wins, abends back out, output
reaches the terminal's own IMS, LTERMs nobody registered keep their messages, and the
units of work of figure 72."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cqs import Uow, make_name
from sharedq.ims import A1, A7, DLI, IMSError, IMSReason, Lterm, Region, Transaction
from sharedq.log import LogStream, RecordType
from sharedq.recovery import PairLayout, RecoverySettings

from .conftest import MSGQ, MakeIMS
from .helpers import Gate, Runs, define, drain, echo, fill, take, until, where

TRANA = Transaction("TRANA", 1, "PGMA")
TRANB = Transaction("TRANB", 2, "PGMB")
LTERMA = Lterm("LTERMA", "NODE1")
LTERMB = Lterm("LTERMB", "NODE2")


def test_first_reader_wins_across_three_systems_and_the_others_get_QC(
    make_ims: MakeIMS,
) -> None:
    runs = Runs()
    systems = [
        make_ims(
            define(imsid, transactions=(TRANA,), lterms=(LTERMA,), queue_buffer=64),
            {"PGMA": echo(runs)},
        )
        for imsid in ("IMSA", "IMSB", "IMSC")
    ]
    node1 = systems[0].logon("NODE1")
    # two buffers: global, so all three are told and each schedules its region
    assert node1.enter("TRANA " + "x" * 80).routing == "global"
    seen = runs.wait_for(3)
    winners = [imsid for imsid, got in seen if got[0] is not None]
    losers = [imsid for imsid, got in seen if got == [None]]
    assert len(winners) == 1 and len(losers) == 2
    assert sorted(winners + losers) == ["IMSA", "IMSB", "IMSC"]
    out = node1.receive(30)
    assert out is not None and out.text.startswith("OUT TRANA x")
    node1.ack(out)
    assert sum(ims.counts["processed"] for ims in systems) == 1
    # every scheduling ended in QC: the winner's second GU, the losers' first
    assert sum(ims.counts["qc"] for ims in systems) == 3


def test_an_abend_backs_out_and_stops_the_program(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    failing = threading.Event()
    failing.set()

    def pgma(dli: DLI) -> None:
        while (segment := dli.io.gu()) is not None:
            if failing.is_set():
                dli.io.isrt(b"discarded")
                dli.alt_pcb("LTERMA").isrt(b"discarded too")
                raise RuntimeError("U0777")
            dli.io.isrt(b"OUT " + segment)

    imsa = make_ims(define("IMSA", transactions=(TRANA,), lterms=(LTERMA,)), {"PGMA": pgma})
    node1 = imsa.logon("NODE1")
    assert node1.enter("TRANA abend").routing == "local"
    # the input is back at the head of its queue; no insert reached a queue
    assert until(lambda: imsa.stopped_programs() == {"PGMA"})
    assert until(lambda: where(facility) == {"\x01TRANA": [b"TRANA abend"]})
    assert imsa.counts["abends"] == 1 and imsa.counts["outputs"] == 0
    # the PSB is stopped: new input goes global, nothing is scheduled here
    assert node1.enter("TRANA second").routing == "global"
    failing.clear()
    imsa.start_program("PGMA")
    texts = take(node1, 2)
    # the unlocked message went back to the head: processed first
    assert texts == ["OUT TRANA abend", "OUT TRANA second"]
    assert until(lambda: where(facility) == {}) and imsa.counts["outputs"] == 2


def test_replies_reach_the_terminal_through_its_own_system(make_ims: MakeIMS) -> None:
    runs = Runs()
    imsa = make_ims(
        define("IMSA", transactions=(TRANB,), lterms=(LTERMA,)), {"PGMB": echo(runs)}
    )  # no region for class 2 on IMSA: it never registers TRANB
    imsb = make_ims(
        define("IMSB", transactions=(TRANB,), lterms=(LTERMA,), regions=(Region("MPR1", (2,)),)),
        {"PGMB": echo(runs)},
    )
    assert imsa.interests() == [] and imsb.interests() == ["TRANB"]
    node1 = imsa.logon("NODE1")
    assert node1.enter("TRANB hello").routing == "global"
    out = node1.receive(30)
    assert out is not None and out.text == "OUT TRANB hello"
    node1.ack(out)
    assert until(lambda: imsb.counts["processed"] == 1) and imsb.counts["delivered"] == 0
    assert imsa.counts["delivered"] == 1


def test_output_for_an_lterm_nobody_registered_waits_for_its_logon(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    def pgma(dli: DLI) -> None:
        while dli.io.gu() is not None:
            assert dli.alt_pcb("LTERMB").isrt(b"for LTERMB") == "  "
            dli.alt_pcb("LTERMB").purg()

    imsa = make_ims(define("IMSA", transactions=(TRANA,), lterms=(LTERMA, LTERMB)), {"PGMA": pgma})
    imsb = make_ims(define("IMSB", transactions=(TRANA,), lterms=(LTERMB,)), {"PGMA": pgma})
    node1 = imsa.logon("NODE1")
    node1.enter("TRANA one")
    node1.enter("TRANA two")
    assert until(lambda: where(facility) == {"\x05LTERMB": [b"for LTERMB", b"for LTERMB"]})
    node2 = imsb.logon("NODE2")  # registration finds the queue non-empty: read at once
    assert take(node2, 2) == ["for LTERMB", "for LTERMB"]
    assert until(lambda: where(facility) == {})
    # an output not acknowledged at logoff goes back and waits for the next logon
    node1.enter("TRANA three")
    out = node2.receive(30)
    assert out is not None
    node2.logoff()
    assert until(lambda: where(facility) == {"\x05LTERMB": [b"for LTERMB"]})
    node2 = imsa.logon("NODE2")
    out = node2.receive(30)
    assert out is not None and out.text == "for LTERMB"
    node2.ack(out)


def figure_72(make_ims: MakeIMS, **options: Any) -> dict[str, Uow]:
    """MSG1 from LTERMA on IMSA -> PGMA on IMSA switches to MSG2 -> PGMB on IMSB
    answers MSG3 to LTERMA (I/O PCB) and MSG4 to LTERMB (alternate PCB).  Returns
    each message's unit of work, as the programs and terminals saw it."""
    held: dict[str, Uow] = {}

    def pgma(dli: DLI) -> None:
        while dli.io.gu() is not None:
            assert dli.uow is not None
            held["MSG1"] = dli.uow
            assert dli.alt_pcb("TRANB").isrt(b"TRANB MSG2") == "  "

    def pgmb(dli: DLI) -> None:
        while dli.io.gu() is not None:
            assert dli.uow is not None
            held["MSG2"] = dli.uow
            assert dli.io.lterm == "LTERMA"  # the switch kept the input's LTERM
            dli.io.isrt(b"MSG3")
            dli.alt_pcb("LTERMB").isrt(b"MSG4")

    programs = {"PGMA": pgma, "PGMB": pgmb}
    imsa = make_ims(
        define("IMSA", transactions=(TRANA, TRANB), lterms=(LTERMA,)), programs, **options
    )
    imsb = make_ims(
        define(
            "IMSB", transactions=(TRANA, TRANB), lterms=(LTERMB,), regions=(Region("MPR1", (2,)),)
        ),
        programs,
        **options,
    )
    node1, node2 = imsa.logon("NODE1"), imsb.logon("NODE2")
    routed = node1.enter("TRANA MSG1")
    assert routed.routing == "local"
    msg3, msg4 = node1.receive(30), node2.receive(30)
    assert msg3 is not None and msg4 is not None
    node1.ack(msg3)
    node2.ack(msg4)
    assert held["MSG1"] == routed.uow
    assert until(lambda: imsb.counts["processed"] == 1)
    imsa.shutdown()
    imsb.shutdown()
    return {**held, "MSG3": msg3.uow, "MSG4": msg4.uow}


A, B, BLANK = b"IMSA    ", b"IMSB    ", b" " * 8


def test_figure_72_units_of_work(make_ims: MakeIMS) -> None:
    uows = figure_72(make_ims)
    msg1, msg2, msg3, msg4 = (uows[f"MSG{n}"] for n in range(1, 5))
    assert (msg1.origin, msg1.processor, msg1.processed) == (A, BLANK, 0)
    assert (msg2.origin, msg2.arrival, msg2.processor) == (A, msg1.arrival, A)
    assert (msg3.origin, msg3.arrival, msg3.processor) == (A, msg1.arrival, B)
    assert (msg4.origin, msg4.arrival, msg4.processor) == (A, msg1.arrival, B)
    assert msg1.arrival < msg2.processed < msg3.processed < msg4.processed
    assert {m.origin_id for m in (msg1, msg2, msg3, msg4)} == {msg1.origin_id}


def test_the_cqs_log_follows_figure_72_across_two_systems(
    make_ims: MakeIMS, tmp_path: Path
) -> None:
    """Both IMSs' CQSs log to one log stream; every message record of the flow carries
    the unit of work of its message, all with MSG1's first 16 bytes."""
    root = tmp_path / "recovery"
    uows = figure_72(make_ims, recovery=RecoverySettings(root))
    log = PairLayout(root, MSGQ).log
    records = list(LogStream(log, name=f"{MSGQ}.LOG", structure=MSGQ).records())
    flow = [r for r in records if RecordType(r.type).carries_uow]
    assert {r.uow[:16] for r in flow} == {uows["MSG1"].origin_id}
    puts = {(r.queue, r.uow) for r in flow if RecordType(r.type) is RecordType.PUT}
    assert puts == {
        (make_name(1, "TRANA"), bytes(uows["MSG1"])),  # the local put
        (make_name(1, "TRANB"), bytes(uows["MSG2"])),
        (make_name(5, "LTERMA"), bytes(uows["MSG3"])),
        (make_name(5, "LTERMB"), bytes(uows["MSG4"])),
    }
    writers = {(r.writer, r.queue) for r in flow if RecordType(r.type) is RecordType.DELETE}
    assert writers == {
        ("CQSIMSA", make_name(1, "TRANA")),
        ("CQSIMSB", make_name(1, "TRANB")),
        ("CQSIMSA", make_name(5, "LTERMA")),
        ("CQSIMSB", make_name(5, "LTERMB")),
    }


def test_a_full_structure_gives_A7_to_inserts_and_DFS070_to_input(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    gate = Gate()
    statuses: list[str] = []

    def pgma(dli: DLI) -> None:
        dli.io.gu()
        gate.stop_at("full")
        statuses.append(dli.io.isrt(b"reply"))
        statuses.append(dli.alt_pcb("NOSUCH").isrt(b"x"))
        while dli.io.gu() is not None:
            pass

    imsa = make_ims(define("IMSA", transactions=(TRANA,), lterms=(LTERMA,)), {"PGMA": pgma})
    node1 = imsa.logon("NODE1")
    assert node1.enter("TRANA before").routing == "local"
    gate.wait_reached("full")
    filler = fill(facility)
    with pytest.raises(IMSError) as refused:
        node1.enter("TRANA after")
    assert refused.value.reason is IMSReason.STRUCTURE_FULL and "DFS070" in str(refused.value)
    gate.open("full")
    assert until(lambda: len(statuses) == 2)
    assert statuses == [A7, A1]
    drain(filler)


def test_committed_output_the_structure_has_no_room_for_waits_in_the_ims(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    """§1.13: committed output not yet on the shared queue is kept in the IMS and
    moved when space becomes available."""
    gate = Gate()

    def pgma(dli: DLI) -> None:
        while dli.io.gu() is not None:
            assert dli.io.isrt(b"OUT 1") == "  "
            dli.io.purg()
            assert dli.io.isrt(b"OUT 2") == "  "
            gate.stop_at("inserted")

    imsa = make_ims(define("IMSA", transactions=(TRANA,), lterms=(LTERMA,)), {"PGMA": pgma})
    node1 = imsa.logon("NODE1")
    node1.enter("TRANA kept")
    gate.wait_reached("inserted")
    filler = fill(facility)
    # the sync point: both puts refused and kept, the input deleted; its entry, freed,
    # takes one of the two when the IMS retries; the other stays in the IMS
    gate.open("inserted")
    assert until(lambda: imsa.counts["processed"] == 1 and imsa.counts["outputs"] == 1)
    drain(filler)  # room again: the IMS puts the reply it kept
    assert take(node1, 2) == ["OUT 1", "OUT 2"]
    assert imsa.counts["outputs"] == 2


def test_a_transaction_not_defined_is_rejected(make_ims: MakeIMS) -> None:
    imsa = make_ims(define("IMSA", transactions=(TRANA,), lterms=(LTERMA,)), {"PGMA": echo()})
    node1 = imsa.logon("NODE1")
    try:
        node1.enter("NOSUCH data")
        raise AssertionError("accepted")
    except IMSError as error:
        assert error.reason is IMSReason.UNKNOWN_DESTINATION
