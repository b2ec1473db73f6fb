"""Opening the Redis backend: URL forms, credentials, TLS, and servers it refuses."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sharedq.cf import (
    AuthenticationFailed,
    CFReason,
    Compare,
    ConnectionFailed,
    CouplingFacility,
    Head,
    InvalidRequest,
    ServerUnsuitable,
    StructureParams,
    open_facility,
)
from sharedq.cf.redis.client import check_server
from sharedq.testing.redis_server import RedisServer, free_port

ServerFactory = Callable[..., RedisServer]
COMMITTED = b"\x0a" + bytes(15)


def round_trip(facility: CouplingFacility, name: str = "QSG1") -> None:
    """A put, a monitored wake-up and a get: every kind of command the backend sends."""
    facility.create(StructureParams.for_capacity(name, list_count=4, entries=10, elements=10))
    with facility.connect(name, "QM1") as qm1, facility.connect(name, "QM2") as qm2:
        qm2.monitor_list(1)
        put = qm1.write(1, b"\x04" + bytes(15), b"hello")
        assert [e.seq for e in qm2.wait_events(timeout=5)] == [put.seq]
        got = qm2.move(Head(1, key=COMMITTED, compare=Compare.LE), 2)
        assert got is not None and got.entry.data == b"hello"
    assert name in facility.structure_names()
    facility.delete(name)


def test_redis_url_with_a_database_number(redis_server: RedisServer) -> None:
    redis_server.flush()
    with open_facility(redis_server.url.replace("/0", "/3")) as facility:
        round_trip(facility)


def test_unix_socket_url(redis_server: RedisServer) -> None:
    redis_server.flush()
    with open_facility(redis_server.unix_url) as facility:
        round_trip(facility)


def test_tls_url_verifies_the_server(redis_servers: ServerFactory) -> None:
    server = redis_servers(tls=True)
    with open_facility(server.tls_url) as facility:
        round_trip(facility)
    # Without our CA the server's certificate is refused: the server is not reached.
    untrusted = server.tls_url.split("?")[0]
    with pytest.raises(ConnectionFailed):
        open_facility(untrusted)


def test_unreachable_server_is_connection_failed() -> None:
    with pytest.raises(ConnectionFailed) as info:
        open_facility(f"redis://127.0.0.1:{free_port()}/0")
    assert info.value.reason is CFReason.CONNECTION_FAILED
    assert "cannot reach" in str(info.value)


def test_password_is_required_and_checked(redis_servers: ServerFactory) -> None:
    server = redis_servers(password="s3cret")
    with pytest.raises(AuthenticationFailed):
        open_facility(f"redis://127.0.0.1:{server.port}/0")
    with pytest.raises(AuthenticationFailed) as info:
        open_facility(f"redis://:wrong@127.0.0.1:{server.port}/0")
    assert "s3cret" not in str(info.value) and "wrong" not in str(info.value)
    with open_facility(server.url) as facility:
        round_trip(facility)


def test_acl_user_with_broad_permissions(redis_servers: ServerFactory) -> None:
    """Categories work too (docs/redis.md gives narrower lines: ``test_acl.py``)."""
    server = redis_servers()
    server.command(
        "ACL", "SETUSER", "qsg1", "on", ">pw1", "~sq:*", "resetchannels",
        "+@read", "+@write", "+@scripting", "+@connection", "+info",
    )  # fmt: skip
    with open_facility(f"redis://qsg1:pw1@127.0.0.1:{server.port}/0") as facility:
        round_trip(facility)
    with pytest.raises(AuthenticationFailed):
        open_facility(f"redis://qsg1:nope@127.0.0.1:{server.port}/0")


def test_acl_user_without_scripting_is_told_what_it_lacks(redis_servers: ServerFactory) -> None:
    server = redis_servers()
    server.command(
        "ACL", "SETUSER", "reader", "on", ">pw2", "~*", "+@read", "+@connection", "+info"
    )
    with pytest.raises(AuthenticationFailed) as info:
        open_facility(f"redis://reader:pw2@127.0.0.1:{server.port}/0")
    assert "+fcall" in str(info.value) and "docs/redis.md" in str(info.value)


def test_a_server_that_may_evict_keys_is_refused(redis_servers: ServerFactory) -> None:
    server = redis_servers(args=["--maxmemory-policy", "allkeys-lru"])
    with pytest.raises(ServerUnsuitable) as info:
        open_facility(server.url)
    assert "allkeys-lru" in str(info.value) and "noeviction" in str(info.value)


@pytest.mark.parametrize(
    ("info", "unsuitable"),
    [
        ({"redis_version": "6.2.14", "maxmemory_policy": "noeviction"}, True),
        ({"redis_version": "7.0.15", "maxmemory_policy": "noeviction"}, False),
        ({"redis_version": "7.2.4", "maxmemory_policy": "volatile-lru"}, True),
        ({"redis_version": "8.0.0"}, False),
    ],
)
def test_server_checks(info: dict[str, object], unsuitable: bool) -> None:
    if unsuitable:
        with pytest.raises(ServerUnsuitable):
            check_server(info, "Redis server test")
    else:
        check_server(info, "Redis server test")


@pytest.mark.parametrize(
    "url", ["redis://localhost:6379/0?lease=soon", "redis://localhost:6379/0?retry=-1"]
)
def test_bad_options_in_the_url(url: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        open_facility(url)
    assert info.value.reason is CFReason.BAD_URL


def test_sequence_floor_beyond_what_lua_numbers_hold_is_refused(
    redis_server: RedisServer,
) -> None:
    redis_server.flush()
    with open_facility(redis_server.url) as facility, pytest.raises(InvalidRequest):
        facility.create(StructureParams("BIG", list_count=2, size=100_000), sequence_floor=2**60)
