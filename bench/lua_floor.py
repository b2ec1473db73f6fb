"""The least server time a put -> get -> commit cycle can take as Redis functions.

A baseline for ``redis_server_us_per_cycle``: three throwaway functions that do only
what any layout needs if entries are found by id and kept in key order on a shared
server, and nothing a queueing system adds on top (no users or leases, no list
controls or limits, no monitors or events, no versions, locks or authority, no kept
results for a resent request, no checks before writes).  Per cycle:

* put: the structure's sequence (``HINCRBY``: ids and change order), the entry's record
  (``HSET``), its place in the list (``ZADD``, lexicographic like the real lists);
* get: the list's head (``ZRANGE BYLEX LIMIT 0 1``), taken out (``ZREM``) and kept on
  the unit's list (``ZADD``), its record read (``HGET``);
* commit: off the unit's list (``ZREM``), the record deleted (``HDEL``), the sequence
  moved (``HINCRBY``).

Ten commands in three ``FCALL``s.  Their time, measured with ``INFO commandstats``
in the same run as sharedq's, says how much of sharedq's server time is the price of
doing the cycle as Redis functions at all: a function call and each ``redis.call``
inside one cost several microseconds more than the same command sent alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

LIBRARY = "sharedq_bench_floor"
SOURCE = f"""#!lua name={LIBRARY}
redis.register_function('floor_put', function(keys, args)
  local seq = redis.call('HINCRBY', keys[1], 'seq', 1)
  local id = string.format('%012d', seq)
  redis.call('HSET', keys[2], id, args[1])
  redis.call('ZADD', keys[3], 0, args[2] .. id)
  return id
end)
redis.register_function('floor_get', function(keys, args)
  local head = redis.call('ZRANGE', keys[3], '-', '+', 'BYLEX', 'LIMIT', 0, 1)[1]
  if not head then return false end
  redis.call('ZREM', keys[3], head)
  local id = string.sub(head, -12)
  redis.call('ZADD', keys[4], 0, args[1] .. id)
  return {{id, redis.call('HGET', keys[2], id)}}
end)
redis.register_function('floor_commit', function(keys, args)
  redis.call('ZREM', keys[4], args[1] .. args[2])
  redis.call('HDEL', keys[2], args[2])
  redis.call('HINCRBY', keys[1], 'seq', 1)
  return 1
end)
"""
#: The structure's keys, one hash slot: sequence, records, the queue's list, the unit's.
KEYS = tuple(f"sharedq:bench:{{floor}}:{name}" for name in ("m", "e", "l0", "l1"))
#: A 16-byte entry key and 8-byte ordinal, the shape of the real lists' members.
POSITION = b"\x09" + b"k" * 15 + b"\x80" + b"o" * 7
UNIT = b"\x01" + b"u" * 15 + b"\x80" + b"o" * 7


def cycler(public: Any, body: bytes, command: Callable[..., Any] | None = None) -> Any:
    """Load the functions on ``public`` (a redis-py client) and return ``run(n)``:
    ``n`` cycles of ``body``, each put, got and committed, sent through ``command``
    (``command("FCALL", ...)``; by default ``public.execute_command``).  Given the
    backend's own lean connection path, the floor's client does what sharedq's does."""
    public.function_load(SOURCE, replace=True)
    public.delete(*KEYS)
    send = command or public.execute_command

    def run(n: int) -> None:
        for _ in range(n):
            send("FCALL", "floor_put", 4, *KEYS, body, POSITION)
            entry_id = send("FCALL", "floor_get", 4, *KEYS, UNIT)[0]
            send("FCALL", "floor_commit", 4, *KEYS, UNIT, entry_id)

    return run


def drop(public: Any) -> None:
    """Remove the functions and the keys."""
    public.delete(*KEYS)
    public.function_delete(LIBRARY)
