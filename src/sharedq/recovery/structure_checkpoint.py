"""Structure checkpoint: copy a structure pair to an SRDS, then delete the log before it.

The steps (redbook §2.10, §5.2; seed 001), performed by one server, the master:

1. become the master through the pair's ``K`` function entry and the control lock;
2. *quiesce*: take the quiesce lock on every structure of the pair, so that every
   server's changes wait (:mod:`sharedq.recovery.quiesce`);
3. copy each structure with ``ListStructure.snapshot`` (one atomic request: the
   memory backend collects its entries, Redis copies the keys on the server);
4. *resume*: release the quiesce lock.  Only steps 2-4 hold anyone up;
5. in the background of everyone else's work, read the copy, classify each entry
   through the server layer (recoverable ones keep their data, the others only their
   queue name and unit of work) and write the SRDS to the slot :func:`target_slot`
   picks (the older, or an unusable one): temporary name, synced, renamed;
6. log a ``STRUCTURE_CHECKPOINT`` record (``{"srds": slot, "seq": S}``) and take the
   master's own system checkpoint;
7. count one more *generation* in the function entry: every active server sees it and
   takes a system checkpoint (CK-4); wait a little for them;
8. delete the log records older than the *older* valid SRDS, but never above the last
   system checkpoint of a server that is active (the conservative reading of CK-8 and
   §9.2: deletion follows the active servers' system checkpoints), and give up the
   function entry.

A master that dies anywhere leaves the SRDS slots as they were (a slot is replaced
only by its rename) and its function entry naming it: the next server to look takes
the checkpoint over and starts it again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sharedq.cf import CFError, ListEntry, ListStructure, StructureSnapshot
from sharedq.clock import Clock, retry_until
from sharedq.log import LogStream, LogWriter, RecordType
from sharedq.recovery import master, system_checkpoint
from sharedq.recovery.control import KIND_CHECKPOINT, ControlArea
from sharedq.recovery.errors import RecoveryError, RecoveryReason, recovery_error
from sharedq.recovery.layout import PairLayout
from sharedq.recovery.quiesce import hold_quiesce, release_quiesce
from sharedq.recovery.srds import (
    SLOTS,
    ListControls,
    SlotStatus,
    SrdsImage,
    StructureImage,
    describe,
    entry_schema,
    srds_path,
    target_slot,
    version_to_i64,
    write_srds,
)

if TYPE_CHECKING:
    import pyarrow as pa

logger = logging.getLogger("sharedq.recovery")

#: What a classifier says of an entry: recoverable, its queue name, its unit of work.
Classification = tuple[bool, bytes | None, bytes | None]
Classifier = Callable[[ListEntry], Classification]
#: Makes a classifier for a structure from the entries of its control list.
ClassifierFactory = Callable[[str, Sequence[ListEntry]], Classifier]
#: Called with the name of each point the checkpoint reaches (crash tests stop there).
Faults = Callable[[str], None]
#: Seconds between looks at the active servers' system checkpoints, while settling.
_SETTLE_POLL = 0.01


@dataclass(frozen=True)
class CheckpointResult:
    """What a structure checkpoint did, and how long its parts took (seconds)."""

    pair: str
    slot: int
    checkpoint_id: int
    seqs: dict[str, int]
    master: str
    reason: str
    entries: int
    recoverable: int
    retention: dict[str, int]
    quiesced_seconds: float
    total_seconds: float
    took_over: str | None = None
    deleted_files: int = 0
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def seq(self) -> int:
        """The seq the SRDS covers in the pair's primary structure."""
        return next(iter(self.seqs.values()))

    @property
    def quiesce_share(self) -> float:
        return self.quiesced_seconds / self.total_seconds if self.total_seconds else 0.0


@dataclass
class CheckpointJob:
    """Everything a checkpoint needs from the server that performs it."""

    pair: str
    structures: Sequence[str]
    server: str
    conns: Mapping[str, ListStructure]  # the master's own connections, one per structure
    area: ControlArea
    layout: PairLayout
    stream: LogStream
    writer: LogWriter
    classifier: ClassifierFactory
    own_system_checkpoint: Callable[[str], object]
    timeout: float
    #: What the checkpoint's time (``taken_at_us``) is read from and its waits paced on.
    clock: Clock
    faults: Faults | None = None
    #: Seconds to wait for the active servers' system checkpoints before deleting.
    settle: float = 2.0


def run(job: CheckpointJob, reason: str) -> CheckpointResult | None:
    """Take a structure checkpoint as master; ``None`` if a live master is taking one."""
    started = time.perf_counter()
    primary = job.conns[job.structures[0]]
    claim = master.claim(primary, job.area, KIND_CHECKPOINT, timeout=job.timeout, clock=job.clock)
    if not claim.won:
        return None
    completed = False
    try:
        _fault(job, "claimed")
        result = _checkpoint(job, reason, started, claim.took_over)
        completed = True
        return result
    except CFError as exc:
        raise recovery_error(
            RecoveryReason.CHECKPOINT_FAILED,
            f"structure checkpoint of {job.pair} by {job.server} failed: {exc}",
        ) from exc
    finally:
        with suppress(CFError, RecoveryError):
            if not completed:
                master.finish(primary, job.area, KIND_CHECKPOINT, completed=False)


def _checkpoint(
    job: CheckpointJob, reason: str, started: float, took_over: str | None
) -> CheckpointResult:
    # pyarrow here, not with the module (``srds``'s docstring says why), and before
    # the quiesce, so that its first import (0.2 s) never holds anyone up.
    import pyarrow as pa

    primary = job.conns[job.structures[0]]
    phases: dict[str, float] = {}
    snapshots: dict[str, StructureSnapshot] = {}
    # Where every writer's records stand, read before the quiesce: every change the
    # copy does not hold is made after it, so logged at a higher lsn than these.
    positions = job.stream.positions()
    quiesced_at = time.perf_counter()
    try:
        for name in job.structures:
            hold_quiesce(job.conns[name], job.area, timeout=job.timeout, clock=job.clock)
        quiesced_at = time.perf_counter()
        _fault(job, "quiesced")
        for name in job.structures:
            snapshots[name] = job.conns[name].snapshot()
        _fault(job, "copied")
    finally:
        for name in job.structures:
            release_quiesce(job.conns[name], job.area)
        resumed_at = time.perf_counter()
    quiesced = resumed_at - quiesced_at
    phases["quiesced"] = quiesced
    _fault(job, "resumed")
    master.set_phase(primary, job.area, KIND_CHECKPOINT, "writing")
    try:
        statuses = slot_summaries(job.layout.srds)
        slot = target_slot(statuses)
        checkpoint_id = 1 + max((s.checkpoint_id or 0 for s in statuses), default=0)
        images, tables, counts = {}, [], [0, 0]
        for name in job.structures:
            snap = snapshots[name]
            table, recoverable = entries_table(name, snap, job.classifier, job.area)
            tables.append(table)
            counts[0] += table.num_rows
            counts[1] += recoverable
            images[name] = StructureImage(
                name,
                snap.params,
                snap.seq,
                tuple(ListControls(i.list_number, i.limit, i.authority) for i in snap.lists),
                table.num_rows,
            )
    finally:
        for snap in snapshots.values():
            with suppress(CFError):
                snap.release()
    phases["copied"] = time.perf_counter() - resumed_at
    seqs = {name: snapshots[name].seq for name in job.structures}
    image = SrdsImage(
        pair=job.pair,
        slot=slot,
        seq=seqs[job.structures[0]],
        taken_at_us=job.clock.now_us(),
        master=job.server,
        checkpoint_id=checkpoint_id,
        structures=images,
        entries=pa.concat_tables(tables),
        log_stream=job.stream.identity,
        positions=positions,
    )
    written_at = time.perf_counter()
    write_srds(job.layout.srds, image)
    phases["written"] = time.perf_counter() - written_at
    _fault(job, "written")
    for name, seq in seqs.items():
        job.writer.log_event(
            RecordType.STRUCTURE_CHECKPOINT,
            payload={"srds": slot, "seq": seq, "checkpoint": checkpoint_id, "reason": reason},
            seq=seq,
            structure=name,
            commit=True,
        )
    _fault(job, "logged")
    job.own_system_checkpoint("structure-checkpoint")
    info = {
        "slot": slot,
        "checkpoint": checkpoint_id,
        "seqs": seqs,
        "master": job.server,
        "reason": reason,
        "quiesced_s": round(quiesced, 6),
    }
    # Every active server takes a system checkpoint now (CK-4); the log is deleted once
    # they have, or once the wait is over (a server that did not is protected anyway).
    master.signal(primary, job.area, KIND_CHECKPOINT, info)
    settled_at = time.perf_counter()
    _wait_for_system_checkpoints(job, seqs)
    phases["settled"] = time.perf_counter() - settled_at
    retention, deleted = _delete_log(job, slot_summaries(job.layout.srds))
    _fault(job, "deleted")
    total = time.perf_counter() - started
    master.finish(
        primary, job.area, KIND_CHECKPOINT, completed=True, info={**info, "total_s": total}
    )
    logger.info(
        "structure checkpoint %d of %s by %s (%s): SRDS%d at seq %s, %d entries, quiesced "
        "%.3f s of %.3f s",
        checkpoint_id,
        job.pair,
        job.server,
        reason,
        slot,
        seqs,
        counts[0],
        quiesced,
        total,
    )
    return CheckpointResult(
        job.pair,
        slot,
        checkpoint_id,
        seqs,
        job.server,
        reason,
        counts[0],
        counts[1],
        retention,
        quiesced,
        total,
        took_over,
        deleted,
        phases,
    )


def entries_table(
    structure: str, snap: StructureSnapshot, classifier: ClassifierFactory, area: ControlArea
) -> tuple[pa.Table, int]:
    """The SRDS rows of one structure's snapshot (columns built directly), and how many
    of them are recoverable."""
    import pyarrow as pa

    classify = classifier(structure, list(snap.entries(area.list_number)))
    schema = entry_schema()
    columns: dict[str, list[Any]] = {name: [] for name in schema.names}
    (
        c_structure,
        c_list,
        c_position,
        c_id,
        c_key,
        c_skey,
        c_version,
        c_elements,
        c_adjunct,
        c_data,
        c_recoverable,
        c_queue,
        c_uow,
    ) = (columns[name] for name in schema.names)
    recoverable = 0
    for info in snap.lists:
        for position, entry in enumerate(snap.entries(info.list_number)):
            keep, queue, uow = (False, None, None) if area.is_machinery(entry) else classify(entry)
            c_list.append(entry.list_number)
            c_position.append(position)
            c_id.append(entry.entry_id)
            c_key.append(entry.key)
            c_skey.append(entry.secondary_key)
            c_version.append(version_to_i64(entry.version))
            c_elements.append(entry.elements)
            c_adjunct.append(entry.adjunct)
            c_data.append(entry.data if keep else None)
            c_recoverable.append(keep)
            c_queue.append(queue)
            c_uow.append(uow)
            recoverable += keep
    c_structure.extend([structure] * len(c_list))
    return pa.Table.from_pydict(columns, schema=schema), recoverable


def slot_summaries(directory: str | Path) -> list[SlotStatus]:
    """Both slots from their footers only: what choosing a slot and deleting the log need.

    ``srds.slot_status`` reads each file whole (every page checksum); a checkpoint
    needs only which slots hold a complete checkpoint and the seq each covers, and
    recovery verifies the one it loads in full.  Per structure seqs are in ``seqs``.
    """
    statuses = []
    for slot in SLOTS:
        path = srds_path(directory, slot)
        try:
            if not path.exists():  # (pyarrow is not imported to learn that)
                raise FileNotFoundError(path)
            import pyarrow.parquet as pq

            meta = pq.read_metadata(path)
            description = describe(path, meta.metadata)
            if description.get("slot") != slot:
                raise ValueError("not this slot's checkpoint")
            if int(description["rows"]) != meta.num_rows:
                raise ValueError("row count does not match")
            statuses.append(
                SlotStatus(
                    slot, path, True, int(description["seq"]), int(description["checkpoint_id"])
                )
            )
        except FileNotFoundError:
            statuses.append(SlotStatus(slot, path, False, problem="empty"))
        except Exception as exc:  # any reason a file is unusable counts the same here
            statuses.append(SlotStatus(slot, path, False, problem=str(exc)))
    return statuses


def structure_seqs(status: SlotStatus) -> dict[str, int]:
    """The seq a valid slot covers for each structure of its pair (footer only)."""
    import pyarrow.parquet as pq

    meta = pq.read_metadata(status.path)
    description = describe(status.path, meta.metadata)
    return {name: int(info["seq"]) for name, info in description["structures"].items()}


def _wait_for_system_checkpoints(job: CheckpointJob, seqs: dict[str, int]) -> None:
    """Wait (at most ``job.settle`` seconds) until every active server's last system
    checkpoint follows the structure checkpoint; then go on whether they did or not."""
    name = job.structures[0]  # system checkpoints carry the primary's seqs
    conn = job.conns[name]

    def caught_up() -> bool:
        active = {u.name for u in conn.users() if u.state.value == "active"}
        return not any(
            server in active and position.seq < seqs[name]
            for server, position in system_checkpoint.positions(conn, job.area).items()
        )

    retry_until(caught_up, timeout_s=job.settle, first_pause_s=_SETTLE_POLL, clock=job.clock)


def _delete_log(job: CheckpointJob, statuses: list[SlotStatus]) -> tuple[dict[str, int], int]:
    """Delete what recovery no longer needs: before the older valid SRDS (CK-5),
    never past an active server's last system checkpoint (CK-8, conservatively)."""
    valid = [s for s in statuses if s.valid]
    older = min(valid, key=lambda s: (s.checkpoint_id or 0, s.seq or 0))
    covered = structure_seqs(older)
    retention: dict[str, int] = {}
    deleted = 0
    for name in job.structures:
        point = covered.get(name)
        if point is None:
            continue
        conn = job.conns[name]
        active = {u.name for u in conn.users() if u.state.value == "active"}
        # System checkpoints are positions in the primary structure's numbering.
        protected = system_checkpoint.positions(conn, job.area) if name == job.structures[0] else {}
        for server, position in protected.items():
            if server in active and position.seq < point:
                logger.info(
                    "log of %s kept from seq %d for active server %s (not %d)",
                    name,
                    position.seq,
                    server,
                    point,
                )
                point = position.seq
        result = job.stream.delete_before(name, point)
        retention[name] = job.stream.retention_points().get(name, 0)
        deleted += len(result.files)
    return retention, deleted


def _fault(job: CheckpointJob, point: str) -> None:
    if job.faults is not None:
        job.faults(point)
