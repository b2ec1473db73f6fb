"""Local or global processing of full-function input: each condition of §9.2.

Local (all of): a region serving the class waits, the PSB is started, the message fits
one queue buffer, the transaction is not serial (and MAXRGN allows).  Local input goes
straight to the lock queue and no other IMS is told; global input goes to the
transaction ready queue (a serial transaction to its serial queue, named with the
IMSID) and every registered IMS is told.
"""

from __future__ import annotations

from sharedq.cf import CouplingFacility
from sharedq.cqs import make_name
from sharedq.ims import DLI, Lterm, Region, Transaction

from .conftest import MakeIMS
from .helpers import Gate, Runs, blocker, define, echo, take, until, where

TRANA = Transaction("TRANA", 1, "PGMA")
BUSY = Transaction("BUSY", 1, "PGMX")
LTERMA = Lterm("LTERMA", "NODE1")


def _pair(make_ims: MakeIMS, gate: Gate, runs: Runs, *, trana: Transaction = TRANA) -> tuple:
    """IMSA (terminal NODE1) and IMSB, both able to process TRANA, one region each."""
    imsa = make_ims(
        define("IMSA", transactions=(trana, BUSY), lterms=(LTERMA,), queue_buffer=64),
        {"PGMA": echo(runs), "PGMX": blocker(gate)},
    )
    imsb = make_ims(define("IMSB", transactions=(trana,)), {"PGMA": echo(runs)})
    return imsa, imsb, imsa.logon("NODE1")


def test_a_waiting_region_processes_locally_and_no_one_is_told(make_ims: MakeIMS) -> None:
    runs = Runs()
    imsa, imsb, node1 = _pair(make_ims, Gate(), runs)
    routed = node1.enter("TRANA local")
    assert routed.routing == "local" and routed.buffers == 1
    out = node1.receive(30)
    assert out is not None and out.text == "OUT TRANA local"
    node1.ack(out)
    assert runs.wait_for(1) == [("IMSA", [b"TRANA local", None])]
    # local processing: no put to the ready queue, so neither IMS was told of TRANA
    assert imsb.cqs.notifications()["told"] == 0
    assert imsa.cqs.notifications()["told"] == 1  # LTERMA's output only
    assert imsb.counts["qc"] == 0


def test_no_waiting_region_means_global(facility: CouplingFacility, make_ims: MakeIMS) -> None:
    gate, runs = Gate(), Runs()
    _imsa, _imsb, node1 = _pair(make_ims, gate, runs)
    node1.enter("BUSY")
    gate.wait_reached("busy")
    assert node1.enter("TRANA global").routing == "global"
    out = node1.receive(30)  # IMSB (told) processed it; IMSA delivers the reply
    assert out is not None and out.text == "OUT TRANA global"
    node1.ack(out)
    assert runs.wait_for(1)[0] == ("IMSB", [b"TRANA global", None])
    gate.open("busy")


def test_a_stopped_psb_means_global_and_its_start_schedules(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    runs = Runs()
    imsa = make_ims(define("IMSA", transactions=(TRANA,), lterms=(LTERMA,)), {"PGMA": echo(runs)})
    node1 = imsa.logon("NODE1")
    imsa.stop_program("PGMA")
    assert node1.enter("TRANA while stopped").routing == "global"
    assert where(facility) == {"\x01TRANA": [b"TRANA while stopped"]}
    imsa.start_program("PGMA")
    out = node1.receive(30)
    assert out is not None and out.text == "OUT TRANA while stopped"
    node1.ack(out)


def test_a_message_bigger_than_one_queue_buffer_means_global_in_parts(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    got: list[list[bytes]] = []

    def pgma(dli: DLI) -> None:
        while (segment := dli.io.gu()) is not None:
            segments = [segment]
            while (more := dli.io.gn()) is not None:
                segments.append(more)
            assert dli.io.status == "QD"
            got.append(segments)
            dli.io.isrt(b"done")

    imsa = make_ims(
        define("IMSA", transactions=(TRANA,), lterms=(LTERMA,), queue_buffer=64),
        {"PGMA": pgma},
    )
    node1 = imsa.logon("NODE1")
    segments = [b"TRANA " + b"a" * 50, b"b" * 60, b"c" * 70]
    routed = node1.enter(*segments)
    assert routed.routing == "global" and routed.buffers == 4
    out = node1.receive(30)
    assert out is not None and out.text == "done"
    node1.ack(out)
    assert got == [segments]
    assert until(lambda: where(facility) == {})


def test_a_serial_transaction_goes_to_its_serial_queue_and_keeps_its_order(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    serial = Transaction("SERT", 1, "PGMS", serial=True)
    runs = Runs()
    imsa = make_ims(
        define(
            "IMSA",
            transactions=(serial,),
            lterms=(LTERMA,),
            regions=(Region("MPR1", (1,)), Region("MPR2", (1,)), Region("MPR3", (1,))),
        ),
        {"PGMS": echo(runs)},
    )
    imsb = make_ims(define("IMSB", transactions=(serial,)), {"PGMS": echo(runs)})
    # each IMS registers the serial queue named with its own IMSID
    assert make_name(4, "SERT", "IMSA") in [q for _, q in imsa.cqs.registered()]
    assert make_name(4, "SERT", "IMSB") in [q for _, q in imsb.cqs.registered()]
    node1 = imsa.logon("NODE1")
    for n in range(5):
        assert node1.enter(f"SERT {n}").routing == "serial"
    texts = take(node1, 5)
    assert texts == [f"OUT SERT {n}" for n in range(5)]  # in order, one region at a time
    assert until(lambda: imsa.counts["processed"] == 5) and imsb.counts["processed"] == 0


def test_maxrgn_reached_means_global(make_ims: MakeIMS) -> None:
    gate, runs = Gate(), Runs()
    limited = Transaction("TRANM", 1, "PGMM", maxrgn=1)

    def pgmm(dli: DLI) -> None:
        segment = dli.io.gu()
        if segment == b"TRANM first":
            gate.stop_at("first")
        dli.io.isrt(b"OUT " + (segment or b""))
        while (segment := dli.io.gu()) is not None:
            dli.io.isrt(b"OUT " + segment)
        runs.record(dli.imsid, [])

    imsa = make_ims(
        define(
            "IMSA",
            transactions=(limited,),
            lterms=(LTERMA,),
            regions=(Region("MPR1", (1,)), Region("MPR2", (1,))),
        ),
        {"PGMM": pgmm},
    )
    node1 = imsa.logon("NODE1")
    assert node1.enter("TRANM first").routing == "local"
    gate.wait_reached("first")
    # MPR2 waits, but TRANM already has its one region: global
    assert node1.enter("TRANM second").routing == "global"
    gate.open("first")
    assert sorted(take(node1, 2)) == ["OUT TRANM first", "OUT TRANM second"]


def test_a_stopped_transaction_is_queued_deregistered_and_scheduled_when_started(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    runs = Runs()
    imsa = make_ims(define("IMSA", transactions=(TRANA,), lterms=(LTERMA,)), {"PGMA": echo(runs)})
    node1 = imsa.logon("NODE1")
    imsa.stop_transaction("TRANA")
    assert imsa.interests() == []
    assert node1.enter("TRANA queued").routing == "global"
    assert where(facility) == {"\x01TRANA": [b"TRANA queued"]}
    imsa.start_transaction("TRANA")  # registers: the queue has work, read at once
    assert imsa.interests() == ["TRANA"]
    out = node1.receive(30)
    assert out is not None and out.text == "OUT TRANA queued"
    node1.ack(out)


def test_a_remote_transaction_is_entered_here_and_processed_elsewhere(
    make_ims: MakeIMS,
) -> None:
    runs = Runs()
    imsa = make_ims(
        define(
            "IMSA", transactions=(Transaction("TRANA", 1, "PGMA", remote=True),), lterms=(LTERMA,)
        ),
        {"PGMA": echo(runs)},
    )
    imsb = make_ims(define("IMSB", transactions=(TRANA,)), {"PGMA": echo(runs)})
    assert imsa.interests() == [] and imsb.interests() == ["TRANA"]
    node1 = imsa.logon("NODE1")
    assert node1.enter("TRANA remote").routing == "global"
    out = node1.receive(30)
    assert out is not None and out.text == "OUT TRANA remote"
    node1.ack(out)
    assert runs.wait_for(1)[0][0] == "IMSB"


def test_interest_follows_the_regions_that_serve_the_class(make_ims: MakeIMS) -> None:
    imsa = make_ims(define("IMSA", transactions=(TRANA,)), {"PGMA": echo()})
    assert imsa.interests() == ["TRANA"]
    imsa.stop_region("MPR1")
    assert imsa.interests() == []
    imsa.start_region("MPR1")
    assert imsa.interests() == ["TRANA"]


def test_local_processing_off_sends_every_input_global(make_ims: MakeIMS) -> None:
    runs = Runs()
    definition = define("IMSA", transactions=(TRANA,), lterms=(LTERMA,))
    imsa = make_ims(
        type(definition)(
            "IMSA",
            transactions=definition.transactions,
            programs=definition.programs,
            regions=definition.regions,
            lterms=definition.lterms,
            local_processing=False,
        ),
        {"PGMA": echo(runs)},
    )
    node1 = imsa.logon("NODE1")
    assert node1.enter("TRANA off").routing == "global"
    out = node1.receive(30)
    assert out is not None and out.text == "OUT TRANA off"
    node1.ack(out)
    assert imsa.cqs.notifications()["told"] == 2  # TRANA's ready queue, LTERMA's


def test_maxrgn_bounds_global_scheduling_too(make_ims: MakeIMS) -> None:
    """MAXRGN=1 and two regions: while one region holds TRANM, the notification of
    more TRANM work schedules no second region; the one region takes it next."""
    gate, runs = Gate(), Runs()
    limited = Transaction("TRANM", 1, "PGMM", maxrgn=1)

    def pgmm(dli: DLI) -> None:
        got: list[bytes | None] = []
        while (segment := dli.io.gu()) is not None:
            got.append(segment)
            if segment == b"TRANM first":
                gate.stop_at("first")
            dli.io.isrt(b"OUT " + segment)
        runs.record(dli.imsid, [*got, None])

    definition = define(
        "IMSA",
        transactions=(limited,),
        lterms=(LTERMA,),
        regions=(Region("MPR1", (1,)), Region("MPR2", (1,))),
    )
    imsa = make_ims(definition, {"PGMM": pgmm})
    node1 = imsa.logon("NODE1")
    imsa.stop_program("PGMM")  # both inputs global
    node1.enter("TRANM first")
    imsa.start_program("PGMM")
    gate.wait_reached("first")
    assert node1.enter("TRANM second").routing == "global"  # MAXRGN reached: not local
    assert until(lambda: imsa.cqs.notifications()["told"] >= 2)  # TRANM told again
    gate.open("first")
    assert sorted(take(node1, 2)) == ["OUT TRANM first", "OUT TRANM second"]
    assert runs.wait_for(1) == [("IMSA", [b"TRANM first", b"TRANM second", None])]
