"""The in-process reference of the ``recover`` job: the servers' own recovery code.

The Spark ``recover`` job must compute, object for object, what
:func:`sharedq.recovery.restore.rebuild` computes when it is given the same SRDS and
the same log records.  This module is the one place that decides *which* SRDS and
*which* records a point in time means (:func:`choose_point`), so that the Spark job
and its reference cannot drift apart on that; and it runs the reference
(:func:`recover_inprocess`: a fresh memory facility, ``rebuild``, ``contents``) for the
tests and for ``bench/pipeline.py``'s baseline.  It reimplements nothing of replay.

The point-in-time rule:

* the target is the end of the log, a sequence number, or a time ``T``; a time means
  the changes of the structure logged at or before ``T``: the target seq is the highest
  seq of such a change (replay must apply a prefix of the structure's changes, so a
  change numbered below it but logged a little later by another writer is included);
* the image is the newest *valid* SRDS (``slot_status``: read whole, checksums
  verified) holding the structure whose seq for that structure is at or below the
  target seq (and, for a time, taken at or before ``T``); newest means highest
  checkpoint number, then seq, as structure recovery orders them;
* without one, the structure starts empty, allocated as its ``STRUCTURE_INITIALIZATION``
  (or ``REBUILD``) record says, but only when the log reaches back to the structure's
  start (its retention point is 0); otherwise the point cannot be recovered;
* the records applied are the structure's changes with image seq < seq <= target.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from sharedq.cf import StructureParams
from sharedq.cf.memory import MemoryFacility
from sharedq.log import ChangeOp, LogStream, RecordType
from sharedq.pipeline.errors import PipelineReason, pipeline_error
from sharedq.pipeline.sources import PairInput
from sharedq.recovery.restore import RECOVERY_USER, StructureContents, contents, rebuild
from sharedq.recovery.srds import METADATA_KEY, ListControls, read_srds

_NONE_OP = int(ChangeOp.NONE)


@dataclass(frozen=True)
class ImageChoice:
    """The SRDS a recovery starts from (or none), and what its footer says of the structure."""

    slot: int | None
    path: Path | None
    seq: int  # the structure's seq the image covers; 0 without an image
    checkpoint_id: int | None
    taken_at_us: int | None
    params: StructureParams
    lists: tuple[ListControls, ...]  # empty without an image

    @property
    def label(self) -> str:
        return "no SRDS (log from the start)" if self.slot is None else f"SRDS{self.slot}"


@dataclass(frozen=True)
class InprocessRecovery:
    """What the reference recovered for one structure, and from what."""

    structure: str
    contents: StructureContents
    image: ImageChoice
    target_seq: int | None
    records: int
    last_seq: int | None


def time_us(at_time: str | datetime) -> int:
    """An ISO 8601 time (naive means UTC) as microseconds since 1970 UTC, as the log has."""
    if isinstance(at_time, str):
        try:
            at_time = datetime.fromisoformat(at_time)
        except ValueError:
            raise pipeline_error(
                PipelineReason.BAD_ARGUMENT, f"--at-time {at_time!r} is not an ISO 8601 time"
            ) from None
    if at_time.tzinfo is None:
        at_time = at_time.replace(tzinfo=UTC)
    delta = at_time - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def srds_description(path: Path) -> dict[str, Any]:
    """An SRDS's description from its footer (the file is verified by ``slot_status``)."""
    meta = pq.read_metadata(path)
    description: dict[str, Any] = json.loads((meta.metadata or {})[METADATA_KEY])
    return description


def choose_point(
    pair: PairInput,
    structure: str,
    *,
    target_seq: int | None,
    at_time_us: int | None = None,
) -> ImageChoice:
    """The image recovery of ``structure`` to ``target_seq`` (``None``: the end) starts from.

    ``POINT_UNRECOVERABLE`` when no valid SRDS qualifies and the log does not reach
    back to the structure's start, or when nothing says how the structure was allocated.
    """
    candidates = []
    for status in pair.srds_slots():
        if not status.valid:
            continue
        description = srds_description(status.path)
        info = description["structures"].get(structure)
        if info is None:
            continue
        seq = int(info["seq"])
        if target_seq is not None and seq > target_seq:
            continue
        taken = int(description["taken_at_us"])
        if at_time_us is not None and taken > at_time_us:
            continue
        candidates.append((status.checkpoint_id or 0, status.seq or 0, status, info, taken))
    if candidates:
        checkpoint_id, _, status, info, taken = max(candidates, key=lambda c: (c[0], c[1]))
        return ImageChoice(
            slot=status.slot,
            path=status.path,
            seq=int(info["seq"]),
            checkpoint_id=checkpoint_id,
            taken_at_us=taken,
            params=StructureParams(**info["params"]),
            lists=tuple(ListControls(n, limit, auth) for n, limit, auth in info["lists"]),
        )
    stream = LogStream.open_existing(pair.log)
    retained = stream.retention_points().get(structure, 0)
    if retained > 0:
        raise pipeline_error(
            PipelineReason.POINT_UNRECOVERABLE,
            f"structure {structure}: no valid SRDS of pair {pair.name} at or before the "
            f"point asked for, and its log starts at seq {retained}, not at its beginning",
            structure=structure,
        )
    params = initial_params(stream, structure)
    if params is None:
        raise pipeline_error(
            PipelineReason.POINT_UNRECOVERABLE,
            f"structure {structure}: no SRDS at or before the point, and the log does not "
            "say how the structure was allocated (no STRUCTURE_INITIALIZATION record)",
            structure=structure,
        )
    return ImageChoice(None, None, 0, None, None, params, ())


def initial_params(stream: LogStream, structure: str) -> StructureParams | None:
    """The allocation the first ``STRUCTURE_INITIALIZATION`` (or ``REBUILD``) record logged."""
    wanted = (int(RecordType.STRUCTURE_INITIALIZATION), int(RecordType.REBUILD))
    for record in stream.records(structures={structure}):
        if record.type in wanted:
            value = record.payload_value() or {}
            try:
                return StructureParams(**value["params"])
            except (KeyError, TypeError):
                continue
    return None


def target_seq_at(stream: LogStream, structure: str, at_time_us: int) -> int:
    """The highest seq of a ``structure`` change logged at or before the time; 0 if none."""
    best = 0
    for record in stream.records(structures={structure}):
        if record.op != _NONE_OP and record.time_us <= at_time_us and record.seq > best:
            best = record.seq
    return best


def structures_of(pair: PairInput) -> list[str]:
    """The structures a pair's log or SRDS mention (the pair's own name first)."""
    found: set[str] = set()
    for status in pair.srds_slots():
        if status.valid:
            found.update(srds_description(status.path)["structures"])
    stream = LogStream.open_existing(pair.log)
    found.update(r.structure for r in stream.records())
    return sorted(found, key=lambda name: (name != pair.name, name))


def recover_inprocess(
    pair: PairInput,
    structure: str,
    *,
    at_seq: int | None = None,
    at_time: str | datetime | None = None,
) -> InprocessRecovery:
    """Recover one structure in process, as the servers do, to the point given."""
    stream = LogStream.open_existing(pair.log)
    at_us = None if at_time is None else time_us(at_time)
    target = at_seq
    if at_us is not None:
        by_time = target_seq_at(stream, structure, at_us)
        target = by_time if target is None else min(target, by_time)
    image = choose_point(pair, structure, target_seq=target, at_time_us=at_us)
    srds = read_srds(image.path) if image.path is not None else None
    records = stream.records(
        structures={structure}, from_seq=image.seq + 1 if srds is not None else None, to_seq=target
    )
    facility = MemoryFacility()
    floor = max(stream.last_seq(structure), image.seq)
    result = rebuild(facility, image.params, image=srds, records=records, sequence_floor=floor)
    with facility.connect(structure, RECOVERY_USER) as conn:
        found = contents(conn)
    return InprocessRecovery(structure, found, image, target, result.records, result.last_seq)
