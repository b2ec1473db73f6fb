"""Structure copy: every object, recoverable or not, moves to a larger structure, and
the managers carry on there: their requests wait, then proceed on the copy."""

from __future__ import annotations

import threading
from dataclasses import replace

from sharedq.log import RecordType
from sharedq.mq import Message, QueueManager
from sharedq.recovery import StructureContents, contents
from sharedq.recovery.control import ControlArea
from tests.mq.helpers import drain
from tests.recovery.conftest import APP, Group, params
from tests.recovery.helpers import define_queues, records

_AREA = ControlArea()


def _everything(group: Group) -> StructureContents:
    """Every object of the structure but the recovery machinery's own entries."""
    with group.facility.connect(APP, "AUDITOR") as auditor:
        found = contents(auditor)
    keep = {
        e.entry_id for entries in found.lists.values() for e in entries if not _AREA.is_machinery(e)
    }
    return found.only(keep)


def test_a_copy_to_a_larger_structure_keeps_every_object_and_the_work_goes_on(
    group: Group,
) -> None:
    qm1, qm2 = group.start(1), group.start(2)
    define_queues(qm1)
    orders = qm1.open("ORDERS")
    for n in range(10):
        orders.put(b"m%d" % n, persistent=n % 2 == 0, priority=n % 10)
    # A unit of work of QM2 in flight across the copy, and a get-wait in progress.
    in_flight, finish, outcome = threading.Event(), threading.Event(), []
    waited: list[Message] = []

    def unit() -> None:
        uow = qm2.unit_of_work()
        qm2.open("ORDERS").get(uow=uow)
        qm2.open("ORDERS").put(b"uncommitted", persistent=False, uow=uow)
        in_flight.set()
        finish.wait(30)
        uow.commit()
        outcome.append("committed")

    def wait_for_one() -> None:
        waited.append(qm2.open("BY.ID").get(wait=30))

    threads = [threading.Thread(target=unit), threading.Thread(target=wait_for_one)]
    for thread in threads:
        thread.start()
    assert in_flight.wait(30)
    before = _everything(group)
    size = params(APP).size
    bigger = replace(params(APP), size=2 * size, max_size=4 * size)

    result = qm1.copy_structure(bigger)

    assert result.entries > 10 and result.old_identity != result.new_identity
    with group.facility.connect(APP, "AUDITOR") as auditor:
        assert auditor.statistics().size == 2 * size
    assert _everything(group) == before  # nonpersistent messages too
    # Both managers go on, on the copy, without a failed request.
    orders.put(b"after the copy", persistent=True)
    qm1.open("BY.ID").put(b"wakes the waiter", persistent=True, msg_id=b"W")
    finish.set()
    for thread in threads:
        thread.join(30)
    assert outcome == ["committed"]
    assert [m.body for m in waited] == [b"wakes the waiter"]
    bodies = sorted(m.body for m in drain(qm1, "ORDERS"))
    assert len(bodies) == 11 and b"uncommitted" in bodies and b"after the copy" in bodies
    (rebuild,) = [
        r
        for r in records(group.root, APP, RecordType.REBUILD)
        if r.payload_value()["kind"] == "copy"
    ]
    assert rebuild.payload_value()["params"]["size"] == 2 * size


def test_a_structure_lost_after_a_copy_is_recovered_from_the_log(group: Group) -> None:
    """The copy took new seqs for its loading: the log still rebuilds the structure."""
    from tests.recovery.helpers import snapshot

    qm1, qm2 = group.start(1), group.start(2)
    define_queues(qm1)
    for n in range(5):
        qm1.open("ORDERS").put(b"m%d" % n, persistent=True)
    qm1.checkpoint(APP)
    qm1.copy_structure(replace(params(APP), size=2 * params(APP).size, max_size=None))
    with qm2.unit_of_work() as uow:
        qm2.open("ORDERS").get(uow=uow)
    qm1.open("ORDERS").put(b"later", persistent=True)
    before = snapshot(group.facility)
    group.lose(APP)
    if group.backend == "redis":
        group.lose()
    manager: QueueManager = qm2
    manager.reconnect()
    assert snapshot(group.facility) == before
