"""Every malformed facility URL is ``BAD_URL``, and no message ever shows a password.

The URLs are refused before anything is reached (no server needed), except a
database the server does not have, which only the server knows: that one, a wrong
password and a password with characters a URL must escape are tried on a private
``redis-server`` with ``requirepass``, after a structure was stored there, which is
checked to be intact afterwards.  Structure names are checked on every backend.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

import pytest

from sharedq.cf import (
    AuthenticationFailed,
    CFError,
    CFReason,
    CouplingFacility,
    Head,
    InvalidRequest,
    StructureParams,
    open_facility,
    redact_url,
    url_with_credentials,
)
from sharedq.cf.redis import RedisFacility
from sharedq.testing.redis_server import RedisServer

ServerFactory = Callable[..., RedisServer]
SECRET = "Sup3r-s3cret"
KEY = b"\x04" + bytes(15)


def _refused(url: Any, *words: str, secrets: tuple[str, ...] = (SECRET,)) -> CFError:
    """``open_facility(url)`` raises ``BAD_URL`` naming ``words`` and none of ``secrets``."""
    with pytest.raises(InvalidRequest) as info:
        open_facility(url)
    error = info.value
    assert error.reason is CFReason.BAD_URL and error.reason_code == 1011
    for word in words:
        assert word in str(error), (word, str(error))
    _shows_no_secret(error, secrets)
    return error


def _shows_no_secret(error: BaseException, secrets: tuple[str, ...]) -> None:
    """Not in the message, the repr, the arguments, the context, the whole traceback, nor
    any exception chained to it (even one ``from None`` hides from the traceback)."""
    shown = "".join(traceback.format_exception(error))
    current: BaseException | None = error
    while current is not None:
        shown += repr(current) + repr(current.args)
        shown += repr(getattr(current, "context", {})) + str(getattr(current, "detail", ""))
        current = current.__cause__ or current.__context__
    for secret in secrets:
        assert secret not in shown, shown


@pytest.mark.parametrize(
    ("url", "words"),
    [
        (None, ("a facility URL is a string", "NoneType")),
        (6379, ("not int",)),
        ("", ("unknown facility URL",)),
        ("ftp://host/", ("unknown facility URL", "ftp://host/")),
        ("memory://elsewhere", ("memory:// takes no host",)),
        ("redis://localhost:abc/0", ("Port could not be cast", "'abc'")),
        ("redis://localhost:99999/0", ("Port out of range",)),
        ("redis://localhost:0/0", ("port 0",)),
        ("redis://localhost:-1/0", ("Port",)),
        ("redis://[::1/0", ("Invalid IPv6 URL",)),
        ("redis://[zz]:6379/0", ("'zz' does not appear to be an IPv4 or IPv6 address",)),
        ("redis://::1:6379/0", ("an IPv6 address goes in brackets",)),
        ("redis://::1/0", ("an IPv6 address goes in brackets",)),
        ("redis://localhost:6379/x", ("database 'x'", "not a number")),
        ("redis://localhost:6379/-1", ("database '-1'",)),
        ("redis://localhost:6379/0/1", ("database '0/1'",)),
        ("redis://localhost:6379/0?db=two", ("db='two'",)),
        ("unix://", ("needs the socket's path",)),
        ("redis://localhost:6379/0?lease=soon", ("lease='soon'", "number of seconds")),
        ("redis://localhost:6379/0?lease=nan", ("lease='nan'", "at most 86400")),
        ("redis://localhost:6379/0?retry=inf", ("retry='inf'",)),
        ("redis://localhost:6379/0?retry=-1", ("retry='-1'",)),
        ("redis://localhost:6379/0?lease=1e12", ("lease='1e12'",)),
        ("redis://localhost:6379/0?socket_timeout=x", ("socket_timeout",)),
    ],
)
def test_a_malformed_url_is_bad_url_before_anything_is_reached(
    url: object, words: tuple[str, ...]
) -> None:
    _refused(url, *words)


@pytest.mark.parametrize(
    "url",
    [
        f"redis://qsg1:{SECRET}@localhost:abc/0",
        f"redis://:{SECRET}@[::1/0",
        f"redis://:{SECRET}@localhost:6379/x",
        f"redis://:{SECRET}@localhost:6379/0?lease=soon",
        f"redis://localhost:6379/0?password={SECRET}&lease=nan",
        f"redis://{SECRET}@localhost:6379/0?retry=0",  # a password without its colon
        f"ftp://qsg1:{SECRET}@localhost/",
        f"memory://qsg1:{SECRET}@x",
    ],
)
def test_no_message_shows_the_password(url: str) -> None:
    error = _refused(url)
    assert "***" in str(error)


@pytest.mark.parametrize(
    "url",
    [
        "redis://:Sup3r/s3cret@localhost:6379/0",  # an unescaped / splits the URL there
        "redis://qsg1:Sup3r@s3cret@[::1/0",
        "redis://:Sup3r?s3cret@localhost:6379/0",
        "redis://:Sup3r#s3cret@localhost:abc/0",
        "unix://:Sup3r/s3cret@",
    ],
)
def test_no_piece_of_an_unescaped_password_is_shown(url: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        open_facility(url)
    assert info.value.reason is CFReason.BAD_URL
    _shows_no_secret(info.value, ("Sup3r", "s3cret"))


def test_redact_url() -> None:
    assert redact_url("redis://qsg1:pw@h:6379/0") == "redis://qsg1:***@h:6379/0"
    assert redact_url("redis://:pw@h") == "redis://:***@h"
    assert redact_url("redis://pw@h/0") == "redis://***@h/0"
    assert redact_url("unix://:pw@/run/redis.sock?db=1") == "unix://:***@/run/redis.sock?db=1"
    assert redact_url("redis://h/0?password=pw&db=1") == "redis://h/0?password=***&db=1"
    assert redact_url("redis://u:p@w@h/0") == "redis://u:***@h/0"  # the last @ ends it
    assert redact_url("redis://:p/w@h/0") == "redis://:***@h/0"  # an unescaped /
    assert redact_url("redis://h:6379/0") == "redis://h:6379/0"
    assert redact_url(None) == "None"


def test_url_with_credentials() -> None:
    assert url_with_credentials("redis://h:6379/0", password="p w@:/%") == (
        "redis://:p%20w%40%3A%2F%25@h:6379/0"
    )
    assert url_with_credentials("redis://h/0", username="qsg1", password="pw") == (
        "redis://qsg1:pw@h/0"
    )
    assert url_with_credentials("unix:///run/r.sock?db=1", password="pw") == (
        "unix://:pw@/run/r.sock?db=1"
    )
    assert url_with_credentials("memory://", password="pw") == "memory://"
    assert url_with_credentials("redis://h/0") == "redis://h/0"
    for url in (f"redis://:{SECRET}@h/0", f"redis://h/0?password={SECRET}"):
        with pytest.raises(InvalidRequest) as info:
            url_with_credentials(url, password="other")
        assert info.value.reason is CFReason.BAD_URL
        assert "not both" in str(info.value)
        _shows_no_secret(info.value, (SECRET,))


# -- on a server with a password ------------------------------------------------------------


@pytest.fixture
def guarded(redis_servers: ServerFactory) -> RedisServer:
    """A private server with ``requirepass`` and 4 databases, holding structure QSG1
    with one entry in database 0."""
    server = redis_servers(args=["--databases", "4"], password=SECRET)
    with RedisFacility.from_url(server.url) as facility:
        facility.create(StructureParams.for_capacity("QSG1", list_count=4, entries=10, elements=10))
        with facility.connect("QSG1", "QM1") as conn:
            conn.write(1, KEY, b"stored before")
    return server


def _intact(server: RedisServer) -> None:
    with (
        RedisFacility.from_url(server.url) as facility,
        facility.connect("QSG1", "CHECK") as conn,
    ):
        assert facility.structure_names() == ["QSG1"]
        assert [e.data for e in conn.scan(1)] == [b"stored before"]
        assert conn.read(Head(1)) is not None


def test_a_database_the_server_lacks_is_bad_url(guarded: RedisServer) -> None:
    base = f"redis://:{SECRET}@127.0.0.1:{guarded.port}"
    for url in (f"{base}/4", f"{base}/99", f"{base}/0?db=7"):
        error = _refused(url, "has no such database", f"127.0.0.1:{guarded.port}")
        assert "DB index is out of range" in str(error)
    with open_facility(f"{base}/3") as facility:  # the last one it has
        assert facility.structure_names() == []
    _intact(guarded)


def test_a_wrong_password_is_refused_without_showing_either(guarded: RedisServer) -> None:
    wrong = "Wr0ng-Passw0rd"
    for url in (
        f"redis://:{wrong}@127.0.0.1:{guarded.port}/0",
        f"redis://default:{wrong}@127.0.0.1:{guarded.port}/0",
        f"redis://127.0.0.1:{guarded.port}/0?password={wrong}",
        url_with_credentials(f"redis://127.0.0.1:{guarded.port}/0", password=wrong),
    ):
        with pytest.raises(AuthenticationFailed) as info:
            open_facility(url)
        assert info.value.reason is CFReason.AUTHENTICATION_FAILED
        assert "refused the credentials" in str(info.value)
        assert f"127.0.0.1:{guarded.port}" in str(info.value)
        _shows_no_secret(info.value, (wrong, SECRET))
    _intact(guarded)


def test_credentials_given_apart_reach_the_server(redis_servers: ServerFactory) -> None:
    awkward = "p@ss:w/rd %#?"  # every character a URL must escape
    server = redis_servers(password=awkward)
    url = url_with_credentials(f"redis://127.0.0.1:{server.port}/0", password=awkward)
    with open_facility(url) as facility:
        facility.create(StructureParams.for_capacity("QSG1", list_count=4, entries=10, elements=10))
        assert facility.structure_names() == ["QSG1"]
        assert awkward not in repr(facility)
    server.command(
        "ACL", "SETUSER", "qsg1", "on", ">" + awkward, "~sq:*", "resetchannels",
        "+@read", "+@write", "+@scripting", "+@connection", "+info",
    )  # fmt: skip
    url = url_with_credentials(
        f"redis://127.0.0.1:{server.port}/0", username="qsg1", password=awkward
    )
    with open_facility(url) as facility:
        assert facility.structure_names() == ["QSG1"]


# -- structure names, on every backend ----------------------------------------------------


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("..", "names a directory"),
        (".", "names a directory"),
        ("QSG1\n", "not allowed: '\\n'"),
        ("ÄPP", "outside ASCII"),
        ("Q" * 17, "more than 16"),
        ("_Q", "starts with '_'"),
        ("Q{1}", "not allowed: '{', '}'"),
    ],
)
def test_a_bad_structure_name_is_refused_and_what_exists_stays(
    facility: CouplingFacility, name: str, words: str
) -> None:
    facility.create(StructureParams.for_capacity("QSG1", list_count=4, entries=10, elements=10))
    with facility.connect("QSG1", "QM1") as conn:
        conn.write(1, KEY, b"stored before")
        with pytest.raises(InvalidRequest) as info:
            facility.create(StructureParams(name, list_count=4, size=100_000))
        assert info.value.reason is CFReason.BAD_STRUCTURE_PARAMS
        assert info.value.reason_code == 1010
        assert words in str(info.value) and repr(name) in str(info.value)
        assert "structure names are 1 to 16 of" in str(info.value)
        assert facility.structure_names() == ["QSG1"]
        assert [e.data for e in conn.scan(1)] == [b"stored before"]


@pytest.mark.parametrize(
    ("counts", "words"),
    [
        ({"entries": -5}, "entries -5"),
        ({"entries": 0}, "entries 0"),
        ({"elements": -1}, "elements -1"),
        ({"entries": 2.5}, "entries 2.5"),
        ({"growth": float("nan")}, "growth nan"),
        ({"growth": float("inf")}, "growth inf"),
        ({"growth": 0.5}, "growth 0.5"),
        ({"list_count": 0}, "list_count 0"),
        ({"list_count": True}, "list_count True"),
        ({"entries": 10**13}, "size"),
    ],
)
def test_for_capacity_refuses_absurd_counts(counts: dict[str, Any], words: str) -> None:
    arguments: dict[str, Any] = {"list_count": 4, "entries": 10, "elements": 10, **counts}
    with pytest.raises(InvalidRequest) as info:
        StructureParams.for_capacity("QSG1", **arguments)
    assert info.value.reason is CFReason.BAD_STRUCTURE_PARAMS
    assert words in str(info.value)
