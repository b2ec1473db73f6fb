"""The seed's transaction flows, step by step (redbook §3.1.3, Appendix A; spec §11).

Each step is checked on the structure itself, through an inspector connection: where
the message is (transaction ready queue, lock queue, LTERM ready queue, staging queue)
at each point the seed names.  Programs stop at gates so that the test looks at the
structure at the step, not after the flow ran on.
"""

from __future__ import annotations

from sharedq.cf import CouplingFacility
from sharedq.cqs import make_name
from sharedq.ims import DLI, Lterm, Transaction

from .conftest import MakeIMS
from .helpers import Gate, blocker, define, until, where

TRANA = Transaction("TRANA", 1, "PGMA")
BUSY = Transaction("BUSY", 1, "PGMX")
LTERMA = Lterm("LTERMA", "NODE1")


def test_appendix_a2_put_notify_read_process_reply_ack(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    # Given IMSA, one region for class 1, busy with another transaction
    gate = Gate()
    seen: dict[str, object] = {}

    def pgma(dli: DLI) -> None:
        seen["before GU"] = where(facility)  # step 10: scheduled, the message still ready
        segment = dli.io.gu()
        seen["after GU"] = where(facility)  # step 11: READ moved it to the lock queue
        seen["segment"] = segment
        dli.io.isrt(b"MSG-OUT")  # step 15
        assert dli.io.gu() is None  # step 16: sync point (PUT MSG-OUT, DELETE MSG-IN); QC

    imsa = make_ims(
        define("IMSA", transactions=(TRANA, BUSY), lterms=(LTERMA,)),
        {"PGMA": pgma, "PGMX": blocker(gate)},
    )
    # Step 1: startup registers interest in the static transactions
    assert imsa.interests() == ["BUSY", "TRANA"]
    # Steps 2-3: logon of NODE1 registers LTERMA
    node1 = imsa.logon("NODE1")
    assert (imsa.cqs.registered()[-1][1]) == make_name(5, "LTERMA")
    busy = node1.enter("BUSY now")
    assert busy.routing == "local"
    gate.wait_reached("busy")

    # Steps 5-8: TRANA MSG-IN entered; no region waits, so the CQS PUT goes to the
    # transaction ready queue (global), and IMSA is told it went non-empty
    routed = node1.enter("TRANA MSG-IN")
    assert routed.routing == "global"
    assert where(facility)["\x01TRANA"] == [b"TRANA MSG-IN"]
    gate.open("busy")  # the region is free: IMSA schedules PGMA

    # Steps 18-21: CQSA tells IMSA of LTERMA's output; IMSA reads it to the lock queue
    # and sends it to the node
    out = node1.receive(30)
    assert out is not None and out.segments == (b"MSG-OUT",) and out.lterm == "LTERMA"
    assert seen["before GU"]["\x01TRANA"] == [b"TRANA MSG-IN"]  # type: ignore[index]
    assert "\x01TRANA" not in seen["after GU"]  # type: ignore[operator]
    assert seen["after GU"]["lock"] == [make_name(1, "TRANA")]  # type: ignore[index]
    assert seen["segment"] == b"TRANA MSG-IN"
    # Step 16 done: MSG-IN deleted; step 22: MSG-OUT stays on the lock queue until the
    # terminal acknowledges it, then it is deleted
    assert until(lambda: imsa.counts["processed"] == 2)  # the delete follows the put
    assert where(facility) == {"lock": [make_name(5, "LTERMA")]}
    node1.ack(out)
    assert where(facility) == {}
    assert imsa.counts["processed"] == 2 and imsa.counts["delivered"] == 1
    assert (imsa.counts["local"], imsa.counts["global"]) == (1, 1)


def test_full_function_flow_across_two_systems_with_a_two_buffer_reply(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    """§3.1.3, figures 10-13: MSG1 entered on IMSA, processed by IMSB; the reply
    MSG2 in two queue buffers (MSG2B on the LTERM staging queue first, then MSG2A on
    the LTERM ready queue) delivered by IMSA and deleted whole on acknowledgement."""
    gate = Gate()
    tranb = Transaction("TRANB", 1, "PGMB")
    seen: dict[str, object] = {}
    long_reply = b"MSG2 " + b"x" * 100  # more than one 64-byte queue buffer

    def pgmb(dli: DLI) -> None:
        dli.io.gu()
        seen["read by"] = dli.imsid
        seen["after read"] = where(facility)
        dli.io.isrt(long_reply)
        assert dli.io.gu() is None

    def not_here(dli: DLI) -> None:
        raise AssertionError("IMSA has no region free for TRANB")

    # Step 1: IMSA and IMSB register TRANB; step 2: IMSA registers LTERMA at logon
    imsa = make_ims(
        define("IMSA", transactions=(tranb, BUSY), lterms=(LTERMA,)),
        {"PGMB": not_here, "PGMX": blocker(gate)},
    )
    imsb = make_ims(define("IMSB", transactions=(tranb,), queue_buffer=64), {"PGMB": pgmb})
    assert "TRANB" in imsa.interests() and imsb.interests() == ["TRANB"]
    node1 = imsa.logon("NODE1")
    node1.enter("BUSY")
    gate.wait_reached("busy")
    # Steps 3-4: IMSA has no resources: MSG1 goes to the TRANB ready queue
    assert node1.enter("TRANB MSG1").routing == "global"
    # Steps 5-8: both told; IMSB schedules and reads: MSG1 to the lock queue
    out = node1.receive(30)
    assert out is not None
    assert seen["read by"] == "IMSB"
    busy_lock = make_name(1, "BUSY")
    assert seen["after read"] == {"lock": sorted([busy_lock, make_name(1, "TRANB")])}
    # Steps 9-12: MSG2 in two buffers, read whole by IMSA, sent to LTERMA
    assert out.segments == (long_reply,)
    assert until(lambda: imsb.counts["processed"] == 1)  # MSG1's delete, after the put
    state = where(facility)
    assert state["lock"] == sorted([busy_lock, make_name(5, "LTERMA")])
    assert len(state["staging"]) == 1
    node1.ack(out)  # MSG2A and MSG2B deleted
    assert where(facility) == {"lock": [busy_lock]}
    gate.open("busy")
    assert imsb.counts["processed"] == 1 and imsa.counts["delivered"] == 1
