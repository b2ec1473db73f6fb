"""The list controls memo (``MEMO`` in ``common.lua``) and what guards it.

A list's controls are packed once per (bytes before, elements) and the bytes kept:
sound only while every line that changes a list's monitors, limit or authority also
clears the table's ``LIST_BYTES``.  The checking library (``scripts.checking_source()``)
packs every table anyway and fails the request when the memo says other bytes; the
conformance suite runs on it in ``test_lua_checks.py``.  Here a function that breaks
the rule on purpose shows that the check catches it and that, without the check, the
memo's stale bytes would be written; and the requests that do change those controls
are seen to store them.
"""

from __future__ import annotations

import struct as pystruct
from collections.abc import Callable

import pytest
from redis.exceptions import ResponseError

from sharedq.cf import CFError, StructureParams
from sharedq.cf.redis import RedisFacility, keys, scripts
from sharedq.cf.types import ById
from sharedq.testing.redis_server import RedisServer

#: A throwaway function, appended to a library: it adds one element to list 0 and one
#: to its authority, and leaves the table's LIST_BYTES (what the rule forbids).
STALE = b"""
redis.register_function{function_name = 'test_stale_controls', callback = function(KEYS, ARGV)
begin(KEYS, ARGV)
local l = controls(redis.call('HGET', M, 'L0'))
l[LIST_ELEMENTS], l[LIST_AUTHORITY] = l[LIST_ELEMENTS] + 1, l[LIST_AUTHORITY] + 1
return packed_controls(l)
end}
"""
#: ARGV[1] of a function (begin() reads it): user 1, a token, no retry.
HEADER = b"\x01" + bytes(16) + b"0"


def _controls(elements: int, monitors: int, limit: int, authority: int) -> bytes:
    return pystruct.pack(">QQQQ", elements, monitors, limit, authority)


@pytest.mark.parametrize("checks", [True, False], ids=["checks on", "checks off"])
def test_a_controls_change_left_out_of_list_bytes_is_caught_only_with_the_checks_on(
    redis_servers: Callable[..., RedisServer], checks: bool
) -> None:
    source = scripts.checking_source() if checks else scripts.SOURCE
    server = redis_servers()
    server.command("FUNCTION", "LOAD", source + STALE)
    with RedisFacility.from_url(server.url) as facility:
        facility.create(StructureParams.for_capacity("QSGM", list_count=2, entries=9, elements=9))
        struct = facility.connect("QSGM", "QM1")
        # List 0 goes from no elements to one and back: the memo knows both ways.
        written = struct.write(0, bytes(16), b"x")
        struct.delete(ById(written.entry.entry_id))
        call = ("FCALL", "test_stale_controls", 1, keys.meta_key("QSGM"), HEADER)
        if checks:
            with pytest.raises(ResponseError, match="sharedq check: the list controls memo"):
                server.command(*call)
        else:
            # The memo's bytes, for the elements alone: the authority's change is lost.
            assert server.command(*call) == _controls(1, 0, 0, 0)


def test_changed_limits_and_authorities_are_stored_past_the_memo(
    redis_servers: Callable[..., RedisServer],
) -> None:
    """Updates that leave a list's elements as they are make the memo know its bytes
    for those elements; a change of its limit or authority right after must not take
    them (each such change clears the table's bytes): each is read back as set."""
    server = redis_servers()
    server.command("FUNCTION", "LOAD", scripts.checking_source())
    with RedisFacility.from_url(server.url) as facility:
        facility.create(StructureParams.for_capacity("QSGN", list_count=2, entries=9, elements=9))
        struct = facility.connect("QSGN", "QM1")
        kept = ById(struct.write(0, bytes(16), b"x").entry.entry_id)
        authority = 0
        for round_ in range(3):
            struct.update(kept, adjunct=bytes([round_]))
            struct.set_list_controls(0, limit=5 + round_, increment_authority=True)
            authority += 1
            info = struct.list_info(0)
            assert (info.limit, info.authority, info.elements) == (5 + round_, authority, 1)
            struct.update(kept, adjunct=bytes([round_]))
            struct.update(kept, increment_authority=True)
            authority += 1
            assert struct.list_info(0).authority == authority
            with pytest.raises(CFError, match="authority"):
                struct.update(kept, expect_authority=authority - 1)
            written = struct.write(0, bytes(16), b"y")
            struct.delete(ById(written.entry.entry_id), expect_authority=authority)
