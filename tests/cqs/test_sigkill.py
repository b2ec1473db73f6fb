"""A CQS process killed (SIGKILL) before each structure change of a move, a delete and
a multi-part put, on a private Redis: when it connects again, every message is whole
on exactly one queue, or (a put that never returned) not there at all."""

from __future__ import annotations

import multiprocessing
import signal

import pytest

from sharedq.cf.redis import RedisFacility
from sharedq.cqs import CQS, Kind
from sharedq.testing.redis_server import RedisServer

from . import workers
from .helpers import where

PARTS = tuple(workers.PARTS)


def killed_then_restarted(url: str, facility: RedisFacility, action: str, at: int) -> CQS:
    process = multiprocessing.get_context("spawn").Process(
        target=workers.doomed, args=(url, action, at)
    )
    process.start()
    process.join(timeout=120)
    assert process.exitcode == -signal.SIGKILL
    with facility.connect(workers.MSGQ, "PEER") as peer:  # a peer declares it failed
        [user] = [u.user_id for u in peer.users() if u.name == "CQSIMSA"]
        peer.mark_failed(user)
    return CQS(facility, "CQSIMSA", system="IMSA", msgq=workers.MSGQ).connect()


@pytest.mark.parametrize("at", [1, 2, 3])
def test_a_move_killed_at_any_step(
    redis_server: RedisServer, redis_facility: RedisFacility, at: int
) -> None:
    with killed_then_restarted(redis_server.url, redis_facility, "move", at) as cqs:
        lists = where(redis_facility, workers.MSGQ)
        if at == 1:
            assert lists["lock"] == [(workers.TRANA, b"CQSIMSA")] and "ready" not in lists
        else:
            assert lists["ready"] == [(workers.SUSPEND, b"part 1")]
            assert "lock" not in lists and "move" not in lists
            assert [m.parts for m in cqs.browse(workers.SUSPEND)] == [PARTS]
            assert cqs.finished[Kind.MSGQ].moves == (1 if at == 2 else 0)
        assert len(lists["staging"]) == 2


@pytest.mark.parametrize("at", [1, 2, 3, 4, 5])
def test_a_delete_killed_at_any_step(
    redis_server: RedisServer, redis_facility: RedisFacility, at: int
) -> None:
    with killed_then_restarted(redis_server.url, redis_facility, "delete", at):
        lists = where(redis_facility, workers.MSGQ)
        if at == 1:
            assert lists["lock"] == [(workers.TRANA, b"CQSIMSA")]
            assert len(lists["staging"]) == 2
        else:
            assert lists == {}


@pytest.mark.parametrize("at", [1, 2, 3, 4])
def test_a_multi_part_put_killed_at_any_step(
    redis_server: RedisServer, redis_facility: RedisFacility, at: int
) -> None:
    with killed_then_restarted(redis_server.url, redis_facility, "put", at) as cqs:
        if at <= 3:  # killed before part 1: the put never returned, nothing stays
            assert where(redis_facility, workers.MSGQ) == {}
            assert cqs.finished[Kind.MSGQ].orphans == at - 1
        else:
            assert [m.parts for m in cqs.browse(workers.TRANA)] == [PARTS]
