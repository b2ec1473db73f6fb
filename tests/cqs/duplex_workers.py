"""A CQS under duplex durability in a process of its own, killed by SIGKILL.

A top-level function, so that ``multiprocessing``'s spawn start method can import it.
The process reads its machine's boot id from a file the test owns (so that the test
can play a reboot afterwards), opens its own facility on Redis A (the queue
structures), logs to a recovery root whose logging structure is Redis B, and, once
its work is done, writes down where its log writer stood (the last lsn it wrote and
the last it synced) for the test to play the machine crash with, and dies.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from sharedq.cf import open_facility
from sharedq.cqs import CQS, make_name
from sharedq.log import Durability, LogConfig, logging_structure
from sharedq.recovery import RecoverySettings

MSGQ = "MSGQ01"
TRANA = make_name(1, "TRANA")
#: Puts before the structure checkpoint, after it, deletes and reads left locked.
PUTS_BEFORE, PUTS_AFTER, DELETED, LOCKED = 20, 40, 7, 3


def body(n: int) -> bytes:
    return b"duplex message %03d" % n


def settings(root: Path, logging_url: str, segment_bytes: int | None = None) -> RecoverySettings:
    """Duplex durability with a sync interval no test outlasts: only a segment roll
    syncs (``segment_bytes``: small enough for the workload to roll a few times;
    ``None``: the default, which it never fills, so nothing is synced)."""
    config = LogConfig() if segment_bytes is None else LogConfig(segment_bytes=segment_bytes)
    return RecoverySettings(
        root,
        durability=Durability.duplex(600_000),
        logging_structure=logging_url,
        strchkpt=None,
        poll_seconds=0.05,
        log_config=config,
    )


def put_and_die(
    facility_url: str,
    root: str,
    logging_url: str,
    boot_file: str,
    report: str,
    segment_bytes: int | None,
) -> None:
    """As CQSIMSA: ``PUTS_BEFORE`` recoverable puts, a structure checkpoint,
    ``PUTS_AFTER`` more, the first ``DELETED`` read and deleted, the next ``LOCKED``
    read and left locked; then the report (``{"durable": .., "last": ..}`` of its
    writer of the MSGQ pair's log), then SIGKILL."""
    logging_structure.BOOT_ID_FILE = Path(boot_file)
    with open_facility(facility_url) as facility:
        cqs = CQS(
            facility,
            "CQSIMSA",
            system="IMSA",
            msgq=MSGQ,
            recovery=settings(Path(root), logging_url, segment_bytes),
        ).connect()
        for n in range(PUTS_BEFORE):
            cqs.put(TRANA, body(n))
        cqs.checkpoint("structure")
        for n in range(PUTS_BEFORE, PUTS_BEFORE + PUTS_AFTER):
            cqs.put(TRANA, body(n))
        for _ in range(DELETED):
            message = cqs.read(TRANA)
            assert message is not None and message.token is not None
            cqs.delete(message.token)
        for _ in range(LOCKED):
            assert cqs.read(TRANA) is not None
        log = cqs.recovery_log
        assert log is not None
        writer = log.journal.writer_for(MSGQ)
        where = {"writer": writer.name, "durable": writer.durable_lsn, "last": writer.last_lsn}
        Path(report).write_text(json.dumps(where))
        os.kill(os.getpid(), signal.SIGKILL)
