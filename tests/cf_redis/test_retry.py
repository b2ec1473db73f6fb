"""A reply lost with a dropped connection: the resent request is not applied twice.

The client talks to the server through a proxy that, when told, lets a request
through, swallows the server's reply and cuts the connection.  The server did the
work; the client reconnects, resends the request with the retry flag, and must get
the first attempt's result instead of a second change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from sharedq.cf import (
    BulkMove,
    ById,
    CFError,
    CFReason,
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


@pytest.fixture
def other(redis_server: RedisServer, facility: RedisFacility) -> Iterator[ListStructure]:
    """A second user, straight to the server: its changes land while a reply is lost."""
    with (
        RedisFacility.from_url(redis_server.url, lease_seconds=600) as direct,
        direct.connect("QSG1", "QM2") as conn,
    ):
        yield conn


def test_a_resent_get_of_large_data_reads_it_again_where_the_entry_keeps_it(
    conn: ListStructure, other: ListStructure, proxy: ReplyDroppingProxy
) -> None:
    """A get of data kept apart keeps no copy of it for a resend: the resend finds the
    entry as the get left it (other entries changed meanwhile) and returns its data."""
    large = conn.write(0, key(1), b"L" * 3000).entry
    conn.write(0, key(2), b"M" * 3000)
    proxy.drop_next_reply(lambda: other.write(2, key(3), b"elsewhere" * 100))
    got = conn.move(GET, 1)
    assert proxy.dropped == 1
    assert got is not None and got.entry == large._replace(list_number=1)
    assert [e.data for e in conn.scan(1)] == [b"L" * 3000]
    assert [e.data for e in conn.scan(0)] == [b"M" * 3000]


def _changes(other: ListStructure, entry_id: bytes) -> dict[str, Callable[[], object]]:
    return {
        "deleted": lambda: other.delete(ById(entry_id)),
        "data replaced": lambda: other.update(ById(entry_id), data=b"R" * 3000),
        "moved back": lambda: other.move(ById(entry_id), 0),
        "version increased": lambda: other.update(ById(entry_id), increment_version=True),
    }


@pytest.mark.parametrize("change", ["deleted", "data replaced", "moved back", "version increased"])
def test_a_resent_get_whose_large_entry_changed_fails_rather_than_return_other_data(
    conn: ListStructure, other: ListStructure, proxy: ReplyDroppingProxy, change: str
) -> None:
    """The data a lost get returned is gone or may be: the resend says the connection
    failed (the move was done, what it returned cannot be told), never other data."""
    large = conn.write(0, key(1), b"L" * 3000).entry
    proxy.drop_next_reply(_changes(other, large.entry_id)[change])
    with pytest.raises(CFError) as failed:
        conn.move(GET, 1)
    assert proxy.dropped == 1
    assert failed.value.reason is CFReason.CONNECTION_FAILED
    assert "was lost" in str(failed.value)
    # The connection goes on: the next request is served as ever.
    assert conn.write(3, key(9), b"after").entry.data == b"after"


def test_a_resent_get_fails_after_any_update_replaced_data_kept_apart(
    conn: ListStructure, other: ListStructure, proxy: ReplyDroppingProxy
) -> None:
    """An update may leave a record byte for byte as it was while replacing its data:
    the resend cannot tell whose data was replaced, so any such update after the get
    fails it (updates of data in place are rare; a resend is rarer)."""
    large = conn.write(0, key(1), b"L" * 3000).entry
    unrelated = conn.write(2, key(2), b"U" * 3000).entry
    proxy.drop_next_reply(lambda: other.update(ById(unrelated.entry_id), data=b"V" * 3000))
    with pytest.raises(CFError) as failed:
        conn.move(GET, 1)
    assert failed.value.reason is CFReason.CONNECTION_FAILED
    assert [e.entry_id for e in conn.scan(1)] == [large.entry_id]


@pytest.mark.parametrize("change", ["deleted", "data replaced", "moved back", "version increased"])
def test_a_resent_get_of_small_data_returns_the_first_reply_whatever_changed(
    conn: ListStructure, other: ListStructure, proxy: ReplyDroppingProxy, change: str
) -> None:
    """Small data is in the record the result keeps: the resend returns the entry as the
    get left it, whatever happened to it since."""
    small = conn.write(0, key(1), b"s" * 100).entry
    proxy.drop_next_reply(_changes(other, small.entry_id)[change])
    got = conn.move(GET, 1)
    assert proxy.dropped == 1
    assert got is not None and got.entry == small._replace(list_number=1)


BODIES = [b"s" * 100, b"L" * 3000, b"", b"t" * 512, b"u" * 513, b"M" * 4000]


@pytest.mark.parametrize("delete", [False, True], ids=["get", "get and delete"])
@pytest.mark.parametrize("watched", [False, True], ids=["unwatched", "watched"])
def test_a_take_many_whose_reply_was_lost_returns_exactly_the_first_reply(
    facility: RedisFacility, proxy: ReplyDroppingProxy, delete: bool, watched: bool
) -> None:
    """Small, large and empty bodies: the resent batch gets the first attempt's reply
    (seqs, entries, data, counts), the same as a twin structure whose reply was not lost."""
    facility.create(StructureParams.for_capacity("QSG3", list_count=4, entries=50, elements=50))
    lost, twin = facility.connect("QSG1", "QM1"), facility.connect("QSG3", "QM1")
    results = []
    for struct, drop in ((lost, True), (twin, False)):
        if watched:
            struct.monitor_list(1)
        for n, body in enumerate(BODIES):
            struct.write(0, key(n), body)
        if drop:
            proxy.drop_next_reply()
        results.append(struct.take_many(Head(0), 1, len(BODIES) - 1, delete=delete))
    assert proxy.dropped == 1
    assert results[0] == results[1]
    assert [change.entry.data for change, _ in results[0]] == BODIES[:-1]
    assert [e.data for e in lost.scan(0)] == [BODIES[-1]]
    assert lost.statistics().seq == twin.statistics().seq


def test_a_resent_take_many_whose_large_entry_changed_fails_rather_than_return_other_data(
    conn: ListStructure, other: ListStructure, proxy: ReplyDroppingProxy
) -> None:
    """A batch of gets names the data it left apart, as a get does (see above)."""
    small = conn.write(0, key(1), b"s" * 100).entry
    large = conn.write(0, key(2), b"L" * 3000).entry
    proxy.drop_next_reply(lambda: other.update(ById(large.entry_id), data=b"R" * 3000))
    with pytest.raises(CFError) as failed:
        conn.take_many(Head(0), 1, 2)
    assert failed.value.reason is CFReason.CONNECTION_FAILED
    assert [e.entry_id for e in conn.scan(1)] == [small.entry_id, large.entry_id]


def test_a_resent_take_many_of_small_data_returns_the_first_reply_whatever_changed(
    conn: ListStructure, other: ListStructure, proxy: ReplyDroppingProxy
) -> None:
    small = [conn.write(0, key(n), b"s%d" % n).entry for n in range(3)]
    proxy.drop_next_reply(lambda: other.delete(ById(small[1].entry_id)))
    taken = conn.take_many(Head(0), 1, 3)
    assert [change.entry for change, _ in taken] == [e._replace(list_number=1) for e in small]


@pytest.mark.parametrize("delete", [False, True], ids=["get", "get and delete"])
def test_a_take_whose_reply_was_lost_returns_its_data_small_or_large(
    conn: ListStructure, other: ListStructure, proxy: ReplyDroppingProxy, delete: bool
) -> None:
    """A take that leaves large data apart names it; one that deleted it kept a copy."""
    entries = [conn.write(0, key(n), body).entry for n, body in enumerate(BODIES)]
    for entry in entries:
        proxy.drop_next_reply(lambda: other.write(3, key(99), b"meanwhile"))
        taken = conn.take(Head(0), 1, delete=delete)
        assert taken.moved is not None and taken.moved.entry == entry._replace(list_number=1)
        assert (taken.deleted is not None) is delete
    assert proxy.dropped == len(BODIES)
    assert len(list(conn.scan(1))) == (0 if delete else len(BODIES))


def test_a_resent_take_whose_large_entry_changed_fails_rather_than_return_other_data(
    conn: ListStructure, other: ListStructure, proxy: ReplyDroppingProxy
) -> None:
    large = conn.write(0, key(1), b"L" * 3000).entry
    proxy.drop_next_reply(lambda: other.update(ById(large.entry_id), data=b"R" * 3000))
    with pytest.raises(CFError) as failed:
        conn.take(Head(0), 1)
    assert failed.value.reason is CFReason.CONNECTION_FAILED


# A sleeping take (``take`` with ``wait``): the wait and the take go in one write, and
# the server writes both replies together once the take has run, so a connection cut
# loses the take's reply after the take was made.  The client resends the take alone,
# with the retry flag, and must get the first attempt's result (entry and events).


@pytest.mark.parametrize("delete", [False, True])
def test_a_sleeping_take_whose_replies_were_lost_takes_once(
    facility: RedisFacility, proxy: ReplyDroppingProxy, delete: bool
) -> None:
    conn = facility.connect("QSG1", "QM1")
    writer = facility.connect("QSG1", "QM2")
    registration = conn.monitor_list(0)
    first = writer.write(0, key(1), b"first")
    writer.write(0, key(2), b"second")
    # The event is queued: the wait ends at once and the take runs in the same pass.
    proxy.drop_next_reply()
    taken = conn.take(GET, 1, delete=delete, take_events=True, wait=30.0)
    assert proxy.dropped == 1
    assert [(e.monitor_id, e.state, e.seq) for e in taken.events] == [
        (registration.monitor_id, MonitorState.NONEMPTY, first.seq)
    ]
    assert taken.moved is not None and taken.moved.entry == first.entry._replace(list_number=1)
    assert (taken.deleted is not None) is delete
    assert [e.data for e in conn.scan(0)] == [b"second"]
    assert [e.data for e in conn.scan(1)] == ([] if delete else [b"first"])
    assert conn.events_nowait() == []
