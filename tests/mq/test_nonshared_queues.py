"""Nonshared queues (QSGDISP(QMGR)): one manager's own, with the shared queues' API.

Every test but the crash test runs on memory and on Redis (``make_qm``): on Redis the
shared structures are on the server, and each manager's own structure stays in its
own memory.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cf.memory import MemoryFacility
from sharedq.cf.redis import RedisFacility
from sharedq.log import LogStream
from sharedq.mq import (
    Disposition,
    InvalidArgument,
    LogJournal,
    NoMessageAvailable,
    QueueExists,
    QueueManager,
    UnknownQueue,
    directory,
    structure_params,
)
from sharedq.mq.errors import MQReason
from sharedq.mq.private_queues import is_private, private_structure_name
from sharedq.recovery import RecoverySettings
from sharedq.testing.redis_server import RedisServer
from tests.mq import nonshared_worker as worker
from tests.mq.conftest import ADMIN, APP, MakeManager
from tests.mq.helpers import drain

QMGR = Disposition.QMGR
ROOT = Path(__file__).resolve().parents[2]


def bodies(messages: list) -> list[bytes]:  # type: ignore[type-arg]
    return [message.body for message in messages]


# -- defining and using ----------------------------------------------------------------


def test_a_nonshared_queue_lives_in_its_managers_own_structure(make_qm: MakeManager) -> None:
    qm = make_qm(1)
    definition = qm.define_queue("LQ1", disposition=QMGR, max_depth=10)
    assert definition.disposition is QMGR
    assert definition.structure == private_structure_name(1)
    assert is_private(definition.structure)
    assert qm.private == private_structure_name(1) not in qm.structures  # not the group's
    assert qm.private in qm.view().structures
    assert qm.queue_definition("LQ1") == definition
    assert qm.view().queue("LQ1").structure == private_structure_name(1)


def test_a_manager_with_no_nonshared_queue_has_no_structure_of_its_own(
    make_qm: MakeManager, tmp_path: Path
) -> None:
    """Made at the first nonshared queue: until then, nothing of it (no structure, no
    log pair, no structure number)."""
    qm = make_qm(1, recovery=RecoverySettings(root=tmp_path))
    qm.define_queue("SQ1")
    assert qm.private not in qm.view().structures
    assert not (tmp_path / qm.private).exists()
    qm.define_queue("LQ1", disposition=QMGR)
    assert qm.private in qm.view().structures
    assert (tmp_path / qm.private).is_dir()
    assert qm.recovery_log is not None and qm.private in qm.recovery_log.pairs


def test_put_get_and_units_of_work_work_as_on_a_shared_queue(make_qm: MakeManager) -> None:
    qm = make_qm(1)
    qm.define_queue("LQ1", disposition=QMGR)
    queue = qm.open("LQ1")
    queue.put(b"low", priority=1)
    queue.put(b"high", priority=8)
    with qm.unit_of_work() as uow:
        queue.put(b"in unit", uow=uow)
        assert bodies(drain(qm, "LQ1")) == [b"high", b"low"]  # not yet committed
    uow = qm.unit_of_work()
    assert queue.get(uow=uow).body == b"in unit"
    uow.backout()
    assert queue.get().body == b"in unit"  # given back by the backout
    with pytest.raises(NoMessageAvailable):
        queue.get()


def test_browse_get_many_put_many_and_alter(make_qm: MakeManager) -> None:
    qm = make_qm(1)
    qm.define_queue("LQ1", disposition=QMGR)
    queue = qm.open("LQ1")
    queue.put_many([b"a", b"b", b"c"])
    assert [m.body for m in queue.browser()] == [b"a", b"b", b"c"]
    assert bodies(queue.get_many(2)) == [b"a", b"b"]
    altered = qm.alter_queue("LQ1", put_inhibited=True)
    assert altered.put_inhibited and altered.disposition is QMGR
    with pytest.raises(Exception) as refused:
        queue.put(b"d")
    assert refused.value.reason is MQReason.PUT_INHIBITED  # type: ignore[attr-defined]
    qm.alter_queue("LQ1", put_inhibited=False)
    queue.put(b"d")
    assert bodies(drain(qm, "LQ1")) == [b"c", b"d"]


def test_max_depth_holds_on_a_nonshared_queue(make_qm: MakeManager) -> None:
    qm = make_qm(1)
    qm.define_queue("LQ1", disposition=QMGR, max_depth=2)
    queue = qm.open("LQ1")
    queue.put(b"1")
    queue.put(b"2")
    with pytest.raises(Exception) as full:
        queue.put(b"3")
    assert full.value.reason is MQReason.Q_FULL  # type: ignore[attr-defined]


def test_a_unit_of_work_spans_shared_and_nonshared_queues(make_qm: MakeManager) -> None:
    qm = make_qm(1)
    qm.define_queue("LQ1", disposition=QMGR)
    qm.define_queue("SQ1", structure=APP)
    with qm.unit_of_work() as uow:
        qm.open("LQ1").put(b"private", uow=uow)
        qm.open("SQ1").put(b"shared", uow=uow)
    uow = qm.unit_of_work()
    qm.open("LQ1").get(uow=uow)
    qm.open("SQ1").get(uow=uow)
    uow.backout()
    assert bodies(drain(qm, "LQ1")) == [b"private"]
    assert bodies(drain(qm, "SQ1")) == [b"shared"]


def test_get_wait_is_woken_by_a_put_on_a_nonshared_queue(make_qm: MakeManager) -> None:
    qm = make_qm(1)
    qm.define_queue("LQ1", disposition=QMGR)
    queue = qm.open("LQ1")
    got: list[bytes] = []
    waiter = threading.Thread(target=lambda: got.append(queue.get(wait=30).body))
    waiter.start()
    from sharedq.testing.waits import wait_asleep_in_wait_events

    wait_asleep_in_wait_events(waiter)
    queue.put(b"wake")
    waiter.join()
    assert got == [b"wake"]


def test_a_journal_given_instead_of_recovery_settings_logs_the_group_structures_only(
    make_qm: MakeManager, tmp_path: Path
) -> None:
    """Without recovery settings the nonshared queues end with the manager, so a
    journal hears nothing of them, and a unit spanning both kinds commits."""
    streams = {s: LogStream(tmp_path / s, name=f"{s}.LOG", structure=s) for s in (ADMIN, APP)}
    qm = make_qm(1, journal=LogJournal("QM1", streams))
    qm.define_queue("LQ1", disposition=QMGR)
    qm.define_queue("SQ1", structure=APP)
    with qm.unit_of_work() as uow:
        qm.open("LQ1").put(b"private", uow=uow, persistent=True)
        qm.open("SQ1").put(b"shared", uow=uow, persistent=True)
    assert bodies(drain(qm, "LQ1")) == [b"private"]
    assert bodies(drain(qm, "SQ1")) == [b"shared"]


# -- only its manager reaches it ---------------------------------------------------------


def test_another_manager_cannot_see_or_open_it(make_qm: MakeManager) -> None:
    qm1, qm2 = make_qm(1), make_qm(2)
    qm1.define_queue("LQ1", disposition=QMGR)
    qm1.open("LQ1").put(b"mine")
    qm1.define_queue("SQ1")
    assert qm1.queue_names() == ["LQ1", "SQ1"]
    assert qm2.queue_names() == ["SQ1"]
    with pytest.raises(UnknownQueue) as unknown:
        qm2.open("LQ1")
    assert unknown.value.reason is MQReason.UNKNOWN_OBJECT_NAME  # 2085
    with pytest.raises(UnknownQueue):
        qm2.queue_definition("LQ1")
    assert qm1.private not in qm2.view().structures


def test_a_peer_recovers_a_failed_manager_in_the_group_structures_only(
    make_qm: MakeManager,
) -> None:
    """A peer's recovery of a failed manager reaches neither the failed manager's own
    structure nor its own (the failed manager's next start deals with its own)."""
    qm1, qm2 = make_qm(1), make_qm(2)
    for qm in (qm1, qm2):
        qm.define_queue(f"LQ{qm.qm_id}", disposition=QMGR)
    qm1.define_queue("SQ1", structure=APP)
    uow = qm1.unit_of_work()
    qm1.open("SQ1").put(b"in flight", uow=uow)
    qm1.open("LQ1").put(b"in flight too", uow=uow)
    qm1.stop_dead()
    qm2.declare_failed("QM1")
    report = qm2.recover("QM1")
    assert sorted(report.structures) == sorted([ADMIN, APP])
    assert report.puts_deleted == 1  # on SQ1; LQ1 went with QM1's structure
    assert drain(qm2, "SQ1") == []


def test_two_managers_may_each_have_a_nonshared_queue_of_one_name(make_qm: MakeManager) -> None:
    qm1, qm2 = make_qm(1), make_qm(2)
    qm1.define_queue("LQ1", disposition=QMGR)
    qm2.define_queue("LQ1", disposition=QMGR)
    qm1.open("LQ1").put(b"of QM1")
    qm2.open("LQ1").put(b"of QM2")
    assert bodies(drain(qm1, "LQ1")) == [b"of QM1"]
    assert bodies(drain(qm2, "LQ1")) == [b"of QM2"]


# -- names: shared or nonshared, never both -------------------------------------------------


def test_a_nonshared_queue_cannot_take_a_shared_queues_name(make_qm: MakeManager) -> None:
    qm1, qm2 = make_qm(1), make_qm(2)
    qm2.define_queue("SQ1")
    for qm in (qm1, qm2):
        with pytest.raises(QueueExists) as refused:
            qm.define_queue("SQ1", disposition=QMGR)
        assert refused.value.reason is MQReason.OBJECT_ALREADY_EXISTS  # 2100
        assert "is a shared queue" in str(refused.value)
    assert qm1.queue_names() == qm2.queue_names() == ["SQ1"]


def test_a_shared_queue_cannot_take_a_nonshared_queues_name(make_qm: MakeManager) -> None:
    qm1, qm2 = make_qm(1), make_qm(2)
    qm1.define_queue("LQ1", disposition=QMGR)
    for qm in (qm1, qm2):  # QM2 cannot see QM1's queue, but the name is held
        with pytest.raises(QueueExists) as refused:
            qm.define_queue("LQ1", structure=APP)
        assert "nonshared queue of QM1" in str(refused.value)
    assert qm2.queue_names() == []


class PauseAtHold:
    """A fault hook that stops its manager after (or just before) its next write to
    the administrative structure (a definer's hold on a name), until the test lets it
    go on."""

    def __init__(self, *, before: bool = False) -> None:
        self.before = before
        self.armed = False
        self.paused = threading.Event()
        self.resume = threading.Event()

    def __call__(self, request: str, structure: str, before: bool) -> None:
        if self.armed and request == "write" and structure == ADMIN and before is self.before:
            self.armed = False
            self.paused.set()
            assert self.resume.wait(30), "the test never let the definer go on"


def _define_paused_at_hold(qm: QueueManager, hook: PauseAtHold, **attributes: object) -> list:
    """Start defining LQ in a thread of its own; returns once it holds the name."""
    outcome: list = []  # type: ignore[type-arg]

    def define() -> None:
        try:
            outcome.append(qm.define_queue("LQ", **attributes))
        except QueueExists as error:
            outcome.append(error)

    hook.armed = True
    definer = threading.Thread(target=define)
    definer.start()
    assert hook.paused.wait(30)
    outcome.append(definer)
    return outcome


@pytest.mark.parametrize("first", ["nonshared", "shared"])
def test_defining_one_name_both_ways_at_once_never_makes_both(
    make_qm: MakeManager, first: str
) -> None:
    """A definer holds the name, then looks for the other kind: whichever way the two
    interleave, at most one queue named LQ exists after them.  Here the first definer
    stops right after its hold, the second runs through and is refused (it sees the
    hold), and the first then completes."""
    hook = PauseAtHold()
    qm1 = make_qm(1, faults=hook)
    qm2 = make_qm(2)
    qm1.define_queue("OTHER", disposition=QMGR)  # its own structure made beforehand
    paused_way = {"disposition": QMGR} if first == "nonshared" else {"structure": APP}
    other_way = {"structure": APP} if first == "nonshared" else {"disposition": QMGR}
    outcome = _define_paused_at_hold(qm1, hook, **paused_way)
    with pytest.raises(QueueExists):
        qm2.define_queue("LQ", **other_way)
    hook.resume.set()
    outcome.pop().join()
    (defined,) = outcome
    assert not isinstance(defined, QueueExists)
    disposition = QMGR if first == "nonshared" else Disposition.SHARED
    assert defined.disposition is disposition
    assert ("LQ" in qm2.queue_names()) is (first == "shared")
    assert "LQ" in qm1.queue_names()


@pytest.mark.parametrize("first", ["nonshared", "shared"])
def test_a_definer_that_held_the_name_second_looks_again_and_is_refused(
    make_qm: MakeManager, first: str
) -> None:
    """The other interleaving: the first definer found the name free and stops just
    before its hold; the second defines the other kind meanwhile.  The first, once it
    holds the name, looks again, finds the other and is refused, its hold let go."""
    hook = PauseAtHold(before=True)
    qm1 = make_qm(1, faults=hook)
    qm2 = make_qm(2)
    qm1.define_queue("OTHER", disposition=QMGR)
    qm2.define_queue("OTHER2", disposition=QMGR)
    paused_way = {"disposition": QMGR} if first == "nonshared" else {"structure": APP}
    other_way = {"structure": APP} if first == "nonshared" else {"disposition": QMGR}
    outcome = _define_paused_at_hold(qm1, hook, **paused_way)
    qm2.define_queue("LQ", **other_way)
    hook.resume.set()
    outcome.pop().join()
    (refused,) = outcome
    assert isinstance(refused, QueueExists)
    assert ("LQ" in qm1.queue_names()) is (first == "nonshared")  # QM2's shared LQ
    assert "LQ" in qm2.queue_names()
    # The refused definer's hold is gone: the name is held by the winner only.
    holder = directory.SHARED_HOLDER if first == "nonshared" else 2
    assert directory.queue_name_holders(qm2.admin, "LQ") == {holder}


def test_a_nonshared_queue_cannot_be_defined_twice(make_qm: MakeManager) -> None:
    qm = make_qm(1)
    qm.define_queue("LQ1", disposition=QMGR)
    with pytest.raises(QueueExists):
        qm.define_queue("LQ1", disposition=QMGR)


def test_a_name_a_closed_manager_without_recovery_held_is_free_again(
    make_qm: MakeManager,
) -> None:
    """Without recovery settings a manager's nonshared queues end with it: its next
    incarnation has none, and their names may be shared queues' again."""
    qm1 = make_qm(1)
    qm1.define_queue("LQ1", disposition=QMGR)
    qm1.open("LQ1").put(b"gone with the manager", persistent=True)
    qm1.close()
    again = make_qm(1)
    assert again.queue_names() == []
    with pytest.raises(UnknownQueue):
        again.open("LQ1")
    again.define_queue("LQ1")  # shared now
    assert make_qm(2).queue_names() == ["LQ1"]


# -- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["qmgr", "QMGR", 1, None, True])
def test_a_disposition_that_is_no_disposition_is_refused(make_qm: MakeManager, bad: object) -> None:
    qm = make_qm(1)
    with pytest.raises(InvalidArgument) as refused:
        qm.define_queue("LQ1", disposition=bad)
    assert refused.value.reason is MQReason.BAD_ARGUMENT
    assert "disposition" in str(refused.value)
    assert qm.queue_names() == []


@pytest.mark.parametrize("disposition", [Disposition.SHARED, QMGR])
def test_a_queues_disposition_cannot_be_altered(make_qm: MakeManager, disposition: object) -> None:
    qm = make_qm(1)
    qm.define_queue("LQ1", disposition=QMGR)
    with pytest.raises(InvalidArgument, match="cannot alter"):
        qm.alter_queue("LQ1", disposition=disposition)
    assert qm.queue_definition("LQ1").disposition is QMGR


def test_a_nonshared_queue_takes_no_structure(make_qm: MakeManager) -> None:
    qm = make_qm(1)
    with pytest.raises(InvalidArgument, match="own structure"):
        qm.define_queue("LQ1", disposition=QMGR, structure=APP)


def test_no_shared_queue_goes_in_a_managers_own_structure(make_qm: MakeManager) -> None:
    qm = make_qm(1)
    with pytest.raises(InvalidArgument, match="own structure"):
        qm.define_queue("SQ1", structure=private_structure_name(1))
    assert qm.queue_names() == []


def test_with_recovery_settings_a_close_and_a_restart_keep_persistent_messages(
    make_qm: MakeManager, tmp_path: Path
) -> None:
    settings = RecoverySettings(root=tmp_path)
    qm = make_qm(1, recovery=settings)
    qm.define_queue("LQ1", disposition=QMGR, max_depth=50, description="mine")
    queue = qm.open("LQ1")
    queue.put_many([b"p1", b"p2", b"p3"], persistent=True)
    queue.put(b"n1", persistent=False)
    with qm.unit_of_work() as uow:
        queue.get(uow=uow)  # p1, gone for good
    qm.close()
    again = make_qm(1, recovery=settings)
    definition = again.queue_definition("LQ1")
    assert (definition.max_depth, definition.description) == (50, "mine")
    assert bodies(drain(again, "LQ1")) == [b"p2", b"p3"]
    with pytest.raises(QueueExists):  # the name is still held
        make_qm(2, recovery=settings).define_queue("LQ1")


# -- recovery: a real SIGKILL ----------------------------------------------------------------


@pytest.fixture
def server(redis_servers) -> RedisServer:  # type: ignore[no-untyped-def]
    server: RedisServer = redis_servers()
    return server


@pytest.fixture
def redis_facility(server: RedisServer) -> Iterator[CouplingFacility]:
    with RedisFacility.from_url(server.url) as opened:
        opened.create(structure_params(ADMIN, queues=16, managers=4, messages=2000))
        yield opened


def _killed_worker(url: str, root: Path) -> dict[str, list[str]]:
    """Run the worker's workload in a process of its own, then SIGKILL it."""
    with (root.parent / "worker.log").open("w") as stderr:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "tests.mq.nonshared_worker"),
                *("--facility", url, "--root", str(root), "--admin", ADMIN),
            ],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # blocks until the workload is done
        assert line, (root.parent / "worker.log").read_text()
        left: dict[str, list[str]] = json.loads(line)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert process.stdin is not None
        process.stdin.close()
        process.stdout.close()  # type: ignore[union-attr]
    assert process.returncode == -signal.SIGKILL
    return left


def test_persistent_messages_on_a_nonshared_queue_survive_a_sigkill(
    server: RedisServer, redis_facility: CouplingFacility, tmp_path: Path
) -> None:
    """The manager's own structure died with its process; its next incarnation rebuilds
    it from its SRDS and log: every committed persistent message is back, exactly
    once; nonpersistent ones and the killed unit's puts are gone, its get given back.
    On the shared queue, in Redis, nonpersistent messages outlive the manager."""
    root = tmp_path / "recovery"
    settings = RecoverySettings(root=root)
    left = _killed_worker(server.url, root)
    with QueueManager(redis_facility, "QM2", 2, admin=ADMIN, recovery=settings) as peer:
        peer.declare_failed("QM1")  # as an operator would, rather than wait for its lease
        peer.recover("QM1")  # its shared part: nothing in flight there
        with pytest.raises(UnknownQueue):
            peer.open("LQ1")
    with QueueManager(redis_facility, "QM1", 1, admin=ADMIN, recovery=settings) as restarted:
        assert restarted.restart_report.puts_deleted == worker.IN_FLIGHT
        assert restarted.queue_names() == ["LQ1", "SQ1"]
        assert restarted.queue_definition("LQ1").disposition is QMGR
        present = Counter(
            body.decode() for name in ("LQ1", "SQ1") for body in bodies(drain(restarted, name))
        )
    committed = Counter(left["committed"])
    assert len(committed) == 2 * worker.PERSISTENT - worker.GOTTEN
    nonpersistent = Counter(b for b in left["nonpersistent"] if b.startswith("SQ1."))
    assert present == committed + nonpersistent  # each exactly once
    assert not set(present) & set(left["lost"])
    assert (root / private_structure_name(1)).is_dir()  # its own log and SRDSs


def test_a_group_in_memory_killed_whole_is_rebuilt_from_its_logs(tmp_path: Path) -> None:
    """The default backend: the group's structures and the manager's own were all in
    the killed process's memory.  A new process's managers rebuild every one from its
    SRDS and log: the shared queue keeps only persistent messages too, the nonshared
    one as in the test above."""
    root = tmp_path / "recovery"
    settings = RecoverySettings(root=root)
    left = _killed_worker("memory://", root)
    with QueueManager(MemoryFacility(), "QM1", 1, admin=ADMIN, recovery=settings) as restarted:
        assert restarted.queue_names() == ["LQ1", "SQ1"]
        present = Counter(
            body.decode() for name in ("LQ1", "SQ1") for body in bodies(drain(restarted, name))
        )
    assert present == Counter(left["committed"])
