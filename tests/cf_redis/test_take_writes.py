"""What a take writes on Redis: nothing when it finds nothing, one command per change.

A waiting get tries a take before each sleep, so a take that finds no entry and no
event is the commonest request of an idle queue.  It changes nothing, so it keeps no
result for a resend and writes nothing (no command a replica or the AOF would be
sent); the take that follows a wake-up clears the user's event stream and its
undelivered marks in one ``DEL``, keeps its result in the ``HSET`` of the counters,
and settles the monitor it leaves empty from the count its reply carries.  Counted
with ``INFO commandstats`` on a private server: every command the function runs is
counted there.  A take that took no event and whose data is in its record keeps its
result as its figures and record (not in MessagePack): a resend after a lost reply
returns exactly the first reply.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sharedq.cf import Compare, Head, ListStructure, MonitorSpec, StructureParams
from sharedq.cf.redis import RedisFacility
from sharedq.testing.redis_server import RedisServer
from tests.tcp_proxy import ReplyDroppingProxy

COMMITTED = MonitorSpec(0, b"\0" * 16, b"\x09" + b"\xff" * 15)
HEAD = Head(0, b"\x0a" + b"\0" * 15, Compare.LE)


def _key(n: int) -> bytes:
    return b"\x04" + n.to_bytes(15, "big")


@pytest.fixture
def struct(redis_server: RedisServer) -> Iterator[ListStructure]:
    redis_server.flush()
    try:
        with RedisFacility.from_url(redis_server.url, lease_seconds=600) as fac:
            fac.create(StructureParams.for_capacity("QSGW", list_count=2, entries=20, elements=20))
            yield fac.connect("QSGW", "QM1")
    finally:
        redis_server.flush()  # other tests on this server expect it empty


def _calls(server: RedisServer) -> dict[str, int]:
    """Calls per command (``INFO commandstats``), nested ones included; ``server.command``
    connects anew (HELLO) each time."""
    info = server.command("INFO", "commandstats")
    assert isinstance(info, dict)
    return {name.removeprefix("cmdstat_"): stats["calls"] for name, stats in info.items()}


def _ran(server: RedisServer, before: dict[str, int]) -> dict[str, int]:
    after = _calls(server)
    ran = {name: n - before.get(name, 0) for name, n in after.items()}
    return {name: n for name, n in ran.items() if n and name not in ("info", "hello", "fcall")}


def test_a_take_that_finds_nothing_writes_nothing(
    redis_server: RedisServer, struct: ListStructure
) -> None:
    struct.register_monitor(COMMITTED)
    before = _calls(redis_server)
    taken = struct.take(HEAD, 1, delete=True, expect_authority=0, take_events=True)
    assert taken.moved is None and taken.events == [] and taken.registration is None
    ran = _ran(redis_server, before)
    assert set(ran) == {"get", "hmget", "zrangebylex", "xrange"}, ran


def test_a_take_after_a_wake_clears_events_and_marks_in_one_del(
    redis_server: RedisServer, struct: ListStructure
) -> None:
    monitor = struct.register_monitor(COMMITTED).monitor_id
    struct.write(0, _key(1), b"m" * 100)
    before = _calls(redis_server)
    taken = struct.take(HEAD, 1, delete=True, expect_authority=0, take_events=True)
    assert taken.deleted is not None and taken.deleted.entry.data == b"m" * 100
    assert [event.monitor_id for event in taken.events] == [monitor]
    ran = _ran(redis_server, before)
    assert ran["del"] == 1 and ran["xrange"] == 1, ran
    # The meta hash once (counters, list controls, the kept result), the monitor once.
    assert ran["hset"] == 2, ran
    # The list left empty was counted for the reply: its monitor needs no range read.
    assert ran["zrangebylex"] == 1 and ran["zcard"] == 1, ran
    # The marks went with the events: the next put queues its event again.
    struct.write(0, _key(2), b"n" * 100)
    assert [event.monitor_id for event in struct.events_nowait()] == [monitor]


def test_a_resent_take_returns_the_first_reply_exactly(redis_server: RedisServer) -> None:
    """Seqs, record, data and the count left, for data in the record and for none."""
    redis_server.flush()
    proxy = ReplyDroppingProxy(redis_server.port)
    try:
        with (
            RedisFacility.from_url(proxy.url, lease_seconds=600) as fac,
            RedisFacility.from_url(redis_server.url, lease_seconds=600) as direct,
        ):
            fac.create(StructureParams.for_capacity("QSGR", list_count=4, entries=20, elements=20))
            struct = fac.connect("QSGR", "QM1")
            other = direct.connect("QSGR", "QM2")
            entries = [
                struct.write(0, _key(n), body).entry for n, body in enumerate([b"m" * 100, b""])
            ]
            entries.append(struct.write(0, _key(2), b"k" * 100).entry)
            for n, entry in enumerate(entries):
                delete = n != 2
                before = struct.statistics().seq
                proxy.drop_next_reply(lambda: other.write(3, _key(99), b"meanwhile"))
                taken = struct.take(Head(0), 1, delete=delete)
                assert taken.moved is not None and taken.events == []
                assert taken.moved.seq == before + 1
                assert taken.moved.entry == entry._replace(list_number=1)
                assert taken.moved.entries == len(entries) - 1 - n
                if delete:
                    assert taken.deleted is not None and taken.deleted.seq == before + 2
                    assert taken.deleted.entry == taken.moved.entry
                else:
                    assert taken.deleted is None
            assert proxy.dropped == len(entries)
            assert [e.entry_id for e in struct.scan(1)] == [entries[2].entry_id]
    finally:
        proxy.close()
        redis_server.flush()
