"""System checkpoints: a server's restart state in the log, and where to find it.

A system checkpoint (redbook §5.1) is local to one server and never quiesces anything:
the server writes its restart state (for a queue manager: the units of work whose
commit it decided and has not finished) as a ``SYSTEM_CHECKPOINT`` record of its own,
and keeps the record's position in two places, as CQS keeps its log token:

* its checkpoint file, ``<pair>/checkpoints/<server>.json`` (the CQS checkpoint data
  set), written atomically;
* its ``P`` entry on the structure's control list (the entry on the control queue),
  for a server whose checkpoint file was lost.

A warm restart reads the server's records from that position on.  If the position
lies below the log's retention point for the structure, the records it needs were
deleted (it was down across two structure checkpoints) and it must cold start.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sharedq.cf import CFError, ListStructure
from sharedq.clock import SYSTEM_CLOCK, Clock
from sharedq.log import LogPosition, LogRecord, LogStream, LogWriter, RecordType
from sharedq.log.files import make_dirs
from sharedq.recovery import control
from sharedq.recovery.control import KIND_POSITION, ControlArea, Runner, direct
from sharedq.recovery.errors import RecoveryError
from sharedq.recovery.layout import PairLayout

logger = logging.getLogger("sharedq.recovery")

#: Where a restart found its checkpoint.
FROM_FILE, FROM_STRUCTURE = "checkpoint file", "control entry"


@dataclass(frozen=True)
class RestartPoint:
    """A server's last system checkpoint: its position, its state, where it was found."""

    position: LogPosition
    source: str
    state: dict[str, Any]


@dataclass(frozen=True)
class RestartDecision:
    """Warm or cold, and why (the message an operator sees)."""

    warm: bool
    point: RestartPoint | None
    reason: str


def take(
    *,
    conn: ListStructure,
    area: ControlArea,
    writer: LogWriter,
    layout: PairLayout,
    server: str,
    structure: str,
    state: dict[str, Any],
    reason: str,
    run: Runner = direct,
    clock: Clock = SYSTEM_CLOCK,
) -> LogPosition:
    """Write a system checkpoint and record its position (and the time on ``clock``)
    in the file and the structure."""
    writer.observe(conn.statistics().seq, structure)
    position = writer.log_event(
        RecordType.SYSTEM_CHECKPOINT,
        payload={"reason": reason, "state": state},
        structure=structure,
        commit=True,
    )
    value = {
        "server": server,
        "structure": structure,
        "position": list(position),
        "time_us": clock.now_us(),
        "reason": reason,
    }
    make_dirs(layout.checkpoints)
    layout.write_json(layout.checkpoint_file(server), value)
    try:
        control.put(conn, area, KIND_POSITION, control.name_hash(server), value, run=run)
    except CFError as exc:  # the file has it; the structure may be gone
        logger.warning(
            "%s: system checkpoint position not recorded in %s: %s", server, structure, exc
        )
    return position


def _position(value: dict[str, Any] | None) -> LogPosition | None:
    if value is None:
        return None
    try:
        seq, op, writer, lsn = value["position"]
        return LogPosition(int(seq), int(op), str(writer), int(lsn))
    except (KeyError, TypeError, ValueError):
        return None


def find(
    layout: PairLayout, server: str, conn: ListStructure | None, area: ControlArea
) -> tuple[LogPosition, str] | None:
    """The server's last system checkpoint: from its file, else from its control entry.

    A damaged file is passed over for the structure's entry; when the structure has
    none either, ``STATE_DAMAGED`` says so: restarting cold without knowing where
    the server stood would be a guess, not a decision.
    """
    damaged: RecoveryError | None = None
    try:
        position = _position(layout.read_json(layout.checkpoint_file(server)))
    except RecoveryError as exc:
        logger.error("%s: %s; looking for its position in the structure", server, exc)
        damaged, position = exc, None
    if position is not None:
        return position, FROM_FILE
    if conn is not None:
        found = control.read(conn, area, KIND_POSITION, control.name_hash(server))
        if found is not None and found[1].get("server") == server:
            position = _position(found[1])
            if position is not None:
                return position, FROM_STRUCTURE
    if damaged is not None:
        raise damaged
    return None


def positions(conn: ListStructure, area: ControlArea) -> dict[str, LogPosition]:
    """Every server's recorded position in a structure, by server name."""
    found: dict[str, LogPosition] = {}
    for value in control.scan(conn, area, KIND_POSITION):
        position = _position(value)
        if position is not None:
            found[str(value.get("server"))] = position
    return found


def decide(
    stream: LogStream,
    structure: str,
    server: str,
    found: tuple[LogPosition, str] | None,
    *,
    cold_requested: bool,
) -> RestartDecision:
    """Warm from the last system checkpoint, or cold (asked, or the log is gone)."""
    if cold_requested:
        return RestartDecision(False, None, f"{server}: cold start requested")
    if found is None:
        return RestartDecision(True, None, f"{server}: no system checkpoint in {structure}")
    position, source = found
    retained = stream.retention_points().get(structure, 0)
    if position.seq < retained:
        return RestartDecision(
            False,
            None,
            f"{server} cannot warm start on {structure}: the log behind its last system "
            f"checkpoint (seq {position.seq}, from its {source}) was deleted (the log now "
            f"starts at seq {retained}); it was down across two structure checkpoints, "
            "so it cold starts",
        )
    state: dict[str, Any] = {}
    for record in records_from(stream, position, server):
        if record.type == RecordType.SYSTEM_CHECKPOINT and (
            record.seq,
            record.op,
            record.writer,
            record.lsn,
        ) == tuple(position):
            state = dict(record.payload_value().get("state") or {})
        break
    return RestartDecision(
        True,
        RestartPoint(position, source, state),
        f"{server}: warm start on {structure} from its system checkpoint at seq "
        f"{position.seq} (its {source})",
    )


def records_from(stream: LogStream, position: LogPosition, server: str) -> Iterator[LogRecord]:
    """The server's own records from a system checkpoint on (the checkpoint first)."""
    return stream.records(writers={server}, start=position)
