"""Results kept for a resend on Redis: a delete whose reply carries no data.

A delete asked for no data (``with_data=False``), and a delete of an entry with no
data, keep their result without a data field of its own (kind ``e``); a resent
request after a lost reply must still get the first attempt's result, not a second
change.  The proxy swallows one reply and cuts the connection (``tests/tcp_proxy.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sharedq.cf import ById, ListStructure, StructureParams
from sharedq.cf.redis import RedisFacility
from sharedq.testing.redis_server import RedisServer
from tests.tcp_proxy import ReplyDroppingProxy


def _key(n: int) -> bytes:
    return b"\x04" + n.to_bytes(15, "big")


@pytest.fixture
def conn(redis_server: RedisServer) -> Iterator[tuple[ListStructure, ReplyDroppingProxy]]:
    redis_server.flush()
    proxy = ReplyDroppingProxy(redis_server.port)
    try:
        with RedisFacility.from_url(proxy.url, lease_seconds=600) as fac:
            fac.create(StructureParams.for_capacity("QSGK", list_count=2, entries=20, elements=20))
            yield fac.connect("QSGK", "QM1"), proxy
    finally:
        proxy.close()
        redis_server.flush()  # other tests on this server expect it empty


def test_deletes_without_data_whose_replies_were_lost(
    conn: tuple[ListStructure, ReplyDroppingProxy],
) -> None:
    struct, proxy = conn
    small = struct.write(0, _key(1), b"s" * 100).entry
    large = struct.write(0, _key(2), b"L" * 3000).entry
    empty = struct.write(0, _key(3)).entry
    before = struct.statistics().seq
    for entry, with_data in ((small, False), (large, False), (empty, True)):
        proxy.drop_next_reply()
        gone = struct.delete(ById(entry.entry_id), with_data=with_data)
        assert gone is not None and gone.entry == entry._replace(data=b"")
    assert proxy.dropped == 3
    assert struct.statistics().seq == before + 3
    assert list(struct.scan(0)) == []
