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

That holds only on the same server process.  A server that restarted may have come
back from an older snapshot (its structures' seqs gone back, acknowledged changes
missing, old users' tokens still valid), and a promoted replica may lack the last
changes; a request resent there would be applied to a structure its user no longer
knows.  So every socket, when it connects, asks the server its ``run_id`` and compares
it with the one its *epoch* knows for that address (``Epoch`` below): a user connection
is bound to the epoch it was made in, sends only over that epoch's sockets, and so
never reaches a server that restarted or took over after it was made; it gets
``STRUCTURE_LOST`` instead, for good.  The check costs nothing per request: only a new
socket asks (``INFO server``, once), and what a lost connection does instead of a
request is decided when the change is seen.
"""

from __future__ import annotations

import contextlib
import math
import re
import socket
import threading
import weakref
from dataclasses import dataclass
from functools import partial
from typing import Any, NoReturn, Protocol, cast
from urllib.parse import parse_qsl, urlencode, urlsplit

import redis
from redis import exceptions as rx
from redis._parsers.helpers import parse_info
from redis.backoff import NoBackoff
from redis.crc import REDIS_CLUSTER_HASH_SLOTS
from redis.retry import Retry

from sharedq.cf.errors import CFError, CFReason, cf_error
from sharedq.cf.redis import codec, scripts
from sharedq.cf.redis.errors import ServerChanged, is_transient, structure_lost, translate
from sharedq.cf.redis.nodes import (
    Address,
    ClusterNodes,
    Connection,
    Nodes,
    call,
    pack_command,
)
from sharedq.cf.redis.scripts import Function
from sharedq.cf.urls import redact_url, scrub
from sharedq.clock import Backoff

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

#: Server changes (restarts, failovers) one facility request follows before giving up.
MAX_SERVER_CHANGES = 8
#: What a new socket asks its server, for its run id.
_INFO_SERVER = pack_command(("INFO", "server"))

#: Arguments of ours in a facility URL's query; the rest go to redis-py.
_OUR_OPTIONS = {"lease": "lease_seconds", "retry": "retry_seconds"}
#: The longest lease or retry time a URL may ask for, in seconds (a day): longer ones
#: are mistakes (a failed manager would hold its lists that long).
MAX_OPTION_SECONDS = 86_400.0
#: What a server says to a database number it does not have, or a cluster to any
#: but 0: the URL was wrong, not the server.
_NO_DATABASE = ("DB index is out of range", "SELECT is not allowed in cluster mode")


@dataclass(frozen=True)
class Options:
    """What a facility URL asks of sharedq itself (``?lease=S&retry=S``)."""

    lease_seconds: float = DEFAULT_LEASE_SECONDS
    retry_seconds: float = DEFAULT_RETRY_SECONDS


def split_url(url: str) -> tuple[str, Options, str]:
    """The URL for redis-py, our options, and a description without the password.

    Everything redis-py would read wrongly or silently is refused here, before any
    connection, as ``BAD_URL``: a port that is no number, 0 or above 65535, a broken
    or unbracketed IPv6 address, a database that is no number (redis-py would take
    database 0), a ``unix://`` URL without a socket path, an option of ours that is
    not a finite number in its range.  No message shows the password.
    """
    shown = redact_url(url)

    def bad(detail: str) -> CFError:
        # The detail may quote a part of a malformed URL, and so of its password.
        return cf_error(CFReason.BAD_URL, f"bad Redis URL {shown}: {scrub(detail, url)}")

    problem: str | None = None
    try:
        parts = urlsplit(url)
        port = parts.port
        hostname = parts.hostname
    except ValueError as exc:  # a port that is no number or out of range, a bad IPv6
        problem = str(exc)
    # Raised here, not in the handler: the parser's exception, which may quote a piece
    # of the password, must not be chained to ours (not even hidden, as by "from None").
    if problem is not None:
        hostport = url.partition("://")[2].split("/", 1)[0].rpartition("@")[2]
        if hostport.count(":") > 1 and "[" not in hostport:
            raise bad("an IPv6 address goes in brackets, as redis://[::1]:6379/0")
        raise bad(_without(problem, url))
    if hostname and ":" in hostname and "[" not in parts.netloc:
        raise bad("an IPv6 address goes in brackets, as redis://[::1]:6379/0")
    if port == 0:
        raise bad("port 0: give a port of 1..65535")
    ours: dict[str, float] = {}
    theirs = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in _OUR_OPTIONS:
            try:
                number = float(value)
            except ValueError:
                raise bad(f"{name}={value!r} must be a number of seconds") from None
            if not (math.isfinite(number) and 0 < number <= MAX_OPTION_SECONDS):
                raise bad(
                    f"{name}={value!r} must be seconds, above 0 and at most {MAX_OPTION_SECONDS:g}"
                )
            ours[_OUR_OPTIONS[name]] = number
        else:
            if name == "db" and not value.isdigit():
                raise bad(f"db={value!r}: a database is a number, 0 or more")
            theirs.append((name, value))
    if parts.scheme == "unix":
        if not parts.path:
            raise bad("a unix:// URL needs the socket's path, as unix:///run/redis.sock?db=0")
    elif parts.path not in ("", "/"):
        database = parts.path[1:]
        if not (database.isascii() and database.isdigit()):
            raise bad(
                f"database {database!r} after the host is not a number "
                f"(redis://host:port/DB with DB 0, 1, ...)"
            )
    query = urlencode(theirs)
    # Rebuilt by hand: urlunsplit would turn unix:///path into unix:/path.
    clean = f"{parts.scheme}://{parts.netloc}{parts.path}" + (f"?{query}" if query else "")
    host = hostname or parts.path or "localhost"
    if hostname and ":" in hostname:
        host = f"[{hostname}]"
    where = f"Redis server {parts.scheme}://{host}" + (f":{port}" if port else "")
    return clean, Options(**ours), where


def _without(text: str, url: str) -> str:
    """``text`` (an exception's, about ``url``) with the URL's secrets masked, and an
    unknown option named as one rather than as a Python ``TypeError``."""
    unknown = re.search(r"unexpected keyword argument '(\w+)'", text)
    if unknown is not None:
        text = f"unknown option {unknown.group(1)}= in the URL's query"
    return scrub(text, url)


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


def _run_id(reply: bytes) -> str:
    """The ``run_id`` line of ``INFO server`` (read as text: it may look like a number)."""
    for line in reply.decode().splitlines():
        if line.startswith("run_id:"):
            return line[7:].strip()
    raise rx.ResponseError("INFO server has no run_id")


try:  # redis-py's own hiredis parser; ``exchange`` reads through it when it is there
    from redis._parsers import hiredis as hiredis_parser
except ImportError:  # pragma: no cover - a redis-py that moved it: read_response only
    hiredis_parser = None  # type: ignore[assignment]
#: The hiredis reader's "no whole reply yet" (redis-py 5 used ``False``).
_NOT_ENOUGH_DATA = getattr(hiredis_parser, "NOT_ENOUGH_DATA", False)
_CLOSED = "Connection closed by server."


def exchange(connection: Any, packed: bytes) -> Any:
    """Send one packed request on ``connection`` and read its reply, as redis-py would.

    Sent by redis-py (which connects first if need be); the reply read from the same
    socket and hiredis reader, with the same errors (a timeout or a dropped socket
    disconnects and raises redis-py's ``TimeoutError`` or ``ConnectionError``, an error
    reply raises), without redis-py's layers around them, whose Python per reply cost
    about as much as a queue manager's on top.  A connection not read by hiredis over
    RESP2 is read by redis-py.

    Once connected, the socket, reader and buffer are kept on the connection (its
    *lane*, :func:`_lane`): a request then writes and reads them directly, without
    looking up redis-py's private attributes each time.  The lane holds while the
    connection's socket is the one it was made with (a reconnect makes a new socket,
    and with it a new reader) and redis-py's ``send_packed_command`` is its own (one
    replaced, as ``bench.harness.RoundTrips`` replaces it, is called instead).
    """
    try:
        sock, reader, buffer = connection.sharedq_lane
    except AttributeError:
        sock = None
    if (
        sock is None
        or sock is not connection._sock
        or type(connection).send_packed_command is not _SEND_PACKED
    ):
        # Not connected, reconnected, or redis-py's write replaced (as a benchmark
        # counting round trips replaces it): the lane is made again, or not used.
        lane = _lane(connection)
        if lane is None:
            connection.send_packed_command([packed], False)
            return read_reply(connection)
        sock, reader, buffer = lane
    try:
        sock.sendall(packed)
    except BaseException as exc:
        _send_failed(connection, exc)
    return _read(connection, sock, reader, buffer, True)


def _lane(connection: Any) -> tuple[Any, Any, Any] | None:
    """The connected socket, hiredis reader and buffer of ``connection``, kept on it;
    ``None`` if it is not connected yet, or not one :func:`exchange` reads directly (a
    redis-py that renamed a private attribute, RESP3, another parser, a connection
    class with its own ``send_packed_command``)."""
    sock = getattr(connection, "_sock", None)
    parser: Any = getattr(connection, "_parser", None)
    if (
        sock is None
        or _HIREDIS is None
        or type(parser) is not _HIREDIS
        or getattr(connection, "protocol", 3) in (3, "3")
        or getattr(type(connection), "send_packed_command", None) is not _SEND_PACKED
    ):
        return None
    reader = getattr(parser, "_reader", None)
    buffer = getattr(parser, "_buffer", None)
    if reader is None or buffer is None:
        return None
    lane = connection.sharedq_lane = (sock, reader, buffer)
    return lane


def _send_failed(connection: Any, exc: BaseException) -> NoReturn:
    """What redis-py's ``send_packed_command`` does when its write fails."""
    connection.disconnect()
    if isinstance(exc, socket.timeout):
        raise rx.TimeoutError("Timeout writing to socket") from None
    if isinstance(exc, OSError):
        errno, message = ("UNKNOWN", exc.args[0]) if len(exc.args) == 1 else exc.args[:2]
        raise rx.ConnectionError(f"Error {errno} while writing to socket. {message}.") from None
    raise exc


def read_reply(connection: Any) -> Any:
    """The next reply on ``connection``, read as :func:`exchange` reads it."""
    # redis-py's private attributes, each looked up with a default: a redis-py that
    # renamed one is read by its own read_response, as before.
    sock = getattr(connection, "_sock", None)
    parser: Any = getattr(connection, "_parser", None)
    if _HIREDIS is None or type(parser) is not _HIREDIS or connection.protocol in (3, "3"):
        return connection.read_response()
    reader = getattr(parser, "_reader", None)
    buffer = getattr(parser, "_buffer", None)
    if sock is None or reader is None or buffer is None:
        return connection.read_response()
    return _read(connection, sock, reader, buffer)


def _read(connection: Any, sock: Any, reader: Any, buffer: Any, sent: bool = False) -> Any:
    """The next reply, read from ``sock`` through hiredis' ``reader``.

    ``sent``: the caller has just sent its one request, so the reader holds no whole
    reply yet (every reply before was read as it came): read the socket first.
    """
    try:
        reply = _NOT_ENOUGH_DATA if sent else reader.gets()
        while reply is _NOT_ENOUGH_DATA:
            read = sock.recv_into(buffer)
            if not read:
                raise rx.ConnectionError(_CLOSED)
            reader.feed(buffer, 0, read)
            reply = reader.gets()
    except BaseException as exc:
        connection.disconnect()
        if isinstance(exc, socket.timeout):
            raise rx.TimeoutError(f"Timeout reading from {connection._host_error()}") from None
        if isinstance(exc, OSError):
            raise rx.ConnectionError(
                f"Error while reading from {connection._host_error()} : {exc.args}"
            ) from None
        raise
    if type(reply) is list:
        if reply and isinstance(reply[0], rx.ConnectionError):
            raise reply[0]
    elif isinstance(reply, _ERROR_REPLIES):
        raise reply
    return reply


#: The error replies hiredis hands back as values (raised by :func:`_read`).
_ERROR_REPLIES = (rx.ResponseError, rx.ConnectionError)
#: redis-py's own write of a packed request (a class that replaces it is not bypassed).
_SEND_PACKED: Any = getattr(redis.connection.AbstractConnection, "send_packed_command", None)
_HIREDIS: Any = getattr(hiredis_parser, "_HiredisParser", None)


#: ``$<length>\r\n`` of a bulk string, made once for the lengths most arguments have.
_BULK_HEADS = [b"$%d\r\n" % size for size in range(512)]
#: What :func:`pack_fcall` puts before a call's own arguments, by (function, key, count).
_FCALL_HEADS: dict[tuple[str, str, int], bytes] = {}
#: Kept heads before the table starts afresh (structures come and go; few at a time).
_FCALL_HEADS_KEPT = 1024


def pack_fcall(fcall: str, key: str, args: list[Any]) -> bytes:
    """``pack_command(("FCALL", fcall, 1, key, *args))``: the same bytes.

    The command's head (its length, ``FCALL``, the function, ``1`` and the key) is
    packed once per function, key and argument count, by ``pack_command`` itself; each
    ``bytes`` argument then adds its length line, itself and CRLF, without hiredis'
    ``sprintf`` per argument (about half a request's client instructions).  A call
    with any other argument type is packed by ``pack_command`` whole.
    """
    head = _FCALL_HEADS.get((fcall, key, len(args)))
    if head is None:
        head = _fcall_head(fcall, key, len(args))
    parts = [head]
    try:
        for arg in args:
            if type(arg) is not bytes:
                return pack_command(("FCALL", fcall, 1, key, *args))
            parts += (_BULK_HEADS[len(arg)], arg, b"\r\n")
    except IndexError:  # an argument of 512 bytes or more: its length formatted
        if any(type(arg) is not bytes for arg in args):
            return pack_command(("FCALL", fcall, 1, key, *args))
        return b"".join((head, *[b"$%d\r\n%b\r\n" % (len(arg), arg) for arg in args]))
    return b"".join(parts)


def _fcall_head(fcall: str, key: str, count: int) -> bytes:
    # pack_command's own bytes, with ``count`` empty arguments ($0, CRLF, CRLF) cut off.
    head = pack_command(("FCALL", fcall, 1, key, *([b""] * count)))[: -6 * count or None]
    if len(_FCALL_HEADS) >= _FCALL_HEADS_KEPT:
        _FCALL_HEADS.clear()
    _FCALL_HEADS[(fcall, key, count)] = head
    return head


def _node(address: Address) -> str:
    return "the server" if address is None else f"node {address[0]}:{address[1]}"


class Loser(Protocol):
    """A user connection bound to an epoch (``RedisListStructure``)."""

    def lose(self, why: str) -> None:
        """Fail every request from now on with ``STRUCTURE_LOST`` saying ``why``; never raises."""


class Epoch:
    """The servers as a client knew them for a while, and sockets that reach only those.

    ``identities`` holds the run id of the server at each address, learned by the first
    socket this epoch (or the one before it) made there.  Every socket of the epoch
    checks, when it connects, that its server still has that run id; one that finds
    another (a restart, or a failover that put another server at the address) records
    the change (``RedisClient._identify``) and fails with ``ServerChanged`` before
    anything is sent on it.  The change makes the epoch *lost* for that address
    (``lost``; on a cluster, a slot whose node went away and whose slot map then named
    another owner is lost too, ``lost_slots``); the user connections bound to the
    epoch there are told at once (``Loser.lose``), and the client goes on with a new
    epoch, which knows the new run id, for the facility's own requests and for the
    connections made from then on.

    A request sent before the change and recovering after it (``recover``) finds its
    epoch lost or its socket refusing the new server, whichever comes first, and so is
    never resent to the new server: the epoch of a request is that of its connection,
    fixed when the connection was made.
    """

    def __init__(
        self, client: RedisClient, identities: dict[Address, str], slots: list[Address] | None
    ) -> None:
        self.client = client
        self.identities = identities
        self.lost: dict[Address, str] = {}
        self.lost_slots: dict[int, str] = {}
        #: User connections bound to this epoch, and their structures' keys.
        self.users: weakref.WeakKeyDictionary[Loser, str] = weakref.WeakKeyDictionary()
        make = partial(client._connection, self)
        if slots is None:
            self.nodes: Nodes = Nodes(make)
        else:
            assert client.seed is not None
            self.nodes = ClusterNodes(make, client.seed, slots)

    def __repr__(self) -> str:
        return f"<Epoch {self.identities} lost={sorted(map(str, self.lost))}>"

    # -- a user connection's requests (facility requests go through RedisClient) -----

    def run(self, function: Function, key: str, args: list[Any]) -> Any:
        """Call a user's request function; ``args[0]`` is its header (``codec.*_header``)."""
        try:
            return exchange(self.nodes.connection(key), pack_fcall(function.fcall, key, args))
        except rx.RedisError as exc:
            return self.recover(exc, ("FCALL", function.fcall, 1, key), args, key, True)[0]

    def command(self, *args: Any, key: str) -> Any:
        """A user's plain command that changes nothing, on the server of ``key``."""
        try:
            return call(self.nodes.connection(key), *args)
        except rx.RedisError as exc:
            return self.recover(exc, args, [], key, True)[0]

    def block(self, key: str, seconds: float) -> None:
        """Wait up to ``seconds`` for an entry on stream ``key`` (it is not consumed).

        Never longer than half the socket timeout (a URL may set it short), so that a
        quiet stream is not mistaken for a dead server.
        """
        timeout = self.client.redis.connection_pool.connection_kwargs.get("socket_timeout")
        if timeout:
            seconds = min(seconds, timeout / 2)
        milliseconds = max(1, int(seconds * 1000))
        self.command("XREAD", "COUNT", 1, "BLOCK", milliseconds, "STREAMS", key, "0-0", key=key)

    def wait_for_event(
        self, stream: str, seconds: float, function: Function, key: str, args: list[Any]
    ) -> Any:
        """:meth:`block` on ``stream``, then :meth:`run`, sent together: the server runs
        the function as soon as the wait ends, without a round trip in between.

        The wait's own reply is read and dropped (an error reply included: the function
        then ran without the wait, as after a wait that ended early).  A failure is
        recovered as the function's, which is resent alone with the retry flag and so
        is never applied twice.
        """
        timeout = self.client.redis.connection_pool.connection_kwargs.get("socket_timeout")
        if timeout:
            seconds = min(seconds, timeout / 2)
        milliseconds = max(1, int(seconds * 1000))
        fcall = ("FCALL", function.fcall, 1, key)
        try:
            connection = self.nodes.connection(key)
            # One buffer, so one send: redis-py sends each item of a list on its own.
            connection.send_packed_command(
                [
                    pack_command(
                        ("XREAD", "COUNT", 1, "BLOCK", milliseconds, "STREAMS", stream, "0-0")
                    )
                    + pack_fcall(function.fcall, key, args)
                ],
                False,
            )
            with contextlib.suppress(rx.ResponseError):
                read_reply(connection)
            return read_reply(connection)
        except rx.RedisError as exc:
            return self.recover(exc, fcall, args, key, True)[0]

    def why_lost(self, key: str | None) -> str | None:
        """Why this epoch's connections to the structure of ``key`` are lost, if they are."""
        why = self.lost.get(self.nodes.address_of(key))
        if why is None and self.lost_slots:
            slot = self.nodes.slot_of(key)
            if slot is not None:
                why = self.lost_slots.get(slot)
        return why

    def recover(
        self,
        exc: rx.RedisError,
        command: tuple[Any, ...],
        args: list[Any],
        key: str | None,
        user: bool,
    ) -> tuple[Any, Epoch]:
        """Resend a request that failed for a reason worth resending; else raise ours.

        ``args`` are the request's own arguments, after ``command``: a function call's
        header gets the retry flag, so that a change is not applied twice.  A user's
        request (``user``) is never resent to a server that restarted or took over
        since its connection was made: it fails with ``STRUCTURE_LOST``.  A facility
        request goes on with the client's current epoch.  Returns the reply and the
        epoch that served it.
        """
        client = self.client
        epoch = self
        backoff: Backoff | None = None  # pauses from the first failure worth resending
        redirects = changes = 0
        went_away = False  # whether the server went away during this request
        while True:
            asking: Address = None
            if isinstance(exc, ServerChanged):
                changes += 1
                if user or changes > MAX_SERVER_CHANGES:
                    if key is None:
                        raise translate(exc, client.where) from None
                    raise structure_lost(key, epoch.why_lost(key) or exc.why) from None
                epoch = client.epoch
            elif isinstance(exc, rx.AskError) and redirects < 16:
                # MOVED: the slot has a new owner for good; ASK: for this request only.
                redirects += 1
                if isinstance(exc, rx.MovedError):
                    if user and went_away and key is not None:
                        # Its node went away and another serves the slot: a failover,
                        # which may have lost the last changes.
                        why = client._slot_taken_over(epoch, exc.slot_id, (exc.host, exc.port))
                        raise structure_lost(key, why) from None
                    if not user:
                        epoch = client.epoch
                    epoch.nodes.moved(exc.slot_id, exc.host, exc.port)
                else:
                    asking = (exc.host, exc.port)
            elif str(exc).startswith("Function not found"):
                # A server without our library; it may drop this connection too.
                try:
                    epoch.load_library(epoch.nodes.address_of(key))
                except rx.RedisError as again:
                    exc = again
                    continue
            elif is_transient(exc):
                went_away = True
                if backoff is None:
                    backoff = Backoff(
                        timeout_s=client.options.retry_seconds,
                        first_pause_s=0.01,
                        longest_pause_s=0.25,
                    )
                elif backoff.expired():
                    raise translate(exc, client.where) from None
                if command[0] == "FCALL":
                    args[0] = codec.as_retry(args[0])
                backoff.pause()
                epoch._refresh_quietly()
                if not user:
                    epoch = client.epoch
            else:
                raise translate(exc, client.where) from None
            if user and key is not None:
                lost = epoch.why_lost(key)
                if lost is not None:
                    raise structure_lost(key, lost) from None
            try:
                if asking is not None:
                    connection = epoch.nodes.connection_to(asking)
                    call(connection, "ASKING")
                else:
                    connection = epoch.nodes.connection(key)
                return call(connection, *command, *args), epoch
            except rx.RedisError as again:
                exc = again

    def load_library(self, address: Address = None) -> None:
        """Give a server our functions (a new or restarted server lacks them).

        Asked first whether it has them: ``FUNCTION LOAD`` is refused when the server
        is at ``maxmemory`` even for a library it has, and a facility must open then
        (to drain the queues, or to recover).
        """
        connection = self.nodes.connection_to(address)
        if call(connection, "FUNCTION", "LIST", "LIBRARYNAME", scripts.LIBRARY):
            return
        try:
            call(connection, "FUNCTION", "LOAD", scripts.SOURCE)
        except rx.ResponseError as exc:
            if "already exists" not in str(exc):
                raise

    def _refresh_quietly(self) -> None:
        # After a dropped connection a cluster may have failed over: learn its new map.
        try:
            slots = self.nodes.read_slots()
        except Exception:  # the next attempt reports what is wrong
            return
        known = self.nodes.slots
        if slots is not None and known is not None and slots != known:
            self.client._slots_changed(
                {
                    slot: now
                    for slot, (was, now) in enumerate(zip(known, slots, strict=True))
                    if was != now
                }
            )

    def _connected(self, address: Address, connection: Any) -> None:
        """A socket of this epoch connected (redis-py's ``redis_connect_func``).

        Authenticates and selects the database as redis-py would, then checks the
        server's identity; raises ``ServerChanged`` (the socket is then closed) if
        the server is not the one this epoch knows at ``address``.
        """
        handshake = getattr(connection, "on_connect_check_health", None)
        if handshake is not None:  # redis-py 6 and later: what it calls without our hook
            handshake(check_health=False)
        else:
            connection.on_connect()
        connection.send_packed_command([_INFO_SERVER], False)
        self.client._identify(self, address, _run_id(connection.read_response()))


class RedisClient:
    """A checked connection to a server or cluster, shared by a facility and its users.

    Requests go through the current ``epoch``; a user connection keeps the epoch it
    was made in (``serve`` says which served its ``ATTACH``).
    """

    def __init__(self, client: redis.Redis, where: str, options: Options, cluster: bool) -> None:
        self.redis = client
        self.where = where
        self.options = options
        pool = client.connection_pool
        self._connection_class = pool.connection_class
        self._kwargs = pool.connection_kwargs
        self.seed: Address = (self._kwargs["host"], self._kwargs["port"]) if cluster else None
        self._lock = threading.Lock()
        self._epochs: weakref.WeakSet[Epoch] = weakref.WeakSet()
        self.epoch = self._new_epoch(
            {}, [self.seed] * REDIS_CLUSTER_HASH_SLOTS if cluster else None
        )

    @classmethod
    def open(cls, url: str, **overrides: float) -> RedisClient:
        """Connect, authenticate and check the server; ``overrides`` beat the URL's options."""
        clean, options, where = split_url(url)
        options = Options(**{**options.__dict__, **overrides})
        problem: str | None = None
        try:
            client = redis.Redis.from_url(
                clean,
                retry=Retry(NoBackoff(), 0),
                socket_timeout=SOCKET_TIMEOUT,
                socket_connect_timeout=CONNECT_TIMEOUT,
                decode_responses=False,
                protocol=2,
            )
        except (ValueError, TypeError) as exc:  # an option redis-py does not take
            problem = _without(str(exc), url)
        if problem is not None:  # raised outside the handler, unchained (see split_url)
            raise cf_error(CFReason.BAD_URL, f"bad Redis URL {redact_url(url)}: {problem}")
        try:
            try:
                client.ping()
            except (TypeError, ValueError) as exc:  # an option the connection refuses
                problem = _without(str(exc), url)
            if problem is not None:
                raise cf_error(CFReason.BAD_URL, f"bad Redis URL {redact_url(url)}: {problem}")
            info = dict(client.info("server"))
            check_server(info, where)
            cluster = bool(client.info("cluster").get("cluster_enabled"))
            self = cls(client, where, options, cluster)
            self.nodes.refresh()
            for address in self.nodes.addresses():
                # Every primary must be suitable, and have our functions; the first
                # socket to each learns its identity (run id).
                connection = self.nodes.connection_to(address)
                info = _info(call(connection, "INFO", "server"))
                info.update(_info(call(connection, "INFO", "memory")))
                check_server(info, where if address is None else f"{where} (node {address})")
                self.load_library(address)
        except rx.RedisError as exc:
            client.close()
            if any(text in str(exc) for text in _NO_DATABASE):
                raise cf_error(
                    CFReason.BAD_URL,
                    f"bad Redis URL {redact_url(url)}: {where} has no such database ({exc})",
                ) from None
            raise translate(exc, where, connecting=True) from None
        except BaseException:
            client.close()
            raise
        return self

    @property
    def nodes(self) -> Nodes:
        """The servers as the current epoch knows them."""
        return self.epoch.nodes

    def close(self) -> None:
        with self._lock:
            epochs = list(self._epochs)
        for epoch in epochs:
            epoch.nodes.close()
        self.redis.close()

    # -- the facility's requests ---------------------------------------------------------

    def run(self, function: Function, key: str, args: list[Any]) -> Any:
        """Call a facility request's function (one no user connection makes)."""
        return self.serve(function, key, args)[0]

    def serve(self, function: Function, key: str, args: list[Any]) -> tuple[Any, Epoch]:
        """``run``, and the epoch whose sockets served the call."""
        epoch = self.epoch
        try:
            return exchange(
                epoch.nodes.connection(key), pack_fcall(function.fcall, key, args)
            ), epoch
        except rx.RedisError as exc:
            return epoch.recover(exc, ("FCALL", function.fcall, 1, key), args, key, False)

    def command(self, *args: Any, key: str | None = None) -> Any:
        """Run a plain command that changes nothing, on the server of ``key``.

        Resent after a dropped connection, like a request.
        """
        epoch = self.epoch
        try:
            return call(epoch.nodes.connection(key), *args)
        except rx.RedisError as exc:
            return epoch.recover(exc, args, [], key, False)[0]

    def on_node(self, address: Address, *args: Any) -> Any:
        """Run a command on one primary (``nodes.addresses()`` lists them)."""
        for _ in range(MAX_SERVER_CHANGES):
            try:
                return call(self.nodes.connection_to(address), *args)
            except ServerChanged:
                continue  # recorded: the current epoch knows the new server now
            except rx.RedisError as exc:
                raise translate(exc, self.where) from None
        raise cf_error(CFReason.STRUCTURE_LOST, f"{self.where} keeps changing servers")

    def load_library(self, address: Address = None) -> None:
        """Give a server our functions (a new or restarted server lacks them)."""
        self.epoch.load_library(address)

    # -- epochs ------------------------------------------------------------------------

    def bind(self, epoch: Epoch, user: Loser, key: str) -> None:
        """Bind a new user connection to the epoch that attached it."""
        with self._lock:
            epoch.users[user] = key
            why = epoch.why_lost(key)
        if why is not None:  # the server changed while it was being attached
            user.lose(why)

    def _new_epoch(self, identities: dict[Address, str], slots: list[Address] | None) -> Epoch:
        epoch = Epoch(self, identities, slots)
        self._epochs.add(epoch)
        return epoch

    def _connection(self, epoch: Epoch, address: Address) -> Connection:
        """A connection of ``epoch`` to ``address`` (it connects when first used)."""
        kwargs = {**self._kwargs, "redis_connect_func": partial(epoch._connected, address)}
        if address is not None:
            kwargs.update(host=address[0], port=address[1])
        return cast(Connection, self._connection_class(**kwargs))

    def _server(self, address: Address) -> str:
        return self.where if address is None else f"{self.where} ({_node(address)})"

    def _identify(self, epoch: Epoch, address: Address, run_id: str) -> None:
        """Check the run id a new socket of ``epoch`` found at ``address``.

        The first socket to an address records it.  A different one means that the
        server restarted or was replaced: every epoch that knew the old server is lost
        there and its user connections there are told, the current epoch is succeeded
        by one that knows the new server, and ``ServerChanged`` is raised if ``epoch``
        is one that knew the old server.
        """
        losers: list[tuple[Loser, str]] = []
        with self._lock:
            known = epoch.identities.get(address)
            if known is None:
                epoch.identities[address] = run_id
                return
            if known == run_id:
                return
            server = self._server(address)
            for other in list(self._epochs):
                old = other.identities.get(address)
                if old is None or old == run_id or address in other.lost:
                    continue
                other.lost[address] = (
                    f"{server} restarted (run id {old}, now {run_id}) or another server took "
                    "its place, so it may hold an older state than this connection left "
                    "(an older RDB snapshot or AOF, or a replica that lacked the last "
                    "changes); no request of this connection is sent to it. Check the "
                    "structure against its log before using it, then connect again"
                )
                losers += [
                    (user, other.lost[address])
                    for user, key in list(other.users.items())
                    if other.nodes.address_of(key) == address
                ]
            current = self.epoch
            if current.identities.get(address, run_id) != run_id:
                self.epoch = self._new_epoch(
                    {**current.identities, address: run_id}, current.nodes.slots
                )
            else:
                current.identities[address] = run_id
            why = epoch.lost[address]
        for user, reason in losers:
            user.lose(reason)
        raise ServerChanged(why)

    def _slots_changed(self, owners: dict[int, Address]) -> None:
        """Slots have new ``owners`` after a node went away: a failover, maybe.

        Each of those slots is lost to every epoch that follows another owner (its user
        connections there are told); the current epoch, if it is one, is succeeded by
        one that follows the new owners.
        """
        losers: list[tuple[Loser, str]] = []
        with self._lock:
            for epoch in list(self._epochs):
                slots = epoch.nodes.slots
                if slots is None:
                    continue
                changed = {
                    slot
                    for slot, owner in owners.items()
                    if slots[slot] != owner and slot not in epoch.lost_slots
                }
                for slot in changed:
                    epoch.lost_slots[slot] = self._taken_over(slots[slot], owners[slot])
                if changed:
                    for user, key in list(epoch.users.items()):
                        slot_of_user = epoch.nodes.slot_of(key)
                        if slot_of_user in changed:
                            losers.append((user, epoch.lost_slots[slot_of_user]))
            current = self.epoch.nodes.slots
            if current is not None and any(current[s] != o for s, o in owners.items()):
                new = list(current)
                for slot, owner in owners.items():
                    new[slot] = owner
                self.epoch = self._new_epoch(dict(self.epoch.identities), new)
        for user, why in losers:
            user.lose(why)

    def _slot_taken_over(self, epoch: Epoch, slot: int, owner: Address) -> str:
        """A user's request found its node gone, then ``owner`` serving its ``slot``."""
        slots = epoch.nodes.slots
        assert slots is not None
        was = slots[slot]
        self._slots_changed({slot: owner})
        return epoch.lost_slots.get(slot) or self._taken_over(was, owner)

    def _taken_over(self, was: Address, now: Address) -> str:
        return (
            f"{self._server(was)} went away and the structure's slot is now served by "
            f"{_node(now)} (a failover, which may have lost the last changes); "
            "no request of this connection is sent there. Check the structure against "
            "its log before using it, then connect again"
        )
