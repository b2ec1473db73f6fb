"""``client.exchange`` keeps a connection's socket and reader (its lane) between
requests, and still goes through redis-py's ``send_packed_command`` when that was
replaced (a benchmark counting round trips replaces it) or the socket changed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.connection import AbstractConnection

from sharedq.cf.redis.client import exchange
from sharedq.cf.redis.nodes import pack_command
from sharedq.testing.redis_server import RedisServer


@pytest.fixture
def connection(redis_server: RedisServer) -> Iterator[Any]:
    redis_server.flush()
    connection: Any = redis.Connection(port=redis_server.port, protocol=2, socket_timeout=5.0)  # type: ignore[no-untyped-call]
    yield connection
    connection.disconnect()


def test_a_replaced_send_is_called_once_the_lane_is_made(
    connection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert exchange(connection, pack_command(("PING",))) == b"PONG"
    assert exchange(connection, pack_command(("PING",))) == b"PONG"  # on the lane
    original: Any = AbstractConnection.send_packed_command
    sent: list[Any] = []

    def counting(self: Any, command: Any, check_health: bool = True) -> None:
        sent.append(command)
        original(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counting)
    assert exchange(connection, pack_command(("ECHO", "a"))) == b"a"
    assert exchange(connection, pack_command(("ECHO", "b"))) == b"b"
    assert sent == [[pack_command(("ECHO", "a"))], [pack_command(("ECHO", "b"))]]
    monkeypatch.undo()
    assert exchange(connection, pack_command(("ECHO", "c"))) == b"c"
    assert len(sent) == 2


def test_a_reconnected_connection_gets_a_new_lane(connection: Any) -> None:
    first = exchange(connection, pack_command(("CLIENT", "ID")))
    connection.disconnect()
    second = exchange(connection, pack_command(("CLIENT", "ID")))
    assert second != first
    assert exchange(connection, pack_command(("CLIENT", "ID"))) == second
