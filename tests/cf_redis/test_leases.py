"""Users whose process vanished or stalled: failed once their lease lapses.

The user under test runs in a process of its own (``workers.hold``) that the test
kills or pauses for real; the peer watches it through ``users()``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from sharedq.cf import (
    CouplingFacility,
    ListStructure,
    MonitorState,
    StructureParams,
    UserState,
    open_facility,
)
from sharedq.cf.redis import RedisFacility
from sharedq.testing.redis_server import RedisServer

LEASE = 1.0  # seconds: the held user's lease, short so that the tests are quick


@pytest.fixture
def facility(redis_server: RedisServer) -> Iterator[CouplingFacility]:
    redis_server.flush()
    with open_facility(redis_server.url) as fac:
        fac.create(StructureParams.for_capacity("QSG1", list_count=4, entries=20, elements=20))
        yield fac


def start_holder(server: RedisServer, user: str) -> tuple[subprocess.Popen[str], int]:
    """``workers.hold`` in a subprocess with a short lease; returns it and its user id."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.cf_redis.workers",
            f"{server.url}?lease={LEASE}",
            "QSG1",
            user,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline().split()
    assert line[:1] == ["ready"], line
    return process, int(line[1])


def state_of(peer: ListStructure, user_id: int) -> UserState | None:
    return next((u.state for u in peer.users() if u.user_id == user_id), None)


def wait_for_state(peer: ListStructure, user_id: int, state: UserState) -> float:
    started = time.monotonic()
    while state_of(peer, user_id) is not state:
        assert time.monotonic() - started < 10 * LEASE + 5, f"user {user_id} never {state}"
        time.sleep(0.05)
    return time.monotonic() - started


def test_a_killed_process_is_failed_and_reattaches_to_what_it_held(
    facility: CouplingFacility, redis_server: RedisServer
) -> None:
    peer = facility.connect("QSG1", "QM2")
    process, user_id = start_holder(redis_server, "QM1")
    try:
        assert state_of(peer, user_id) is UserState.ACTIVE
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        waited = wait_for_state(peer, user_id, UserState.FAILED)
        assert waited < 10 * LEASE
        # Failed-persistent: its lock still holds, its monitor still counts and queues.
        assert peer.lock_holder(3) == user_id
        assert peer.statistics().emcs == 1
        put = peer.write(0, bytes(16), b"while QM1 was down")
        again = facility.connect("QSG1", "QM1")
        assert again.user_id == user_id
        assert again.lock_holder(3) == user_id
        events = again.events_nowait()
        assert [(e.state, e.seq) for e in events] == [(MonitorState.NONEMPTY, put.seq)]
    finally:
        process.kill()
        process.wait(timeout=10)


def test_a_peer_cleans_up_after_a_killed_process(
    facility: CouplingFacility, redis_server: RedisServer
) -> None:
    peer = facility.connect("QSG1", "QM2")
    process, user_id = start_holder(redis_server, "QM1")
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    wait_for_state(peer, user_id, UserState.FAILED)
    peer.cleanup_user(user_id)
    assert peer.lock_holder(3) is None
    assert peer.statistics().emcs == 0
    assert [u.name for u in peer.users()] == ["QM2"]


def test_a_paused_process_finds_itself_failed_when_it_resumes(
    facility: CouplingFacility, redis_server: RedisServer
) -> None:
    """A stalled user must not race the peer that took over: its lease stays lapsed."""
    peer = facility.connect("QSG1", "QM2")
    process, user_id = start_holder(redis_server, "QM1")
    assert process.stdin is not None and process.stdout is not None
    try:
        process.send_signal(signal.SIGSTOP)
        wait_for_state(peer, user_id, UserState.FAILED)
        process.send_signal(signal.SIGCONT)
        time.sleep(LEASE)  # its lease keeper runs again, and must not revive it
        process.stdin.write("write\n")
        process.stdin.flush()
        assert process.stdout.readline().strip() == "NOT_CONNECTED"
        assert state_of(peer, user_id) is UserState.FAILED
        assert peer.list_info(2).entries == 0
    finally:
        process.kill()
        process.wait(timeout=10)


def test_a_live_connection_keeps_its_lease(redis_server: RedisServer) -> None:
    redis_server.flush()
    with RedisFacility.from_url(redis_server.url, lease_seconds=1.0) as fac:
        fac.create(StructureParams.for_capacity("QSG2", list_count=2, entries=5, elements=5))
        conn = fac.connect("QSG2", "QM1")
        time.sleep(3.0)  # three leases: renewed all along
        assert conn.connected
        assert [u.state for u in conn.users()] == [UserState.ACTIVE]
        conn.write(0, bytes(16))
