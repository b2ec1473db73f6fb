"""Users in separate processes share a structure on Redis.

Each process opens its own facility on the server's URL (``workers.py``), as queue
managers on different hosts would: events cross processes, and conditional moves of
the same head entry, raced by several processes thousands of times, never hand one
entry to two of them.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter
from multiprocessing.queues import Queue

from sharedq.cf import ById, ListStructure, MonitorState, StructureParams, open_facility
from sharedq.clock import retry_until
from sharedq.testing.redis_server import RedisServer
from tests.cf_redis import workers

#: Messages the producer puts; every one is raced for by all the consumers.
MESSAGES = 3000
CONSUMERS = 3


def _drained_and_waiting(server: RedisServer, producer: ListStructure) -> bool:
    """The consumers took every entry of list 0, and all of them sleep in a blocking
    read of their events (so that the next commit has to wake them)."""
    info = server.command("INFO", "clients")
    assert isinstance(info, dict)
    return producer.list_info(0).entries == 0 and info["blocked_clients"] >= CONSUMERS


def test_events_cross_processes_to_the_user_that_registered(redis_server: RedisServer) -> None:
    redis_server.flush()
    context = multiprocessing.get_context("spawn")
    ready: Queue[int] = context.Queue()
    results: Queue[object] = context.Queue()
    with open_facility(redis_server.url) as facility:
        facility.create(StructureParams.for_capacity("QSG1", list_count=4, entries=10, elements=10))
        watchers = [
            context.Process(
                target=workers.watch, args=(redis_server.url, "QSG1", f"QM{n}", ready, results)
            )
            for n in (1, 2)
        ]
        for watcher in watchers:
            watcher.start()
        monitors = sorted(ready.get(timeout=60) for _ in watchers)
        with facility.connect("QSG1", "PUTTER") as putter:
            put = putter.write(1, bytes(16), b"wake up")
            putter.write(1, b"\x01" * 16, b"no second event: the list was not empty")
        events = sorted(  # type: ignore[type-var]
            (results.get(timeout=60) for _ in watchers),
            key=lambda e: e[0][3],  # type: ignore[index]
        )
        for watcher in watchers:
            watcher.join(timeout=30)
            assert watcher.exitcode == 0
    # Each watcher got one event, from its own monitor (the token says whose), carrying
    # the seq of the write that made the list non-empty.
    assert [(state, seq, token) for [(_, state, seq, token)] in events] == [
        (MonitorState.NONEMPTY.value, put.seq, b"QM1"),
        (MonitorState.NONEMPTY.value, put.seq, b"QM2"),
    ]
    assert sorted(monitor for [(monitor, _, _, _)] in events) == monitors


def test_processes_racing_for_the_head_never_get_the_same_entry(
    redis_server: RedisServer,
) -> None:
    redis_server.flush()
    context = multiprocessing.get_context("spawn")
    done = context.Event()
    results: Queue[object] = context.Queue()
    with open_facility(redis_server.url) as facility:
        facility.create(
            StructureParams.for_capacity(
                "QSG1", list_count=8, entries=MESSAGES + 10, elements=MESSAGES + 10
            )
        )
        consumers = [
            context.Process(
                target=workers.consume,
                args=(redis_server.url, "QSG1", f"C{n}", 1 + n, done, results),
            )
            for n in range(CONSUMERS)
        ]
        for consumer in consumers:
            consumer.start()
        with facility.connect("QSG1", "PRODUCER") as producer:
            written = []
            for i in range(MESSAGES):
                if i == MESSAGES // 2:
                    assert retry_until(
                        lambda: _drained_and_waiting(redis_server, producer),
                        timeout_s=60,
                        first_pause_s=0.01,
                    ), "the consumers did not drain the list and wait"
                # The two-phase put: uncommitted (X'F6'), then committed by a move within
                # the list.  A get must never take the uncommitted form.
                entry = producer.write(0, b"\xf6" + i.to_bytes(15, "big"), b"%06d" % i).entry
                producer.move(ById(entry.entry_id), 0, new_key=b"\x04" + i.to_bytes(15, "big"))
                written.append(entry.entry_id)
            done.set()
            reports = [results.get(timeout=120) for _ in consumers]
            for consumer in consumers:
                consumer.join(timeout=60)
                assert consumer.exitcode == 0
            on_get_lists = sum(producer.list_info(1 + n).entries for n in range(CONSUMERS))
    got = Counter(entry_id for _, ids, _, _ in reports for entry_id in ids)  # type: ignore[misc]
    attempts = sum(tries for _, _, tries, _ in reports)  # type: ignore[misc]
    wakeups = sum(woken for _, _, _, woken in reports)  # type: ignore[misc]
    assert max(got.values()) == 1, "an entry was handed to two consumers"
    assert sorted(got) == sorted(written)
    assert on_get_lists == MESSAGES
    assert attempts >= MESSAGES
    assert wakeups > 0  # consumers that found nothing waited until a commit woke them
    for _, ids, _, _ in reports:  # type: ignore[misc]
        assert ids == sorted(ids)  # each took them in key (= commit) order
