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
from typing import TYPE_CHECKING

from sharedq.cf import BulkWrite, CFError, ListStructure, StructureParams
from sharedq.log import RecordType
from sharedq.recovery import master, structure_recovery
from sharedq.recovery.control import KIND_CHECKPOINT, KIND_COPY, KIND_MARKER
from sharedq.recovery.errors import RecoveryReason, recovery_error
from sharedq.recovery.quiesce import hold_quiesce, release_quiesce
from sharedq.recovery.restore import LOAD_BATCH, set_controls, write_all
from sharedq.recovery.srds import ListControls

if TYPE_CHECKING:
    from sharedq.recovery.pair import PairRecovery

logger = logging.getLogger("sharedq.recovery")


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


def copy_structure(pair: PairRecovery, params: StructureParams) -> CopyResult:
    """Copy one of the pair's structures to a new allocation described by ``params``."""
    name = params.name
    if name not in pair.structures:
        raise recovery_error(
            RecoveryReason.BAD_ARGUMENT, f"{name} is not a structure of pair {pair.pair}"
        )
    started = time.perf_counter()
    timeout = pair.settings.max_wait_seconds
    user = f"{pair.server}.COPY"
    with pair.layout.recovery_lock(timeout):
        conn = pair.facility.connect(name, user)
        try:
            claim = master.claim(conn, pair.area, KIND_COPY, timeout=timeout)
            if not claim.won:
                raise recovery_error(
                    RecoveryReason.COPY_FAILED,
                    f"{claim.state.master} is copying structure {name} already",
                )
            _wait_for_checkpoint(pair, conn, timeout)
            hold_quiesce(conn, pair.area, timeout=timeout)
            quiesced_at = time.perf_counter()
            snap = conn.snapshot()
            found = structure_recovery.marker(conn, pair.area)
            old_identity = "" if found is None else str(found["id"])
            pair.layout.write_json(pair.layout.rebuilding_file, {"kind": "copy", "by": pair.server})
        except BaseException:
            release_quiesce(conn, pair.area)
            with suppress(CFError):
                master.finish(conn, pair.area, KIND_COPY, completed=False)
                conn.disconnect()
            raise
        try:
            marker_id = pair.area.entry_id(KIND_MARKER)
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
        pair.facility.delete(name, force=True)  # every connection to it is lost from here
        structure_recovery.allocate(pair.facility, params, seq)
        with pair.facility.connect(name, user) as new:
            for start in range(0, len(writes), LOAD_BATCH):
                write_all(new, writes[start : start + LOAD_BATCH])
            for control_values in controls:
                set_controls(new, control_values)
            new_identity = structure_recovery.write_marker(
                new, pair.area, "copy", pair.stream, by=pair.server, **{"from": old_identity}
            )
            master.finish(new, pair.area, KIND_COPY, completed=True)
            quiesced = time.perf_counter() - quiesced_at
            assert pair.writer is not None
            pair.writer.observe(new.statistics().seq, name)
        pair.writer.log_event(
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
        pair.layout.rebuilding_file.unlink(missing_ok=True)
    total = time.perf_counter() - started
    logger.warning(
        "%s copied structure %s (%d entries) to a new allocation of %d bytes in %.3f s",
        pair.server,
        name,
        len(writes),
        params.size,
        total,
    )
    return CopyResult(name, len(writes), seq, old_identity, new_identity, quiesced, total)


def _wait_for_checkpoint(pair: PairRecovery, conn: ListStructure, timeout: float) -> None:
    """A copy waits for a structure checkpoint in progress (redbook §6.3.1)."""
    deadline = time.monotonic() + timeout
    while True:
        state = master.read_function(conn, pair.area, KIND_CHECKPOINT)
        if state.master is None or not master.alive(conn, state.user_id, state.master):
            return
        if time.monotonic() >= deadline:
            raise recovery_error(
                RecoveryReason.RECOVERY_TIMEOUT,
                f"structure checkpoint by {state.master} did not finish in {timeout:g} s",
            )
        time.sleep(0.01)
