"""The peer-failure event (redbook §1.17, issue 20): an IMS watching the structure's
users (``peer_watch_s``) finds a member's CQS connection failed and calls
``peer_failed`` for it by itself, once per failure: its Fast Path global table drops
the dead IMS and an input nobody else serves gets DFS2533 (``ROUTING_NOT_ACTIVE``).
In process (``stop_dead``, memory and Redis) and with the member's process SIGKILLed
(Redis: its connection's lease lapses)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from multiprocessing.queues import Queue

import pytest

from sharedq.cf import CouplingFacility, UserState, open_facility
from sharedq.cf.redis import RedisFacility
from sharedq.cqs import structure_params
from sharedq.ims import (
    IMS,
    SPC,
    FastPathDefinition,
    FPTransaction,
    IMSError,
    IMSReason,
)
from sharedq.ims.events import failed_members
from sharedq.testing.redis_server import RedisServer

from .conftest import EMHQ, MSGQ, MakeIMS
from .helpers import WAIT_S, define, reply, until, where

FP = (FPTransaction("FPGO", "PSBF", SPC.GLOBAL_ONLY),)
GROUP = ("IMSA", "IMSB")
ENTRY_A = "\x01PSBF    IMSA"
#: How often the survivor looks at the structure's users, seconds.
WATCH_S = 0.05


def fastpath(regions: dict[str, str]) -> FastPathDefinition:
    return FastPathDefinition(FP, regions, GROUP)


def looked_again(ims: IMS, times: int = 2) -> bool:
    """Wait until the watcher has made ``times`` more looks (one begun before now
    may be in progress: the second begins after)."""
    seen = ims.events.looks
    return until(lambda: ims.events.looks >= seen + times)


def refused(ims: IMS) -> IMSReason:
    assert ims.fastpath is not None
    with pytest.raises(IMSError) as caught:
        ims.fastpath.enter("LTB", "FPGO", b"refused")
    return caught.value.reason


def test_failed_members_reads_the_cqs_users() -> None:
    users = [
        ("CQSIMSA", UserState.FAILED),
        ("CQSIMSB", UserState.ACTIVE),
        ("CQSIMSC", UserState.FAILED),
        ("WIIMSC", UserState.FAILED),  # not a CQS
        ("CQS1BAD", UserState.FAILED),  # not an IMSID
        ("CQSIMSD", UserState.FAILED),  # own
    ]
    assert failed_members(users, "CQSIMSD") == ({"IMSA", "IMSC"}, {"IMSB"})


def test_a_peer_that_stops_dead_leaves_the_global_table_by_itself(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    facility.create(structure_params(EMHQ, messages=200))
    options = {"emhq": EMHQ}
    imsa = make_ims(
        define("IMSA"),
        {},
        fastpath=fastpath({"IFP1": "PSBF"}),
        ifp_programs={"PSBF": reply},
        **options,
    )
    imsb = make_ims(
        define("IMSB"),
        {},
        fastpath=fastpath({}),
        ifp_programs={"PSBF": reply},
        peer_watch_s=WATCH_S,
        **options,
    )
    assert imsb.fastpath is not None
    assert looked_again(imsb)
    assert imsb.events.peers_failed == []  # IMSA alive: nothing told
    assert imsb.fastpath.enter("LTB", "FPGO", b"served") == "global"  # IMSA serves PSBF
    assert imsb.fastpath.receive("LTB", WAIT_S) == "R served"

    imsa.stop_dead()  # no peer_failed call anywhere below

    assert until(lambda: imsb.events.peers_failed == ["IMSA"])
    assert imsb.fastpath.global_table("PSBF") == []
    assert ENTRY_A not in where(facility, EMHQ)  # the stale entry deleted
    assert refused(imsb) is IMSReason.ROUTING_NOT_ACTIVE  # DFS2533
    assert looked_again(imsb, 3)
    assert imsb.events.peers_failed == ["IMSA"]  # once, though still failed

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
        again.start(restart="emergency")
        assert imsb.fastpath.global_table("PSBF") == ["IMSA"]
        assert looked_again(imsb)  # seen active: a later failure is a new one
        assert imsb.fastpath.enter("LTB", "FPGO", b"back") == "global"
        assert imsb.fastpath.receive("LTB", WAIT_S) == "R back"
        again.stop_dead()
        assert until(lambda: imsb.events.peers_failed == ["IMSA", "IMSA"])
        assert refused(imsb) is IMSReason.ROUTING_NOT_ACTIVE
    finally:
        again.shutdown()
    assert imsb.counts["processed"] == 0  # IMSB has no region: IMSA did the work


def test_a_bad_watch_interval_is_refused(facility: CouplingFacility) -> None:
    for bad in (0, -1.0, "1"):
        with pytest.raises(IMSError) as caught:
            IMS(facility, define("IMSB"), {}, msgq=MSGQ, peer_watch_s=bad)  # type: ignore[arg-type]
        assert caught.value.reason is IMSReason.BAD_ARGUMENT


def served_forever(url: str, ready: Queue[str]) -> None:
    """IMSA with an IFP region for PSBF, in a process of its own (killed by the test);
    its facility's leases short, so that its death shows soon."""
    with open_facility(url) as facility:
        IMS(
            facility,
            define("IMSA"),
            {},
            msgq=MSGQ,
            fastpath=fastpath({"IFP1": "PSBF"}),
            ifp_programs={"PSBF": reply},
            emhq=EMHQ,
        ).start()
        ready.put("IMSA")
        threading.Event().wait()


def test_a_peer_process_killed_leaves_the_global_table_by_itself(
    redis_server: RedisServer, redis_pair: RedisFacility
) -> None:
    context = multiprocessing.get_context("spawn")
    ready = context.Queue()
    doomed = context.Process(
        target=served_forever, args=(redis_server.url + "?lease=1", ready), daemon=True
    )
    doomed.start()
    try:
        assert ready.get(timeout=120) == "IMSA"
        imsb = IMS(
            redis_pair,
            define("IMSB"),
            {},
            msgq=MSGQ,
            fastpath=fastpath({}),
            ifp_programs={"PSBF": reply},
            emhq=EMHQ,
            peer_watch_s=WATCH_S,
        )
        with imsb:
            assert imsb.fastpath is not None
            assert imsb.fastpath.global_table("PSBF") == ["IMSA"]
            assert imsb.fastpath.enter("LTB", "FPGO", b"served") == "global"
            assert imsb.fastpath.receive("LTB", WAIT_S) == "R served"  # by the other process
            assert looked_again(imsb)
            assert imsb.events.peers_failed == []

            assert doomed.pid is not None
            os.kill(doomed.pid, signal.SIGKILL)
            doomed.join(timeout=60)
            assert doomed.exitcode == -signal.SIGKILL

            assert until(lambda: imsb.events.peers_failed == ["IMSA"])  # its lease lapsed
            assert imsb.fastpath.global_table("PSBF") == []
            assert ENTRY_A not in where(redis_pair, EMHQ)
            assert refused(imsb) is IMSReason.ROUTING_NOT_ACTIVE  # DFS2533
            assert looked_again(imsb, 3)
            assert imsb.events.peers_failed == ["IMSA"]  # once
    finally:
        if doomed.is_alive():
            doomed.kill()
            doomed.join(timeout=60)
