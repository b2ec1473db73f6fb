"""A sleeping take (``take`` with ``wait``) whose replies were lost with the connection.

The wait and the take go in one write, and the server writes both replies together
once the take has run: a connection cut then loses the take's reply after the take
was made.  The client resends the take alone, with the retry flag, and must get the
first attempt's result (entry and events) instead of a second take.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sharedq.cf import Compare, Head, MonitorState, StructureParams
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
