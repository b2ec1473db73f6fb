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

The wait floor, a baseline for ``wait_p50_ratio_vs_brpop`` (``waiter``): the least a
get already waiting for a message can do as Redis functions with notification, the way
sharedq's Redis backend waits (an event queued in a stream of the getter's, a blocking
read of the stream and the take sent together), and nothing more:

* put with notify (``floor_put_notify``): the put above, and when the list has just
  gone from empty to non-empty (``ZCARD`` is 1), an event for the getter (``XADD`` to its
  stream);
* the getter's one request per message: ``XREAD BLOCK`` on its stream (it takes
  nothing) and ``floor_take`` in one write, the server running the function as soon
  as the read returns; ``floor_take`` takes the events (``XRANGE``, ``DEL``) and the
  list's head out of syncpoint (``ZRANGE BYLEX LIMIT 0 1``, ``ZREM``, ``HGET``, ``HDEL``,
  ``HINCRBY``), and the client reads both replies.

No monitors or their registration, users, leases, kept results, checks, or our client
layers: a packed request that never changes, the put sent like ``LPUSH`` in the
baseline, the getter's replies read as the backend reads them.  Its latency, put to
the getter holding the message, measured with the same harness and in turns with
sharedq's and ``BRPOP``'s, says how close to ``BRPOP`` any Lua layout's waiting get
can come on this machine: within ``1.3`` (the target) or not.
"""

from __future__ import annotations

import contextlib
import time
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
redis.register_function('floor_put_notify', function(keys, args)
  local seq = redis.call('HINCRBY', keys[1], 'seq', 1)
  local id = string.format('%012d', seq)
  redis.call('HSET', keys[2], id, args[1])
  redis.call('ZADD', keys[3], 0, args[2] .. id)
  if redis.call('ZCARD', keys[3]) == 1 then
    redis.call('XADD', keys[5], '*', 'e', id)
  end
  return id
end)
redis.register_function('floor_take', function(keys, args)
  local items = redis.call('XRANGE', keys[5], '-', '+')
  local events = {{}}
  if #items > 0 then
    for i, item in ipairs(items) do events[i] = item[2][2] end
    redis.call('DEL', keys[5])
  end
  local head = redis.call('ZRANGE', keys[3], '-', '+', 'BYLEX', 'LIMIT', 0, 1)[1]
  if not head then return {{events, false}} end
  redis.call('ZREM', keys[3], head)
  local id = string.sub(head, -12)
  local data = redis.call('HGET', keys[2], id)
  redis.call('HDEL', keys[2], id)
  redis.call('HINCRBY', keys[1], 'seq', 1)
  return {{events, id, data}}
end)
"""
#: The structure's keys, one hash slot: sequence, records, the queue's list, the unit's.
KEYS = tuple(f"sharedq:bench:{{floor}}:{name}" for name in ("m", "e", "l0", "l1"))
#: The same and the getter's event stream (the wait floor's fifth key).
WAIT_KEYS = (*KEYS, "sharedq:bench:{floor}:q")
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


def waiter(
    public: Any,
    body: bytes,
    command: Callable[..., Any],
    connection: Callable[[], Any],
) -> tuple[Callable[[], None], Callable[[list[float], int], None]]:
    """Load the functions on ``public`` and return ``(put, getter)`` for a waiting get.

    ``put()`` puts one message of ``body`` with ``floor_put_notify`` through ``command``
    (``command("FCALL", ...)``); ``getter(arrivals, n)`` takes ``n`` messages, appending
    ``perf_counter()`` as each arrives, the way sharedq's pump does: ``XREAD BLOCK`` on
    the event stream and ``floor_take`` in one write, both replies read, again and
    again.  ``connection()`` gives the calling thread's redis-py connection, written
    and read as the backend writes and reads it (``Epoch.wait_for_event``).
    """
    from redis.exceptions import ResponseError

    from sharedq.cf.redis.client import read_reply
    from sharedq.cf.redis.nodes import pack_command

    public.function_load(SOURCE, replace=True)
    public.delete(*WAIT_KEYS)
    stream = WAIT_KEYS[4]
    # The request never changes: packed once (the least a client can do per wait).
    request = pack_command(
        ("XREAD", "COUNT", 1, "BLOCK", WAIT_MS, "STREAMS", stream, "0-0")
    ) + pack_command(("FCALL", "floor_take", 5, *WAIT_KEYS))

    def put() -> None:
        command("FCALL", "floor_put_notify", 5, *WAIT_KEYS, body, POSITION)

    def getter(arrivals: list[float], n: int) -> None:
        link = connection()
        got = 0
        while got < n:
            link.send_packed_command([request], False)
            with contextlib.suppress(ResponseError):
                read_reply(link)
            if read_reply(link)[1]:
                arrivals.append(time.perf_counter())
                got += 1

    return put, getter


#: Milliseconds of one ``XREAD BLOCK`` (sharedq's longest, ``WAIT_SLICE``).
WAIT_MS = 2_000


def drop(public: Any) -> None:
    """Remove the functions and the keys."""
    public.delete(*WAIT_KEYS)
    public.function_delete(LIBRARY)
