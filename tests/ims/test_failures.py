"""IMS and CQS failures (redbook §6.1-6.2): an IMS process killed with SIGKILL with
every region's input in flight, then an emergency restart (the inputs processed again,
exactly once) or a cold start (to the cold queue, one X'6740' record each); a CQS that
fails under its IMS (full function refused, Fast Path local work goes on)."""

from __future__ import annotations

import contextlib
import multiprocessing
from collections.abc import Iterator

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cf.redis import RedisFacility
from sharedq.cqs import structure_params
from sharedq.ims import (
    IMS,
    SPC,
    FastPathDefinition,
    FPTransaction,
    IMSError,
    IMSReason,
    Lterm,
    Program,
    SystemDefinition,
    Terminal,
    Transaction,
)
from sharedq.ims.restart import Restart
from sharedq.testing.redis_server import RedisServer

from . import workers
from .conftest import MakeIMS
from .helpers import WAIT_S, define, echo, kill_holding, reply, take, until, where

IN_FLIGHT = 3
QUEUED = 2


def front_end() -> SystemDefinition:
    return SystemDefinition(
        "IMSA",
        transactions=(Transaction("TRANA", 1, "PGMA", remote=True),),
        programs=(Program("PGMA"),),
        lterms=(Lterm("LTERMA", "NODE1"),),
    )


def back_end() -> SystemDefinition:
    return define("IMSB", transactions=(workers.TRANA,))


def kill_with_work_in_flight(
    url: str, facility: CouplingFacility, imsa: IMS
) -> tuple[Terminal, list[str]]:
    """IMSB in a process of its own takes ``IN_FLIGHT`` inputs into its regions and is
    killed; ``QUEUED`` more wait on the ready queue.  Returns the terminal and the
    inputs entered."""
    context = multiprocessing.get_context("spawn")
    reached = context.Queue()
    doomed = context.Process(
        target=workers.held_forever, args=(url, "IMSB", IN_FLIGHT, reached), daemon=True
    )
    doomed.start()
    node1 = imsa.logon("NODE1")
    sent = kill_holding(node1, doomed, reached, IN_FLIGHT, QUEUED)
    with facility.connect(workers.MSGQ, "PEER") as peer:  # a peer declares it failed
        [user] = [u.user_id for u in peer.users() if u.name == "CQSIMSB"]
        peer.mark_failed(user)
    on = where(facility)
    assert len(on["lock"]) == IN_FLIGHT  # locked by the dead IMS's CQS: no one takes them
    assert on["\x01TRANA"] == [t.encode() for t in sent[IN_FLIGHT:]]
    return node1, sent


@contextlib.contextmanager
def restarted(
    redis_server: RedisServer, mode: Restart
) -> Iterator[tuple[CouplingFacility, Terminal, list[str], IMS]]:
    """IMSB killed with work in flight, then started again in this process with
    ``mode``: the facility, the front end's terminal, the inputs and the new IMSB."""
    redis_server.flush()
    with RedisFacility.from_url(redis_server.url) as facility:
        facility.create(structure_params(workers.MSGQ, messages=200))
        with IMS(facility, front_end(), {"PGMA": echo()}, msgq=workers.MSGQ) as imsa:
            node1, sent = kill_with_work_in_flight(redis_server.url, facility, imsa)
            imsb = IMS(facility, back_end(), {"PGMA": echo()}, msgq=workers.MSGQ)
            with imsb.start(restart=mode):
                yield facility, node1, sent, imsb
    redis_server.flush()


def test_emergency_restart_processes_the_inflight_inputs_once(redis_server: RedisServer) -> None:
    with restarted(redis_server, "emergency") as (facility, node1, sent, imsb):
        assert imsb.restarted.requeued == IN_FLIGHT
        assert imsb.restarted.deleted == 0 and imsb.cold_messages == []
        replies = take(node1, len(sent))
        assert sorted(replies) == sorted(f"OUT {t}" for t in sent)
        assert until(lambda: imsb.counts["processed"] == len(sent))  # each exactly once
        assert until(lambda: where(facility, workers.MSGQ) == {})
        assert imsb.counts["processed"] == len(sent)  # and not more


def test_cold_start_sends_the_inflight_inputs_to_the_cold_queue(redis_server: RedisServer) -> None:
    with restarted(redis_server, "cold") as (facility, node1, sent, imsb):
        records = imsb.cold_messages
        assert sorted(r.first_segment.decode() for r in records) == sent[:IN_FLIGHT]
        assert {(r.queue, r.source) for r in records} == {("TRANA", "LTERMA")}
        assert len({r.uow for r in records}) == IN_FLIGHT
        replies = take(node1, QUEUED)
        assert sorted(replies) == [f"OUT {t}" for t in sent[IN_FLIGHT:]]
        assert until(lambda: imsb.counts["processed"] == QUEUED)  # counted after the delete
        assert len(imsb.cqs.cold_queue()) == IN_FLIGHT
        assert until(lambda: set(where(facility, workers.MSGQ)) == {"cold"})


def test_an_unknown_restart_mode_is_refused(facility: CouplingFacility) -> None:
    ims = IMS(facility, back_end(), {"PGMA": echo()}, msgq=workers.MSGQ)
    with pytest.raises(IMSError) as caught:
        ims.start(restart="warm")  # type: ignore[arg-type]
    assert caught.value.reason is IMSReason.BAD_ARGUMENT


EMHQ = "EMHQ01"
FP = (
    FPTransaction("FPLO", "PSBF", SPC.LOCAL_ONLY),
    FPTransaction("FPLF", "PSBF"),
    FPTransaction("FPGO", "PSBF", SPC.GLOBAL_ONLY),
)


def test_a_failed_cqs_stops_full_function_but_not_local_fast_path(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    facility.create(structure_params(EMHQ, messages=200))
    ims = make_ims(
        define("IMSA", transactions=(workers.TRANA,), lterms=(Lterm("LTERMA", "NODE1"),)),
        {"PGMA": echo()},
        fastpath=FastPathDefinition(FP, {"IFP1": "PSBF"}, ("IMSA",)),
        ifp_programs={"PSBF": reply},
        emhq=EMHQ,
    )
    assert ims.fastpath is not None
    node1 = ims.logon("NODE1")
    assert node1.enter("TRANA BEFORE").routing == "local"
    assert take(node1, 1) == ["OUT TRANA BEFORE"]
    ims.cqs.stop_dead()  # the CQS dies under its IMS
    for text in ("TRANA AFTER", "TRANA AGAIN"):
        with pytest.raises(IMSError, match="not available") as caught:
            node1.enter(text)
        assert caught.value.reason is IMSReason.CQS_UNAVAILABLE
    routes = [ims.fastpath.enter("LTA", code, f"{n}".encode()) for n, code in enumerate(FP_CODES)]
    assert routes == ["local"] * len(FP_CODES)
    got = sorted(ims.fastpath.receive("LTA", WAIT_S) or "" for _ in FP_CODES)
    assert got == sorted(f"R {n}" for n in range(len(FP_CODES)))
    assert ims.fastpath.counts["processed"] == len(FP_CODES)
    with pytest.raises(IMSError) as caught:  # Global Only needs the EMHQ
        ims.fastpath.enter("LTA", "FPGO", b"global")
    assert caught.value.reason is IMSReason.CQS_UNAVAILABLE
    report = ims.reconnect()  # the CQS is back: Global Only and full function again
    assert (report.requeued, report.deleted, report.emhq_requeued) == (0, 0, 0)
    assert ims.fastpath.enter("LTA", "FPGO", b"global") == "global"
    assert ims.fastpath.receive("LTA", WAIT_S) == "R global"
    assert node1.enter("TRANA AFTER").routing == "local"
    assert take(node1, 1) == ["OUT TRANA AFTER"]


FP_CODES = ("FPLO", "FPLF", "FPLO", "FPLF")
