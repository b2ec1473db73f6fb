"""IMS systems in separate processes on a private Redis: a front-end IMS whose
transaction is remote routes every input globally; two back-end IMS processes share
the work (first reader wins); every reply comes back to the terminal's IMS, once."""

from __future__ import annotations

import multiprocessing

from sharedq.cf.redis import RedisFacility
from sharedq.cqs import structure_params
from sharedq.ims import IMS, Lterm, Program, SystemDefinition, Transaction
from sharedq.testing.redis_server import RedisServer

from . import workers
from .helpers import take, until, where

BACK_ENDS = ("IMSB", "IMSC")


def test_back_end_processes_share_the_work_of_a_front_end(redis_server: RedisServer) -> None:
    redis_server.flush()
    context = multiprocessing.get_context("spawn")
    ready, results, stop = context.Queue(), context.Queue(), context.Event()
    with RedisFacility.from_url(redis_server.url) as facility:
        facility.create(structure_params(workers.MSGQ, messages=500))
        front = SystemDefinition(
            "IMSA",
            transactions=(Transaction("TRANA", 1, "PGMA", remote=True),),
            programs=(Program("PGMA"),),
            lterms=(Lterm("LTERMA", "NODE1"),),
        )
        processes = [
            context.Process(
                target=workers.back_end, args=(redis_server.url, s, ready, stop, results)
            )
            for s in BACK_ENDS
        ]
        for p in processes:
            p.start()
        try:
            assert sorted(ready.get(timeout=120) for _ in BACK_ENDS) == list(BACK_ENDS)
            with IMS(facility, front, {"PGMA": workers.answer}, msgq=workers.MSGQ) as imsa:
                node1 = imsa.logon("NODE1")
                for n in range(30):
                    assert node1.enter(f"TRANA {n:02}").routing == "global"
                replies = take(node1, 30)
                assert imsa.counts["delivered"] == 30 and imsa.counts["processed"] == 0
            stop.set()
            counts = dict(results.get(timeout=120) for _ in BACK_ENDS)
        finally:
            stop.set()
            for p in processes:
                p.join(timeout=60)
        assert all(p.exitcode == 0 for p in processes)
        assert sorted(r.split(" by ")[0] for r in replies) == [f"TRANA {n:02}" for n in range(30)]
        assert {r.split(" by ")[1] for r in replies} <= set(BACK_ENDS)
        assert sum(c["processed"] for c in counts.values()) == 30
        assert until(lambda: where(facility, workers.MSGQ) == {})
    redis_server.flush()
