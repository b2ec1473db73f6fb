"""Losing the server under load: every user gets ``StructureLost``, none hangs.

The server is killed with SIGKILL (a crash: no goodbye on any connection), with users
in threads and in processes of their own in the middle of requests and waits.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
import time
from collections.abc import Callable
from multiprocessing.queues import Queue

from sharedq.cf import (
    CFError,
    ListStructure,
    NotConnected,
    StructureLost,
    StructureParams,
    open_facility,
)
from sharedq.cf.redis import RedisFacility
from sharedq.clock import retry_until
from sharedq.testing.redis_server import RedisServer
from sharedq.testing.waits import wait_asleep_in_wait_events
from tests.cf_redis import workers

#: Seconds a user retries a dropped connection before giving up (kept short here).
RETRY = 2.0
#: A user must report the loss within this, or it counts as hung.
DEADLINE = 30.0
#: Changes the users make, at least, before the server is killed under their load.
LOAD = 300

ServerFactory = Callable[..., RedisServer]


def _wait_then_report(conn: ListStructure, outcomes: list[str]) -> None:
    try:
        conn.wait_events(timeout=None)
        outcomes.append("returned")
    except CFError as exc:
        outcomes.append(exc.reason.name)


def test_every_user_gets_structure_lost_when_the_server_dies_under_load(
    redis_servers: ServerFactory,
) -> None:
    server = redis_servers()
    url = f"{server.url}?retry={RETRY}"
    with open_facility(url) as facility:
        facility.create(
            StructureParams.for_capacity("QSG1", list_count=4, entries=5000, elements=5000)
        )
        # Three users in threads, two in processes of their own, all writing, getting
        # and deleting; one more blocked in wait_events.
        thread_ready: queue.Queue[str] = queue.Queue()
        thread_results: queue.Queue[str] = queue.Queue()
        threads = [
            threading.Thread(
                target=workers.churn, args=(url, "QSG1", f"T{n}", thread_ready, thread_results)
            )
            for n in range(3)
        ]
        outcomes: list[str] = []
        waiter = facility.connect("QSG1", "WAITER")
        waiter.monitor_list(3)
        threads.append(threading.Thread(target=_wait_then_report, args=(waiter, outcomes)))
        context = multiprocessing.get_context("spawn")
        ready: Queue[str] = context.Queue()
        results: Queue[str] = context.Queue()
        processes = [
            context.Process(target=workers.churn, args=(url, "QSG1", f"P{n}", ready, results))
            for n in range(2)
        ]
        for worker in [*threads, *processes]:
            worker.start()
        assert sorted(ready.get(timeout=60) for _ in processes) == ["P0", "P1"]
        assert sorted(thread_ready.get(timeout=60) for _ in range(3)) == ["T0", "T1", "T2"]
        # Under load: the users are changing the structure, and the waiter sleeps.
        with facility.connect("QSG1", "OBSERVER") as observer:
            start = observer.statistics().seq
            assert retry_until(
                lambda: observer.statistics().seq >= start + LOAD,
                timeout_s=DEADLINE,
                first_pause_s=0.01,
            ), "the users made no progress"
        wait_asleep_in_wait_events(threads[-1])
        assert thread_results.empty() and outcomes == []
        killed = time.monotonic()
        server.kill()
        for thread in threads:
            thread.join(timeout=DEADLINE)
            assert not thread.is_alive(), "a user hung after the server died"
        reports = [results.get(timeout=DEADLINE) for _ in processes]
        reports += [thread_results.get_nowait() for _ in range(3)]
        for process in processes:
            process.join(timeout=DEADLINE)
        took = time.monotonic() - killed
    assert outcomes + reports == ["STRUCTURE_LOST"] * 6
    assert took < DEADLINE


def test_a_restarted_empty_server_is_a_lost_structure_not_an_empty_one(
    redis_servers: ServerFactory,
) -> None:
    server = redis_servers()
    with RedisFacility.from_url(server.url, retry_seconds=RETRY) as facility:
        facility.create(StructureParams.for_capacity("QSG1", list_count=2, entries=10, elements=10))
        conn = facility.connect("QSG1", "QM1")
        conn.write(0, bytes(16), b"committed before the crash")
        server.restart()  # persistence is off: the structure is gone
        for request in (lambda: conn.write(0, bytes(16)), conn.statistics, conn.events_nowait):
            try:
                request()
            except StructureLost as exc:
                assert "QSG1" in str(exc)
            else:
                raise AssertionError("a request on a lost structure succeeded")
        assert not facility.exists("QSG1")
        assert not conn.connected


def test_a_waiter_learns_promptly_that_its_structure_was_deleted_or_it_was_cleaned_up(
    redis_server: RedisServer,
) -> None:
    redis_server.flush()
    with open_facility(redis_server.url) as facility:
        facility.create(StructureParams.for_capacity("QSG1", list_count=2, entries=10, elements=10))
        facility.create(StructureParams.for_capacity("QSG2", list_count=2, entries=10, elements=10))
        doomed, failed = facility.connect("QSG1", "QM1"), facility.connect("QSG2", "QM1")
        peer = facility.connect("QSG2", "QM2")
        outcomes: list[str] = []
        threads = [
            threading.Thread(target=_wait_then_report, args=(conn, outcomes))
            for conn in (doomed, failed)
        ]
        for thread in threads:
            thread.start()
        wait_asleep_in_wait_events(*threads)
        started = time.monotonic()
        facility.delete("QSG1", force=True)
        peer.mark_failed(failed.user_id)
        peer.cleanup_user(failed.user_id)
        for thread in threads:
            thread.join(timeout=10)
        assert time.monotonic() - started < 5
        assert sorted(outcomes) == ["NOT_CONNECTED", "STRUCTURE_LOST"]
        try:
            failed.write(0, bytes(16))
        except NotConnected:
            pass
        else:
            raise AssertionError("a cleaned-up user could still write")
