"""A small log written by hand with queue depth events: a High, a Low and a Full, each
with its coordinator and peers, at times chosen to the millisecond.

Queue Q1 fills out of syncpoint to 4, two more puts in a unit of work take the
manager's depth to 6 (High, coordinated by QM1, messages from QM1 and QM2) before they
commit; QM2 then gets four messages out of syncpoint down to 2 (Low, coordinated by
QM2 with its PERFMEV disabled: messages from QM1 and QM3 only).  A put refused on Q2
makes a Full that QM3 coordinates alone, on a queue the log has no message for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sharedq.log import LogStream, RecordType
from sharedq.testing import ManualClock
from tests.pipeline.handmade import T0, append_change

STRUCTURE = "EV"


def correl_id(n: int) -> bytes:
    return f"CORREL{n:02d}".encode().ljust(24, b"\x00")


def _event(
    event: str,
    role: str,
    issued: bool,
    depth: int,
    enqueues: int | None = None,
    dequeues: int | None = None,
) -> dict[str, Any]:
    idle = enqueues is None
    return {
        "event": event,
        "role": role,
        "issued": issued,
        "depth": depth,
        "max_depth": 10,
        "high_depth": None if idle else depth,
        "enqueues": enqueues,
        "dequeues": dequeues,
        "since_reset_s": None if idle else 1.5,
    }


#: (ms after T0, writer, queue, what): what is ("kind", message number, uow) for a
#: message change, or (CorrelId number, payload[, seq]) for a DEPTH_EVENT record (its
#: seq: the last written, unless given).
SCRIPT: list[tuple[int, str, str, tuple[Any, ...]]] = [
    (0, "QM1", "Q1", ("put", 1, "s1")),
    (1, "QM1", "Q1", ("sync-put", 1, "s1")),
    (10, "QM1", "Q1", ("put", 2, "s2")),
    (11, "QM1", "Q1", ("sync-put", 2, "s2")),
    (20, "QM1", "Q1", ("put", 3, "s3")),
    (21, "QM1", "Q1", ("sync-put", 3, "s3")),
    (30, "QM1", "Q1", ("put", 4, "s4")),
    (31, "QM1", "Q1", ("sync-put", 4, "s4")),
    (40, "QM1", "Q1", ("put", 5, "a1")),
    (41, "QM1", "Q1", ("put", 6, "a1")),
    (42, "QM1", "Q1", (1, _event("high", "coordinator", True, 6, 6, 0))),
    (43, "QM2", "Q1", (1, _event("high", "peer", True, 6))),
    (44, "QM1", "Q1", ("commit-puts", 5, "a1")),
    (44, "QM1", "Q1", ("commit-puts", 6, "a1")),
    (100, "QM2", "Q1", ("get", 1, "b1")),
    (101, "QM2", "Q1", ("sync-get", 1, "b1")),
    (110, "QM2", "Q1", ("get", 2, "b2")),
    (111, "QM2", "Q1", ("sync-get", 2, "b2")),
    (120, "QM2", "Q1", ("get", 3, "b3")),
    (121, "QM2", "Q1", ("sync-get", 3, "b3")),
    (130, "QM2", "Q1", ("get", 4, "b4")),
    (131, "QM2", "Q1", ("sync-get", 4, "b4")),
    (132, "QM2", "Q1", (2, _event("low", "coordinator", False, 2, 0, 4))),
    (133, "QM1", "Q1", (2, _event("low", "peer", True, 2, 2, 0))),
    # QM3 answers from far behind: the last seq it saw is its last change's, long ago
    (134, "QM3", "Q1", (2, _event("low", "peer", True, 2), 3)),
    (200, "QM3", "Q2", (3, _event("full", "coordinator", True, 10, 3, 1))),
]
#: The last record's time (a shutdown), ms after T0.
END_MS = 300

#: What the job must find, per CorrelId number.
GROUPS = {
    1: {
        "event": "high",
        "queue": "Q1",
        "coordinator": "QM1",
        "messages": 2,
        "managers": ["QM1", "QM2"],
        "enqueues": 6,
        "dequeues": 0,
        "depth": 6,
        "log_depth": 4,
        "records": 2,
        "ms": 42,
    },
    2: {
        "event": "low",
        "queue": "Q1",
        "coordinator": "QM2",
        "messages": 2,
        "managers": ["QM1", "QM3"],
        "enqueues": 2,
        "dequeues": 0,
        "depth": 2,
        "log_depth": 2,
        "records": 3,
        "ms": 132,
    },
    3: {
        "event": "full",
        "queue": "Q2",
        "coordinator": "QM3",
        "messages": 1,
        "managers": ["QM3"],
        "enqueues": 3,
        "dequeues": 1,
        "depth": 10,
        "log_depth": 0,
        "records": 1,
        "ms": 200,
    },
}
#: Q1's committed depth after each change that moved it: (ms after T0, depth).
Q1_DEPTH = [
    (1, 1),
    (11, 2),
    (21, 3),
    (31, 4),
    (44, 5),
    (44, 6),
    (101, 5),
    (111, 4),
    (121, 3),
    (131, 2),
]


def write_events_log(root: Path) -> Path:
    """Write the script as the log of structure EV under ``root``; returns the log dir.

    A change takes the next seq; a DEPTH_EVENT record (op none) carries the last seq
    written, as a manager's record that is not a change does.
    """
    clock = ManualClock(T0 / 1_000_000)
    log_dir = root / STRUCTURE / "log"
    stream = LogStream(log_dir, name=STRUCTURE, clock=clock)
    writers = {name: stream.writer(name) for name in ("QM1", "QM2", "QM3")}
    at_ms, seq = 0, 0
    for ms, writer, queue, what in SCRIPT:
        clock.advance_s((ms - at_ms) / 1000)
        at_ms = ms
        if isinstance(what[0], str):
            kind, n, uow = what
            seq += 1
            append_change(writers[writer], seq, kind, n, queue, uow)
        else:
            number, payload, *stale = what
            writers[writer].append(
                RecordType.DEPTH_EVENT,
                seq=stale[0] if stale else seq,
                queue=queue.encode(),
                correl_id=correl_id(number),
                payload=payload,
            )
    clock.advance_s((END_MS - at_ms) / 1000)
    writers["QM1"].append(RecordType.SHUTDOWN, payload={"qmgr": "QM1"})
    for opened in writers.values():
        opened.close()
    return log_dir
