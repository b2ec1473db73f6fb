"""How a structure is kept on the server: small entry data inside the entry's record
(no second hash field to write, read and delete), larger data apart from it (so that a
move or a re-key never copies it), and nothing left behind by an entry or a structure
that goes."""

from __future__ import annotations

import pytest

from sharedq.cf import ById, CFReason, ListStructure, ServerUnsuitable, StructureParams
from sharedq.cf.redis import RedisFacility
from sharedq.testing.redis_server import RedisServer

DATA_KEY = "sq:{QSG1}:d"
ENTRIES_KEY = "sq:{QSG1}:e"
#: The most data an entry's record keeps (``INLINE`` in ``common.lua``).
INLINE = 512


def key(n: int) -> bytes:
    return b"\x04" + n.to_bytes(15, "big")


def data_on_server(server: RedisServer) -> dict[bytes, bytes]:
    found = server.command("HGETALL", DATA_KEY)
    assert isinstance(found, dict)
    return found


def record_on_server(server: RedisServer, entry_id: bytes) -> bytes:
    found = server.command("HGET", ENTRIES_KEY, entry_id)
    assert isinstance(found, bytes)
    return found


def test_large_entry_data_is_kept_apart_and_goes_with_its_entry(
    redis_server: RedisServer,
) -> None:
    redis_server.flush()
    with RedisFacility.from_url(redis_server.url) as facility:
        facility.create(
            StructureParams.for_capacity("QSG1", list_count=4, entries=50, elements=200)
        )
        conn: ListStructure = facility.connect("QSG1", "QM1")
        big = conn.write(0, key(1), b"a" * 700).entry  # three elements
        empty = conn.write(0, key(2)).entry  # no data: nothing kept for it
        small = conn.write(0, key(3), b"c" * 600).entry
        gone = conn.write(0, key(4), b"d" * 600).entry
        assert data_on_server(redis_server) == {
            big.entry_id: b"a" * 700,
            small.entry_id: b"c" * 600,
            gone.entry_id: b"d" * 600,
        }
        moved = conn.move(ById(big.entry_id), 1, new_key=key(9), increment_version=True)
        assert moved is not None and moved.entry.data == b"a" * 700
        conn.update(ById(small.entry_id), data=b"")
        conn.update(ById(empty.entry_id), data=b"b" * 1000)
        deleted = conn.delete(ById(gone.entry_id))
        assert deleted is not None and deleted.entry.data == b"d" * 600
        assert data_on_server(redis_server) == {
            big.entry_id: b"a" * 700,
            empty.entry_id: b"b" * 1000,
        }
        assert [(e.entry_id, e.data) for e in conn.scan(0)] == [
            (empty.entry_id, b"b" * 1000),
            (small.entry_id, b""),
        ]
        assert [e.data for e in conn.scan(1, with_data=False)] == [b""]
        result = conn.delete_entries([big.entry_id, empty.entry_id, small.entry_id])
        assert result.complete
        assert data_on_server(redis_server) == {}
        conn.write(2, key(5), b"e" * 600)
        conn.disconnect()
        facility.delete("QSG1")
        assert redis_server.command("KEYS", "sq:{QSG1}:*") == []


def test_small_entry_data_is_kept_in_the_record_and_moves_with_it(
    redis_server: RedisServer,
) -> None:
    """Data up to INLINE bytes lives at the end of the entry's record; an update that
    crosses the limit moves it between the record and the data hash, either way."""
    redis_server.flush()
    with RedisFacility.from_url(redis_server.url) as facility:
        facility.create(
            StructureParams.for_capacity("QSG1", list_count=4, entries=50, elements=200)
        )
        conn: ListStructure = facility.connect("QSG1", "QM1")
        small = conn.write(0, key(1), b"s" * INLINE, adjunct=b"adj").entry
        assert data_on_server(redis_server) == {}
        assert record_on_server(redis_server, small.entry_id).endswith(b"adj" + b"s" * INLINE)
        moved = conn.move(ById(small.entry_id), 1, new_key=key(2), new_secondary_key=b"sk")
        assert moved is not None and moved.entry.data == b"s" * INLINE
        assert moved.entry.secondary_key == b"sk" and moved.entry.adjunct == b"adj"
        assert record_on_server(redis_server, small.entry_id).endswith(b"sk" + b"s" * INLINE)
        conn.update(ById(small.entry_id), data=b"L" * (INLINE + 1))  # now apart
        assert data_on_server(redis_server) == {small.entry_id: b"L" * (INLINE + 1)}
        read = conn.read(ById(small.entry_id))
        assert read is not None and read.data == b"L" * (INLINE + 1)
        conn.update(ById(small.entry_id), data=b"back")  # in the record again
        assert data_on_server(redis_server) == {}
        assert [e.data for e in conn.scan(1)] == [b"back"]
        assert [e.data for e in conn.scan(1, with_data=False)] == [b""]
        with conn.snapshot() as snapshot:
            conn.update(ById(small.entry_id), data=b"after")
            conn.delete(ById(small.entry_id))
            assert [e.data for e in snapshot.entries(1)] == [b"back"]
        deleted = conn.write_and_rekey(0, key(3), b"w" * 10, new_key=key(4))[1]
        gone = conn.delete(ById(deleted.entry.entry_id))
        assert gone is not None and gone.entry.data == b"w" * 10
        assert redis_server.command("HLEN", ENTRIES_KEY) == 0
        conn.disconnect()
        facility.delete("QSG1")


def test_a_snapshot_keeps_what_changes_after_it_wherever_the_data_is_kept(
    redis_server: RedisServer,
) -> None:
    """Copy on write, with data in the record and apart: entries updated across the
    limit, moved and deleted after the snapshot read as they were at it."""
    redis_server.flush()
    with RedisFacility.from_url(redis_server.url) as facility:
        facility.create(
            StructureParams.for_capacity("QSG1", list_count=2, entries=50, elements=200)
        )
        conn: ListStructure = facility.connect("QSG1", "QM1")
        before = {
            "small": b"s" * 10,
            "large": b"L" * 2000,
            "grows": b"g" * 20,
            "shrinks": b"h" * 1500,
            "moves": b"m" * 900,
            "goes": b"x" * 700,
        }
        ids = {
            name: conn.write(0, key(n), data).entry.entry_id
            for n, (name, data) in enumerate(before.items())
        }
        assert redis_server.command("HGET", "sq:{QSG1}:m", "xa") is None
        with conn.snapshot() as snapshot:
            assert redis_server.command("HGET", "sq:{QSG1}:m", "xa") == b"1"
            conn.update(ById(ids["small"]), data=b"S" * 5)
            conn.update(ById(ids["large"]), data=b"l" * 3000)
            conn.update(ById(ids["grows"]), data=b"G" * 1000)
            conn.update(ById(ids["shrinks"]), data=b"H")
            conn.move(ById(ids["moves"]), 1, new_key=key(30))
            conn.delete(ById(ids["goes"]))
            assert [e.data for e in snapshot.entries(0)] == list(before.values())
            assert list(snapshot.entries(1)) == []
        assert redis_server.command("HGET", "sq:{QSG1}:m", "xa") is None
        now = {e.entry_id: e.data for e in conn.scan(0)}
        assert now == {
            ids["small"]: b"S" * 5,
            ids["large"]: b"l" * 3000,
            ids["grows"]: b"G" * 1000,
            ids["shrinks"]: b"H",
        }
        assert [e.data for e in conn.scan(1)] == [b"m" * 900]
        conn.disconnect()
        facility.delete("QSG1")


def test_a_structure_kept_in_another_format_is_refused_not_misread(
    redis_server: RedisServer,
) -> None:
    """A structure an older sharedq made (format 1: entry data always inside the
    records, no format mark; format 2: always apart) on a server that persisted it:
    connecting says so; deleting it works."""
    redis_server.flush()
    with RedisFacility.from_url(redis_server.url) as facility:
        facility.create(StructureParams.for_capacity("QSG1", list_count=2, entries=5, elements=5))
        redis_server.command("HDEL", "sq:{QSG1}:m", "fmt")
        with pytest.raises(ServerUnsuitable) as caught:
            facility.connect("QSG1", "QM1")
        assert caught.value.reason is CFReason.SERVER_UNSUITABLE
        assert "format 1, not 3" in str(caught.value)
        redis_server.command("HSET", "sq:{QSG1}:m", "fmt", "2")
        with pytest.raises(ServerUnsuitable) as caught:
            facility.connect("QSG1", "QM1")
        assert "format 2, not 3" in str(caught.value)
        facility.delete("QSG1")
        assert not facility.exists("QSG1")
