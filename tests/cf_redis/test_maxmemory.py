"""A Redis server at ``maxmemory``: what frees memory runs, what adds to it is refused.

Redis refuses a function before it starts when the server is out of memory, unless the
function is flagged ``no-writes`` or ``allow-oom`` (``scripts.py`` says which are and
why).  Each test fills a private server with a memory limit until a write is refused,
holds it out of memory (``maxmemory.hold_out_of_memory``), and checks each request
against it for real.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources

import pytest

from sharedq.cf import (
    BulkMove,
    BulkWrite,
    ById,
    Head,
    ListStructure,
    MonitorState,
    StructureParams,
    StructureStats,
    UserState,
)
from sharedq.cf.redis import RedisFacility, scripts
from sharedq.testing.redis_server import RedisServer
from tests.cf_redis.maxmemory import (
    fill_until_refused,
    hold_out_of_memory,
    is_out_of_memory_error,
    limit_above_use,
    set_maxmemory,
    structure_bytes,
)

ServerFactory = Callable[..., RedisServer]

#: Bytes of data per entry filling the server (16 elements of 256 bytes).
BODY = 4000
#: How far below what the server uses the limit is held: more than the steps of a test
#: free before they have checked what they check out of memory.
MARGIN = 256 << 10
#: The lease of the user whose renewals are tested, in seconds.
LEASE = 1.0

#: What the scripts declare, as ``scripts.py`` documents it.
ALLOW_OOM = {
    "alter", "bulk_commit", "bulk_delete", "bulk_move", "controls", "delete", "destroy", "detach",
    "events", "monitor", "move", "renew", "snapshot_drop", "take", "take_many", "unlock",
    "unmonitor", "user", "write_reserve", "update_in_place",
}  # fmt: skip
NO_WRITES = {"alive", "holder", "list_info", "read", "scan", "snapshot_read", "stats", "users"}


def key(n: int) -> bytes:
    return b"\x04" + n.to_bytes(15, "big")


def params(name: str) -> StructureParams:
    # Room for far more than the server holds: Redis runs out first.
    return StructureParams.for_capacity(name, list_count=8, entries=100_000, elements=2_000_000)


@dataclass
class Full:
    """A structure filled until the server ran out of memory, and its users."""

    server: RedisServer
    facility: RedisFacility
    conn: ListStructure
    ids: list[bytes]


@pytest.fixture
def full(redis_servers: ServerFactory) -> Iterator[Full]:
    server = redis_servers()
    with RedisFacility.from_url(server.url) as facility:
        facility.create(params("QSG1"))
        conn = facility.connect("QSG1", "QM1")
        limit_above_use(server, 2 << 20)
        ids: list[bytes] = []

        def write(n: int) -> None:
            ids.append(conn.write(0, key(n), bytes([n % 251]) * BODY).entry.entry_id)

        assert fill_until_refused(write) == len(ids) > 100
        yield Full(server, facility, conn, ids)


def counts(stats: StructureStats) -> tuple[int, ...]:
    return stats.entries, stats.elements, stats.emcs, stats.users, stats.seq


def assert_refused(request: Callable[[], object]) -> None:
    with pytest.raises(Exception) as caught:
        request()
    assert is_out_of_memory_error(caught.value), caught.value


def assert_adding_is_refused(full: Full) -> None:
    """Everything that would store an entry, data or anything new is refused, and
    changes nothing."""
    conn, facility = full.conn, full.facility
    before = counts(conn.statistics())
    lists = [conn.list_info(n) for n in range(8)]
    users = conn.users()
    last = full.ids[-1]
    entry = conn.read(ById(last))
    assert_refused(lambda: conn.write(3, key(1), b"x" * BODY))
    assert_refused(lambda: conn.write(3, key(2)))  # not even an entry without data
    assert_refused(lambda: conn.write_and_rekey(3, key(3), b"x", new_key=key(4)))
    assert_refused(lambda: conn.write_entries([BulkWrite(3, key(5), b"y")]))
    assert_refused(lambda: conn.update(ById(last), data=b"z" * (2 * BODY)))
    assert_refused(lambda: conn.lock(7))
    assert_refused(conn.snapshot)
    assert_refused(lambda: facility.connect("QSG1", "NEWCOMER"))
    assert_refused(lambda: facility.create(params("QSG2")))
    assert counts(conn.statistics()) == before
    assert [conn.list_info(n) for n in range(8)] == lists
    assert conn.users() == users
    assert conn.read(ById(last)) == entry
    assert conn.lock_holder(7) is None
    assert not facility.exists("QSG2")


def test_the_scripts_declare_the_documented_flags() -> None:
    flagged = {name: flags for name, flags in scripts.FLAGS.items() if flags}
    assert {n for n, f in flagged.items() if f == {"allow-oom"}} == ALLOW_OOM
    assert {n for n, f in flagged.items() if f == {"no-writes"}} == NO_WRITES
    assert set(flagged) == ALLOW_OOM | NO_WRITES
    # The variants run another request's file: write_reserve stores new (descriptor)
    # entries by design, bounded by the units being committed; update_in_place is
    # update with the data left as it is.
    assert {
        "write_reserve": ("write", frozenset({"allow-oom"})),
        "update_in_place": ("update", frozenset({"allow-oom"})),
    } == scripts.VARIANTS
    # bulk.lua: the moves and deletes the bulk requests share.
    for name in (ALLOW_OOM - set(scripts.VARIANTS)) | {"bulk"}:
        text = (resources.files("sharedq.cf.redis") / "lua" / f"{name}.lua").read_text()
        # No allow-oom function stores entry data, nor takes an entry id for a new entry.
        assert "'HSET', D" not in text and "HSETNX', D" not in text, name
        assert "store_new_entry" not in text and "make_rec" not in text, name
    with pytest.raises(ValueError, match="known flags"):
        scripts.flags_of("-- flags: allow-oom no-eviction\n")
    assert scripts.flags_of("-- flags: allow-oom\n-- text\n") == {"allow-oom"}
    assert scripts.flags_of("-- move: ...\n") == frozenset()


def test_at_maxmemory_what_frees_memory_runs_and_what_adds_is_refused(
    redis_servers: ServerFactory,
) -> None:
    server = redis_servers()
    with RedisFacility.from_url(server.url) as facility:
        facility.create(params("QSG1"))
        facility.create(params("DOOMED"))
        conn = facility.connect("QSG1", "QM1")
        peer = facility.connect("QSG1", "QM2")
        leaving = facility.connect("QSG1", "QM3")
        failing = facility.connect("QSG1", "QM4")
        # What the steps out of memory release, set up while there was room.
        watching = conn.monitor_list(1)
        assert watching.nonempty is False
        second = peer.monitor_list(2, notify_empty=True)
        conn.lock(3)
        failing.lock(4)
        failing.monitor_list(4)
        snapshot = peer.snapshot()
        limit_above_use(server, 2 << 20)
        ids: list[bytes] = []

        def write(n: int) -> None:
            ids.append(conn.write(0, key(n), bytes([n % 251]) * BODY).entry.entry_id)

        written = fill_until_refused(write)
        assert written == len(ids) > 100
        hold_out_of_memory(server, MARGIN)
        full = Full(server, facility, conn, ids)
        assert_adding_is_refused(full)

        # Gets: a move of the head, with its data; a move with a new key and version.
        got = peer.move(Head(0), 1, new_key=key(1 << 20), increment_version=True)
        assert got is not None and got.entry.entry_id == ids[0]
        assert got.entry.data == bytes([0]) * BODY and got.entry.version == 1
        again = conn.move(ById(ids[1], 0), 1)
        assert again is not None and again.entry.data == bytes([1]) * BODY
        # Bulk moves; secondary keys set on the way, and removed again.
        moved = conn.move_entries(
            [BulkMove(i, 2, new_secondary_key=b"S", from_list=0) for i in ids[2:6]]
        )
        assert moved.complete and len(moved.seqs) == 4
        back = conn.move_entries([BulkMove(i, 2, new_secondary_key=None) for i in ids[2:6]])
        assert back.complete
        # Commits: deletes, with and without the data back, and in bulk.
        deleted = conn.delete(ById(ids[0], 1))
        assert deleted is not None and deleted.entry.data == bytes([0]) * BODY
        quiet = conn.delete(ById(ids[1], 1), with_data=False)
        assert quiet is not None and quiet.entry.data == b""
        assert conn.delete_entries(ids[2:6]).complete
        # A commit of several: its descriptor (a reserve write), its status changed in
        # place, then deleted; a get that waits registers a monitor (counted in EMCs).
        descriptor = conn.write(5, key(7), b"uow", adjunct=b"\x01", reserve=True)
        status = conn.update(ById(descriptor.entry.entry_id), adjunct=b"\x02")
        assert status is not None and status.entry.adjunct == b"\x02"
        assert conn.delete(ById(descriptor.entry.entry_id)) is not None
        waiting = conn.monitor_list(6)
        conn.stop_monitor(waiting.monitor_id)
        # Events taken (list 1 went non-empty and empty again; list 2 likewise, and its
        # monitor asked for empty events too), monitors stopped, locks released.
        assert [(e.monitor_id, e.state) for e in conn.events_nowait()] == [
            (watching.monitor_id, MonitorState.NONEMPTY)
        ]
        assert [(e.monitor_id, e.state) for e in peer.events_nowait()] == [
            (second.monitor_id, MonitorState.NONEMPTY),
            (second.monitor_id, MonitorState.EMPTY),
        ]
        conn.stop_monitor(watching.monitor_id)
        peer.stop_monitor(second.monitor_id)
        conn.unlock(3)
        assert conn.lock_holder(3) is None
        # List controls and the structure's size are rewritten in place.
        conn.set_list_controls(5, limit=10, increment_authority=True)
        assert conn.list_info(5).limit == 10 and conn.list_info(5).authority == 1
        stats = conn.statistics()
        assert conn.alter(size=stats.size).size == stats.size
        # Users: one leaves, one is marked failed and cleaned up (its lock and monitor
        # go with it); a snapshot and another structure are dropped.
        leaving.disconnect()
        peer.mark_failed(failing.user_id)
        peer.mark_failed(failing.user_id)  # already failed: nothing more to wake
        peer.cleanup_user(failing.user_id)
        assert conn.lock_holder(4) is None
        assert {u.name for u in conn.users()} == {"QM1", "QM2"}
        snapshot.release()
        facility.delete("DOOMED")
        assert not facility.exists("DOOMED")

        # Still out of memory: nothing that adds is let through, and it changed nothing.
        assert_adding_is_refused(full)
        assert conn.statistics().entries == written - 6

        # Draining frees the memory; then writes work again.
        rest = ids[6:]
        while rest:
            result = conn.delete_entries(rest)
            assert result.error is None
            rest = rest[result.processed :]
        assert conn.statistics().entries == 0
        conn.write(0, key(1), b"x" * BODY)
        conn.write_and_rekey(0, key(2), b"y", new_key=key(3))
        assert conn.statistics().entries == 2
        conn.monitor_list(0)
        conn.lock(3)


def test_a_lease_is_renewed_at_maxmemory(full: Full) -> None:
    """A user whose lease is short stays active while the server is out of memory."""
    set_maxmemory(full.server, 0)  # room to open a facility and connect (see below)
    with RedisFacility.from_url(f"{full.server.url}?lease={LEASE}") as facility:
        short = facility.connect("QSG1", "SHORT")
        hold_out_of_memory(full.server, MARGIN)
        assert_refused(lambda: facility.connect("QSG1", "OTHER"))
        assert_refused(lambda: short.write(1, key(1)))
        time.sleep(3 * LEASE)
        assert {u.name: u.state for u in full.conn.users()}["SHORT"] is UserState.ACTIVE
        assert short.connected
        # And it can still get and commit.
        got = short.move(Head(0), 1)
        assert got is not None and got.entry.entry_id == full.ids[0]
        assert short.delete(ById(full.ids[0], 1), with_data=False) is not None
        short.disconnect()


def test_a_full_structure_is_drained_get_by_get_and_then_takes_writes(full: Full) -> None:
    """Consumers get (move to their own list) and commit (delete) every entry, one at a
    time, each request out of memory until enough is freed; nothing is lost."""
    hold_out_of_memory(full.server, MARGIN)
    seen: list[bytes] = []
    while True:
        got = full.conn.move(Head(0), 1)
        if got is None:
            break
        assert got.entry.data == bytes([len(seen) % 251]) * BODY
        seen.append(got.entry.entry_id)
        assert full.conn.delete(ById(got.entry.entry_id, 1), with_data=False) is not None
    assert seen == full.ids
    stats = full.conn.statistics()
    assert (stats.entries, stats.elements) == (0, 0)
    full.conn.write(0, key(1), b"x" * BODY)
    assert full.conn.list_info(0).entries == 1


def test_a_facility_opens_at_maxmemory(full: Full) -> None:
    hold_out_of_memory(full.server, MARGIN)
    with RedisFacility.from_url(full.server.url) as facility:
        assert facility.exists("QSG1")


def test_gets_and_backouts_at_maxmemory_do_not_grow_memory(full: Full) -> None:
    """Moving entries back and forth out of memory (a get, then a backout, many times
    over, from threads of their own) leaves the structure as large as it was but for
    one result kept for a resend per thread: each replaces the thread's last."""
    hold_out_of_memory(full.server, MARGIN)
    before = structure_bytes(full.server, "QSG1")

    def churn() -> None:
        for _ in range(100):
            got = full.conn.move(Head(0), 1)
            assert got is not None
            assert full.conn.move_entries([BulkMove(got.entry.entry_id, 0)]).complete

    for _ in range(3):
        worker = threading.Thread(target=churn)
        worker.start()
        worker.join()
    grown = structure_bytes(full.server, "QSG1") - before
    assert grown < 3 * (BODY + 512), grown
    assert full.conn.statistics().entries == len(full.ids)
