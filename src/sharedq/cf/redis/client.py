"""One client per facility: opening it, checking the server, calling functions.

redis-py reads the URL and makes the connections (with hiredis); requests go over the
calling thread's own connection to the right server (``nodes.py``), without redis-py's
client-level bookkeeping per command, which would cost more than a function's run on
the server.

Requests are resent after a dropped connection for a bounded time, and only here:
redis-py's own retries are switched off, because it would resend a function call that
may already have changed the structure.  A resent request carries the retry flag, and
a function that sees it returns the result it recorded the first time, if there was a
first time (see ``record()`` in ``lua/common.lua``), so no change is applied twice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import parse_qsl, urlencode, urlsplit

import redis
from redis import exceptions as rx
from redis._parsers.helpers import parse_info
from redis.backoff import NoBackoff
from redis.retry import Retry

from sharedq.cf.errors import CFReason, cf_error
from sharedq.cf.redis import codec, scripts
from sharedq.cf.redis.errors import is_transient, translate
from sharedq.cf.redis.nodes import (
    Address,
    ClusterNodes,
    Connection,
    Nodes,
    call,
    pack_command,
)
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


def _info(reply: bytes) -> dict[str, Any]:
    parsed: dict[str, Any] = parse_info(reply.decode())  # type: ignore[no-untyped-call]
    return parsed


class RedisClient:
    """A checked connection to a server or cluster, shared by a facility and its users."""

    def __init__(self, client: redis.Redis, where: str, options: Options, cluster: bool) -> None:
        self.redis = client
        self.where = where
        self.options = options
        pool = client.connection_pool
        kwargs = pool.connection_kwargs

        def make(address: Address) -> Connection:
            if address is None:
                return cast(Connection, pool.connection_class(**kwargs))
            where = {"host": address[0], "port": address[1]}
            return cast(Connection, pool.connection_class(**{**kwargs, **where}))

        if cluster:
            self.nodes: Nodes = ClusterNodes(make, (kwargs["host"], kwargs["port"]))
        else:
            self.nodes = Nodes(make)

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
        try:
            client.ping()
            info = dict(client.info("server"))
            check_server(info, where)
            cluster = bool(client.info("cluster").get("cluster_enabled"))
            self = cls(client, where, options, cluster)
            self.nodes.refresh()
            for address in self.nodes.addresses():
                # Every primary must be suitable, and have our functions.
                connection = self.nodes.connection_to(address)
                info = _info(call(connection, "INFO", "server"))
                info.update(_info(call(connection, "INFO", "memory")))
                check_server(info, where if address is None else f"{where} (node {address})")
                self.load_library(address)
        except rx.RedisError as exc:
            client.close()
            raise translate(exc, where, connecting=True) from None
        except BaseException:
            client.close()
            raise
        return self

    def close(self) -> None:
        self.nodes.close()
        self.redis.close()

    # -- requests ---------------------------------------------------------------------

    def run(self, function: Function, key: str, args: list[Any]) -> Any:
        """Call a request's function; ``args[0]`` is its header (``codec.*_header``)."""
        connection = self.nodes.connection(key)
        try:
            connection.send_packed_command(
                [pack_command(("FCALL", function.fcall, 1, key, *args))], False
            )
            return connection.read_response()
        except rx.RedisError as exc:
            return self._recover(exc, ("FCALL", function.fcall, 1, key), args, key)

    def command(self, *args: Any, key: str | None = None) -> Any:
        """Run a plain command that changes nothing, on the server of ``key``.

        Resent after a dropped connection, like a request.
        """
        try:
            return call(self.nodes.connection(key), *args)
        except rx.RedisError as exc:
            return self._recover(exc, args, [], key)

    def on_node(self, address: Address, *args: Any) -> Any:
        """Run a command on one primary (``nodes.addresses()`` lists them)."""
        try:
            return call(self.nodes.connection_to(address), *args)
        except rx.RedisError as exc:
            raise translate(exc, self.where) from None

    def block(self, key: str, seconds: float) -> None:
        """Wait up to ``seconds`` for an entry on stream ``key`` (it is not consumed).

        Never longer than half the socket timeout (a URL may set it short), so that a
        quiet stream is not mistaken for a dead server.
        """
        timeout = self.redis.connection_pool.connection_kwargs.get("socket_timeout")
        if timeout:
            seconds = min(seconds, timeout / 2)
        milliseconds = max(1, int(seconds * 1000))
        self.command("XREAD", "COUNT", 1, "BLOCK", milliseconds, "STREAMS", key, "0-0", key=key)

    def _recover(
        self, exc: rx.RedisError, command: tuple[Any, ...], args: list[Any], key: str | None
    ) -> Any:
        """Resend a request that failed for a reason worth resending; else raise ours.

        ``args`` are the request's own arguments, after ``command``: a function call's
        header gets the retry flag, so that a change is not applied twice.
        """
        deadline: float | None = None
        delay = 0.01
        redirects = 0
        while True:
            asking: Address = None
            if isinstance(exc, rx.AskError) and redirects < 16:
                # MOVED: the slot has a new owner for good; ASK: for this request only.
                redirects += 1
                if isinstance(exc, rx.MovedError):
                    self.nodes.moved(exc.slot_id, exc.host, exc.port)
                else:
                    asking = (exc.host, exc.port)
            elif str(exc).startswith("Function not found"):
                # A restarted server; it may drop this connection too: judge that alike.
                try:
                    self.load_library(None if key is None else self._address_of(key))
                except rx.RedisError as again:
                    exc = again
                    continue
            elif is_transient(exc):
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self.options.retry_seconds
                elif now >= deadline:
                    raise translate(exc, self.where) from None
                if command[0] == "FCALL":
                    args[0] = codec.as_retry(args[0])
                time.sleep(delay)
                delay = min(delay * 2, 0.25)
                self._refresh_quietly()
            else:
                raise translate(exc, self.where) from None
            try:
                if asking is not None:
                    connection = self.nodes.connection_to(asking)
                    call(connection, "ASKING")
                else:
                    connection = self.nodes.connection(key)
                return call(connection, *command, *args)
            except rx.RedisError as again:
                exc = again

    def _address_of(self, key: str) -> Address:
        if isinstance(self.nodes, ClusterNodes):
            return self.nodes.address_of(key)
        return None

    def _refresh_quietly(self) -> None:
        # After a dropped connection a cluster may have failed over: learn its new map.
        try:
            self.nodes.refresh()
        except Exception:  # the next attempt reports what is wrong
            return

    def load_library(self, address: Address = None) -> None:
        """Give a server our functions (a new or restarted server lacks them)."""
        try:
            call(self.nodes.connection_to(address), "FUNCTION", "LOAD", scripts.SOURCE)
        except rx.ResponseError as exc:
            if "already exists" not in str(exc):
                raise
