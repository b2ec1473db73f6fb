"""A checkpoint master that dies: waiting requests proceed, another server takes over.

On memory the master's manager is stopped dead at a checkpoint point and every one of
its connections marked failed (what the backend does when a process vanishes); on
Redis the master is a process of its own, SIGKILLed while it holds the quiesce lock,
and nobody tells the structure: its connections fail when their leases lapse.
"""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from sharedq.cf import UserState
from sharedq.log import RecordType
from sharedq.mq import QueueManager
from sharedq.recovery import PairLayout, slot_status
from sharedq.recovery.control import KIND_CHECKPOINT
from sharedq.recovery.master import read_function
from sharedq.testing import SimulatedFailure
from tests.mq.helpers import drain
from tests.recovery.conftest import APP, STRUCTURES, Group
from tests.recovery.helpers import define_queues, eventually, records, snapshot


def _generation(qm: QueueManager) -> tuple[int, str | None]:
    assert qm.recovery_log is not None
    pair = qm.recovery_log.pairs[APP]
    state = read_function(pair.conns[APP], pair.area, KIND_CHECKPOINT)
    return state.generation, state.info.get("master")


def _fail_everything_of(group: Group, name: str) -> None:
    """What the backend does when a process dies: its users are failed."""
    for structure in STRUCTURES:
        with group.facility.connect(structure, "KILLER") as peer:
            for user in peer.users():
                if user.name.split(".")[0] == name and user.state is UserState.ACTIVE:
                    peer.mark_failed(user.user_id)


@pytest.mark.parametrize("point", ["quiesced", "written"])
def test_a_master_killed_mid_checkpoint_is_taken_over(memory_group: Group, point: str) -> None:
    group = memory_group
    victim: list[QueueManager] = []

    def faults(where: str) -> None:
        if where == point and victim:
            group.kill(victim[0])
            _fail_everything_of(group, "QM1")
            raise SimulatedFailure(f"QM1 died at {where}")

    qm1 = group.start(1, checkpoint_faults=faults)
    # Dead while quiesced: the waiting put finds the master failed and has QM2 take over
    # (its watcher is slowed down, so that it is the put that notices).  Dead after the
    # copy: QM2's watcher notices the function entry names a master that is gone.
    qm2 = group.start(2, recovery=group.settings(poll_seconds=0.05 if point == "written" else 60))
    define_queues(qm1)
    qm1.open("ORDERS").put(b"before", persistent=True)
    generation, _ = _generation(qm2)
    victim.append(qm1)
    with pytest.raises(SimulatedFailure):
        qm1.checkpoint(APP)
    # A put waits (when the dead master holds the quiesce lock) and then goes through.
    put = threading.Thread(
        target=qm2.open("ORDERS").put, args=(b"during",), kwargs={"persistent": True}
    )
    put.start()
    put.join(20)
    assert not put.is_alive()
    assert qm2.recovery_log is not None
    assert (qm2.recovery_log.pairs[APP].gate.held >= 1) is (point == "quiesced")
    # Another server finished the checkpoint: started again, as master, by QM2.
    pair = qm2.recovery_log.pairs[APP]
    eventually(lambda: pair.last_checkpoint is not None)
    assert _generation(qm2) == (generation + 1, "QM2")
    assert pair.last_checkpoint is not None and pair.last_checkpoint.took_over == "QM1.CHKPT"
    assert sorted(m.body for m in drain(qm2, "ORDERS")) == [b"before", b"during"]


def test_a_master_process_killed_holding_the_quiesce_lock_is_taken_over(
    redis_group: Group,
) -> None:
    group = redis_group
    qm2 = group.start(2)
    define_queues(qm2)
    worker = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.recovery.worker",
            "--facility",
            group.url,
            "--root",
            str(group.root),
            "--kill-at",
            "quiesced",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert worker.returncode == -9, worker.stderr
    assert "dying at quiesced" in worker.stdout
    # QM1's checkpoint connection still holds the quiesce lock: QM2's put waits for its
    # lease to lapse, cleans it up, and goes through.
    qm2.open("ORDERS").put(b"after the master died", persistent=True)
    eventually(lambda: _generation(qm2)[1] == "QM2", timeout=30)
    assert qm2.recovery_log is not None
    assert qm2.recovery_log.pairs[APP].gate.held >= 1
    statuses = [s for s in slot_status(PairLayout(group.root, APP).srds) if s.valid]
    assert statuses and max(s.checkpoint_id or 0 for s in statuses) >= 1
    qm2.recover_failed()
    assert [m.body for m in drain(qm2, "WORK")] == [b"from the worker %d" % n for n in range(5)]
    # The checkpoint it took is a true image: lose everything, and it comes back.
    before = snapshot(group.facility)
    group.lose(*STRUCTURES)
    qm2.reconnect()
    assert snapshot(group.facility) == before
    assert records(group.root, APP, RecordType.REBUILD)
