"""A reply lost with a dropped connection: the resent request is not applied twice.

The client talks to the server through a proxy that, when told, lets a request
through, swallows the server's reply and cuts the connection.  The server did the
work; the client reconnects, resends the request with the retry flag, and must get
the first attempt's result instead of a second change.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sharedq.cf import (
    BulkMove,
    ById,
    Compare,
    Head,
    ListStructure,
    MonitorState,
    StructureParams,
    open_facility,
)
from sharedq.cf.redis import RedisFacility
from sharedq.testing.redis_server import RedisServer
from tests.tcp_proxy import ReplyDroppingProxy

GET = Head(0, key=b"\x0a" + bytes(15), compare=Compare.LE)


def key(n: int) -> bytes:
    return b"\x04" + n.to_bytes(15, "big")


@pytest.fixture
def proxy(redis_server: RedisServer) -> Iterator[ReplyDroppingProxy]:
    redis_server.flush()
    proxy = ReplyDroppingProxy(redis_server.port)
    yield proxy
    proxy.close()


@pytest.fixture
def facility(proxy: ReplyDroppingProxy) -> Iterator[RedisFacility]:
    # A long lease: no lease renewal crosses the proxy while a reply is to be dropped.
    with RedisFacility.from_url(proxy.url, lease_seconds=600) as fac:
        fac.create(StructureParams.for_capacity("QSG1", list_count=4, entries=50, elements=50))
        yield fac


@pytest.fixture
def conn(facility: RedisFacility) -> ListStructure:
    return facility.connect("QSG1", "QM1")


def test_a_write_whose_reply_was_lost_is_written_once(
    conn: ListStructure, proxy: ReplyDroppingProxy
) -> None:
    before = conn.statistics().seq
    proxy.drop_next_reply()
    change = conn.write(0, key(1), b"once")
    assert proxy.dropped == 1
    assert change.seq == before + 1
    assert [e.data for e in conn.scan(0)] == [b"once"]
    assert conn.statistics().seq == before + 1
    assert conn.read(ById(change.entry.entry_id)) == change.entry


def test_a_get_whose_reply_was_lost_takes_one_entry_and_returns_it(
    conn: ListStructure, proxy: ReplyDroppingProxy
) -> None:
    first = conn.write(0, key(1), b"first").entry
    conn.write(0, key(2), b"second")
    proxy.drop_next_reply()
    got = conn.move(GET, 1)
    assert proxy.dropped == 1
    assert got is not None and got.entry == first._replace(list_number=1)
    assert [e.data for e in conn.scan(0)] == [b"second"]
    assert [e.data for e in conn.scan(1)] == [b"first"]


def test_lost_replies_with_data_in_the_record_and_apart(
    conn: ListStructure, proxy: ReplyDroppingProxy
) -> None:
    """The result kept for a resend leaves small data in the record it keeps, and keeps
    larger data (kept apart) beside it: either way the resend returns the data."""
    small = conn.write(0, key(1), b"s" * 100).entry
    large = conn.write(0, key(2), b"L" * 3000).entry
    for entry in (small, large):
        proxy.drop_next_reply()
        got = conn.move(GET, 1)
        assert got is not None and got.entry == entry._replace(list_number=1)
        proxy.drop_next_reply()
        updated = conn.update(ById(entry.entry_id), increment_version=True)
        assert updated is not None and updated.entry.data == entry.data
        proxy.drop_next_reply()
        gone = conn.delete(ById(entry.entry_id))
        assert gone is not None and gone.entry.data == entry.data
    assert proxy.dropped == 6
    assert list(conn.scan(0)) == list(conn.scan(1)) == []


def test_a_delete_and_a_bulk_move_whose_replies_were_lost(
    conn: ListStructure, proxy: ReplyDroppingProxy
) -> None:
    ids = [conn.write(0, key(n), b"%d" % n).entry.entry_id for n in range(3)]
    proxy.drop_next_reply()
    deleted = conn.delete(ById(ids[0]))
    assert deleted is not None and deleted.entry.entry_id == ids[0]
    assert deleted.entry.data == b"0"  # the first attempt's reply, data and all
    proxy.drop_next_reply()
    result = conn.move_entries([BulkMove(i, 2, increment_version=True) for i in ids[1:]])
    assert proxy.dropped == 2
    assert result.complete and len(result.seqs) == 2
    assert [(e.data, e.version) for e in conn.scan(2)] == [(b"1", 1), (b"2", 1)]


def test_events_taken_with_a_lost_reply_are_not_lost(
    facility: RedisFacility, conn: ListStructure, proxy: ReplyDroppingProxy
) -> None:
    reg = conn.monitor_list(3)
    writer = facility.connect("QSG1", "QM2")
    put = writer.write(3, key(1))
    proxy.drop_next_reply()
    events = conn.events_nowait()
    assert proxy.dropped == 1
    assert [(e.monitor_id, e.state, e.seq) for e in events] == [
        (reg.monitor_id, MonitorState.NONEMPTY, put.seq)
    ]


def test_lock_unlock_and_disconnect_with_lost_replies(
    facility: RedisFacility, conn: ListStructure, proxy: ReplyDroppingProxy
) -> None:
    proxy.drop_next_reply()
    taken = conn.lock(1)
    proxy.drop_next_reply()
    released = conn.unlock(1)  # resent, it must not find the lock free and fail
    assert released == taken + 1
    assert conn.lock_holder(1) is None
    proxy.drop_next_reply()
    conn.disconnect()  # resent, it must not find itself disconnected and fail
    assert proxy.dropped == 3
    assert not conn.connected
    with facility.connect("QSG1", "QM9") as other:
        assert [u.name for u in other.users()] == ["QM9"]


def test_connect_create_and_delete_with_lost_replies(proxy: ReplyDroppingProxy) -> None:
    with open_facility(proxy.url) as facility:
        proxy.drop_next_reply()
        facility.create(StructureParams.for_capacity("QSG2", list_count=2, entries=5, elements=5))
        proxy.drop_next_reply()
        conn = facility.connect("QSG2", "QM1")  # resent, it must not find QM1 active
        assert [u.name for u in conn.users()] == ["QM1"]
        conn.disconnect()
        proxy.drop_next_reply()
        facility.delete("QSG2")
        assert proxy.dropped == 3
        assert not facility.exists("QSG2")
