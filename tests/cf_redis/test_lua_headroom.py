"""Room for new top-level names in the Redis function library.

The library is one Lua chunk (``scripts.build_library``): the shared files' top level
is one Lua function, and Lua 5.1 lets a function hold at most 200 local variables at
once.  A library one local past that fails to load ("main function has more than 200
local variables"), and every request with it.  Here a real server loads the library
with spare locals declared before everything else (so that they are live wherever the
shared files' own are, inside their ``do ... end`` blocks included), and the most
spares it still loads is the headroom: at least ``HEADROOM`` must be left for the
names the next changes add.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from sharedq.cf.redis import scripts
from sharedq.testing.redis_server import RedisServer

#: The fewest top-level local names that must stay free.
HEADROOM = 40
#: Lua 5.1's bound on a function's local variables (LUAI_MAXVARS).
LUA_MAX_LOCALS = 200


def _loads(server: RedisServer, spare: int) -> bool:
    prelude = "".join(f"local spare_{i}\n" for i in range(spare))
    _, source = scripts.build_library(scripts.REQUESTS, prelude=prelude)
    try:
        server.command("FUNCTION", "LOAD", "REPLACE", source)
    except redis.ResponseError as exc:
        assert "more than 200 local variables" in str(exc), exc
        return False
    return True


def free_top_level_names(server: RedisServer) -> int:
    """The most spare top-level locals the library still loads with (a bisection)."""
    assert _loads(server, 0), "the library does not load as it is"
    low, high = 0, LUA_MAX_LOCALS + 1  # low loads, high does not
    while high - low > 1:
        middle = (low + high) // 2
        if _loads(server, middle):
            low = middle
        else:
            high = middle
    return low


@pytest.fixture
def server(redis_servers: Callable[..., RedisServer]) -> RedisServer:
    return redis_servers()


def test_the_library_leaves_room_for_new_top_level_names(server: RedisServer) -> None:
    free = free_top_level_names(server)
    assert free >= HEADROOM, (
        f"the library's top level has {free} local names left of Lua's 200; keep at"
        f" least {HEADROOM} (cold names in a table, helpers in do ... end blocks)"
    )


def test_the_probe_finds_the_bound(server: RedisServer) -> None:
    # The count is exact: one spare more than it says fails to load, for that reason.
    free = free_top_level_names(server)
    assert _loads(server, free)
    assert not _loads(server, free + 1)
