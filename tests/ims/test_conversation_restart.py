"""A conversation outlives its front end's failure (IMS restores its CCBs at restart).

The front end fails for real in process (``IMS.stop_dead``: its CQS stops dead, what it
held stays locked, its terminals lose their session) and a new incarnation makes an
emergency restart.  Its CCBs were only in the dead one's memory; the responses say
whose they are (their unit of work's origin is this IMSID, from before the restart),
so the new incarnation adopts them: the held response, put back on its LTERM's queue
by the restart, is sent again at logon and the conversation goes on with its SPA; a
response still being made on another IMS when the front end died is taken when it
comes.  A late response the same incarnation let go (/EXIT) is still deleted.
"""

from __future__ import annotations

import multiprocessing
import signal

from sharedq.cf import CouplingFacility
from sharedq.cf.redis import RedisFacility
from sharedq.cqs import structure_params
from sharedq.ims import IMS, Program, Region, SystemDefinition, Transaction
from sharedq.ims.queues import lterm_ready
from sharedq.testing.redis_server import RedisServer

from . import workers
from .conftest import MSGQ, MakeIMS
from .helpers import Gate, take, until, where
from .test_conversation import (
    KEPT,
    LTERMA,
    TRANA32,
    Talk,
    continuing,
    rows,
    spa,
    system,
)


def test_a_held_conversation_goes_on_after_its_front_end_fails_and_restarts(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    talk = Talk()
    definition = system("IMSA", (TRANA32,), lterms=(LTERMA,))
    programs = {"PGMA": talk.program("PGMA", continuing())}
    dead = make_ims(definition, programs)
    node1 = dead.logon("NODE1")
    node1.enter("TRANA ONE")
    assert take(node1, 1) == ["OUT 1 TRANA ONE"]  # acknowledged: held on the lock queue
    assert until(lambda: len(where(facility, MSGQ).get("lock", [])) == 1)
    dead.stop_dead()
    again = IMS(facility, definition, programs, msgq=MSGQ)
    try:
        again.start(restart="emergency")
        assert again.restarted.requeued == 1  # the held response, back on LTERMA's queue
        node1 = again.logon("NODE1")
        assert take(node1, 1) == ["OUT 1 TRANA ONE"]  # sent again
        assert node1.in_conversation
        assert rows(again) == [("NODE1", None, "LTERMA", "TRANA", "HELD")]
        node1.enter("TWO")  # no code: the conversation's next input
        assert take(node1, 1) == ["OUT 2 TWO"]
        node1.enter("END")
        assert take(node1, 1) == ["BYE"]
        assert not node1.in_conversation
        assert until(lambda: where(facility, MSGQ) == {})
    finally:
        again.shutdown()
    seen = talk.wait_for(3)
    assert seen[1].spa == spa("TRANA", b"\x01" + KEPT[1:])  # the SPA survived the failure


def test_a_response_made_elsewhere_while_the_front_end_was_down_is_taken(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    """The input is on IMSB (held at a gate) when IMSA, the front end, fails; IMSA
    restarts and the user logs on again; the response then comes and is the
    conversation's, not an orphan's."""
    talk, gate = Talk(), Gate()
    front = system("IMSA", (TRANA32,), regions=(), lterms=(LTERMA,), local_processing=False)
    make_ims(
        system("IMSB", (TRANA32,), regions=(Region("MPR1", (1,)),)),
        {"PGMA": talk.program("PGMA", continuing(gate))},
    )
    dead = make_ims(front, {"PGMA": talk.program("PGMA", continuing())})
    node1 = dead.logon("NODE1")
    node1.enter("TRANA ONE")
    assert take(node1, 1) == ["OUT 1 TRANA ONE"]
    node1.enter("HOLD IT")
    gate.wait_reached("HOLD")
    dead.stop_dead()
    again = IMS(facility, front, {"PGMA": talk.program("PGMA", continuing())}, msgq=MSGQ)
    try:
        again.start(restart="emergency")
        node1 = again.logon("NODE1")
        assert not node1.in_conversation  # nothing has told it yet
        gate.open("HOLD")
        assert take(node1, 1) == ["OUT 2 HOLD IT"]
        assert node1.in_conversation
        node1.enter("END")
        assert take(node1, 1) == ["BYE"]
        assert until(lambda: where(facility, MSGQ) == {})
    finally:
        again.shutdown()


def test_a_late_response_of_this_incarnations_exit_is_still_not_adopted(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    """Adoption is for an earlier incarnation's conversations only: after DFS577I the
    late response (this incarnation's unit of work) is deleted, never sent."""
    talk, gate = Talk(), Gate()
    ims = make_ims(
        system("IMSA", (Transaction("TRANA", 1, "PGMA", spa=32),), lterms=(LTERMA,)),
        {"PGMA": talk.program("PGMA", continuing(gate))},
    )
    node1 = ims.logon("NODE1")
    node1.enter("TRANA HOLD")
    gate.wait_reached("HOLD")
    assert node1.exit().startswith("DFS577I")
    gate.open("HOLD")
    assert until(lambda: where(facility, MSGQ) == {})
    assert node1.receive(timeout=0.2) is None
    assert not node1.in_conversation


def test_a_front_end_process_killed_mid_conversation(redis_server: RedisServer) -> None:
    """IMSA in a process of its own, its terminal in conversation (one iteration
    answered, the response held on the lock queue), SIGKILLed; a peer declares its CQS
    failed; IMSA restarts (emergency) here: the response comes again at logon and the
    conversation goes on from the SPA the dead process's program wrote."""
    redis_server.flush()
    context = multiprocessing.get_context("spawn")
    said = context.Queue()
    with RedisFacility.from_url(redis_server.url) as facility:
        facility.create(structure_params(workers.MSGQ, messages=200))
        doomed = context.Process(
            target=workers.conversing_front_end, args=(redis_server.url, said), daemon=True
        )
        doomed.start()
        assert said.get(timeout=60) == "STEP 1 TRANC ONE"
        doomed.kill()
        doomed.join(10)
        assert doomed.exitcode == -signal.SIGKILL
        with facility.connect(workers.MSGQ, "PEER") as peer:
            [user] = [u.user_id for u in peer.users() if u.name == "CQSIMSA"]
            peer.mark_failed(user)
        assert len(where(facility, workers.MSGQ)["lock"]) == 1  # the held response
        definition = SystemDefinition(
            "IMSA",
            transactions=(workers.TRANC,),
            programs=(Program("PGMC"),),
            regions=(Region("MPR1", (1,)),),
            lterms=(LTERMA,),
        )
        ims = IMS(facility, definition, {"PGMC": workers.converse}, msgq=workers.MSGQ)
        with ims.start(restart="emergency"):
            assert ims.restarted.requeued == 1
            node1 = ims.logon("NODE1")
            assert take(node1, 1) == ["STEP 1 TRANC ONE"]  # sent again
            node1.enter("TWO")
            assert take(node1, 1) == ["STEP 2 TWO"]  # the count in the SPA went on
            node1.enter("END")
            assert take(node1, 1) == ["BYE"]
            assert until(lambda: where(facility, workers.MSGQ) == {})
    redis_server.flush()


def test_a_held_conversation_goes_on_after_a_shutdown_and_a_normal_start(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    """A shutdown puts the held response back on its queue (nothing stays locked by a
    CQS no one will ask for it); the next start adopts it at logon."""
    talk = Talk()
    definition = system("IMSA", (TRANA32,), lterms=(LTERMA,))
    programs = {"PGMA": talk.program("PGMA", continuing())}
    first = make_ims(definition, programs)
    node1 = first.logon("NODE1")
    node1.enter("TRANA ONE")
    assert take(node1, 1) == ["OUT 1 TRANA ONE"]
    first.shutdown()
    on_queue = lterm_ready("LTERMA").decode("ascii").rstrip()
    assert until(lambda: list(where(facility, MSGQ)) == [on_queue])  # not locked any more
    again = make_ims(definition, programs)
    node1 = again.logon("NODE1")
    assert take(node1, 1) == ["OUT 1 TRANA ONE"]
    node1.enter("TWO")
    assert take(node1, 1) == ["OUT 2 TWO"]
    node1.enter("END")
    assert take(node1, 1) == ["BYE"]
    assert until(lambda: where(facility, MSGQ) == {})
