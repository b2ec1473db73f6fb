"""The server-side scripts, one per request, read from ``lua/*.lua`` beside this module.

Each request is exactly one script call, because a script is the only unit Redis runs
atomically with logic in it.  A script file starts with its shebang (``#!lua``, or
``#!lua flags=no-writes`` for those that only read: Redis then runs them when it is out
of memory and refuses the others before they start, never halfway), then an
``-- include: common, ...`` line naming the prelude files its text is built from.
Scripts are called by SHA (EVALSHA); a server that does not know one yet (a fresh or
restarted server) is given it by the client on its NOSCRIPT reply.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

_INCLUDE = "-- include:"


@dataclass(frozen=True)
class Script:
    """One request's script: its name, full source and SHA1 (what EVALSHA names)."""

    name: str
    source: bytes
    sha: str


def _text(name: str) -> str:
    return (resources.files("sharedq.cf.redis") / "lua" / f"{name}.lua").read_text("utf-8")


def build(name: str) -> Script:
    """The script ``name`` with its includes expanded after the shebang."""
    shebang, _, body = _text(name).partition("\n")
    if not shebang.startswith("#!lua"):
        raise ValueError(f"lua/{name}.lua must start with a #!lua shebang line")
    parts = [shebang]
    rest: list[str] = []
    for line in body.splitlines():
        if line.startswith(_INCLUDE):
            parts.extend(_text(part.strip()) for part in line[len(_INCLUDE) :].split(","))
        else:
            rest.append(line)
    source = ("\n".join([*parts, *rest]) + "\n").encode("utf-8")
    return Script(name, source, hashlib.sha1(source).hexdigest())


# Built at import: reading two dozen small files once per process.
ALIVE = build("alive")
ALTER = build("alter")
ATTACH = build("attach")
BULK_DELETE = build("bulk_delete")
BULK_MOVE = build("bulk_move")
CONTROLS = build("controls")
CREATE = build("create")
DELETE = build("delete")
DESTROY = build("destroy")
DETACH = build("detach")
EVENTS = build("events")
HOLDER = build("holder")
LIST_INFO = build("list_info")
LOCK = build("lock")
MONITOR = build("monitor")
MOVE = build("move")
READ = build("read")
RENEW = build("renew")
SCAN = build("scan")
STATS = build("stats")
UNMONITOR = build("unmonitor")
UPDATE = build("update")
USER = build("user")
USERS = build("users")
WRITE = build("write")

#: Every request script (a client loads them all when a server first lacks one).
ALL = (
    ALIVE,
    ALTER,
    ATTACH,
    BULK_DELETE,
    BULK_MOVE,
    CONTROLS,
    CREATE,
    DELETE,
    DESTROY,
    DETACH,
    EVENTS,
    HOLDER,
    LIST_INFO,
    LOCK,
    MONITOR,
    MOVE,
    READ,
    RENEW,
    SCAN,
    STATS,
    UNMONITOR,
    UPDATE,
    USER,
    USERS,
    WRITE,
)
