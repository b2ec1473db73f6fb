"""``sharedq pipeline recover``: a structure's image at the end of the log, or at a point.

"What was on queue X at 10:42?": the newest valid SRDS at or before the point, plus the
log after it, folded with DataFrame operations
(:mod:`sharedq.pipeline.transforms.recover`).  The result equals, object for object,
what the servers' own recovery computes from the same SRDS and records
(:mod:`sharedq.pipeline.inprocess` decides which those are, for both).

Writes ``<output>/recover/entries`` (one row per entry, in list order: structure,
list_number, position, entry_id, key, secondary_key, version, adjunct, data) and
``<output>/recover/lists`` (structure, list_number, limit, authority), and a summary.
"""

from __future__ import annotations

from datetime import datetime
from functools import reduce
from typing import TYPE_CHECKING, Any

import click

from sharedq.log import LogStream
from sharedq.pipeline.cli_support import job_command
from sharedq.pipeline.errors import PipelineReason, pipeline_error
from sharedq.pipeline.inprocess import ImageChoice, choose_point, srds_description, time_us
from sharedq.pipeline.job import JobContext, JobResult, write_table
from sharedq.pipeline.sources import PairInput, read_log, read_srds
from sharedq.pipeline.transforms import recover as T

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def run(
    ctx: JobContext,
    *,
    structure: str | None = None,
    at_seq: int | None = None,
    at_time: str | datetime | None = None,
) -> JobResult:
    """Recover structures from the newest SRDS at or before a point plus the log after it.

    Without ``structure``, every structure of every pair.  ``at_seq`` and ``at_time``
    (ISO 8601, naive = UTC) set the point; both: the earlier; neither: the end of the log.
    """
    if at_seq is not None and at_seq < 0:
        raise pipeline_error(PipelineReason.BAD_ARGUMENT, f"--at-seq {at_seq} is negative")
    at_us = None if at_time is None else time_us(at_time)
    log = _log(ctx)
    ctx.step("finding the structures")
    targets = _targets(ctx, log, structure)
    entries: list[DataFrame] = []
    lists: list[DataFrame] = []
    counts: list[DataFrame] = []
    plans: list[tuple[str, ImageChoice, int | None]] = []
    for pair, name in targets:
        target = at_seq
        if at_us is not None:
            ctx.step(f"{name}: the last change at or before {at_time}")
            (row,) = T.target_seq_at_time(log, name, at_us).collect()
            by_time = int(row.target_seq or 0)
            target = by_time if target is None else min(target, by_time)
        ctx.step(f"{name}: choosing the SRDS")
        image = choose_point(pair, name, target_seq=target, at_time_us=at_us)
        after = image.seq if image.slot is not None else None
        changes = T.select_changes(log, name, after_seq=after, upto_seq=target)
        image_rows = (
            T.image_entries(read_srds(ctx.spark, pair, image.slot), name)
            if image.slot is not None
            else None
        )
        live, gone = T.live_changes(changes)
        entries.append(T.recovered_entries(name, T.net_changes(live), image_rows, gone))
        lists.append(T.recovered_lists(name, changes, _base_lists(ctx, image)))
        counts.append(T.applied(changes).selectExpr(f"'{name}' AS structure", "*"))
        plans.append((name, image, target))
    out = ctx.job_dir("recover")
    ctx.step("folding the log and writing the entries")
    entries_path = write_table(_union(entries), out / "entries")
    ctx.step("writing the list controls")
    lists_path = write_table(_union(lists), out / "lists")
    ctx.step("summarising")
    applied = {r.structure: r for r in _union(counts).collect()}
    written = ctx.spark.read.parquet(str(entries_path))
    per_list: dict[str, dict[int, int]] = {}
    for row in written.groupBy("structure", "list_number").count().collect():
        per_list.setdefault(row.structure, {})[int(row.list_number)] = int(row["count"])
    figures: dict[str, Any] = {
        "entries": sum(sum(v.values()) for v in per_list.values()),
        "records_applied": sum(int(r.records) for r in applied.values()),
        "image_seq": {
            name: image.seq if image.slot is not None else None for name, image, _ in plans
        },
        "target_seq": {name: target for name, _, target in plans},
        "structures": [name for name, _, _ in plans],
    }
    summary = _summary(plans, applied, per_list, at_seq, at_time)
    return JobResult(
        "recover",
        summary,
        tables={"entries": entries_path, "lists": lists_path},
        figures=figures,
    )


def _log(ctx: JobContext) -> DataFrame:
    """The log: the context's cached one when a job before this one read it, else read
    afresh, uncached: recover reads a few columns of most records once or twice, which
    Parquet's column pruning serves faster than materialising every column in memory.
    """
    if ctx._log is not None:
        return ctx._log
    ctx.step("reading the log")
    return read_log(ctx.spark, ctx.pairs, ctx.work)


def _targets(ctx: JobContext, log: DataFrame, structure: str | None) -> list[tuple[PairInput, str]]:
    """The (pair, structure) couples to recover: one named, or every structure logged."""
    if structure is not None:
        return [(_pair_of(ctx.pairs, structure), structure)]
    names = sorted(r.structure for r in log.select("structure").distinct().collect())
    return [(_pair_of(ctx.pairs, name), name) for name in names]


def _pair_of(pairs: list[PairInput], structure: str) -> PairInput:
    """The pair whose log and SRDS hold ``structure`` (named after it, or listing it)."""
    for pair in pairs:
        if pair.name == structure:
            return pair
    for pair in pairs:
        for status in pair.srds_slots():
            if status.valid and structure in srds_description(status.path)["structures"]:
                return pair
    if len(pairs) == 1:
        return pairs[0]
    for pair in pairs:
        if LogStream.open_existing(pair.log).last_seq(structure) > 0:
            return pair
    raise pipeline_error(
        PipelineReason.BAD_ARGUMENT, f"no pair under the input holds structure {structure!r}"
    )


def _base_lists(ctx: JobContext, image: ImageChoice) -> DataFrame:
    """Every list of the structure with the image's controls (none: no limit, authority 0)."""
    known = {c.list_number: c for c in image.lists}
    rows = [
        (n, known[n].limit if n in known else None, known[n].authority if n in known else 0)
        for n in range(image.params.list_count)
    ]
    return ctx.spark.createDataFrame(rows, "list_number int, limit long, authority long")


def _union(frames: list[DataFrame]) -> DataFrame:
    return reduce(lambda a, b: a.unionByName(b), frames)


def _summary(
    plans: list[tuple[str, ImageChoice, int | None]],
    applied: dict[str, Any],
    per_list: dict[str, dict[int, int]],
    at_seq: int | None,
    at_time: str | datetime | None,
) -> str:
    point = []
    if at_seq is not None:
        point.append(f"seq {at_seq}")
    if at_time is not None:
        point.append(f"time {at_time}")
    lines = [f"recover: structures at {' and '.join(point) or 'the end of the log'}", ""]
    for name, image, target in plans:
        row = applied.get(name)
        records = int(row.records) if row is not None else 0
        last = row.last_seq if row is not None else None
        lists = per_list.get(name, {})
        source = (
            f"{image.label} (seq {image.seq}, checkpoint {image.checkpoint_id})"
            if image.slot is not None
            else image.label
        )
        lines.append(f"{name}: {sum(lists.values())} entries")
        lines.append(f"  image:   {source}")
        lines.append(
            f"  log:     {records} change records applied"
            + (f", seq {row.first_seq}..{last}" if row is not None and records else "")
        )
        lines.append(f"  target:  {'end of log' if target is None else f'seq {target}'}")
        if lists:
            shown = ", ".join(f"{n}: {c}" for n, c in sorted(lists.items()))
            lines.append(f"  per list: {shown}")
        lines.append("")
    return "\n".join(lines)


@job_command("recover")
@click.option("--structure", default=None, help="one structure (default: every one)")
@click.option("--at-seq", type=int, default=None, help="recover to this sequence number")
@click.option(
    "--at-time", default=None, help="recover to this time (ISO 8601; without a zone: UTC)"
)
def _recover(
    ctx: JobContext, structure: str | None, at_seq: int | None, at_time: str | None
) -> JobResult:
    """A structure's image at the end of the log or at a point: SRDS + log, on Spark."""
    return run(ctx, structure=structure, at_seq=at_seq, at_time=at_time)


command = _recover
