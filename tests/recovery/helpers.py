"""What the recovery tests share: a workload, snapshots of recoverable objects, counts."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from sharedq.cf import CouplingFacility
from sharedq.log import LogRecord, LogStream, RecordType
from sharedq.mq import IndexType, QueueManager, UnitOfWork
from sharedq.mq.classify import recoverable_contents
from sharedq.recovery import PairLayout, StructureContents, contents
from tests.recovery.conftest import ADMIN, APP, STRUCTURES


def snapshot(
    facility: CouplingFacility, names: tuple[str, ...] = STRUCTURES
) -> dict[str, StructureContents]:
    """The recoverable objects of each structure now, read by an auditor."""
    found = {}
    for name in names:
        with facility.connect(name, "AUDITOR") as auditor:
            found[name] = recoverable_contents(contents(auditor))
    return found


def define_queues(qm: QueueManager) -> None:
    qm.define_queue("ORDERS", structure=APP, max_depth=500)
    qm.define_queue("BY.ID", structure=APP, index=IndexType.MSG_ID)
    qm.define_queue("ADMIN.Q", structure=ADMIN)


def workload(qm1: QueueManager, qm2: QueueManager, rounds: int, *, tag: str = "") -> UnitOfWork:
    """Puts, gets, commits and backouts of persistent and nonpersistent messages.

    Returns a prepared unit of ``qm2`` left in doubt (its entries must come back too).
    """
    orders, by_id, admin = qm1.open("ORDERS"), qm1.open("BY.ID"), qm1.open("ADMIN.Q")
    for n in range(rounds):
        orders.put(b"%s order %d" % (tag.encode(), n), priority=n % 10, persistent=n % 3 != 0)
        by_id.put(b"indexed", persistent=True, msg_id=b"%s-%d" % (tag.encode(), n))
        with qm1.unit_of_work() as uow:
            orders.put(b"in unit %d" % n, persistent=True, uow=uow)
            admin.put(b"admin %d" % n, persistent=True, uow=uow)
        if n % 2:
            with qm2.unit_of_work() as uow:
                qm2.open("ORDERS").get(uow=uow)
        else:
            uow = qm2.unit_of_work()
            qm2.open("ADMIN.Q").get(uow=uow)
            uow.backout()
    qm1.alter_queue("ORDERS", description=f"altered {tag}")
    # A unit prepared and left for its coordinator, in a thread of its own (a thread
    # has one unit at a time); the thread stays, parked, so that no later thread takes
    # its identity (and with it the prepared unit's slot).
    prepared: list[UnitOfWork] = []
    done = threading.Event()

    def prepare() -> None:
        try:
            uow = qm2.unit_of_work()
            qm2.open("ADMIN.Q").put(b"prepared %s" % tag.encode(), persistent=True, uow=uow)
            qm2.open("ORDERS").get(uow=uow)
            uow.prepare()
            prepared.append(uow)
        finally:
            done.set()
        threading.Event().wait(3600)

    threading.Thread(target=prepare, daemon=True).start()
    done.wait()
    (unit,) = prepared
    return unit


def records(root: Path, structure: str, record_type: RecordType) -> list[LogRecord]:
    """Every record of a type in a structure's log."""
    layout = PairLayout(root, structure)
    stream = LogStream(layout.log, name=f"{structure}.LOG", structure=structure)
    return [r for r in stream.records(structures={structure}) if r.type == record_type]


def eventually(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true in time"
        time.sleep(0.01)
