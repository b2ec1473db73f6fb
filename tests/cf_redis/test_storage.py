"""How a structure is kept on the server: each entry's data apart from its record (so
that a move or a re-key never copies it), and nothing left behind by an entry or a
structure that goes."""

from __future__ import annotations

import pytest

from sharedq.cf import ById, CFReason, ListStructure, ServerUnsuitable, StructureParams
from sharedq.cf.redis import RedisFacility
from sharedq.testing.redis_server import RedisServer

DATA_KEY = "sq:{QSG1}:d"


def key(n: int) -> bytes:
    return b"\x04" + n.to_bytes(15, "big")


def data_on_server(server: RedisServer) -> dict[bytes, bytes]:
    found = server.command("HGETALL", DATA_KEY)
    assert isinstance(found, dict)
    return found


def test_entry_data_is_kept_apart_and_goes_with_its_entry(redis_server: RedisServer) -> None:
    redis_server.flush()
    with RedisFacility.from_url(redis_server.url) as facility:
        facility.create(
            StructureParams.for_capacity("QSG1", list_count=4, entries=50, elements=200)
        )
        conn: ListStructure = facility.connect("QSG1", "QM1")
        big = conn.write(0, key(1), b"a" * 700).entry  # three elements
        empty = conn.write(0, key(2)).entry  # no data: nothing kept for it
        small = conn.write(0, key(3), b"c").entry
        gone = conn.write(0, key(4), b"d").entry
        assert data_on_server(redis_server) == {
            big.entry_id: b"a" * 700,
            small.entry_id: b"c",
            gone.entry_id: b"d",
        }
        moved = conn.move(ById(big.entry_id), 1, new_key=key(9), increment_version=True)
        assert moved is not None and moved.entry.data == b"a" * 700
        conn.update(ById(small.entry_id), data=b"")
        conn.update(ById(empty.entry_id), data=b"b" * 10)
        deleted = conn.delete(ById(gone.entry_id))
        assert deleted is not None and deleted.entry.data == b"d"
        assert data_on_server(redis_server) == {big.entry_id: b"a" * 700, empty.entry_id: b"b" * 10}
        assert [(e.entry_id, e.data) for e in conn.scan(0)] == [
            (empty.entry_id, b"b" * 10),
            (small.entry_id, b""),
        ]
        assert [e.data for e in conn.scan(1, with_data=False)] == [b""]
        result = conn.delete_entries([big.entry_id, empty.entry_id, small.entry_id])
        assert result.complete
        assert data_on_server(redis_server) == {}
        conn.write(2, key(5), b"still there when the structure goes")
        conn.disconnect()
        facility.delete("QSG1")
        assert redis_server.command("KEYS", "sq:{QSG1}:*") == []


def test_a_structure_kept_in_another_format_is_refused_not_misread(
    redis_server: RedisServer,
) -> None:
    """A structure an older sharedq made (entry data inside the records, no format
    mark) on a server that persisted it: connecting says so; deleting it works."""
    redis_server.flush()
    with RedisFacility.from_url(redis_server.url) as facility:
        facility.create(StructureParams.for_capacity("QSG1", list_count=2, entries=5, elements=5))
        redis_server.command("HDEL", "sq:{QSG1}:m", "fmt")
        with pytest.raises(ServerUnsuitable) as caught:
            facility.connect("QSG1", "QM1")
        assert caught.value.reason is CFReason.SERVER_UNSUITABLE
        assert "format 1, not 2" in str(caught.value)
        facility.delete("QSG1")
        assert not facility.exists("QSG1")
