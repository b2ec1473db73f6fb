"""A server that restarts is never carried on with by the connections made before.

A Redis server restarted from an RDB snapshot (or a replica promoted in its place, or
an AOF that was not fsynced) holds its structures as they were some time ago: seqs
gone back, acknowledged changes missing, and the old users' tokens still valid.  A
connection made before the restart must therefore fail every request with
``STRUCTURE_LOST`` (the layer above reconnects and checks the structure against its
log), never resend to the new server what it sent to the old one, and never let a
request of its reach it.  New connections see the server as it came back.

The servers here are real and private; they are killed with SIGKILL and started again
on the same directory, so that they load what they persisted.
"""

from __future__ import annotations

import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sharedq.cf import (
    ById,
    CFError,
    Compare,
    Head,
    StructureLost,
    StructureParams,
    UserState,
)
from sharedq.cf.redis import RedisFacility
from sharedq.cf.redis.keys import meta_key
from sharedq.clock import retry_until
from sharedq.testing.redis_server import RedisCluster, RedisServer

#: Seconds a dropped connection is retried (kept short here).
RETRY = 3.0
#: A user must report the restart within this, or it counts as hung.
DEADLINE = 20.0
GET = Head(0, key=b"\x0a" + bytes(15), compare=Compare.LE)

ServerFactory = Callable[..., RedisServer]


def key(n: int) -> bytes:
    return b"\x04" + n.to_bytes(15, "big")


def params(name: str = "QSG1") -> StructureParams:
    return StructureParams.for_capacity(name, list_count=4, entries=500, elements=500)


def counters(server: RedisServer, name: str = "QSG1") -> tuple[int, int, int]:
    """seq, entries and elements of a structure, read from the server itself."""
    packed = server.command("HGET", meta_key(name), "c")
    assert isinstance(packed, bytes)
    seq, entries, elements = struct.unpack(">3Q", packed[:24])
    return seq, entries, elements


def outcome(request: Callable[[], Any]) -> str:
    try:
        request()
    except CFError as exc:
        return exc.reason.name
    return "ok"


def wait_until(condition: Callable[[], bool]) -> None:
    assert retry_until(condition, timeout_s=DEADLINE, first_pause_s=0.005), "timed out"


def assert_lost_to_restart(exc: BaseException, old: str, new: str) -> None:
    assert isinstance(exc, StructureLost), repr(exc)
    text = str(exc)
    assert "QSG1" in text and "restarted" in text and "log" in text, text
    assert old in text and new in text, text


class Holder:
    """A user in a process of its own (``tests.cf_redis.workers hold``)."""

    def __init__(self, url: str, user: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.cf_redis.workers", url, "QSG1", user],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().split()
        assert line[:1] == ["ready"], line

    def write(self) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("write\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().strip()

    def close(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)


def test_a_server_restarted_from_an_older_snapshot_fails_every_connection_made_before(
    redis_servers: ServerFactory,
) -> None:
    server = redis_servers()
    url = f"{server.url}?retry={RETRY}"
    with RedisFacility.from_url(url) as facility, RedisFacility.from_url(url) as other:
        facility.create(params())
        qm1 = facility.connect("QSG1", "QM1")
        qm2 = other.connect("QSG1", "QM2")  # another facility: another process, in effect
        holder = Holder(url, "QM3")  # and a real one
        try:
            assert holder.write() == "ok"
            # A thread with a socket of its own to the server, used before the restart.
            used, go, done = threading.Event(), threading.Event(), threading.Event()
            in_thread: list[BaseException | None] = []

            def thread_user() -> None:
                qm1.write(3, key(1), b"from the thread")
                used.set()
                go.wait(DEADLINE)
                try:
                    qm1.write(3, key(2), b"from the thread, after the restart")
                    in_thread.append(None)
                except BaseException as exc:
                    in_thread.append(exc)
                done.set()

            thread = threading.Thread(target=thread_user)
            thread.start()
            assert used.wait(DEADLINE)
            for n in range(3):
                qm1.write(0, key(n), b"before the snapshot %d" % n)
            server.save()
            snapshot_counters = counters(server)
            old_run_id = server.run_id
            # Acknowledged after the snapshot: the restart loses them.
            for n in range(3, 6):
                qm1.write(0, key(n), b"after the snapshot %d" % n)
            got = qm2.move(GET, 1)
            assert got is not None
            assert counters(server)[0] == snapshot_counters[0] + 4

            server.restart()  # SIGKILL, then started again: it loads the snapshot
            new_run_id = server.run_id
            assert counters(server) == snapshot_counters

            # The thread's own socket reconnects first: it must find the restart itself.
            go.set()
            assert done.wait(DEADLINE)
            thread.join()
            assert in_thread[0] is not None
            assert_lost_to_restart(in_thread[0], old_run_id, new_run_id)
            # Every later request of a connection made before fails the same way.
            for request in (
                lambda: qm1.write(0, key(9), b"on the stale structure"),
                qm1.statistics,
                qm1.events_nowait,
                lambda: qm1.read(ById(bytes(12))),
                lambda: qm1.move(GET, 2),
                lambda: qm1.wait_events(timeout=5),
                lambda: qm1.lock(1),
                qm1.snapshot,
            ):
                with pytest.raises(StructureLost) as lost:
                    request()
                assert_lost_to_restart(lost.value, old_run_id, new_run_id)
            with pytest.raises(StructureLost) as lost:
                qm2.delete(ById(got.entry.entry_id))
            assert_lost_to_restart(lost.value, old_run_id, new_run_id)
            assert holder.write() == "STRUCTURE_LOST"
            assert not qm1.connected and not qm2.connected
            # Nothing reached the stale structure.
            assert counters(server) == snapshot_counters

            # New connections work, under the same names too, and see the snapshot's
            # state: what the layer above checks against its log.
            assert facility.exists("QSG1")
            with facility.connect("QSG1", "QM1") as again:
                assert again.user_id == qm1.user_id
                assert [e.data for e in again.scan(0)] == [
                    b"before the snapshot %d" % n for n in range(3)
                ]
                assert again.list_info(1).entries == 0  # the get after it is undone
                assert again.statistics().seq == snapshot_counters[0] + 1  # its attach
                with other.connect("QSG1", "QM2") as qm2_again:
                    assert qm2_again.user_id == qm2.user_id
                    qm2_again.write(0, key(7), b"after the restart")
                assert [e.data for e in again.scan(0)][-1] == b"after the restart"
        finally:
            holder.close()


def test_a_restart_that_lost_nothing_still_fails_the_old_connections(
    redis_servers: ServerFactory,
) -> None:
    """AOF fsynced at every write: nothing is lost, but the old connections cannot know."""
    server = redis_servers(["--appendonly", "yes", "--appendfsync", "always"])
    with RedisFacility.from_url(server.url, retry_seconds=RETRY) as facility:
        facility.create(params())
        qm1 = facility.connect("QSG1", "QM1")
        qm1.monitor_list(2)
        written = [qm1.write(0, key(n), b"%d" % n).entry for n in range(5)]
        qm1.lock(3)
        old_run_id = server.run_id
        before = counters(server)
        server.restart()
        assert counters(server) == before
        with pytest.raises(StructureLost) as lost:
            qm1.write(0, key(9), b"after the restart")
        assert_lost_to_restart(lost.value, old_run_id, server.run_id)
        with pytest.raises(StructureLost):
            qm1.unlock(3)
        assert counters(server) == before
        with facility.connect("QSG1", "QM1") as again:  # reattached, with what it held
            assert again.user_id == qm1.user_id
            assert list(again.scan(0)) == written
            assert again.lock_holder(3) == qm1.user_id
            assert again.statistics().emcs == 1
            again.write(2, key(1))
            assert len(again.events_nowait()) == 1


def test_requests_under_way_when_the_server_restarts_are_not_resent(
    redis_servers: ServerFactory,
) -> None:
    """A waiter blocked and a writer in a loop, both in threads, as the server restarts.

    Both end with ``STRUCTURE_LOST``; the writer's request under way is not resent to
    the restarted server, and the old connections' leases are no longer renewed there.
    """
    server = redis_servers()
    lease = 1.0
    with RedisFacility.from_url(server.url, retry_seconds=RETRY, lease_seconds=lease) as facility:
        facility.create(
            StructureParams.for_capacity("QSG1", list_count=4, entries=5000, elements=5000)
        )
        writer = facility.connect("QSG1", "WRITER")
        waiter = facility.connect("QSG1", "WAITER")
        waiter.monitor_list(3)
        base = counters(server)[0]
        outcomes: dict[str, str] = {}
        acked: list[int] = []
        stop = threading.Event()

        def write_loop() -> None:
            n = 0
            try:
                while not stop.is_set():
                    n += 1
                    writer.write(0, key(n), b"%d" % n)
                    acked.append(n)
                outcomes["writer"] = "stopped"
            except CFError as exc:
                outcomes["writer"] = exc.reason.name

        def wait() -> None:
            try:
                waiter.wait_events(timeout=None)
                outcomes["waiter"] = "returned"
            except CFError as exc:
                outcomes["waiter"] = exc.reason.name

        threads = [threading.Thread(target=write_loop), threading.Thread(target=wait)]
        for thread in threads:
            thread.daemon = True
            thread.start()
        wait_until(lambda: len(acked) >= 50)
        server.save()
        saved = len(acked)
        wait_until(lambda: len(acked) >= saved + 50)  # acknowledged, lost by the restart
        server.restart()
        for thread in threads:
            thread.join(timeout=DEADLINE)
        stop.set()
        assert outcomes == {"writer": "STRUCTURE_LOST", "waiter": "STRUCTURE_LOST"}

        # The stale structure holds writes 1..k from the snapshot, and nothing else.
        seq, entries, _ = counters(server)
        with facility.connect("QSG1", "CHECKER") as checker:
            numbers = [int(e.data) for e in checker.scan(0)]
            assert numbers == list(range(1, len(numbers) + 1))
            assert seq == base + len(numbers) == base + entries
            assert len(numbers) < len(acked)

            # The old connections' leases lapse: nobody renews them on the new server.
            def lapsed() -> bool:
                states = {u.name: u.state for u in checker.users()}
                return states["WRITER"] is states["WAITER"] is UserState.FAILED

            assert retry_until(lapsed, timeout_s=2 * lease, first_pause_s=0.05), (
                f"a lease did not lapse in {2 * lease:g} s: {checker.users()}"
            )


def test_a_dropped_connection_to_the_same_server_is_still_resent(
    redis_servers: ServerFactory,
) -> None:
    """The server's identity is checked on every new socket, and is the same: carry on."""
    server = redis_servers()
    with RedisFacility.from_url(server.url, retry_seconds=RETRY) as facility:
        facility.create(params())
        qm1 = facility.connect("QSG1", "QM1")
        qm1.write(0, key(1), b"one")
        for _ in range(3):
            server.command("CLIENT", "KILL", "TYPE", "normal")  # every client but us
            assert qm1.write(0, key(2), b"two").seq == counters(server)[0]
        assert [e.data for e in qm1.scan(0)] == [b"one", b"two", b"two", b"two"]
        assert qm1.connected
        assert facility.connect("QSG1", "QM2").user_id == 2


def test_a_server_restarted_empty_is_still_a_lost_structure(
    redis_servers: ServerFactory,
) -> None:
    server = redis_servers()
    with RedisFacility.from_url(server.url, retry_seconds=RETRY) as facility:
        facility.create(params())
        conn = facility.connect("QSG1", "QM1")
        conn.write(0, key(1))
        server.restart()
        with pytest.raises(StructureLost) as lost:
            conn.write(0, key(2))
        assert "QSG1" in str(lost.value)
        assert not facility.exists("QSG1")
        facility.create(params())  # the layer above rebuilds it
        with facility.connect("QSG1", "QM1") as again:
            assert again.statistics().entries == 0


# -- on a Redis Cluster -----------------------------------------------------------------


@pytest.fixture
def cluster() -> Iterator[RedisCluster]:
    """A private three-node cluster, for tests that kill its nodes."""
    cluster = RedisCluster().start()
    try:
        yield cluster
    finally:
        cluster.stop()


def names_on_two_nodes(cluster: RedisCluster) -> tuple[str, str]:
    """Two structure names whose slots are on different nodes."""
    first = "QSG1"
    home = cluster.node_of(meta_key(first))
    second = next(
        name
        for name in (f"QSG{n}" for n in range(2, 100))
        if cluster.node_of(meta_key(name)) is not home
    )
    return first, second


def test_a_cluster_node_restarted_from_a_snapshot_fails_only_its_connections(
    cluster: RedisCluster,
) -> None:
    lost_name, kept_name = names_on_two_nodes(cluster)
    node = cluster.node_of(meta_key(lost_name))
    with RedisFacility.from_url(cluster.url, retry_seconds=10) as facility:
        for name in (lost_name, kept_name):
            facility.create(params(name))
        lost, kept = facility.connect(lost_name, "QM1"), facility.connect(kept_name, "QM1")
        lost.write(0, key(1), b"in the snapshot")
        kept.write(0, key(1), b"on another node")
        node.save()
        lost.write(0, key(2), b"lost with the restart")
        old_run_id = node.run_id
        node.restart()
        with pytest.raises(StructureLost) as error:
            lost.write(0, key(3), b"on the stale structure")
        text = str(error.value)
        assert lost_name in text and old_run_id in text and node.run_id in text, text
        assert f"{node.port}" in text and "log" in text, text
        assert outcome(lost.statistics) == "STRUCTURE_LOST"
        # Connections to structures on the other nodes carry on.
        kept.write(0, key(2), b"after the restart")
        assert [e.data for e in kept.scan(0)] == [b"on another node", b"after the restart"]
        with facility.connect(lost_name, "QM1") as again:
            assert [e.data for e in again.scan(0)] == [b"in the snapshot"]


def test_a_failover_to_a_replica_fails_the_connections_to_the_old_primary(
    cluster: RedisCluster,
) -> None:
    lost_name, kept_name = names_on_two_nodes(cluster)
    primary = cluster.node_of(meta_key(lost_name))
    replica = cluster.add_replica(primary)
    # Retried long enough for the cluster to notice the death and promote the replica.
    with RedisFacility.from_url(cluster.url, retry_seconds=30) as facility:
        for name in (lost_name, kept_name):
            facility.create(params(name))
        lost, kept = facility.connect(lost_name, "QM1"), facility.connect(kept_name, "QM1")
        written = [lost.write(0, key(n), b"%d" % n).entry for n in range(3)]
        kept.write(0, key(1), b"on another node")
        primary.command("WAIT", 1, 5000)  # replicated: the replica has all of it
        primary.kill()
        started = time.monotonic()
        with pytest.raises(StructureLost) as error:
            lost.write(0, key(9), b"after the failover")
        assert time.monotonic() - started < 30
        text = str(error.value)
        assert lost_name in text and f"{replica.port}" in text and "log" in text, text
        assert outcome(lost.statistics) == "STRUCTURE_LOST"
        kept.write(0, key(2), b"after the failover")
        # A new connection reaches the structure on the promoted replica.
        with facility.connect(lost_name, "QM1") as again:
            assert list(again.scan(0)) == written
