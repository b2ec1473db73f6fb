"""One redis-py client per facility: opening it, checking the server, calling functions.

Each thread calls functions on a connection of its own, kept for the thread's life: a
request is one packed write and one read on a redis-py connection (hiredis packs and
parses), without a pool checkout and the client-level bookkeeping per command, which
would cost more than the function runs on the server.

Requests are resent after a dropped connection for a bounded time, and only here:
redis-py's own retries are switched off, because it would resend a function call that
may already have changed the structure.  A resent request carries the retry flag, and
a function that sees it returns the result it recorded the first time, if there was a
first time (see ``record()`` in ``lua/common.lua``), so no change is applied twice.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import hiredis
import redis
from redis import exceptions as rx
from redis.backoff import NoBackoff
from redis.connection import AbstractConnection
from redis.retry import Retry

from sharedq.cf.errors import CFReason, cf_error
from sharedq.cf.redis import codec, scripts
from sharedq.cf.redis.errors import is_transient, translate
from sharedq.cf.redis.scripts import Function

#: Seconds a connection's lease lasts without renewal before its user counts as failed.
DEFAULT_LEASE_SECONDS = 15.0
#: Seconds of reconnect attempts after a dropped connection before ``StructureLost``.
DEFAULT_RETRY_SECONDS = 5.0
#: Seconds a reply may take (a dead server that sends no reset surfaces after this).
SOCKET_TIMEOUT = 10.0
#: Seconds to establish a connection.
CONNECT_TIMEOUT = 5.0
#: The oldest server we run on: Redis functions came with 7.0.
MIN_SERVER_VERSION = (7, 0)

#: Packs a command for the wire (hiredis, in C).
pack_command: Callable[[tuple[Any, ...]], bytes] = hiredis.pack_command

#: Arguments of ours in a facility URL's query; the rest go to redis-py.
_OUR_OPTIONS = {"lease": "lease_seconds", "retry": "retry_seconds"}


@dataclass(frozen=True)
class Options:
    """What a facility URL asks of sharedq itself (``?lease=S&retry=S``)."""

    lease_seconds: float = DEFAULT_LEASE_SECONDS
    retry_seconds: float = DEFAULT_RETRY_SECONDS


def split_url(url: str) -> tuple[str, Options, str]:
    """The URL for redis-py, our options, and a description without the password."""
    parts = urlsplit(url)
    ours: dict[str, float] = {}
    theirs = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in _OUR_OPTIONS:
            try:
                ours[_OUR_OPTIONS[name]] = float(value)
            except ValueError:
                raise cf_error(
                    CFReason.BAD_URL, f"{name}={value!r} in {url!r} must be a number"
                ) from None
            if ours[_OUR_OPTIONS[name]] <= 0:
                raise cf_error(CFReason.BAD_URL, f"{name} in the URL must be positive")
        else:
            theirs.append((name, value))
    query = urlencode(theirs)
    # Rebuilt by hand: urlunsplit would turn unix:///path into unix:/path.
    clean = f"{parts.scheme}://{parts.netloc}{parts.path}" + (f"?{query}" if query else "")
    host = parts.hostname or parts.path or "localhost"
    where = f"Redis server {parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")
    return clean, Options(**ours), where


def check_server(info: dict[str, Any], where: str) -> None:
    """Refuse a server that is too old or may evict keys (it would lose entries)."""
    version = str(info.get("redis_version", "0"))
    numbers = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
    if numbers < MIN_SERVER_VERSION:
        raise cf_error(
            CFReason.SERVER_UNSUITABLE,
            f"{where} runs Redis {version}; sharedq needs "
            f"{'.'.join(map(str, MIN_SERVER_VERSION))} or newer",
        )
    policy = info.get("maxmemory_policy", "noeviction")
    if policy != "noeviction":
        raise cf_error(
            CFReason.SERVER_UNSUITABLE,
            f"{where} has maxmemory-policy {policy}: it may evict structure keys; "
            "set maxmemory-policy noeviction",
        )


class RedisClient:
    """A checked redis-py client, shared by a facility and every connection it makes."""

    def __init__(self, client: redis.Redis, where: str, options: Options) -> None:
        self.redis = client
        self.where = where
        self.options = options
        self._local = threading.local()
        self._connections: weakref.WeakSet[AbstractConnection] = weakref.WeakSet()
        self._lock = threading.Lock()

    @classmethod
    def open(cls, url: str, **overrides: float) -> RedisClient:
        """Connect, authenticate and check the server; ``overrides`` beat the URL's options."""
        clean, options, where = split_url(url)
        options = Options(**{**options.__dict__, **overrides})
        try:
            client = redis.Redis.from_url(
                clean,
                retry=Retry(NoBackoff(), 0),
                socket_timeout=SOCKET_TIMEOUT,
                socket_connect_timeout=CONNECT_TIMEOUT,
                decode_responses=False,
                protocol=2,
            )
        except ValueError as exc:
            raise cf_error(CFReason.BAD_URL, f"bad Redis URL {url!r}: {exc}") from None
        self = cls(client, where, options)
        try:
            client.ping()
            info = dict(client.info("server"))
            check_server(info, where)
            info.update(client.info("memory"))
            check_server(info, where)
            self.load_library()
        except rx.RedisError as exc:
            client.close()
            raise translate(exc, where, connecting=True) from None
        except BaseException:
            client.close()
            raise
        return self

    def close(self) -> None:
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            connection.disconnect()  # type: ignore[no-untyped-call]
        self.redis.close()

    def _connection(self) -> AbstractConnection:
        """This thread's connection (dropped with the thread's locals when it ends)."""
        pool = self.redis.connection_pool
        connection: AbstractConnection = pool.connection_class(**pool.connection_kwargs)
        self._local.connection = connection
        with self._lock:
            self._connections.add(connection)
        return connection

    def _execute(self, *args: Any) -> Any:
        try:
            connection = self._local.connection
        except AttributeError:
            connection = self._connection()
        connection.send_packed_command([pack_command(args)], False)
        return connection.read_response()

    # -- requests ---------------------------------------------------------------------

    def run(self, function: Function, key: str, args: list[Any]) -> Any:
        """Call a request's function; ``args[0]`` is its header (``codec.*_header``)."""
        try:
            connection = self._local.connection
        except AttributeError:
            connection = self._connection()
        try:
            connection.send_packed_command(
                [pack_command(("FCALL", function.fcall, 1, key, *args))], False
            )
            return connection.read_response()
        except rx.RedisError as exc:
            return self._recover(exc, function, key, args)

    def command(self, *args: Any) -> Any:
        """Run a plain command that changes nothing, resending it after a dropped connection."""
        try:
            return self._execute(*args)
        except rx.RedisError as exc:
            return self._recover(exc, None, "", list(args))

    def block(self, key: str, seconds: float) -> None:
        """Wait up to ``seconds`` for an entry on stream ``key`` (it is not consumed)."""
        milliseconds = max(1, int(seconds * 1000))
        self.command("XREAD", "COUNT", 1, "BLOCK", milliseconds, "STREAMS", key, "0-0")

    def _recover(
        self, exc: rx.RedisError, function: Function | None, key: str, args: list[Any]
    ) -> Any:
        deadline: float | None = None
        delay = 0.01
        while True:
            if str(exc).startswith("Function not found"):
                self.load_library()
            elif is_transient(exc):
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self.options.retry_seconds
                elif now >= deadline:
                    raise translate(exc, self.where) from None
                if function is not None:
                    args[0] = codec.as_retry(args[0])
                time.sleep(delay)
                delay = min(delay * 2, 0.25)
            else:
                raise translate(exc, self.where) from None
            try:
                if function is None:
                    return self._execute(*args)
                return self._execute("FCALL", function.fcall, 1, key, *args)
            except rx.RedisError as again:
                exc = again

    def load_library(self) -> None:
        """Give the server our functions (a new or restarted server lacks them)."""
        try:
            self._execute("FUNCTION", "LOAD", scripts.SOURCE)
        except rx.ResponseError as exc:
            if "already exists" not in str(exc):
                raise
