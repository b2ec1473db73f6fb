"""The server-side code: one Redis function per request, from ``lua/*.lua`` beside this.

Each request is exactly one function call (FCALL), because a function is the only unit
Redis runs atomically with logic in it.  The files are assembled into one function
library: the shared parts (``common``, ``counts``, ``release``, ``bulk``) first, defined
once when the library loads, then each request file as the body of a function that
starts by binding its keys and arguments (``begin`` in ``common.lua``).  The shared
parts' top level is one Lua function, which Lua 5.1 allows at most 200 local names:
``common.lua`` says how it keeps some free, and a test keeps at least 40 free.

A request file may open with a line ``-- flags: FLAG ...`` naming Redis function flags
(``FLAGS`` below collects them).  Two are used, both about a server at ``maxmemory``
(with ``maxmemory-policy noeviction``, which sharedq requires), where Redis refuses
every function without one of them before it starts, never halfway:

``no-writes``
    The function only reads (Redis enforces it): alive, holder, list_info, read, scan,
    snapshot_read, stats, users.

``allow-oom``
    The function writes but never grows the structure's memory beyond a small bound,
    so it must run when the server is out of memory: that is how consumers drain a
    full queue-sharing group and how managers keep their leases.  Flagged:

    * delete, bulk_delete: remove entries (record, data, list members).
    * bulk_commit: bulk_move's moves, then bulk_delete's deletes (one unit's commit of
      puts and gets): what those two may do, in one request; it only shrinks the
      structure or rewrites entries in place, so a unit that gets and replies can
      commit at ``maxmemory``.
    * move, bulk_move: a get (a move of the queue head), a commit of puts, a backout.
      A move rewrites the entry's record (with the small data it keeps, at the same
      length) and list member in place of the old ones and never writes entry data
      kept apart (``D``); it may add a secondary-key index member, at most one per
      entry.
    * take: a move (a get) and, if asked, the delete of the entry moved, or an EMC
      (monitor's bound), and the caller's events taken: what its three files do.
      take_many: that many takes of a head; the result it keeps for a resend holds
      the batch's records and, for takes that deleted data kept apart, that data (at
      most ``MAX_TAKE_MANY`` entries; data still in ``D`` is named, not copied),
      replaced by the thread's next request.
    * unlock: removes a lock-table entry (``lock.lua`` takes one, unflagged).
    * renew: extends the expiry of the caller's existing token key.
    * detach, user (cleanup_user, mark_failed): release a user's monitors, events,
      locks and results; mark_failed deletes a live user's token and queues one wake-up
      marker for it (none when the token was gone already).
    * unmonitor, events: free an EMC, take queued events.
    * snapshot_drop, destroy: free a snapshot's copy, a whole structure.
    * controls, alter: rewrite fixed-size fields of the meta hash (a list's controls,
      the structure's size); the first change of a list's controls adds its 32-byte
      field.

    What a flagged change may add besides: the result it keeps for a resend (one per
    client thread of a user, replacing that thread's previous one, so a get keeps one
    message's data per thread; dropped when the user goes); for a snapshot still being
    read, the first old record of each entry it changes (copy on write; a delete's
    data moves there from the structure; gone when the snapshot is dropped or
    expires); and monitor events for the empty/non-empty transitions it causes.  A
    non-empty event is queued at most once per monitor until taken.  Empty events are
    queued only for monitors that asked for them (the queue manager's never do); those
    are the one growth bounded only by their user taking its events, a few dozen
    bytes per transition, and a transition back to non-empty out of memory needs a
    move (a backout), since nothing can be written.

    * monitor: an EMC and its records, for a get that waits.  The structure counts
      EMCs against its own size (``StructureParams``), so they are bounded by it.
    * write_reserve: ``write`` (the same file) for the few entries the interface's
      ``reserve=True`` asks for: a unit of work's commit descriptors, one set per unit
      being committed and deleted when its commit ends, so that a unit of several
      gets can commit (and free their messages) at ``maxmemory``.
    * update_in_place: ``update`` (the same file) when the data is left as it is: the
      adjunct (at most 64 bytes), the version and the list's authority are rewritten in
      place of the old ones (a unit's status in its descriptor, as it commits).

    Not flagged, because they store new entries or new data, or create things:
    write, write_rekey, bulk_write (new entries), update with new data (may grow
    it), create (a structure), snapshot (copies every list), lock (a lock-table entry),
    attach (a user and its token).  At
    ``maxmemory`` they fail with ``STRUCTURE_FULL`` ("the Redis server is out of
    memory") and change nothing.

Never flag ``allow-oom`` on a function that can store new entries or data: Redis then
lets it grow memory past ``maxmemory`` without bound.

The library and function names carry a digest of the code, so that different sharedq
versions sharing a server each find their own.  A server that lacks the library (new,
restarted without persistence, or a cluster node added later) gets it from the client
on its "function not found" reply.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

#: Files defining what every function shares, in the order they are loaded.
SHARED = ("common", "counts", "release", "bulk")
_PREFIX = "@@PREFIX@@"
_FLAGS_LINE = "-- flags:"
#: The function flags a request file may declare (see the module's docstring).
KNOWN_FLAGS = frozenset({"no-writes", "allow-oom"})


@dataclass(frozen=True)
class Function:
    """A request's function: the file it comes from and its name on the server."""

    name: str
    fcall: str


def _text(name: str) -> str:
    return (resources.files("sharedq.cf.redis") / "lua" / f"{name}.lua").read_text("utf-8")


def flags_of(text: str) -> frozenset[str]:
    """The Redis function flags a request file's first line declares (``-- flags: ...``)."""
    first = text.partition("\n")[0]
    if not first.startswith(_FLAGS_LINE):
        return frozenset()
    flags = frozenset(first.removeprefix(_FLAGS_LINE).replace(",", " ").split())
    unknown = flags - KNOWN_FLAGS
    if unknown or not flags:
        raise ValueError(f"bad flags line {first!r}: known flags are {sorted(KNOWN_FLAGS)}")
    return flags


#: Functions made from another request's file, with flags of their own.
VARIANTS: dict[str, tuple[str, frozenset[str]]] = {
    "write_reserve": ("write", frozenset({"allow-oom"})),
    "update_in_place": ("update", frozenset({"allow-oom"})),
}


def _source_of(name: str) -> str:
    return _text(VARIANTS[name][0]) if name in VARIANTS else _text(name)


def _flags(name: str) -> frozenset[str]:
    return VARIANTS[name][1] if name in VARIANTS else flags_of(_text(name))


def _function(name: str) -> str:
    text = _source_of(name)
    flags = ", ".join(f"'{flag}'" for flag in sorted(_flags(name)))
    return (
        f"redis.register_function{{function_name = '{_PREFIX}_{name}', flags = {{{flags}}},\n"
        f"callback = function(KEYS, ARGV)\nbegin(KEYS, ARGV)\n{text}end}}\n"
    )


def build_library(requests: tuple[str, ...], prelude: str = "") -> tuple[str, bytes]:
    """The library's name and its source, for ``FUNCTION LOAD``.

    ``prelude``: Lua put before the shared files, at the library's top level (a test
    declares spare locals there to count the top-level names left: see ``common.lua``).
    """
    shared = [prelude, *map(_text, SHARED)] if prelude else list(map(_text, SHARED))
    code = "\n".join([*shared, *map(_function, requests)])
    digest = hashlib.sha1(code.encode("utf-8")).hexdigest()[:12]
    library = f"sharedq_{digest}"
    source = f"#!lua name={library}\n" + code.replace(_PREFIX, f"sq{digest}")
    return library, source.encode("utf-8")


REQUESTS = (
    "alive",
    "alter",
    "attach",
    "bulk_commit",
    "bulk_delete",
    "bulk_move",
    "bulk_write",
    "controls",
    "create",
    "delete",
    "destroy",
    "detach",
    "events",
    "holder",
    "list_info",
    "lock",
    "monitor",
    "move",
    "read",
    "renew",
    "scan",
    "snapshot",
    "snapshot_drop",
    "snapshot_read",
    "stats",
    "take",
    "take_many",
    "unlock",
    "unmonitor",
    "update",
    "user",
    "users",
    "write",
    "write_rekey",
    "write_reserve",
    "update_in_place",
)
LIBRARY, SOURCE = build_library(REQUESTS)
#: Each request's declared flags: what the server lets it do at ``maxmemory``.
FLAGS = {name: _flags(name) for name in REQUESTS}
_DIGEST = LIBRARY.removeprefix("sharedq_")
#: The line of ``common.lua`` that leaves the library's own checks off.
_CHECKS_OFF = b"local CHECKS = false"


def checking_source() -> bytes:
    """The library with its own checks on (``CHECKS`` in ``common.lua``), for tests.

    Same name and function names as ``SOURCE``: loaded onto a private server before a
    client comes, it is what that client's calls run.  Each check costs time on every
    request, so the library sharedq loads has them off.
    """
    if SOURCE.count(_CHECKS_OFF) != 1:
        raise AssertionError("common.lua must say once: local CHECKS = false")
    return SOURCE.replace(_CHECKS_OFF, b"local CHECKS = true")


def _fn(name: str) -> Function:
    assert name in REQUESTS, name
    return Function(name, f"sq{_DIGEST}_{name}")


ALIVE = _fn("alive")
ALTER = _fn("alter")
ATTACH = _fn("attach")
BULK_COMMIT = _fn("bulk_commit")
BULK_DELETE = _fn("bulk_delete")
BULK_MOVE = _fn("bulk_move")
BULK_WRITE = _fn("bulk_write")
CONTROLS = _fn("controls")
CREATE = _fn("create")
DELETE = _fn("delete")
DESTROY = _fn("destroy")
DETACH = _fn("detach")
EVENTS = _fn("events")
HOLDER = _fn("holder")
LIST_INFO = _fn("list_info")
LOCK = _fn("lock")
MONITOR = _fn("monitor")
MOVE = _fn("move")
READ = _fn("read")
RENEW = _fn("renew")
SCAN = _fn("scan")
SNAPSHOT = _fn("snapshot")
SNAPSHOT_DROP = _fn("snapshot_drop")
SNAPSHOT_READ = _fn("snapshot_read")
STATS = _fn("stats")
TAKE = _fn("take")
TAKE_MANY = _fn("take_many")
UNLOCK = _fn("unlock")
UNMONITOR = _fn("unmonitor")
UPDATE = _fn("update")
USER = _fn("user")
USERS = _fn("users")
WRITE = _fn("write")
WRITE_REKEY = _fn("write_rekey")
WRITE_RESERVE = _fn("write_reserve")
UPDATE_IN_PLACE = _fn("update_in_place")
