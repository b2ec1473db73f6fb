"""The Redis library's own checks (``CHECKS`` in ``common.lua``), on for these tests.

The packed counters and list controls a request writes are kept by the library under
their bytes and taken by the next request that reads those bytes (``PACKED``): sound
only while every request packs a table as its last change to it, which nothing in the
library enforces.  The checking library (``scripts.checking_source()``, the same
library with its checks on) repacks every table it takes and fails the request, before
any write, when the table no longer packs to its bytes.  Here the whole conformance
suite, its stateful check included, runs on a private server holding that library;
and a function that breaks the rule on purpose shows that the check catches it, and
that without the check the stale table goes unnoticed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from sharedq.cf import CFError, CouplingFacility, StructureParams
from sharedq.cf.redis import RedisFacility, keys, scripts
from sharedq.testing.conformance import CHECKS, FacilityFactory, check_list_structure
from sharedq.testing.redis_server import RedisServer

#: A throwaway function, appended to a library: it packs the counters, then changes
#: the table it packed (what the rule forbids), so the table kept under the bytes it
#: wrote says one seq more than they do.
STALE = b"""
redis.register_function{function_name = 'test_stale_counters', callback = function(KEYS, ARGV)
begin(KEYS, ARGV)
local c = counters(redis.call('HGET', M, 'c'))
redis.call('HSET', M, 'c', packed_counters(c))
c[SEQ] = c[SEQ] + 1
return 1
end}
"""
#: ARGV[1] of a function (begin() reads it): user 1, a token, no retry.
HEADER = b"\x01" + bytes(16) + b"0"


def _checking(make: Callable[..., RedisServer], source: bytes) -> RedisServer:
    server = make()
    server.command("FUNCTION", "LOAD", source)
    return server


@pytest.fixture
def checking_server(redis_servers: Callable[..., RedisServer]) -> RedisServer:
    """A private server whose sharedq library is the checking one."""
    return _checking(redis_servers, scripts.checking_source())


def _facilities(server: RedisServer) -> FacilityFactory:
    @contextmanager
    def on_server() -> Iterator[CouplingFacility]:
        try:
            with RedisFacility.from_url(server.url) as facility:
                yield facility
        finally:
            server.flush()  # the data, not the functions

    return on_server


def test_the_checking_library_is_the_library_with_its_checks_on() -> None:
    checking = scripts.checking_source()
    assert checking.count(b"local CHECKS = true") == 1
    assert b"local CHECKS = true" not in scripts.SOURCE
    assert checking.replace(b"CHECKS = true", b"CHECKS = false") == scripts.SOURCE


def test_the_conformance_suite_passes_with_the_checks_on(checking_server: RedisServer) -> None:
    fast = [check for check in CHECKS if not check.slow]
    check_list_structure(_facilities(checking_server), checks=fast, fail_fast=True)
    listed = checking_server.command("FUNCTION", "LIST", "WITHCODE")
    assert isinstance(listed, list) and len(listed) == 1
    library = listed[0]
    assert library[b"library_name"].decode() == scripts.LIBRARY
    assert b"local CHECKS = true" in library[b"library_code"]


@pytest.mark.slow
def test_the_stateful_check_passes_with_the_checks_on(checking_server: RedisServer) -> None:
    stateful = [check for check in CHECKS if check.slow]
    assert stateful
    check_list_structure(_facilities(checking_server), checks=stateful, fail_fast=True)


@pytest.mark.parametrize("checks", [True, False], ids=["checks on", "checks off"])
def test_a_table_changed_after_its_pack_fails_the_next_request_only_with_the_checks_on(
    redis_servers: Callable[..., RedisServer], checks: bool
) -> None:
    source = scripts.checking_source() if checks else scripts.SOURCE
    server = _checking(redis_servers, source + STALE)
    with RedisFacility.from_url(server.url) as facility:
        facility.create(StructureParams.for_capacity("QSGC", list_count=2, entries=9, elements=9))
        struct = facility.connect("QSGC", "QM1")
        before = struct.statistics().seq
        server.command("FCALL", "test_stale_counters", 1, keys.meta_key("QSGC"), HEADER)
        if checks:
            with pytest.raises(CFError, match="sharedq check: the counters kept under"):
                struct.write(0, bytes(16), b"x")
            assert list(struct.scan(0)) == []
            assert struct.write(0, bytes(16), b"x").seq == before + 1
        else:
            # The stale table goes unnoticed: the write takes a seq one too far.
            assert struct.write(0, bytes(16), b"x").seq == before + 2
