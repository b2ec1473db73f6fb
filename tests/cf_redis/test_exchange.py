"""``client.exchange``: one request on a redis-py connection, its reply read directly.

It must behave as redis-py's ``send_packed_command`` + ``read_response`` do: replies
whole however many reads they take, error replies raised, a dropped socket or a
timeout raised as redis-py's errors with the connection disconnected (so that the
next request connects again).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis import exceptions as rx

from sharedq.cf.redis.client import exchange
from sharedq.cf.redis.nodes import pack_command
from sharedq.testing.redis_server import RedisServer


def connect(port: int, timeout: float) -> Any:
    """A redis-py connection as the client makes them (hiredis, RESP2); not yet connected."""
    return redis.Connection(port=port, protocol=2, socket_timeout=timeout)  # type: ignore[no-untyped-call]


@pytest.fixture
def connection(redis_server: RedisServer) -> Iterator[Any]:
    redis_server.flush()
    connection = connect(redis_server.port, 5.0)
    yield connection
    connection.disconnect()


def test_connects_first_and_reads_a_reply(connection: Any) -> None:
    assert exchange(connection, pack_command(("PING",))) == b"PONG"
    assert exchange(connection, pack_command(("RPUSH", "sq:x", "a", "b"))) == 2
    assert exchange(connection, pack_command(("LRANGE", "sq:x", 0, -1))) == [b"a", b"b"]
    assert exchange(connection, pack_command(("GET", "sq:none"))) is None


def test_a_reply_over_many_reads_is_whole(connection: Any) -> None:
    big = bytes(range(256)) * 4096  # 1 MiB: many reads of the parser's buffer
    assert exchange(connection, pack_command(("SET", "sq:big", big))) == b"OK"
    assert exchange(connection, pack_command(("GET", "sq:big"))) == big


def test_an_error_reply_raises_and_the_connection_goes_on(
    connection: Any,
) -> None:
    with pytest.raises(rx.ResponseError, match="Function not found"):
        exchange(connection, pack_command(("FCALL", "sq_no_such_function", 0)))
    assert exchange(connection, pack_command(("SET", "sq:s", "v"))) == b"OK"
    with pytest.raises(rx.ResponseError, match="WRONGTYPE"):
        exchange(connection, pack_command(("LPUSH", "sq:s", "v")))
    assert exchange(connection, pack_command(("PING",))) == b"PONG"


def test_a_dropped_connection_raises_and_the_next_request_reconnects(
    connection: Any, redis_server: RedisServer
) -> None:
    client_id = exchange(connection, pack_command(("CLIENT", "ID")))
    admin = redis.Redis(port=redis_server.port)
    try:
        assert admin.client_kill_filter(_id=client_id) == 1
    finally:
        admin.close()
    with pytest.raises(rx.ConnectionError):
        exchange(connection, pack_command(("PING",)))
    assert exchange(connection, pack_command(("PING",))) == b"PONG"
    assert exchange(connection, pack_command(("CLIENT", "ID"))) != client_id


def test_a_timeout_raises_and_disconnects(redis_server: RedisServer) -> None:
    connection = connect(redis_server.port, 0.2)
    try:
        with pytest.raises(rx.TimeoutError):
            exchange(connection, pack_command(("BLPOP", "sq:never", 0)))
        # Disconnected: the blocked command's late reply is never read as the next one's.
        assert exchange(connection, pack_command(("ECHO", "after"))) == b"after"
    finally:
        connection.disconnect()
