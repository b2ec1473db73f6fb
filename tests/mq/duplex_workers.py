"""A queue manager under duplex durability in a process of its own, killed by SIGKILL.

A top-level function, so that ``multiprocessing``'s spawn start method can import it.
The process reads its machine's boot id from a file the test owns (so that the test
can play a reboot afterwards), opens its own facility on Redis A (the structures),
logs to a recovery root whose logging structure is Redis B, and, once its work is
done, writes down where each of its log writers stood (one per structure's log: the
last lsn written and the last synced) for the test to play the machine crash with,
and dies.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from sharedq.cf import StructureParams, open_facility
from sharedq.log import Durability, LogConfig, logging_structure
from sharedq.mq import QueueManager
from sharedq.mq import structure_params as sized
from sharedq.recovery import RecoverySettings

ADMIN = "DXADMIN"
APP = "DXAPP"
STRUCTURES = (ADMIN, APP)
#: A queue in each structure: units of work span both (and both logs).
ORDERS, NOTES = "ORDERS", "NOTES"
#: Puts out of syncpoint, units of work (an order and a note each), and how many of
#: the orders are gotten (committed) before the end.
PUTS, UNITS, GOTTEN = 30, 12, 9
#: A segment small enough for the workload to roll (and so sync) each log a few times.
SEGMENT_BYTES = 4096


def structure_params(name: str) -> StructureParams:
    return sized(name, queues=4, managers=4, messages=2000, message_bytes=256)


def order(n: int) -> bytes:
    return b"order %03d" % n


def unit_order(n: int) -> bytes:
    return b"unit order %03d" % n


def note(n: int) -> bytes:
    return b"note %03d" % n


def settings(root: Path, logging_url: str) -> RecoverySettings:
    """Duplex durability with a sync interval no test outlasts: only segment rolls
    sync, so each log's last segment holds records that were only pushed."""
    return RecoverySettings(
        root,
        durability=Durability.duplex(600_000),
        logging_structure=logging_url,
        poll_seconds=0.05,
        max_wait_seconds=30,
        log_config=LogConfig(segment_bytes=SEGMENT_BYTES),
    )


def put_and_die(
    facility_url: str, root: str, logging_url: str, boot_file: str, report: str
) -> None:
    """As QM1: ``PUTS`` persistent orders out of syncpoint, a structure checkpoint,
    ``UNITS`` units of an order and a note, one unit backed out, the first ``GOTTEN``
    orders gotten; then the report (per structure, ``{"durable": .., "last": ..}`` of
    its writer), then SIGKILL."""
    logging_structure.BOOT_ID_FILE = Path(boot_file)
    facility = open_facility(facility_url)
    qm = QueueManager(
        facility,
        "QM1",
        1,
        admin=ADMIN,
        structures=[APP],
        recovery=settings(Path(root), logging_url),
    )
    qm.define_queue(ORDERS, structure=APP, max_depth=1000)
    qm.define_queue(NOTES, structure=ADMIN, max_depth=1000)
    orders, notes = qm.open(ORDERS), qm.open(NOTES)
    for n in range(PUTS):
        orders.put(order(n), persistent=True)
    qm.checkpoint(APP)
    for n in range(UNITS):
        with qm.unit_of_work() as uow:
            orders.put(unit_order(n), persistent=True, uow=uow)
            notes.put(note(n), persistent=True, uow=uow)
    backed_out = qm.unit_of_work()
    orders.put(b"backed out", persistent=True, uow=backed_out)
    notes.put(b"backed out", persistent=True, uow=backed_out)
    backed_out.backout()
    for _ in range(GOTTEN):
        orders.get()
    log = qm.recovery_log
    assert log is not None
    where = {}
    for structure in STRUCTURES:
        writer = log.pairs[structure].writer
        assert writer is not None
        where[structure] = {"durable": writer.durable_lsn, "last": writer.last_lsn}
    Path(report).write_text(json.dumps(where))
    os.kill(os.getpid(), signal.SIGKILL)
