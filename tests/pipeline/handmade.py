"""A small log written by hand, record by record, with the message kinds the workload
never produces (expiry, purge, cold queue, requeue, out-of-syncpoint put and get,
locked and in-doubt messages at the end), and times chosen to the millisecond."""

from __future__ import annotations

from pathlib import Path

from sharedq.log import LogStream, LogWriter, RecordType
from sharedq.log.records import ChangeOp
from sharedq.testing import ManualClock

STRUCTURE = "HS"
#: The log's first instant: a whole second, so that intervals start on it.
T0 = 1_800_000_000 * 1_000_000

#: The record type and op of each message kind.
RECORD_TYPES = {
    "put": (RecordType.PUT, ChangeOp.WRITE),
    "sync-put": (RecordType.MOVE, ChangeOp.MOVE),
    "commit-puts": (RecordType.MOVE, ChangeOp.MOVE),
    "get": (RecordType.READ, ChangeOp.MOVE),
    "sync-get": (RecordType.DELETE, ChangeOp.DELETE),
    "commit-gets": (RecordType.DELETE, ChangeOp.DELETE),
    "backout-puts": (RecordType.DELETE, ChangeOp.DELETE),
    "backout-gets": (RecordType.UNLOCK, ChangeOp.MOVE),
    "expire": (RecordType.MOVE, ChangeOp.MOVE),
    "purge": (RecordType.DELETE, ChangeOp.DELETE),
    "cold-queue": (RecordType.MOVE, ChangeOp.MOVE),
    "requeue": (RecordType.MOVE, ChangeOp.MOVE),
}

#: (ms after T0, writer, kind, message number, queue, uow)
SCRIPT: list[tuple[int, str, str, int, str, str]] = [
    # m1: put in a unit, committed, gotten by QM2 100 ms after its put, committed at 150
    (0, "QM1", "put", 1, "Q1", "a1"),
    (0, "QM1", "put", 2, "Q1", "a2"),
    (0, "QM1", "put", 3, "Q1", "a3"),
    (0, "QM1", "put", 4, "Q2", "a1"),
    (0, "QM1", "put", 5, "Q2", "a1"),
    (0, "QM1", "put", 6, "Q2", "a1"),
    (0, "QM1", "put", 7, "Q2", "a1"),
    (0, "QM1", "put", 9, "Q1", "a1"),
    (1, "QM1", "sync-put", 3, "Q1", "a3"),
    (5, "QM1", "backout-puts", 2, "Q1", "a2"),
    (10, "QM1", "commit-puts", 1, "Q1", "a1"),
    (10, "QM1", "commit-puts", 4, "Q2", "a1"),
    (10, "QM1", "commit-puts", 5, "Q2", "a1"),
    (10, "QM1", "commit-puts", 6, "Q2", "a1"),
    (10, "QM1", "commit-puts", 7, "Q2", "a1"),
    (10, "QM1", "commit-puts", 9, "Q1", "a1"),
    (100, "QM2", "get", 1, "Q1", "b1"),
    (150, "QM2", "commit-gets", 1, "Q1", "b1"),
    # m3: gotten and backed out twice, then gotten out of syncpoint
    (200, "QM2", "get", 3, "Q1", "b2"),
    (210, "QM2", "backout-gets", 3, "Q1", "b2"),
    (300, "QM1", "get", 3, "Q1", "a4"),
    (310, "QM1", "backout-gets", 3, "Q1", "a4"),
    (400, "QM2", "get", 3, "Q1", "b3"),
    (405, "QM2", "sync-get", 3, "Q1", "b3"),
    # m4 expires when gotten, then is purged
    (500, "QM1", "get", 4, "Q2", "a5"),
    (500, "QM1", "expire", 4, "Q2", "a5"),
    (600, "QM1", "purge", 4, "Q2", "a5"),
    # m5 and m6 go to the cold queue; m6 is requeued
    (700, "QM2", "get", 5, "Q2", "b4"),
    (800, "QM2", "get", 6, "Q2", "b4"),
    (1500, "QM2", "cold-queue", 5, "Q2", "b4"),
    (1500, "QM2", "cold-queue", 6, "Q2", "b4"),
    (1600, "QM1", "requeue", 6, "Q2", "a6"),
    # m8 put and never committed (in doubt); m9 gotten and not committed (locked)
    (2000, "QM1", "put", 8, "Q1", "a7"),
    (2100, "QM2", "get", 9, "Q1", "b5"),
    # m10 put and gotten in one unit of work by QM3
    (2200, "QM3", "put", 10, "Q1", "c1"),
    (2250, "QM3", "get", 10, "Q1", "c1"),
    (2300, "QM3", "commit-gets", 10, "Q1", "c1"),
    # m11: QM3 died before its put's record reached the log; QM2 backed the put out
    (2400, "QM2", "backout-puts", 11, "Q1", "c2"),
]
#: The last record's time (a shutdown), ms after T0: the end of the log.
END_MS = 2500
#: What the tests expect of each message.
OUTCOMES = {
    1: "consumed",
    2: "backed-out-put",
    3: "consumed",
    4: "expired",
    5: "cold",
    6: "queued",
    7: "queued",
    8: "uncommitted",
    9: "locked",
    10: "consumed",
    11: "backed-out-put",
}


def entry_id(n: int) -> bytes:
    return b"E" + n.to_bytes(11, "big")


def message_id(n: int) -> bytes:
    return f"MSG{n:02d}".encode().ljust(24, b"\x00")


def uow_id(name: str) -> bytes:
    return name.encode().ljust(8, b"\x00")


def append_change(writer: LogWriter, seq: int, kind: str, n: int, queue: str, uow: str) -> None:
    """Append the record of a change of ``kind`` to message ``n``, as a manager logs it."""
    record_type, op = RECORD_TYPES[kind]
    writer.append(
        record_type,
        op=op,
        seq=seq,
        entry_id=entry_id(n),
        list_number=1,
        uow=uow_id(uow),
        queue=queue.encode(),
        message_id=message_id(n),
        priority=4,
        persistent=True,
        payload={"mq": kind},
    )


def write_handmade_log(root: Path) -> Path:
    """Write the script as the log of structure HS under ``root``; returns the log dir."""
    clock = ManualClock(T0 / 1_000_000)
    log_dir = root / STRUCTURE / "log"
    stream = LogStream(log_dir, name=STRUCTURE, clock=clock)
    writers = {name: stream.writer(name) for name in ("QM1", "QM2", "QM3")}
    at_ms = 0
    for seq, (ms, writer, kind, n, queue, uow) in enumerate(SCRIPT, start=1):
        clock.advance_s((ms - at_ms) / 1000)  # the script's times only go forward
        at_ms = ms
        append_change(writers[writer], seq, kind, n, queue, uow)
    clock.advance_s((END_MS - at_ms) / 1000)
    writers["QM1"].append(RecordType.SHUTDOWN, payload={"qmgr": "QM1"})
    for opened in writers.values():
        opened.close()
    return log_dir
