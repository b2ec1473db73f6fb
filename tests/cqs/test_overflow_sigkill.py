"""An overflow master killed (SIGKILL, its own process, Redis) at each step of a move:
a peer takes over; queue A is then whole in the overflow structure, each message
once, none left on the primary or its move queue."""

from __future__ import annotations

import multiprocessing
import signal

import pytest

from sharedq.cf.redis import RedisFacility
from sharedq.cqs import CQS, Kind, StructurePair
from sharedq.cqs.layout import Private
from sharedq.cqs.overflow import OverflowOptions
from sharedq.testing.redis_server import RedisServer

from . import overflow_workers
from .helpers import MSGQ_LAYOUT
from .test_overflow import UNIT_BODY, A, B, C, D, allocate

PAIR = StructurePair(overflow_workers.PRIMARY, overflow_workers.OVERFLOW)


def body(queue: bytes, i: int) -> bytes:
    return (queue[1:6] + b" %03d " % i).ljust(UNIT_BODY, b".")


@pytest.mark.parametrize(
    ("point", "nth"),
    [
        ("quiesced", 1),
        ("recorded", 1),
        ("on-move-queue", 1),
        ("on-move-queue", 17),
        ("written", 1),
        ("written", 30),
        ("moved", 1),
    ],
)
def test_a_killed_master_is_replaced(
    redis_server: RedisServer, redis_facility: RedisFacility, point: str, nth: int
) -> None:
    allocate(redis_facility)
    options = OverflowOptions(check_every=10**6, refresh_s=0.0)
    with CQS(redis_facility, "CQSIMSB", system="IMSB", msgq=PAIR, overflow=options) as filler:
        for queue, count in {A: 30, B: 20, C: 10, D: 10}.items():
            for i in range(count):
                filler.put(queue, body(queue, i))
    process = multiprocessing.get_context("spawn").Process(
        target=overflow_workers.doomed_master, args=(redis_server.url, point, nth)
    )
    process.start()
    process.join(timeout=120)
    assert process.exitcode == -signal.SIGKILL
    with redis_facility.connect(overflow_workers.PRIMARY, "PEER") as peer:
        [user] = [u.user_id for u in peer.users() if u.name == "CQSIMSA"]
        peer.mark_failed(user)
    with CQS(redis_facility, "CQSIMSB", system="IMSB", msgq=PAIR, overflow=options) as peer_cqs:
        flow = peer_cqs.overflow[Kind.MSGQ]
        if point == "quiesced":  # killed before it recorded anything: run it again
            assert flow.take_over()
            assert flow.check() is not None
        else:
            assert flow.take_over()
        header = MSGQ_LAYOUT.header(A)
        with redis_facility.connect(overflow_workers.PRIMARY, "LOOK") as conn:
            assert list(conn.scan(header, A, A)) == []
            for via in Private.MOVE.headers():
                assert list(conn.scan(via, A, A)) == []
        assert [m.body for m in peer_cqs.browse(A)] == [body(A, i) for i in range(30)]
        assert [m.body for m in peer_cqs.browse(B)] == [body(B, i) for i in range(20)]
        peer_cqs.put(B, b"the structure is not quiesced any more")
