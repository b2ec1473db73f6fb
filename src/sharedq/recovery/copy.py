"""Structure copy: move a structure, everything in it, to a new allocation (say, larger).

While the structure is still reachable (redbook §6.3, §7.1), one server, the copy's
master, copies *every* object, recoverable or not, into a newly allocated structure of
the same name and the new parameters:

1. take the pair's recovery lock (servers that lose the structure meanwhile wait on it)
   and become master through the ``B`` function entry; wait for a structure checkpoint
   in progress to finish (a rebuild does not run during one, §6.3.1);
2. quiesce the structure (the quiesce lock: every server's changes wait) and snapshot it;
3. delete it and allocate the new one, continuing the old numbering; load every entry
   in list order (bulk writes) and every list's limit and authority; give it a new
   identity (``V``) that names the old one: ``how = "copy"``;
4. log a ``REBUILD`` record and release the lock.

Servers whose next request finds the old structure gone wait for the lock, see that
the new structure is a copy of the one they used, connect to it and make the request
again: to them the copy was a quiesce (:meth:`PairRecovery.relocate`).  Units of work
go on: their entries were copied as they were.  A master that dies half way leaves the
``REBUILDING`` file, and the next server to connect recovers the structure from its
SRDS and log instead: recoverable objects only, as the redbook says of a copy that
aborts.  An operator's copy takes no structure checkpoint afterwards (§5.2).
"""

from __future__ import annotations

import logging
import time
from contextlib import suppress
from dataclasses import asdict, dataclass

from sharedq.cf import BulkWrite, CFError, CouplingFacility, ListStructure, StructureParams
from sharedq.clock import Clock, retry_until
from sharedq.log import LogStream, LogWriter, RecordType
from sharedq.recovery import master, structure_recovery
from sharedq.recovery.control import KIND_CHECKPOINT, KIND_COPY, KIND_MARKER, ControlArea
from sharedq.recovery.errors import RecoveryReason, recovery_error
from sharedq.recovery.layout import PairLayout
from sharedq.recovery.quiesce import hold_quiesce, release_quiesce
from sharedq.recovery.restore import LOAD_BATCH, set_controls, write_all
from sharedq.recovery.srds import ListControls

logger = logging.getLogger("sharedq.recovery")

#: Seconds between a copy's looks at a structure checkpoint in progress.
_CHECKPOINT_POLL = 0.01


@dataclass(frozen=True)
class CopyResult:
    """What a structure copy did; times in seconds."""

    structure: str
    entries: int
    seq: int
    old_identity: str
    new_identity: str
    quiesced_seconds: float
    total_seconds: float


@dataclass(frozen=True)
class CopySite:
    """What a copy needs of the pair whose structure it copies, and of the server doing it
    (:meth:`PairRecovery.copy_structure <sharedq.recovery.PairRecovery.copy_structure>`
    makes one)."""

    #: Where the structures are.
    facility: CouplingFacility
    #: The pair's files: its recovery lock and its ``REBUILDING`` file.
    layout: PairLayout
    #: Where the machinery's entries and locks are in each structure.
    area: ControlArea
    #: The pair's log, which the new structure's identity names.
    stream: LogStream
    #: The server's writer on that log: the ``REBUILD`` record goes there.
    writer: LogWriter
    #: The pair's name (its primary structure).
    pair: str
    #: The pair's structures, primary first.
    structures: tuple[str, ...]
    #: The server's name: the copy connects as ``<server>.COPY``.
    server: str
    #: How long the copy waits for the recovery lock, the master function and the
    #: quiesce, in seconds.
    max_wait_seconds: float
    #: What those waits are timed and paced on.
    clock: Clock


def copy_structure(site: CopySite, params: StructureParams) -> CopyResult:
    """Copy one of the pair's structures to a new allocation described by ``params``."""
    name = params.name
    if name not in site.structures:
        raise recovery_error(
            RecoveryReason.BAD_ARGUMENT, f"{name} is not a structure of pair {site.pair}"
        )
    started = time.perf_counter()
    timeout = site.max_wait_seconds
    user = f"{site.server}.COPY"
    with site.layout.recovery_lock(timeout, clock=site.clock):
        conn = site.facility.connect(name, user)
        try:
            claim = master.claim(conn, site.area, KIND_COPY, timeout=timeout, clock=site.clock)
            if not claim.won:
                raise recovery_error(
                    RecoveryReason.COPY_FAILED,
                    f"{claim.state.master} is copying structure {name} already",
                )
            _wait_for_checkpoint(site, conn, timeout)
            hold_quiesce(conn, site.area, timeout=timeout, clock=site.clock)
            quiesced_at = time.perf_counter()
            snap = conn.snapshot()
            found = structure_recovery.marker(conn, site.area)
            old_identity = "" if found is None else str(found["id"])
            site.layout.write_json(site.layout.rebuilding_file, {"kind": "copy", "by": site.server})
        except BaseException:
            release_quiesce(conn, site.area)
            with suppress(CFError):
                master.finish(conn, site.area, KIND_COPY, completed=False)
                conn.disconnect()
            raise
        try:
            marker_id = site.area.entry_id(KIND_MARKER)
            writes = [
                BulkWrite(
                    e.list_number, e.key, e.data, e.adjunct, e.secondary_key, e.entry_id, e.version
                )
                for info in snap.lists
                for e in snap.entries(info.list_number)
                if e.entry_id != marker_id
            ]
            controls = [ListControls(i.list_number, i.limit, i.authority) for i in snap.lists]
            seq = snap.seq
        finally:
            snap.release()
        site.facility.delete(name, force=True)  # every connection to it is lost from here
        structure_recovery.allocate(site.facility, params, seq)
        with site.facility.connect(name, user) as new:
            for start in range(0, len(writes), LOAD_BATCH):
                write_all(new, writes[start : start + LOAD_BATCH])
            for control_values in controls:
                set_controls(new, control_values)
            new_identity = structure_recovery.write_marker(
                new, site.area, "copy", site.stream, by=site.server, **{"from": old_identity}
            )
            master.finish(new, site.area, KIND_COPY, completed=True)
            quiesced = time.perf_counter() - quiesced_at
            site.writer.observe(new.statistics().seq, name)
        site.writer.log_event(
            RecordType.REBUILD,
            payload={
                "kind": "copy",
                "seq": seq,
                "entries": len(writes),
                "params": asdict(params),
                "from": old_identity,
            },
            structure=name,
            commit=True,
        )
        site.layout.rebuilding_file.unlink(missing_ok=True)
    total = time.perf_counter() - started
    logger.info(  # a success: nothing for an operator to do
        "%s copied structure %s (%d entries) to a new allocation of %d bytes in %.3f s",
        site.server,
        name,
        len(writes),
        params.size,
        total,
    )
    return CopyResult(name, len(writes), seq, old_identity, new_identity, quiesced, total)


def _wait_for_checkpoint(site: CopySite, conn: ListStructure, timeout: float) -> None:
    """A copy waits for a structure checkpoint in progress (redbook §6.3.1)."""
    state = master.FunctionState()

    def finished() -> bool:
        nonlocal state
        state = master.read_function(conn, site.area, KIND_CHECKPOINT)
        return state.master is None or not master.alive(conn, state.user_id, state.master)

    if not retry_until(
        finished, timeout_s=timeout, first_pause_s=_CHECKPOINT_POLL, clock=site.clock
    ):
        raise recovery_error(
            RecoveryReason.RECOVERY_TIMEOUT,
            f"structure checkpoint by {state.master} did not finish in {timeout:g} s",
        )
