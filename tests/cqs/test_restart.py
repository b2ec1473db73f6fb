"""A CQS's own failures and restart (redbook §5.1-5.3, §6.1, §6.3.3).

A CQS killed (SIGKILL) restarts warm from its system checkpoint and the log, its
client's locks kept for resync; one down across two structure checkpoints starts cold
and sends its client's locks to the cold queue, saying why; the decision table at
connect; a structure pair (primary and overflow) lost with its Redis server (SIGKILL,
started again empty) and rebuilt object for object; a checkpoint master killed in the
middle of a structure checkpoint, taken over by another CQS.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from sharedq.cf import CouplingFacility, open_facility
from sharedq.cf.redis import RedisFacility
from sharedq.cqs import CQS, Kind, StructurePair, structure_params
from sharedq.recovery import PairLayout, RecoverySettings, slot_status
from sharedq.recovery.control import KIND_CHECKPOINT
from sharedq.recovery.master import read_function
from sharedq.recovery.structure_recovery import (
    INITIALISED,
    RECOVERED,
    RECOVERED_FROM_LOG,
)
from sharedq.testing.redis_server import RedisServer
from tests.recovery.helpers import eventually

from . import workers
from .conftest import MSGQ, MakeCQS
from .helpers import TRANA, TRANB, snapshot, where
from .test_recovery import workload

OVERFLOW = "OVFL01"


def run_worker(url: str, root: Path, overflow: str | None, kill_at: str) -> None:
    """CQSIMSA in a process of its own, killed by SIGKILL (see ``workers``)."""
    process = multiprocessing.get_context("spawn").Process(
        target=workers.logged_and_killed, args=(url, str(root), overflow, kill_at)
    )
    process.start()
    process.join(timeout=120)
    assert process.exitcode == -signal.SIGKILL


def declare_failed(facility: CouplingFacility, name: str, *structures: str) -> None:
    """What a peer does for a CQS whose process vanished: its users are failed."""
    for structure in structures:
        with facility.connect(structure, "PEER") as peer:
            for user in peer.users():
                if user.name == name:
                    peer.mark_failed(user.user_id)


def held(facility: CouplingFacility) -> tuple[int, list[tuple[bytes, bytes]]]:
    lists = where(facility, MSGQ)
    return len(lists.get("ready", [])), lists.get("lock", [])


def test_a_cqs_killed_restarts_warm_and_keeps_its_clients_locks(
    redis_server: RedisServer, redis_facility: RedisFacility, tmp_path: Path
) -> None:
    root = tmp_path / "recovery"
    run_worker(redis_server.url, root, None, "now")
    declare_failed(redis_facility, "CQSIMSA", MSGQ)
    cqs = CQS(redis_facility, "CQSIMSA", system="IMSA", msgq=MSGQ, recovery=RecoverySettings(root))
    with cqs.connect():
        assert "warm start" in cqs.start_reason and "system checkpoint" in cqs.start_reason
        assert cqs.cold == {}
        # Two ready, two still locked by CQSIMSA for its client's resync.
        assert held(redis_facility) == (2, [(TRANA, b"CQSIMSA")] * 2)
        report = cqs.resync()
        assert len(report.requeued) == 2
        assert held(redis_facility) == (4, [])
        assert sorted(m.body for m in cqs.browse(TRANA)) == [b"message %d" % n for n in range(4)]


def test_a_cqs_down_across_two_structure_checkpoints_cold_starts(
    facility: CouplingFacility, make_cqs: MakeCQS, tmp_path: Path
) -> None:
    settings = RecoverySettings(tmp_path / "recovery", strchkpt=None)
    a = make_cqs("IMSA", recovery=settings)
    for n in range(3):
        a.put(TRANA, b"a's %d" % n)
    assert a.read(TRANA) is not None and a.read(TRANA) is not None
    a.disconnect()  # down: its two locks wait for it on the lock queue
    b = make_cqs("IMSB", recovery=settings)
    for checkpoint in range(2):
        b.put(TRANB, b"b's %d" % checkpoint)
        b.checkpoint("structure")
    again = make_cqs("IMSA", recovery=settings)
    assert "down across two structure checkpoints" in again.start_reason
    assert "cold" in again.start_reason
    assert sorted(m.body for m in again.cold[Kind.MSGQ]) == [b"a's 0", b"a's 1"]
    lists = where(facility, MSGQ)
    assert "lock" not in lists
    assert sorted(lists["cold"]) == [(TRANA, b"a's 0"), (TRANA, b"a's 1")]
    assert sorted(lists["ready"]) == [(TRANA, b"a's 2"), (TRANB, b"b's 0"), (TRANB, b"b's 1")]
    assert again.read(TRANA) is not None and again.read(TRANA) is None  # cold: no one's


def test_a_cqs_killed_and_down_across_two_checkpoints_cold_starts(
    redis_server: RedisServer, redis_facility: RedisFacility, tmp_path: Path
) -> None:
    """The seed's case with a real death: CQSIMSA's process is SIGKILLed holding two
    messages; CQSIMSB takes two structure checkpoints meanwhile; CQSIMSA cold starts and
    its client's two messages go to the cold queue, counted."""
    root = tmp_path / "recovery"
    run_worker(redis_server.url, root, None, "now")
    declare_failed(redis_facility, "CQSIMSA", MSGQ)
    settings = RecoverySettings(root, strchkpt=None)
    with CQS(redis_facility, "CQSIMSB", system="IMSB", msgq=MSGQ, recovery=settings) as b:
        for n in range(2):
            b.put(TRANB, b"b's %d" % n)
            b.checkpoint("structure")
    with CQS(redis_facility, "CQSIMSA", system="IMSA", msgq=MSGQ, recovery=settings) as a:
        assert "down across two structure checkpoints" in a.start_reason
        assert sorted(m.body for m in a.cold[Kind.MSGQ]) == [b"message 0", b"message 1"]
        lists = where(redis_facility, MSGQ)
        assert "lock" not in lists and len(lists["cold"]) == 2
        assert sorted(body for _, body in lists["ready"]) == [
            b"b's 0",
            b"b's 1",
            b"message 2",
            b"message 3",
        ]


def test_a_cqs_down_across_one_structure_checkpoint_still_starts_warm(
    facility: CouplingFacility, make_cqs: MakeCQS, tmp_path: Path
) -> None:
    """In steady state (both SRDSs taken): the log goes back to the older SRDS, which
    was taken before the CQS went down, so its system checkpoint is still there."""
    settings = RecoverySettings(tmp_path / "recovery", strchkpt=None)
    a = make_cqs("IMSA", recovery=settings)
    b = make_cqs("IMSB", recovery=settings)
    b.checkpoint("structure")
    a.put(TRANA, b"held")
    assert a.read(TRANA) is not None
    a.disconnect()
    b.checkpoint("structure")
    again = make_cqs("IMSA", recovery=settings)
    assert "warm start" in again.start_reason and again.cold == {}
    assert [t.queue for t in again.locks()] == [TRANA]


def _decision(case: str, facility: CouplingFacility, make_cqs: MakeCQS, root: Path) -> str:
    """Set up one row of the decision table; return the action a CQS connecting takes."""
    settings = RecoverySettings(root, strchkpt=None)
    if case != "empty-nothing":
        first = make_cqs("IMSB", recovery=settings)
        workload(first, make_cqs("IMSC", recovery=settings), b"one")
        if case == "empty-srds":
            first.checkpoint("structure")
            workload(first, first, b"two")
    before = snapshot(facility)
    for cqs_name in ("CQSIMSB", "CQSIMSC"):
        declare_failed(facility, cqs_name, MSGQ)
    if case.startswith("empty") and case != "empty-nothing":
        facility.delete(MSGQ, force=True)  # the structure is lost
    cqs = make_cqs("IMSA", recovery=settings)
    assert snapshot(facility) == before, case
    assert cqs.recovery_log is not None
    [outcome] = cqs.recovery_log.pairs[MSGQ].outcomes
    return outcome.action


@pytest.mark.parametrize(
    ("case", "action"),
    [
        ("empty-nothing", INITIALISED),  # no SRDS, no log: cold start the structure
        ("empty-srds", RECOVERED),  # a valid SRDS: recover from it and the log
        ("empty-log", RECOVERED_FROM_LOG),  # initialised, no checkpoint: the log alone
        ("not-empty", "in-use"),  # messages in it: used as it is
    ],
)
def test_the_decision_table_at_connect(
    facility: CouplingFacility, make_cqs: MakeCQS, tmp_path: Path, case: str, action: str
) -> None:
    assert _decision(case, facility, make_cqs, tmp_path / "recovery") == action


@pytest.fixture
def private_redis(
    redis_servers: Callable[..., RedisServer],
) -> tuple[RedisServer, CouplingFacility, str]:
    """A Redis server of the test's own (to kill), with the pair MSGQ01 + OVFL01."""
    server = redis_servers()
    url = f"{server.url}?lease=2&retry=2"
    facility = open_facility(url)
    facility.create(structure_params(MSGQ, messages=500))
    facility.create(structure_params(OVERFLOW, messages=500))
    return server, facility, url


def test_a_pair_lost_with_its_redis_server_comes_back_object_for_object(
    private_redis: tuple[RedisServer, CouplingFacility, str], tmp_path: Path
) -> None:
    server, facility, _ = private_redis
    settings = RecoverySettings(tmp_path / "recovery", strchkpt=None)
    pair = StructurePair(MSGQ, OVERFLOW)

    def start(system: str) -> CQS:
        return CQS(facility, f"CQS{system}", system=system, msgq=pair, recovery=settings)

    a, b = start("IMSA").connect(), start("IMSB").connect()
    assert a.recovery_log is not None
    assert a.recovery_log.pairs[MSGQ].structures == (MSGQ, OVERFLOW)
    workload(a, b, b"before")
    a.checkpoint("structure")  # both structures to the pair's SRDS
    workload(a, b, b"after")
    before = {s: snapshot(facility, s) for s in (MSGQ, OVERFLOW)}
    a.stop_dead()
    b.stop_dead()
    server.restart()  # SIGKILL, and a new, empty server on the same port
    assert not facility.exists(MSGQ) and not facility.exists(OVERFLOW)

    with start("IMSA") as c:
        assert c.recovery_log is not None and c.recovery_log.rebuilt() == [MSGQ, OVERFLOW]
        assert {s: snapshot(facility, s) for s in (MSGQ, OVERFLOW)} == before
        assert "warm start" in c.start_reason
        with facility.connect(OVERFLOW, "AUDITOR") as auditor:
            assert auditor.statistics().list_count == 192
        assert any(s.valid for s in slot_status(PairLayout(settings.root, MSGQ).srds))
    facility.close()


def test_a_cqs_and_its_redis_server_both_killed(
    private_redis: tuple[RedisServer, CouplingFacility, str], tmp_path: Path
) -> None:
    """The CQS process dies (SIGKILL), then the Redis server (SIGKILL, empty again):
    the pair comes back from its log alone, and the CQS restarts warm with its locks."""
    server, facility, url = private_redis
    root = tmp_path / "recovery"
    run_worker(url, root, OVERFLOW, "now")
    server.restart()
    cqs = CQS(
        facility,
        "CQSIMSA",
        system="IMSA",
        msgq=StructurePair(MSGQ, OVERFLOW),
        recovery=RecoverySettings(root),
    )
    with cqs.connect():
        assert cqs.recovery_log is not None
        assert cqs.recovery_log.rebuilt() == [MSGQ, OVERFLOW]
        assert "warm start" in cqs.start_reason
        assert held(facility) == (2, [(TRANA, b"CQSIMSA")] * 2)
        assert len(cqs.resync().requeued) == 2
        assert held(facility) == (4, [])
    facility.close()


def test_a_checkpoint_master_killed_mid_checkpoint_is_taken_over(
    private_redis: tuple[RedisServer, CouplingFacility, str], tmp_path: Path
) -> None:
    """CQSIMSA, master of a structure checkpoint, is SIGKILLed holding the quiesce
    lock; CQSIMSB's put waits for its lease to lapse, then goes through, and CQSIMSB
    takes the checkpoint over (the control queue's entry names it master)."""
    _, facility, url = private_redis
    root = tmp_path / "recovery"
    settings = RecoverySettings(root, poll_seconds=0.05, max_wait_seconds=30)
    pair = StructurePair(MSGQ, OVERFLOW)
    b = CQS(facility, "CQSIMSB", system="IMSB", msgq=pair, recovery=settings).connect()
    try:
        run_worker(url, root, OVERFLOW, "quiesced")
        b.put(TRANB, b"after the master died")
        assert b.recovery_log is not None
        recovery = b.recovery_log.pairs[MSGQ]
        conn = recovery.conns[MSGQ]

        def master() -> str | None:
            return read_function(conn, recovery.area, KIND_CHECKPOINT).info.get("master")

        eventually(lambda: master() == "CQSIMSB", timeout=30)
        eventually(lambda: recovery.last_checkpoint is not None, timeout=30)
        assert recovery.last_checkpoint is not None
        assert recovery.last_checkpoint.took_over == "CQSIMSA.CHKPT"
        assert any(s.valid for s in slot_status(PairLayout(root, MSGQ).srds))
        assert [m.body for m in b.browse(TRANA)] == [b"message %d" % n for n in (2, 3)]
    finally:
        b.disconnect()
    facility.close()
