"""Helpers for tests of a Redis server at ``maxmemory`` (``maxmemory-policy noeviction``).

The tests give a private server a memory limit a little above what it uses, fill it
through sharedq until a change is refused for want of memory, and then set the limit
below what the server uses by a margin: every step that follows runs at ``maxmemory``
however much memory the steps before it freed, up to that margin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sharedq.cf import CFError, CFReason
from sharedq.testing.redis_server import RedisServer

#: What sharedq says when Redis refuses a change at maxmemory.
OUT_OF_MEMORY = "out of memory (maxmemory)"


def memory_info(server: RedisServer) -> dict[str, Any]:
    info = server.command("INFO", "memory")
    assert isinstance(info, dict)
    return info


def used_memory(server: RedisServer) -> int:
    return int(memory_info(server)["used_memory"])


def structure_bytes(server: RedisServer, name: str) -> int:
    """What the keys of structure ``name`` take on the server, counted exactly (the
    server's own figures also count client buffers, which come and go)."""
    found = server.command("KEYS", f"sq:{{{name}}}:*")
    assert isinstance(found, list)
    total = 0
    for key in found:
        usage = server.command("MEMORY", "USAGE", key, "SAMPLES", "0")
        assert isinstance(usage, int)
        total += usage
    return total


def set_maxmemory(server: RedisServer, limit: int) -> int:
    """Set the server's ``maxmemory`` (0: no limit); returns it."""
    server.command("CONFIG", "SET", "maxmemory", str(limit))
    return limit


def limit_above_use(server: RedisServer, headroom: int) -> int:
    """Let the server use ``headroom`` bytes more than it does now; returns the limit."""
    assert memory_info(server)["maxmemory_policy"] == "noeviction"
    return set_maxmemory(server, used_memory(server) + headroom)


def hold_out_of_memory(server: RedisServer, margin: int) -> int:
    """Set the limit ``margin`` bytes below what the server uses now: it stays out of
    memory until that much more is freed.  Returns the limit."""
    used = used_memory(server)
    assert used > margin
    return set_maxmemory(server, used - margin)


def is_out_of_memory_error(error: BaseException) -> bool:
    return (
        isinstance(error, CFError)
        and error.reason is CFReason.STRUCTURE_FULL
        and OUT_OF_MEMORY in str(error)
    )


def fill_until_refused(write: Callable[[int], object], *, most: int = 1_000_000) -> int:
    """Call ``write(n)`` for n = 0, 1, ... until it is refused because the server is out
    of memory; returns how many were accepted.  Any other error is raised."""
    for n in range(most):
        try:
            write(n)
        except Exception as error:
            if is_out_of_memory_error(error) or is_out_of_memory_error(error.__cause__ or error):
                return n
            raise
    raise AssertionError(f"{most} writes and the server never ran out of memory")
