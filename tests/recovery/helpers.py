"""What the recovery tests share: a workload, snapshots of recoverable objects, counts."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from sharedq.cf import CouplingFacility
from sharedq.clock import SystemClock, retry_until
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
    """Return once ``condition()`` is true; fail if it is not within ``timeout`` s."""
    assert retry_until(condition, timeout_s=timeout, first_pause_s=0.01), (
        "the condition did not come true in time"
    )


class PausingClock(SystemClock):
    """The system's clock, telling a test which threads paused on it.

    Given to servers as their recovery clock (``RecoverySettings(clock=...)``): a server
    pauses only while it waits for something (a lock, a quiesced structure, another
    server's checkpoint), so a thread seen pausing is waiting.
    """

    def __init__(self) -> None:
        self._paused: set[threading.Thread] = set()
        self._changed = threading.Condition()

    def sleep_s(self, seconds: float) -> None:
        with self._changed:
            self._paused.add(threading.current_thread())
            self._changed.notify_all()
        super().sleep_s(seconds)

    def wait_paused(self, threads: Iterable[threading.Thread], timeout: float = 30.0) -> None:
        """Return once every one of ``threads`` has paused; fail if not within ``timeout``."""
        wanted = set(threads)
        with self._changed:
            assert self._changed.wait_for(lambda: wanted <= self._paused, timeout), (
                "not every thread came to wait"
            )
