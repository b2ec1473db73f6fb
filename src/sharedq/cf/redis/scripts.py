"""The server-side code: one Redis function per request, from ``lua/*.lua`` beside this.

Each request is exactly one function call (FCALL), because a function is the only unit
Redis runs atomically with logic in it.  The files are assembled into one function
library: the shared parts (``common``, ``counts``, ``release``, ``bulk``) first, defined
once when the library loads, then each request file as the body of a function that
starts by binding its keys and arguments (``begin`` in ``common.lua``).  A request file
whose header says ``-- flags: no-writes`` only reads: Redis runs it even when out of
memory, and refuses the others before they start, never halfway.

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


@dataclass(frozen=True)
class Function:
    """A request's function: the file it comes from and its name on the server."""

    name: str
    fcall: str


def _text(name: str) -> str:
    return (resources.files("sharedq.cf.redis") / "lua" / f"{name}.lua").read_text("utf-8")


def _function(name: str) -> str:
    text = _text(name)
    flags = "'no-writes'" if text.startswith("-- flags: no-writes\n") else ""
    return (
        f"redis.register_function{{function_name = '{_PREFIX}_{name}', flags = {{{flags}}},\n"
        f"callback = function(KEYS, ARGV)\nbegin(KEYS, ARGV)\n{text}end}}\n"
    )


def build_library(requests: tuple[str, ...]) -> tuple[str, bytes]:
    """The library's name and its source, for ``FUNCTION LOAD``."""
    code = "\n".join([*map(_text, SHARED), *map(_function, requests)])
    digest = hashlib.sha1(code.encode("utf-8")).hexdigest()[:12]
    library = f"sharedq_{digest}"
    source = f"#!lua name={library}\n" + code.replace(_PREFIX, f"sq{digest}")
    return library, source.encode("utf-8")


REQUESTS = (
    "alive",
    "alter",
    "attach",
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
    "unmonitor",
    "update",
    "user",
    "users",
    "write",
    "write_rekey",
)
LIBRARY, SOURCE = build_library(REQUESTS)
_DIGEST = LIBRARY.removeprefix("sharedq_")


def _fn(name: str) -> Function:
    assert name in REQUESTS, name
    return Function(name, f"sq{_DIGEST}_{name}")


ALIVE = _fn("alive")
ALTER = _fn("alter")
ATTACH = _fn("attach")
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
UNMONITOR = _fn("unmonitor")
UPDATE = _fn("update")
USER = _fn("user")
USERS = _fn("users")
WRITE = _fn("write")
WRITE_REKEY = _fn("write_rekey")
