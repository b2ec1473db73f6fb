"""The logging structure: a second copy of each writer's unsynced records, in Redis.

The seed's CQS does not wait for a disk per request (``seeds/002_*`` §2.13): the MVS
system logger puts each record in a *logging structure* in the coupling facility and
keeps a second copy in the writing system's memory (its data space); the log reaches
DASD later, at offload.  A record is safe against the loss of either copy alone, and
the seed says plainly that losing both at once loses the log stream.

``Durability.duplex(N)`` is that configuration here.  A commit returns once its
records are written to the segment (the operating system's page cache: the "data
space", which a process crash does not lose) *and* pushed to this structure, a sorted
set per writer in a Redis that should live on another machine (the facility).  The
writer syncs its segment every ``N`` ms and then trims what the sync made durable from
the set, so the set holds only the records a machine crash could cost.

Who reads the set back: a writer reopening after it stopped without closing, and a
reader (a peer recovering a structure) finding such a writer, when the machine it
ran on has booted since (:func:`this_boot` differs from the one its state file
recorded): then the page cache is gone and the records after the last sync are only
here.  Each writer's set carries an ``@open`` member from the moment it starts
pushing: a set without it is one the facility lost (a Redis restarted empty), and a
writer that finds it gone syncs to disk before it pushes again, so that ``@open``
present always means "every committed record not on disk is here".

Replicas.  A Redis replica is copied asynchronously: a failover to one that had not yet
received the last pushes would keep ``@open`` and lose them, with nothing to say so.
``Durability.duplex(N, replicas=R)`` makes each push wait (``WAIT R``, in the push's
own round trip) until ``R`` replicas hold it; a push that fewer acknowledge within
:data:`REPLICA_WAIT_MS` counts as a push that failed, and the commit syncs to disk.
A logging structure watched by Redis Sentinel is named by its sentinels and service,
``redis+sentinel://[:password@]host:port[,host:port...]/service[/db]``: every
connection asks the sentinels where the primary is, so after a failover the writers
follow the promoted replica by themselves (the pushes that failed meanwhile synced).
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from sharedq.cf.urls import redact_url, scrub
from sharedq.log.errors import LogReason, log_error

#: Where this machine's boot id is read (Linux); a test may point it at a file of its
#: own to play a machine that rebooted.
BOOT_ID_FILE = Path("/proc/sys/kernel/random/boot_id")
#: The member that says the writer's set is whole (see the module docstring).
OPEN_MEMBER = b"@open"
#: Seconds a request to the logging structure may take before it counts as down.
TIMEOUT_S = 2.0
#: Milliseconds a push waits for the replicas it asks for before it counts as failed.
REPLICA_WAIT_MS = 100
#: Query parameters of a Redis URL that carry credentials.
_SECRET_QUERY = frozenset({"username", "password"})
#: URL schemes redis-py opens, and the one of a logging structure Sentinel watches.
_SCHEMES = ("redis", "rediss", "unix")
SENTINEL = "redis+sentinel"


def sentinel_parts(url: str) -> tuple[list[tuple[str, int]], str, int, str | None, str | None]:
    """A ``redis+sentinel://`` URL's sentinels, service name, database, user name and
    password; ``BAD_CONFIG`` naming what is wrong."""
    rest = url.partition("://")[2]
    at = rest.rfind("@", 0, len(rest) if "/" not in rest else rest.index("/"))
    userinfo, rest = (rest[:at], rest[at + 1 :]) if at >= 0 else ("", rest)
    hosts, _, path = rest.partition("/")
    service, _, db = path.split("?")[0].partition("/")
    sentinels = []
    for item in hosts.split(","):
        host, colon, port = item.rpartition(":")
        if not colon or not host or not port.isdigit():
            raise log_error(
                LogReason.BAD_CONFIG,
                f"the logging structure's sentinels are host:port[,host:port...], not "
                f"{item!r} in {redact_url(url)!r}",
            )
        sentinels.append((host, int(port)))
    if not service or (db and not db.isdigit()):
        raise log_error(
            LogReason.BAD_CONFIG,
            f"a Sentinel logging structure is redis+sentinel://host:port/service[/db], "
            f"not {redact_url(url)!r}",
        )
    user, colon, password = userinfo.partition(":")
    return sentinels, service, int(db or 0), user or None, password if colon else None


def this_boot() -> str:
    """This machine's name and boot id: what a page cache's life is tied to.

    ``""`` where the boot id cannot be read: then no page cache is trusted.
    """
    try:
        boot = BOOT_ID_FILE.read_text().strip()
    except OSError:
        return ""
    return f"{socket.gethostname()}/{boot}" if boot else ""


def check_url(url: object) -> str:
    """``BAD_CONFIG`` unless ``url`` is a Redis URL (``redis://``, ``rediss://``, ``unix://``)
    or names a Sentinel-watched one (``redis+sentinel://``, :func:`sentinel_parts`)."""
    if isinstance(url, str) and url.startswith(SENTINEL + "://"):
        sentinel_parts(url)
        return url
    if not isinstance(url, str) or urlsplit(url).scheme not in _SCHEMES:
        raise log_error(
            LogReason.BAD_CONFIG,
            f"the logging structure is a Redis URL (redis://host:port/db, or "
            f"redis+sentinel://host:port/service), not {redact_url(url)!r}",
        )
    return url


def on_this_machine(url: str) -> bool:
    """Whether the Redis of ``url`` runs on this machine: a Unix socket, or a host whose
    address this machine can bind (a loopback address, or one of its own).

    A logging structure there shares the writers' failure: the seed's single point of
    failure, where its logger writes staging data sets instead.  (A Redis in another
    container or virtual machine on the same physical machine is not seen.)
    """
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return True
    try:
        found = socket.getaddrinfo(parts.hostname or "localhost", None, type=socket.SOCK_DGRAM)
    except OSError:
        return False  # unresolvable here: the first push says so
    for family, kind, proto, _, address in found:
        with socket.socket(family, kind, proto) as probe:
            try:
                probe.bind((address[0], 0))
            except OSError:
                continue
            return True
    return False


def without_credentials(url: str) -> str:
    """``url`` without its user information nor a ``username=``/``password=`` in its
    query: what the ``STREAM`` file may record (every process of the stream reads that
    file; a password does not belong in it)."""
    head, sep, rest = url.partition("://")
    authority_end = len(rest) if "/" not in rest else rest.index("/")
    at = rest.rfind("@", 0, authority_end)
    bare = url if at < 0 else f"{head}{sep}{rest[at + 1 :]}"
    base, question, query = bare.partition("?")
    kept = [(k, v) for k, v in parse_qsl(query) if k not in _SECRET_QUERY]
    return f"{base}?{urlencode(kept)}" if question and kept else base


class LoggingUnavailable(Exception):
    """The logging structure did not answer (its Redis is down or unreachable), or
    fewer of its replicas than asked acknowledged a push."""


class LoggingStructure:
    """One log stream's logging structure: a sorted set per writer, by lsn.

    Args:
        url: the Redis that holds it (ideally on another machine than the writers).
        identity: the stream's identity, so that two streams never share a key.
    """

    def __init__(self, url: str, identity: str) -> None:
        #: The URL as messages show it (a password masked).
        self.url = redact_url(check_url(url))
        self._secret_url = url
        import redis  # here: a stream without a logging structure never loads redis-py

        self._prefix = f"sharedq:logging:{identity}:"
        self._failed: type[Exception] = redis.RedisError
        #: The sentinels' client and service, for a logging structure Sentinel watches.
        self._sentinel: Any = None
        self._service = ""
        if url.startswith(SENTINEL + "://"):
            from redis.sentinel import Sentinel

            sentinels, self._service, db, user, password = sentinel_parts(url)
            timeouts = {"socket_timeout": TIMEOUT_S, "socket_connect_timeout": TIMEOUT_S}
            self._sentinel = Sentinel(sentinels, sentinel_kwargs=timeouts, **timeouts)  # type: ignore[no-untyped-call]
            self._client = self._sentinel.master_for(
                self._service, db=db, username=user, password=password, **timeouts
            )
        else:
            self._client = redis.Redis.from_url(
                url, socket_timeout=TIMEOUT_S, socket_connect_timeout=TIMEOUT_S
            )
        # Pushes, one per commit, go on a connection of their own, packed and read
        # without the client's pool and reply callbacks (half a push's CPU).
        self._connection: Any = self._client.connection_pool.make_connection()
        self._pushing = threading.Lock()

    def __repr__(self) -> str:
        return f"<LoggingStructure {self.url!r} {self._prefix!r}>"

    def _unavailable(self, exc: Exception) -> LoggingUnavailable:
        return LoggingUnavailable(f"{self.url}: {scrub(str(exc), self._secret_url)}")

    def key(self, writer: str) -> str:
        return self._prefix + writer

    def on_this_machine(self) -> bool:
        """Whether the Redis holding the sets runs on this machine (:func:`on_this_machine`;
        under Sentinel, the primary the sentinels name now)."""
        if self._sentinel is None:
            return on_this_machine(self._secret_url)
        try:
            host, port = self._sentinel.discover_master(self._service)
        except self._failed:
            return False  # the first push says what is wrong
        return on_this_machine(f"redis://{host}:{port}/0")

    def open(self, writer: str) -> None:
        """Start the writer's set afresh: everything it wrote before is on disk."""
        key = self.key(writer)
        try:
            with self._client.pipeline(transaction=True) as pipe:
                pipe.delete(key)
                pipe.zadd(key, {OPEN_MEMBER: 0})
                pipe.execute()
        except self._failed as exc:
            raise self._unavailable(exc) from exc

    def eviction(self) -> str | None:
        """The Redis's ``maxmemory-policy`` when it may evict the writers' sets (any
        policy but ``noeviction``; a set evicted is a set lost); ``None`` when it may not,
        or when ``CONFIG`` is not allowed to this user (nothing to say then)."""
        try:
            policy = self._client.config_get("maxmemory-policy").get("maxmemory-policy")
        except self._failed:
            return None
        return None if policy in (None, "noeviction") else str(policy)

    def replicas(self) -> int | None:
        """How many replicas the Redis has connected now (``None``: it will not say)."""
        try:
            info = self._client.info("replication")
        except self._failed:
            return None
        count = info.get("connected_slaves")
        return count if isinstance(count, int) else None

    def push(self, writer: str, last_lsn: int, frames: bytes, *, replicas: int = 0) -> bool:
        """Add frames ending at ``last_lsn``; ``False`` if the set is no longer whole.

        One round trip of two commands: whether ``@open`` is there, and the batch.  A
        batch added to a set without ``@open`` (recreated by this very ``ZADD``) is
        never read back: a set without it is not whole.  With ``replicas``, a third
        command in the same round trip, ``WAIT``: :class:`LoggingUnavailable` when
        fewer replicas than that hold the batch after :data:`REPLICA_WAIT_MS`.
        """
        key = self._prefix + writer
        with self._pushing:
            connection = self._connection
            try:
                if self._sentinel is not None:
                    # redis-py's send_packed_command connects a Sentinel-managed
                    # connection as a plain one (to localhost:6379), not to the primary
                    # the sentinels name: connect it first (nothing to do once open).
                    connection.connect()
                packed = connection.pack_command(
                    "ZSCORE", key, OPEN_MEMBER
                ) + connection.pack_command("ZADD", key, last_lsn, frames)
                if replicas:
                    packed += connection.pack_command("WAIT", replicas, REPLICA_WAIT_MS)
                connection.send_packed_command(packed, False)
                whole = connection.read_response()
                connection.read_response()
                acknowledged = connection.read_response() if replicas else 0
            except self._failed as exc:
                connection.disconnect()  # a reply may be left unread
                raise self._unavailable(exc) from exc
        if acknowledged < replicas:
            raise LoggingUnavailable(
                f"{self.url}: {acknowledged} of the {replicas} replica(s) asked for held a "
                f"push after {REPLICA_WAIT_MS} ms"
            )
        return whole is not None

    def trim(self, writer: str, through_lsn: int) -> None:
        """Drop the batches a sync of the segment made durable (``@open`` stays)."""
        try:
            self._client.zremrangebyscore(self.key(writer), 1, through_lsn)
        except self._failed as exc:
            raise self._unavailable(exc) from exc

    def held(self, writer: str) -> list[bytes] | None:
        """The writer's batches in lsn order, or ``None`` if its set is not whole."""
        key = self.key(writer)
        try:
            with self._client.pipeline(transaction=True) as pipe:
                pipe.zscore(key, OPEN_MEMBER)
                pipe.zrangebyscore(key, 1, "+inf")
                whole, batches = pipe.execute()
        except self._failed as exc:
            raise self._unavailable(exc) from exc
        return None if whole is None else list(batches)

    def drop(self, writer: str) -> None:
        """Forget the writer's set: it closed cleanly, everything is on disk."""
        try:
            self._client.delete(self.key(writer))
        except self._failed as exc:
            raise self._unavailable(exc) from exc

    def close(self) -> None:
        with self._pushing:
            self._connection.disconnect()
        self._client.close()


def boot_of(state: dict[str, object] | None) -> str:
    """The boot a writer's state file says it ran on (``""``: not recorded)."""
    return "" if state is None else str(state.get("boot", ""))


def needs_copy_back(state: dict[str, object] | None) -> bool:
    """Whether a writer's unsynced records may be only in the logging structure: it
    pushed instead of syncing, stopped without closing, and its machine has booted
    since (or is another machine, or no boot id could be read)."""
    if state is None or state.get("closed") or not state.get("duplex"):
        return False
    boot = boot_of(state)
    return not boot or boot != this_boot()


__all__ = [
    "BOOT_ID_FILE",
    "REPLICA_WAIT_MS",
    "SENTINEL",
    "LoggingStructure",
    "LoggingUnavailable",
    "check_url",
    "needs_copy_back",
    "on_this_machine",
    "sentinel_parts",
    "this_boot",
    "without_credentials",
]
