"""Structure recovery: what a server does when it finds a structure missing or empty.

A server calls :func:`ensure` for each structure of a pair before it connects (and
again when it reconnects after a loss).  A structure with its ``V`` marker (see
:mod:`sharedq.recovery.control`) is in use, unless it is *behind its log*: the log
holds a change with a higher seq than the structure's own counter has reached, which
happens only when the structure came back older than it was (a Redis server
restarted from an old snapshot or AOF, a promoted replica).  Such a structure is
treated as lost and rebuilt, never used: what it lacks is committed work.  The log's
high-water mark is read before the structure's seq, so a change made meanwhile
cannot make a sound structure look behind.  A marker naming another log stream than
the server's is refused (``LOG_MISMATCH``): two logs for one structure would each
miss the other's changes at the next recovery.

Otherwise the server takes the pair's recovery lock (a file lock in the pair's
directory, since the structure itself may be gone), so that one server recovers and
the others wait for it; a server that gets the lock after another recovered finds
the marker and connects.  The one that recovers follows the redbook's decision table
(§6.3.3, §6.4):

==========================  ========================  ===================================
structure                   SRDS / log                action
==========================  ========================  ===================================
empty or missing            no SRDS, no log           cold start the structure (empty)
empty or missing            a readable SRDS           rebuild from the newest readable
                                                      SRDS (the older if the newer cannot
                                                      be read) plus the log after it
empty or missing            no SRDS, log from start   rebuild from the log alone
empty or missing            SRDS unreadable, or the   refused: ``STRUCTURE_UNRECOVERABLE``
                            log does not go back to
                            the start
not empty, no marker        any                       used as it is (adopted); a structure
                                                      checkpoint follows
==========================  ========================  ===================================

Before it changes anything, recovery checks that every record it needs is in the log
(``log_check.py``): a gap in a writer's records refuses it with ``LOG_INCOMPLETE``,
naming what is missing, unless an operator accepted that loss.  Its outcome carries
a report of what it read, skipped and why.

The new structure continues the old one's numbering (``sequence_floor`` = the last seq
in the log), so the log stays in order.  Only recoverable objects come back: the SRDS
holds no data for the others and they were never logged.  A recovery that dies half
way leaves the ``REBUILDING`` file: the next server to get the lock starts it over.
The structure's allocation parameters come from the SRDS, or, without one, from the
``STRUCTURE_INITIALIZATION`` record logged when the structure was first used.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from sharedq.cf import (
    CouplingFacility,
    ListStructure,
    StructureExists,
    StructureParams,
)
from sharedq.clock import SYSTEM_CLOCK, Clock
from sharedq.log import LogStream, LogWriter, RecordType
from sharedq.recovery import control, log_check
from sharedq.recovery.control import KIND_MARKER, ControlArea
from sharedq.recovery.errors import (
    RecoveryError,
    RecoveryReason,
    SrdsUnreadable,
    recovery_error,
)
from sharedq.recovery.layout import PairLayout
from sharedq.recovery.log_check import LogReport
from sharedq.recovery.replay import replay
from sharedq.recovery.restore import load_image
from sharedq.recovery.srds import SlotStatus, SrdsImage, read_srds
from sharedq.recovery.structure_checkpoint import slot_summaries

logger = logging.getLogger("sharedq.recovery")

#: What ``ensure`` did.
IN_USE = "in-use"
WAITED = "waited"
INITIALISED = "initialised"
ADOPTED = "adopted"
RECOVERED = "recovered"
RECOVERED_FROM_LOG = "recovered-from-log"


@dataclass(frozen=True)
class StructureOutcome:
    """What a server found, and did, before connecting to a structure."""

    structure: str
    action: str
    marker: str = ""
    slot: int | None = None
    image_seq: int | None = None
    loaded: int = 0
    records: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    #: What the recovery read of the log, skipped, and lost (``None``: no log read).
    log: LogReport | None = None
    #: Why the structure that was there could not be used (it was behind its log).
    replaced: str | None = None

    @property
    def rebuilt(self) -> bool:
        """Whether this server rebuilt or adopted the structure (a checkpoint follows)."""
        return self.action in (RECOVERED, RECOVERED_FROM_LOG, ADOPTED)


@dataclass(frozen=True)
class _Job:
    """What recovering one structure works with."""

    facility: CouplingFacility
    layout: PairLayout
    structure: str
    stream: LogStream
    writer: LogWriter
    area: ControlArea
    server: str

    @property
    def user(self) -> str:
        """The user name recovery connects under."""
        return f"{self.server}.RCV"


def marker(conn: ListStructure, area: ControlArea) -> dict[str, Any] | None:
    """The structure's ``V`` marker, or ``None`` when it has none (empty to recovery)."""
    found = control.read(conn, area, KIND_MARKER)
    return None if found is None else found[1]


def write_marker(
    conn: ListStructure, area: ControlArea, how: str, stream: LogStream, **info: Any
) -> str:
    """Give the structure a new identity, naming the log its changes go to; returns it."""
    identity = os.urandom(8).hex()
    value = {"id": identity, "how": how, "log": stream.identity, "log_root": str(stream.root)}
    control.put(conn, area, KIND_MARKER, b"", {**value, **info})
    return identity


def ensure(
    facility: CouplingFacility,
    *,
    layout: PairLayout,
    structure: str,
    stream: LogStream,
    writer: LogWriter,
    area: ControlArea,
    server: str,
    params_hint: StructureParams | None,
    timeout: float,
    clock: Clock = SYSTEM_CLOCK,
) -> StructureOutcome:
    """Make sure ``structure`` is usable: connect, wait for a recovery, or recover it
    (waiting up to ``timeout`` seconds on ``clock`` for another server's)."""
    started = time.perf_counter()
    job = _Job(facility, layout, structure, stream, writer, area, server)
    found, behind = _marker_if_exists(job)
    if found is not None and behind is None:
        return StructureOutcome(structure, IN_USE, found["id"])
    with layout.recovery_lock(timeout, clock=clock):
        try:
            rebuilding = layout.read_json(layout.rebuilding_file)
        except RecoveryError as exc:  # a damaged file still says a rebuild was under way
            rebuilding = {"by": f"unknown ({exc})"}
        found, behind = _marker_if_exists(job)
        if found is not None and behind is None and rebuilding is None:
            return StructureOutcome(structure, WAITED, found["id"])
        if rebuilding is not None:
            logger.warning(
                "%s: a rebuild of %s by %s did not finish: recovering it again",
                server,
                structure,
                rebuilding.get("by"),
            )
        if behind is not None:
            logger.error("%s: %s: it is rebuilt from its SRDS and log", server, behind)
        outcome = _recover(job, params_hint, rebuilding is not None or behind is not None)
    return replace(outcome, seconds=time.perf_counter() - started, replaced=behind)


def _marker_if_exists(job: _Job) -> tuple[dict[str, Any] | None, str | None]:
    """The structure's marker (``None``: no usable structure), and why it cannot be used
    as it is (``None``: it can)."""
    if not job.facility.exists(job.structure):
        return None, None
    with job.facility.connect(job.structure, job.user) as probe:
        found = marker(probe, job.area)
        if found is None:
            return None, None
        logged_to = found.get("log")
        if logged_to and logged_to != job.stream.identity:
            raise recovery_error(
                RecoveryReason.LOG_MISMATCH,
                f"structure {job.structure} logs its changes to log stream {logged_to} "
                f"({found.get('log_root', 'elsewhere')}), but server {job.server} writes "
                f"stream {job.stream.identity} at {job.stream.root}: give every server of "
                "the group the same recovery root",
                structure=job.structure,
            )
        # The log first, then the structure: a change made in between is in the
        # structure before its record is in the log, so it cannot look like a lag.
        logged = job.stream.high_water(job.structure)
        seq = probe.statistics().seq
    if seq < logged:
        return found, (
            f"structure {job.structure} is behind its log: its last change is seq {seq}, "
            f"the log holds changes up to seq {logged} (it came back older than it was: "
            "a server restarted from an old snapshot, or a failover)"
        )
    return found, None


def _recover(job: _Job, params_hint: StructureParams | None, restarting: bool) -> StructureOutcome:
    """Rebuild the structure (``restarting``: whatever is there must be replaced)."""
    facility, layout, structure, stream, writer, area, server = (
        job.facility,
        job.layout,
        job.structure,
        job.stream,
        job.writer,
        job.area,
        job.server,
    )
    exists = facility.exists(structure)
    if exists and not restarting:
        with facility.connect(structure, job.user) as probe:
            with probe.snapshot() as snap:
                params_hint = snap.params
                empty = all(info.entries == 0 for info in snap.lists)
            if not empty:
                identity = write_marker(probe, area, ADOPTED, stream, by=server)
                _log_initialisation(writer, structure, params_hint, server, probe.statistics().seq)
                logger.warning(
                    "%s: structure %s has entries but was never initialised for recovery: "
                    "adopted as it is; a structure checkpoint follows",
                    server,
                    structure,
                )
                return StructureOutcome(structure, ADOPTED, identity)
    image, statuses, problems = newest_image(layout)
    if image is not None and structure not in image.structures:
        image = None
    checked = log_check.check(stream, structure, image)
    last_seq = checked.plan.last_seq(structure)
    retained = checked.plan.retention.points.get(structure, 0)
    if image is None and (retained > 0 or any(s.path.exists() for s in statuses)):
        raise recovery_error(
            RecoveryReason.STRUCTURE_UNRECOVERABLE,
            f"structure {structure} cannot be recovered: no SRDS of pair {layout.pair} can "
            f"be read ({'; '.join(problems) or 'none'}) and its log starts at seq "
            f"{retained}, not at the structure's beginning.  Restore an SRDS into "
            f"{layout.srds}, or, to start the structure empty (losing its messages), "
            f"delete {layout.srds} and {layout.log} (redbook §7.4)",
            structure=structure,
        )
    if image is not None and image.log_stream and image.log_stream != stream.identity:
        raise recovery_error(
            RecoveryReason.LOG_MISMATCH,
            f"SRDS{image.slot} of pair {layout.pair} was taken of a structure logged to "
            f"stream {image.log_stream}, not to this log (stream {stream.identity} at "
            f"{stream.root}): its log is not here, so nothing after it can be replayed",
            structure=structure,
        )
    if image is None and last_seq == 0:
        return _cold_start(job, params_hint, exists)
    missing = log_check.unaccepted(layout, checked.gaps)
    if missing:
        raise log_check.refusal(layout, structure, missing, "recovery")
    report = log_check.report_of(checked, checked.gaps, 0)
    for line in report.lost:
        logger.error("%s: recovering %s with an accepted loss: %s", server, structure, line)
    params: StructureParams | None
    if image is not None:
        params = image.structures[structure].params
    else:
        params = _initial_params(stream, structure) or params_hint
        if params is None:
            raise recovery_error(
                RecoveryReason.STRUCTURE_UNRECOVERABLE,
                f"structure {structure} must be rebuilt from its log, which does not say "
                "how it was allocated (no STRUCTURE_INITIALIZATION record): create it "
                "empty with its parameters, and connect again",
                structure=structure,
            )
    layout.write_json(layout.rebuilding_file, {"kind": "recovery", "by": server})
    floor = max(last_seq, image.seq if image is not None else 0)
    allocate(facility, params, floor)
    with facility.connect(structure, job.user) as conn:
        loaded = load_image(conn, image, structure) if image is not None else 0
        result = replay(
            conn,
            checked.plan.records(),
            on_conflict=report.note_conflict if report.lost else None,
        )
        report.records = result.records
        identity = write_marker(
            conn,
            area,
            RECOVERED,
            stream,
            by=server,
            slot=image.slot if image is not None else None,
        )
        writer.observe(conn.statistics().seq, structure)
    action = RECOVERED if image is not None else RECOVERED_FROM_LOG
    writer.log_event(
        RecordType.REBUILD,
        payload={
            "kind": "recovery",
            "srds": image.slot if image is not None else None,
            "image_seq": image.seq if image is not None else None,
            "loaded": loaded,
            "records": result.records,
            "last_seq": result.last_seq,
            "params": asdict(params),
            "lost": report.lost,
            "passed_over": report.passed_over,
        },
        structure=structure,
        commit=True,
    )
    layout.rebuilding_file.unlink(missing_ok=True)
    # A success: INFO (an accepted loss was logged above as an ERROR, line by line).
    logger.info(
        "%s recovered structure %s (%s): %d entries from %s, %d log records after it",
        server,
        structure,
        action,
        loaded,
        f"SRDS{image.slot} (seq {image.seq})" if image is not None else "no SRDS",
        result.records,
    )
    return StructureOutcome(
        structure,
        action,
        identity,
        image.slot if image is not None else None,
        image.seq if image is not None else None,
        loaded,
        result.records,
        problems=problems,
        log=report,
    )


def newest_image(layout: PairLayout) -> tuple[SrdsImage | None, list[SlotStatus], list[str]]:
    """The newest SRDS that reads whole, else the older one; each slot's status; what
    was wrong with the slots that could not be used.

    The slots are told apart by their footers (``slot_summaries``) and only the one
    loaded is read whole, with every page checksum, which ``srds.newest_readable`` does
    for both: an SRDS of a large structure is read once, not three times.
    """
    statuses = slot_summaries(layout.srds)
    problems = [f"SRDS{s.slot}: {s.problem}" for s in statuses if s.problem]
    valid = sorted(
        (s for s in statuses if s.valid),
        key=lambda s: (s.checkpoint_id or 0, s.seq or 0),
        reverse=True,
    )
    for status in valid:
        try:
            return read_srds(status.path), statuses, problems
        except SrdsUnreadable as exc:
            problems.append(f"SRDS{status.slot}: {exc}")
            logger.warning("%s cannot be read, trying the other SRDS: %s", status.path, exc)
    return None, statuses, problems


def _cold_start(job: _Job, params: StructureParams | None, exists: bool) -> StructureOutcome:
    """No SRDS, no log: the structure starts empty (its first use, or after §7.4)."""
    if not exists:
        if params is None:
            raise recovery_error(
                RecoveryReason.BAD_ARGUMENT,
                f"structure {job.structure} does not exist and nothing says how to allocate it",
            )
        allocate(job.facility, params, 0)
    with job.facility.connect(job.structure, job.user) as conn:
        if params is None:
            with conn.snapshot() as snap:
                params = snap.params
        identity = write_marker(conn, job.area, INITIALISED, job.stream, by=job.server)
        _log_initialisation(job.writer, job.structure, params, job.server, conn.statistics().seq)
    return StructureOutcome(job.structure, INITIALISED, identity)


def allocate(facility: CouplingFacility, params: StructureParams, floor: int) -> None:
    """Allocate the structure afresh (an empty one in the way is deleted first)."""
    for _ in range(10):
        if facility.exists(params.name):
            facility.delete(params.name, force=True)
        try:
            facility.create(params, sequence_floor=floor)
            return
        except StructureExists:
            continue  # someone created an empty one meanwhile: ours replaces it
    facility.create(params, sequence_floor=floor)


def _log_initialisation(
    writer: LogWriter, structure: str, params: StructureParams, server: str, seq: int
) -> None:
    writer.observe(seq, structure)
    writer.log_event(
        RecordType.STRUCTURE_INITIALIZATION,
        payload={"params": asdict(params), "by": server},
        structure=structure,
        commit=True,
    )


def _initial_params(stream: LogStream, structure: str) -> StructureParams | None:
    """The allocation logged when the structure was initialised (the first such record)."""
    for record in stream.records(structures={structure}):
        if record.type == RecordType.STRUCTURE_INITIALIZATION:
            value = record.payload_value() or {}
            try:
                return StructureParams(**value["params"])
            except (KeyError, TypeError):
                return None
    return None
