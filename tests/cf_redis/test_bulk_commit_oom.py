"""``move_and_delete_entries`` (the function ``bulk_commit``, flagged ``allow-oom``) runs
on a server at ``maxmemory``: a unit of gets and puts commits there, as a bulk move and
a bulk delete do, and frees memory; a write is still refused."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sharedq.cf import BulkMove, CFError, StructureParams
from sharedq.cf.redis import RedisFacility
from sharedq.testing.redis_server import RedisServer
from tests.cf_redis.maxmemory import (
    fill_until_refused,
    hold_out_of_memory,
    is_out_of_memory_error,
    limit_above_use,
    used_memory,
)

#: Bytes of data per entry filling the server.
BODY = 4000
#: How far below what the server uses the limit is held.
MARGIN = 256 << 10


def key(n: int) -> bytes:
    return b"\xf6" + n.to_bytes(15, "big")


def test_a_commit_of_puts_and_gets_runs_out_of_memory(
    redis_servers: Callable[..., RedisServer],
) -> None:
    server = redis_servers()
    with RedisFacility.from_url(server.url) as facility:
        facility.create(
            StructureParams.for_capacity("QSG1", list_count=8, entries=100_000, elements=2_000_000)
        )
        conn = facility.connect("QSG1", "QM1")
        limit_above_use(server, 2 << 20)
        ids: list[bytes] = []

        def write(n: int) -> None:
            # Even n: a request gotten (list 2), odd: a reply put uncommitted (list 0).
            list_number = 2 if n % 2 == 0 else 0
            ids.append(conn.write(list_number, key(n), bytes([n % 251]) * BODY).entry.entry_id)

        assert fill_until_refused(write) > 100
        hold_out_of_memory(server, MARGIN)
        with pytest.raises(CFError) as refused:
            conn.write(0, key(1 << 20), b"x" * BODY)
        assert is_out_of_memory_error(refused.value)
        before = used_memory(server)
        gets, puts = ids[0:40:2], ids[1:40:2]
        moves = [BulkMove(i, 1, new_key=b"\x04" * 16, set_version=0, from_list=0) for i in puts]
        result = conn.move_and_delete_entries(moves, gets)
        assert result.complete and len(result.seqs) == 40
        assert conn.list_info(1).entries == 20
        assert used_memory(server) < before
