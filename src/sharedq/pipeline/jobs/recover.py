"""``sharedq pipeline recover``: a structure's image at the end of the log, or at a point.

"What was on queue X at 10:42?": the newest valid SRDS at or before the point, plus the
log after it, folded on Spark in two passes
(:mod:`sharedq.pipeline.transforms.recover`).  The result equals, object for object,
what the servers' own recovery computes from the same SRDS and records
(:mod:`sharedq.pipeline.inprocess` decides which those are, for both).

Before any result is written, the job checks, as the servers' recovery does, that every
record it needs is in the log (``sharedq.recovery.log_check``): a gap in a writer's
records refuses it with ``LOG_INCOMPLETE``, naming writer, range and file, unless the
loss was accepted (``sharedq recovery accept-loss``, or ``--accept-loss`` for this
run); the summary says what was read, skipped and lost.

Writes ``<output>/recover/entries`` (one row per entry, in list order: structure,
list_number, position, entry_id, key, secondary_key, version, adjunct, data) and
``<output>/recover/lists`` (structure, list_number, limit, authority), and a summary.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from functools import partial, reduce
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import Observation
from pyspark.sql import functions as F

from sharedq.log import LogStream
from sharedq.pipeline.errors import PipelineReason, pipeline_error
from sharedq.pipeline.inprocess import ImageChoice, choose_point, srds_description, time_us
from sharedq.pipeline.job import JobContext, JobResult, write_table
from sharedq.pipeline.sources import PairInput, log_frame, read_srds
from sharedq.pipeline.transforms import recover as T
from sharedq.recovery import LogReport, PairLayout, log_check

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Up to this many live entries (an entry id and a seq each, some 40 bytes) are sent
#: to every task of the second pass, which then reads only their records; more, and
#: the log's records are shuffled to meet them instead.
BROADCAST_LIVE_ENTRIES = 2_000_000

#: The ``lists`` table's schema, as Spark writes it (every column nullable).
_LISTS_SCHEMA = pa.schema(
    [
        pa.field("structure", pa.string()),
        pa.field("list_number", pa.int32()),
        pa.field("limit", pa.int64()),
        pa.field("authority", pa.int64()),
    ]
)


def run(
    ctx: JobContext,
    *,
    structure: str | None = None,
    at_seq: int | None = None,
    at_time: str | datetime | None = None,
    accept_loss: bool = False,
) -> JobResult:
    """Recover structures from the newest SRDS at or before a point plus the log after it.

    Without ``structure``, every structure of every pair.  ``at_seq`` and ``at_time``
    (ISO 8601, naive = UTC) set the point; both: the earlier; neither: the end of the log.
    ``accept_loss``: go on past records missing from the log, listing them, instead of
    refusing (as an operator's accepted loss does for the pair).
    """
    if at_seq is not None and at_seq < 0:
        raise pipeline_error(PipelineReason.BAD_ARGUMENT, f"--at-seq {at_seq} is negative")
    at_us = None if at_time is None else time_us(at_time)
    log, logged = _log(ctx)
    ctx.step("finding the structures")
    targets = _targets(ctx, log, logged, structure)
    by_time: dict[str, int] = {}
    if at_us is not None:
        ctx.step(f"the last change at or before {at_time}")
        rows = T.targets_at_time(log, [name for _, name in targets], at_us).collect()
        by_time = {r.structure: int(r.target_seq or 0) for r in rows}
    entries: list[DataFrame] = []
    plans: list[_Plan] = []
    reports: dict[str, _LogChecked] = {}
    for pair, name in targets:
        target = at_seq
        if at_us is not None:
            target = by_time.get(name, 0) if target is None else min(target, by_time.get(name, 0))
        ctx.step(f"{name}: choosing the SRDS")
        image = choose_point(pair, name, target_seq=target, at_time_us=at_us)
        ctx.step(f"{name}: checking the log, finding the entries it leaves")
        # The check reads every data set on the driver while the first pass runs on
        # the executors; damage it finds is left out and the pass run again.
        # It starts once the pass is planned: beside the planning, its Python work
        # held the interpreter lock against each of the planner's Py4J calls.
        with ThreadPoolExecutor(1) as pool:
            checking = _Deferred(pool, partial(_check_log, ctx, pair, name, image, accept_loss))
            folded: tuple[_Plan, DataFrame] | None = None
            try:
                tag = f"{len(plans)}"
                folded = _fold(ctx, log, pair, name, image, target, tag, checking.start)
            except Exception:
                # A damaged data set fails Spark's page checks: the check tells which.
                if not checking.result().dropped:
                    raise
            report = checking.result()
        reports[name] = report
        if report.dropped:
            log = log_frame(ctx.spark, ctx.stage().without(report.dropped))
            # (A fresh name: an Observation is used once.)
            folded = _fold(ctx, log, pair, name, image, target, f"{len(plans)}_again", _none)
        assert folded is not None
        plans.append(folded[0])
        entries.append(folded[1])
    out = ctx.job_dir("recover")
    # The entries per list are counted while they are written.
    sizes = Observation("sharedq_recover_lists")
    entries_frame = _union(entries).observe(sizes, T.list_sizes_metric()).select(*T.ENTRY_COLUMNS)
    ctx.step("folding the live entries' records, writing the entries")
    # Ids, keys and data are unique per entry: no dictionary, whose building and
    # falling back took most of the write.
    entries_path = write_table(
        entries_frame, out / "entries", {"parquet.enable.dictionary": "false"}
    )
    counts = {plan.name: _Applied.of(plan.applied.get) for plan in plans}
    ctx.step("writing the list controls")
    lists_path = _write_lists(
        [
            row
            for plan in plans
            for row in T.recovered_lists(
                plan.name,
                _base_lists(plan.image),
                # Few logs change list controls after the image: only those are read again.
                T.list_changes(plan.changes).collect() if counts[plan.name].touches else [],
            )
        ],
        out / "lists",
    )
    ctx.step("summarising")
    per_list: dict[str, dict[int, int]] = {}
    for item in sizes.get["lists"] or []:
        per_list.setdefault(item["structure"], {})[int(item["list_number"])] = int(item["entries"])
    figures: dict[str, Any] = {
        "entries": sum(sum(v.values()) for v in per_list.values()),
        "records_applied": sum(c.records for c in counts.values()),
        "image_seq": {p.name: p.image.seq if p.image.slot is not None else None for p in plans},
        "target_seq": {p.name: p.target for p in plans},
        "structures": [p.name for p in plans],
    }
    figures["log_lost"] = {n: len(r.report.lost) for n, r in reports.items()}
    summary = _summary(plans, counts, per_list, at_seq, at_time, reports)
    return JobResult(
        "recover",
        summary,
        tables={"entries": entries_path, "lists": lists_path},
        figures=figures,
    )


def _fold(
    ctx: JobContext,
    log: DataFrame,
    pair: PairInput,
    name: str,
    image: ImageChoice,
    target: int | None,
    tag: str,
    planned: Callable[[], None],
) -> tuple[_Plan, DataFrame]:
    """One structure's recovery planned: its change records, its live entries found
    (the first pass runs here, a job of its own) and its entries as a DataFrame.

    The live entries (an id and a seq each) are kept by the executors
    (``localCheckpoint``), so that the second pass, run when the entries are written,
    reads them instead of folding the log again; they are sent whole to every task
    of it when there are up to :data:`BROADCAST_LIVE_ENTRIES`.
    """
    after = image.seq if image.slot is not None else None
    changes = T.select_changes(log, name, after_seq=after, upto_seq=target)
    image_rows = (
        T.image_entries(read_srds(ctx.spark, pair, image.slot), name)
        if image.slot is not None
        else None
    )
    # The records applied are counted while the first pass reads them.
    applied = Observation(f"sharedq_recover_{tag}")
    found = Observation(f"sharedq_recover_live_{tag}")
    first = T.live_entries(changes.observe(applied, *T.applied_metrics()), image_rows).observe(
        found, F.count(F.lit(1)).alias("entries")
    )
    planned()
    live = first.localCheckpoint(eager=True)
    few = int(found.get["entries"]) <= BROADCAST_LIVE_ENTRIES
    nets = T.net_changes(changes, image_rows, live, broadcast=few)
    frame = T.recovered_entries(name, nets, list_size=True)
    return _Plan(name, image, target, changes, applied), frame


def _none() -> None:
    pass


@dataclass
class _Deferred:
    """A call run on a pool, started when first asked for (``start``, ``result``)."""

    pool: ThreadPoolExecutor
    call: Callable[[], _LogChecked]
    future: Future[_LogChecked] | None = None

    def start(self) -> None:
        if self.future is None:
            self.future = self.pool.submit(self.call)

    def result(self) -> _LogChecked:
        self.start()
        assert self.future is not None
        return self.future.result()


@dataclass(frozen=True)
class _Plan:
    """One structure's recovery: its image, its target and its change records."""

    name: str
    image: ImageChoice
    target: int | None
    changes: DataFrame
    applied: Observation


@dataclass(frozen=True)
class _Applied:
    """The change records applied to one structure: how many, the first and last seq,
    and how many changed list controls."""

    records: int
    first_seq: int | None
    last_seq: int | None
    touches: int

    @classmethod
    def of(cls, metrics: dict[str, Any]) -> _Applied:
        """From the observed :func:`~sharedq.pipeline.transforms.recover.applied_metrics`."""
        first, last = metrics.get("first_seq"), metrics.get("last_seq")
        return cls(
            int(metrics.get("records") or 0),
            None if first is None else int(first),
            None if last is None else int(last),
            int(metrics.get("touches") or 0),
        )


def _log(ctx: JobContext) -> tuple[DataFrame, dict[str, tuple[int, int]] | None]:
    """The log, and the structures it holds when its files' footers tell them.

    The context's cached log when a job before this one read it, else read afresh,
    uncached: recover reads a few columns of most records once, which Parquet's column
    pruning serves faster than materialising every column in memory.
    """
    if ctx._log is not None:
        return ctx._log, None
    ctx.step("reading the log")
    staged = ctx.stage()
    return log_frame(ctx.spark, staged), staged.structures


@dataclass(frozen=True)
class _LogChecked:
    """What checking the log for one structure found, and data set files to leave out."""

    report: LogReport
    dropped: set[str]


def _check_log(
    ctx: JobContext, pair: PairInput, structure: str, image: ImageChoice, accept_loss: bool
) -> _LogChecked:
    """Refuse (``LOG_INCOMPLETE``) when records the recovery needs are missing, unless
    the loss is accepted; the same check the servers' recovery makes."""
    plan = ctx.stage().plans[pair.name]
    positions = None
    log_stream = ""
    if image.path is not None:
        described = srds_description(image.path).get("log") or {}
        positions = described.get("positions")
        log_stream = str(described.get("stream") or "")
        if log_stream and log_stream != LogStream.open_existing(pair.log).identity:
            raise pipeline_error(
                PipelineReason.LOG_INCOMPLETE,
                f"{image.label} of pair {pair.name} was taken of a structure logged to "
                f"another log stream ({log_stream}) than {pair.log}",
            )
    needed = {structure: image.seq + 1 if image.slot is not None else 0}
    starts = None if positions is None else {str(k): int(v) for k, v in positions.items()}
    coverage = plan.check(starts=starts, needed_seq=needed)
    accepted = set()
    if pair.log.parent.name == pair.name:
        accepted = log_check.accepted(PairLayout(pair.log.parent.parent, pair.name))
    missing = [g for g in coverage.gaps if g.key() not in accepted]
    if missing and not accept_loss:
        named = "; ".join(str(g) for g in missing[:8])
        more = f"; and {len(missing) - 8} more" if len(missing) > 8 else ""
        raise pipeline_error(
            PipelineReason.LOG_INCOMPLETE,
            f"recovering {structure}: records it needs are missing from the log of pair "
            f"{pair.name}: {named}{more}.  Put the files back, or accept the loss "
            "(`sharedq recovery accept-loss`, or --accept-loss for this run)",
            gaps=[str(g) for g in missing],
        )
    dropped = {str(p) for d in plan.datasets if d.meta is None for p in d.paths}
    report = LogReport(
        files=coverage.files,
        skipped=list(coverage.skipped),
        repaired=list(coverage.repaired),
        lost=[str(g) for g in coverage.gaps],
    )
    return _LogChecked(report, dropped)


def _targets(
    ctx: JobContext,
    log: DataFrame,
    logged: dict[str, tuple[int, int]] | None,
    structure: str | None,
) -> list[tuple[PairInput, str]]:
    """The (pair, structure) couples to recover: one named, or every structure logged
    (from the log files' footers and the staging records; without them, a query)."""
    if structure is not None:
        return [(_pair_of(ctx.pairs, structure), structure)]
    if logged is not None:
        names = sorted(logged)
    else:
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


def _base_lists(image: ImageChoice) -> list[tuple[int, int | None, int]]:
    """Every list of the structure with the image's controls (none: no limit, authority 0)."""
    known = {c.list_number: c for c in image.lists}
    return [
        (n, known[n].limit if n in known else None, known[n].authority if n in known else 0)
        for n in range(image.params.list_count)
    ]


def _write_lists(rows: list[tuple[str, int, int | None, int]], path: Path) -> Path:
    """Write the list controls (a row per list: a handful) as one Parquet file under
    ``path`` (replacing what was there), as Spark writes a table: no job for so little."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(_LISTS_SCHEMA)
    arrays = [pa.array(list(v), type=f.type) for v, f in zip(columns, _LISTS_SCHEMA, strict=True)]
    table = pa.Table.from_arrays(arrays, schema=_LISTS_SCHEMA)
    pq.write_table(table, path / "part-00000.parquet")
    (path / "_SUCCESS").touch()
    return path


def _union(frames: list[DataFrame]) -> DataFrame:
    return reduce(lambda a, b: a.unionByName(b), frames)


def _summary(
    plans: list[_Plan],
    applied: dict[str, _Applied],
    per_list: dict[str, dict[int, int]],
    at_seq: int | None,
    at_time: str | datetime | None,
    reports: dict[str, _LogChecked],
) -> str:
    point = []
    if at_seq is not None:
        point.append(f"seq {at_seq}")
    if at_time is not None:
        point.append(f"time {at_time}")
    lines = [f"recover: structures at {' and '.join(point) or 'the end of the log'}", ""]
    for plan in plans:
        name, image, target = plan.name, plan.image, plan.target
        row = applied.get(name)
        records = row.records if row is not None else 0
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
        checked = reports.get(name)
        if checked is not None:
            report = checked.report
            lines.append(f"  read:    {report.files} log files")
            lines += [f"  skipped: {item}" for item in report.skipped]
            lines += [f"  repaired: {item}" for item in report.repaired]
            lines += [f"  LOST:    {item}" for item in report.lost]
        if lists:
            shown = ", ".join(f"{n}: {c}" for n, c in sorted(lists.items()))
            lines.append(f"  per list: {shown}")
        lines.append("")
    return "\n".join(lines)
