"""Three CQSs in separate processes on a private Redis: the seed's global processing."""

from __future__ import annotations

import multiprocessing

from sharedq.cf.redis import RedisFacility
from sharedq.cqs import CQS
from sharedq.testing.redis_server import RedisServer

from . import workers
from .helpers import where

SYSTEMS = ("IMSA", "IMSB", "IMSC")


def test_every_process_is_told_the_first_reader_wins(
    redis_server: RedisServer, redis_facility: RedisFacility
) -> None:
    context = multiprocessing.get_context("spawn")
    ready, results = context.Queue(), context.Queue()
    processes = [
        context.Process(target=workers.bidder, args=(redis_server.url, s, ready, results))
        for s in SYSTEMS
    ]
    for p in processes:
        p.start()
    try:
        assert sorted(ready.get(timeout=120) for _ in SYSTEMS) == sorted(SYSTEMS)
        with CQS(redis_facility, "CQSPUT", system="IMSP", msgq=workers.MSGQ) as putter:
            putter.put(workers.TRANA, b"one message")
            outcomes = sorted(results.get(timeout=120) for _ in SYSTEMS)
    finally:
        for p in processes:
            p.join(timeout=60)
    assert all(p.exitcode == 0 for p in processes)
    assert all(told for _, told, _ in outcomes)  # every registered CQS was told
    assert sorted(body or b"" for _, _, body in outcomes) == [b"", b"", b"one message"]
    assert where(redis_facility, workers.MSGQ) == {}


def test_multi_part_messages_read_whole_across_processes(
    redis_server: RedisServer, redis_facility: RedisFacility
) -> None:
    context = multiprocessing.get_context("spawn")
    done, ready, results = context.Event(), context.Queue(), context.Queue()
    processes = [
        context.Process(target=workers.reader, args=(redis_server.url, s, done, ready, results))
        for s in SYSTEMS
    ]
    for p in processes:
        p.start()
    sent = [tuple(f"m{n}p{i}".encode() * 100 for i in range(3)) for n in range(30)]
    try:
        assert len([ready.get(timeout=120) for _ in SYSTEMS]) == 3
        with CQS(redis_facility, "CQSPUT", system="IMSP", msgq=workers.MSGQ) as putter:
            for parts in sent:
                putter.put(workers.TRANA, list(parts))
        done.set()
        got = [results.get(timeout=120) for _ in SYSTEMS]
    finally:
        done.set()
        for p in processes:
            p.join(timeout=60)
    assert all(p.exitcode == 0 for p in processes)
    every = [parts for _, messages in got for parts in messages]
    assert sorted(every) == sorted(sent)  # each message once, whole
    assert where(redis_facility, workers.MSGQ) == {}
