"""A CQS in a process of its own (``sharedq cqs serve``) and its client, ``RemoteCQS``:
the requests and their refusals cross the socket unchanged, notifications are pushed
back, the key is checked, and a dead server is ``NOT_CONNECTED``, never a hang.

On a private Redis only: the server is another process, and a memory structure is one
process's alone.  (The requests' own behaviour is tested on both backends in process.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sharedq.cf.redis import RedisFacility
from sharedq.cf.types import UserState
from sharedq.clock import retry_until
from sharedq.cqs import (
    CQS,
    CQSError,
    CQSReason,
    CQSService,
    InvalidCQSRequest,
    Kind,
    LockToken,
    NotAuthorized,
    NotLocked,
    RemoteCQS,
    authkey_file,
)
from sharedq.cqs import remote_codec as codec
from sharedq.cqs.message import Message, QueueCounts
from sharedq.cqs.uow import Uow
from sharedq.testing.redis_server import RedisServer

from .conftest import MSGQ
from .helpers import SUSPEND_A, TRANA, TRANB, where
from .remote_server import ServedCQS

WAIT_S = 30.0


@pytest.fixture
def served(redis_server: RedisServer, redis_facility: RedisFacility) -> Iterator[ServedCQS]:
    server = ServedCQS(redis_server.url, "CQSIMSA", "IMSA").start()
    yield server
    server.stop()


@pytest.fixture
def remote(served: ServedCQS) -> Iterator[RemoteCQS]:
    client = served.client()
    yield client
    client.disconnect()


def test_requests_cross_the_socket(redis_facility: RedisFacility, remote: RemoteCQS) -> None:
    told: list[tuple[Kind, bytes]] = []
    came = threading.Event()

    def on_work(kind: Kind, queue: bytes) -> None:
        told.append((kind, queue))
        came.set()

    remote.on_work = on_work
    assert isinstance(remote, CQSService)
    assert (remote.name, remote.system, remote.structures) == ("CQSIMSA", "IMSA", [MSGQ])
    remote.connect()
    assert remote.register(TRANA) is False
    entry = remote.put(TRANA, b"one")
    assert isinstance(entry, bytes)
    assert came.wait(WAIT_S)  # pushed by the server: no polling here
    assert told == [(Kind.MSGQ, TRANA)]
    assert remote.wait_for_work(0) == (Kind.MSGQ, TRANA)
    assert remote.registered() == [(Kind.MSGQ, TRANA)]
    assert remote.notifications() == {"told": 1, "spared": 0, "received": 1}
    uow = remote.new_uow()
    remote.put(TRANA, [b"two-a", b"two-b"], uow=uow)  # multi-part: through staging
    assert [m.parts for m in remote.browse(TRANA)] == [(b"one",), (b"two-a", b"two-b")]
    first = remote.read(TRANA)
    assert first is not None and first.body == b"one" and first.token is not None
    assert first.entry_id == entry and first.uow.origin == b"IMSA    "
    assert remote.browse_locked(first.token).body == b"one"
    [counts] = remote.query([TRANA])
    assert (counts.ready, counts.locked) == (1, 1)
    assert remote.locks() == [first.token]
    remote.delete(first.token)
    with pytest.raises(NotLocked) as caught:  # a refusal crosses as its own class
        remote.delete(first.token)
    assert caught.value.reason is CQSReason.NOT_LOCKED
    second = remote.read(TRANA)
    assert second is not None and second.uow == uow and second.token is not None
    assert second.token.staged
    remote.unlock(second.token, to_queue=SUSPEND_A)
    assert remote.move(SUSPEND_A, TRANB) is not None
    assert remote.read(TRANA) is None  # empty: not an error
    assert where(redis_facility, MSGQ)["ready"] == [(TRANB, b"two-a")]
    local = remote.put(TRANA, b"local", local=True)
    assert isinstance(local, LockToken)
    report = remote.resync([])  # the client's restart: its lock back to the queue
    assert [m.body for m in report.requeued] == [b"local"] and report.deleted == []
    assert remote.statistics().entries == 3  # TRANA's, and TRANB's two parts
    remote.deregister(TRANA)
    with pytest.raises(InvalidCQSRequest) as bad:
        remote.put(b"\x99NOSUCH", b"x")
    assert bad.value.reason is CQSReason.BAD_QUEUE_NAME


def test_a_killed_server_is_not_connected_and_a_restarted_one_serves(
    redis_facility: RedisFacility, served: ServedCQS, remote: RemoteCQS
) -> None:
    remote.connect()
    token = remote.put(TRANA, b"held", local=True)
    assert isinstance(token, LockToken)
    served.kill()
    for request in (
        lambda: remote.read(TRANA),
        lambda: remote.put(TRANA, b"more"),
        lambda: remote.delete(token),
        lambda: remote.statistics(),
        lambda: remote.register(TRANB),
    ):
        with pytest.raises(CQSError) as caught:
            request()
        assert caught.value.reason is CQSReason.NOT_CONNECTED
        assert "gone" in str(caught.value)
    with pytest.raises(CQSError) as caught:  # nothing listens: no one to connect to
        remote.connect()
    assert caught.value.reason is CQSReason.NOT_CONNECTED
    assert where(redis_facility, MSGQ)["lock"] == [(TRANA, b"CQSIMSA")]
    with redis_facility.connect(MSGQ, "PEER") as peer:  # a peer declares it failed
        [user] = [u.user_id for u in peer.users() if u.name == "CQSIMSA"]
        peer.mark_failed(user)
    served.start()  # its next incarnation, the same name, on the socket left behind
    remote.connect()
    remote.delete(token)  # the lock it held is its own again
    assert where(redis_facility, MSGQ) == {}


def test_a_client_gone_without_disconnect_is_disconnected_for_it(
    redis_facility: RedisFacility, served: ServedCQS
) -> None:
    first = served.client().connect()
    first.register(TRANA)
    held = first.put(TRANA, b"held", local=True)
    first.close()  # as a killed client: no CQSDISC
    second = retry_until(lambda: accepted(served), timeout_s=WAIT_S, first_pause_s=0.01)
    assert second is not None  # accepted once the server let the first go
    try:
        second.connect()
        assert second.registered() == []  # the first's registrations went
        assert second.locks() == [held]  # its locks stayed, for its restart
        assert [m.body for m in second.resync([]).requeued] == [b"held"]
    finally:
        second.disconnect()


def accepted(served: ServedCQS) -> RemoteCQS | None:
    """A new client, or ``None`` while the server still serves another."""
    try:
        return served.client()
    except CQSError as error:
        assert error.reason is CQSReason.ALREADY_CONNECTED
        return None


def test_one_client_at_a_time(served: ServedCQS, remote: RemoteCQS) -> None:
    with pytest.raises(CQSError) as caught:
        served.client()
    assert caught.value.reason is CQSReason.ALREADY_CONNECTED


def test_the_key_is_checked(served: ServedCQS) -> None:
    with pytest.raises(NotAuthorized):
        RemoteCQS(served.socket, b"not the key")
    served.key_file.chmod(0o644)  # a key others may read is refused
    with pytest.raises(NotAuthorized):
        authkey_file(served.key_file)
    served.key_file.chmod(0o600)
    assert RemoteCQS(served.socket, served.key).name == "CQSIMSA"


def test_sigterm_disconnects_cleanly(redis_facility: RedisFacility, served: ServedCQS) -> None:
    remote = served.client().connect()
    remote.register(TRANA)
    assert served.stop() == 0
    with redis_facility.connect(MSGQ, "PEER") as peer:
        assert [u for u in peer.users() if u.name == "CQSIMSA"] == []  # CQSDISC, not failed
        assert all(u.state is UserState.ACTIVE for u in peer.users())
    with pytest.raises(CQSError) as caught:
        remote.read(TRANA)
    assert caught.value.reason is CQSReason.NOT_CONNECTED


def test_an_in_process_cqs_is_a_service_too(redis_facility: RedisFacility) -> None:
    cqs = CQS(redis_facility, "CQSIMSB", system="IMSB", msgq=MSGQ)
    assert isinstance(cqs, CQSService) and cqs.on_work is None


def test_the_bodies_keep_every_cqs_type() -> None:
    uow = Uow(b"IMSA    ", 7, b"IMSB    ", 9)
    token = LockToken(Kind.EMHQ, TRANA, b"\x00" * 12, staged=True)
    message = Message(TRANA, (b"a", b"b"), uow, 123, True, b"\x01" * 12, token)
    value = [message, QueueCounts(TRANA, 1, 2, None), (Kind.MSGQ, TRANA), {"n": [uow]}]
    assert codec.unpack(codec.pack(value)) == value
    with pytest.raises(InvalidCQSRequest):
        codec.unpack(b"\xc1")  # never used by msgpack


def test_serve_wants_a_redis_facility(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "sharedq", "cqs", "serve", "--facility", "memory://"]
    command += ["--name", "CQSA", "--system", "A", "--socket", str(tmp_path / "s")]
    command += ["--authkey-file", str(tmp_path / "key")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode != 0 and "redis://" in done.stderr
    assert not os.path.exists(tmp_path / "s")


def test_a_server_that_hangs_is_taken_for_gone_after_timeout(
    redis_facility: RedisFacility, served: ServedCQS
) -> None:
    remote = RemoteCQS(served.socket, served.key, timeout_s=WAIT_S).connect()
    remote.timeout_s = 0.5  # (no reply can come: the server is stopped)
    assert served.process is not None
    os.kill(served.process.pid, signal.SIGSTOP)  # alive, answering nothing
    try:
        with pytest.raises(CQSError) as caught:
            remote.read(TRANA)
        assert caught.value.reason is CQSReason.NOT_CONNECTED
        assert "no reply to read" in str(caught.value)
        with pytest.raises(CQSError):  # and every later request, without waiting
            remote.put(TRANA, b"x")
    finally:
        os.kill(served.process.pid, signal.SIGCONT)
    remote.close()
    with pytest.raises(InvalidCQSRequest):
        RemoteCQS(served.socket, served.key, timeout_s=0)


def test_sigterm_taken_by_any_thread_of_the_server_ends_it(served: ServedCQS) -> None:
    """The kernel may hand a process's SIGTERM to any of its threads; kill() with a
    thread's id makes that thread the one.  The server must end all the same (a main
    thread blocked in accept would never run the handler)."""
    remote = RemoteCQS(served.socket, served.key, timeout_s=WAIT_S).connect()
    remote.register(TRANA)  # a session thread and the CQS's listener run
    assert served.process is not None
    pid = served.process.pid
    others = [int(tid) for tid in os.listdir(f"/proc/{pid}/task") if int(tid) != pid]
    assert others, "the server has threads besides its main thread"
    os.kill(others[-1], signal.SIGTERM)
    assert served.process.wait(WAIT_S) == 0
    remote.close()


def test_a_logged_server_restarts_warm_after_sigkill(
    redis_server: RedisServer, redis_facility: RedisFacility, tmp_path: Path
) -> None:
    served = ServedCQS(redis_server.url, "CQSIMSA", "IMSA", recovery_root=str(tmp_path)).start()
    try:
        remote = served.client().connect()
        remote.checkpoint("system")  # CQSCHKPT, in the server's process
        held = remote.put(TRANA, b"held", local=True)
        remote.put(TRANB, b"ready")
        served.kill()
        with redis_facility.connect(MSGQ, "PEER") as peer:
            [user] = [u.user_id for u in peer.users() if u.name == "CQSIMSA"]
            peer.mark_failed(user)
        served.start()
        remote.connect()  # warm, from its log: the lock is its own again (cold: cold queue)
        assert remote.locks() == [held]
        assert [m.body for m in remote.browse(TRANB)] == [b"ready"]
        assert (tmp_path / MSGQ).is_dir()  # the pair's log and checkpoints
        remote.delete(held)
        remote.disconnect()
    finally:
        served.stop()
    assert where(redis_facility, MSGQ)["ready"] == [(TRANB, b"ready")]


def test_display_overflowq_crosses_the_socket(remote: RemoteCQS) -> None:
    remote.connect()
    assert remote.display_overflowq() == {
        "structure": MSGQ,
        "overflow_structure": None,
        "mode": False,
        "queues": [],
    }
