"""``sharedq pipeline report``: every job on one reading of the log, charts, one HTML page.

The jobs share one :class:`~sharedq.pipeline.job.JobContext`, whose log DataFrame is
read once and cached, so the report costs one read of the log (and one JVM start)
instead of seven.  ``ims`` runs only when the log holds CQS message records (a log
only queue managers wrote has nothing for it): otherwise it is *skipped*, said in the
summary and the figures, with no section in the page.  Each job writes its own tables
under the output directory as it would alone; the report adds ``charts/*.png`` and
``report.html``.  A job that fails does not stop the others: its error goes into the
page and the summary, and the report's figures list it under ``report.failed``.

The other job modules are imported when the report runs, not when this module is
imported.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sharedq.pipeline import charts
from sharedq.pipeline.html_report import Chart, Section, write_report
from sharedq.pipeline.job import JobContext, JobResult
from sharedq.pipeline.sizing import DEFAULT_HEADROOM, check_headroom

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped, unused-ignore]

#: The jobs a report runs, in order: (name in the page, module, options).
JOBS: tuple[tuple[str, str], ...] = (
    ("recover", "recover"),
    ("print", "print_log"),
    ("track", "track"),
    ("stats", "stats"),
    ("capacity", "capacity"),
    ("events", "events"),
    ("ims", "ims"),
)
#: Jobs run only when the log holds what they read: the job, and why it was skipped.
CONDITIONAL: dict[str, str] = {"ims": "the log holds no CQS message records"}
#: Records the short print shows.
PRINT_LIMIT = 20
#: Intervals the depth chart aims at when no ``--interval`` is given.
AUTO_INTERVALS = 60


@dataclass
class ReportResult:
    """Everything a report produced: each job's result (or error), the charts, the page."""

    results: dict[str, JobResult] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    #: Jobs not run because the log holds nothing for them, with the reason.
    skipped: dict[str, str] = field(default_factory=dict)
    charts: dict[str, Path] = field(default_factory=dict)
    html: Path | None = None
    seconds: dict[str, float] = field(default_factory=dict)

    def figures(self) -> dict[str, Any]:
        """Every job's figures, each key prefixed with its job (``capacity.structures``)."""
        merged: dict[str, Any] = {}
        for job, result in self.results.items():
            for key, value in result.figures.items():
                merged[f"{job}.{key}"] = value
            merged[f"{job}.seconds"] = round(self.seconds.get(job, result.seconds), 3)
        merged["report.html"] = str(self.html) if self.html else None
        merged["report.charts"] = {name: str(path) for name, path in self.charts.items()}
        merged["report.failed"] = sorted(self.errors)
        merged["report.skipped"] = sorted(self.skipped)
        return merged


def _auto_interval(ctx: JobContext) -> float:
    """An interval giving about :data:`AUTO_INTERVALS` points over the log's time span."""
    from pyspark.sql import functions as F

    row = ctx.log().agg(F.min("time_us").alias("lo"), F.max("time_us").alias("hi")).first()
    if row is None or row.lo is None or row.hi is None:
        return 1.0
    span = (row.hi - row.lo).total_seconds()
    if span <= 0:
        return 1.0
    raw = span / AUTO_INTERVALS
    # a round number: 1, 2 or 5 times a power of ten, at least a millisecond
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return float(max(step, 0.001))


def _has_cqs_records(ctx: JobContext) -> bool:
    """Whether the log holds a CQS message record (one is enough: the scan stops there)."""
    from pyspark.sql import functions as F

    from sharedq.pipeline.transforms.cqs_records import message_tag

    return not ctx.log().where(message_tag(F.col("payload")).isNotNull()).isEmpty()


#: How the report tells whether a conditional job has anything to read.
_APPLIES: dict[str, Callable[[JobContext], bool]] = {"ims": _has_cqs_records}


def _job_runner(module_name: str) -> Callable[..., JobResult]:
    module = importlib.import_module(f"sharedq.pipeline.jobs.{module_name}")
    run: Callable[..., JobResult] = module.run
    return run


def run_all(
    ctx: JobContext,
    *,
    headroom: float = DEFAULT_HEADROOM,
    interval: float | None = None,
    emhq: tuple[str, ...] = (),
    title: str = "sharedq pipeline report",
    jobs: Collection[str] | None = None,
    extra_sections: Sequence[Section] = (),
    extra_charts: Sequence[Chart] = (),
) -> ReportResult:
    """Run every job on ``ctx`` (one cached log), draw the charts, write ``report.html``.

    ``jobs`` names the ones to run (default: all of :data:`JOBS`); the charts and
    sections of the others are left out of the page, as are those of a job of
    :data:`CONDITIONAL` the log has nothing for (``ims`` on a log without CQS records;
    ``emhq`` names its Fast Path structures, as ``pipeline ims --emhq``).  ``extra_sections`` and
    ``extra_charts`` (a job run on another input, as the demo's IMS group) are added
    to the page after the jobs' own.  For the demo and tests, in process; the command
    goes through :func:`run`.
    """
    import time

    check_headroom(headroom)
    chosen = [(job, module) for job, module in JOBS if jobs is None or job in jobs]
    unknown = set(jobs or ()) - {job for job, _ in JOBS}
    if unknown:
        raise ValueError(f"no such report job: {', '.join(sorted(unknown))}")
    report = ReportResult()
    ctx.log()
    options: dict[str, dict[str, Any]] = {
        "print": {"limit": PRINT_LIMIT},
        "stats": {"interval": interval if interval is not None else _auto_interval(ctx)},
        "capacity": {"headroom": headroom},
        "ims": {"emhq": emhq},
    }
    for job, module_name in chosen:
        ctx.step(f"report: {job}")
        if job in CONDITIONAL and not _APPLIES[job](ctx):
            report.skipped[job] = CONDITIONAL[job]
            continue
        began = time.perf_counter()
        try:
            result = _job_runner(module_name)(ctx, **options.get(job, {}))
        except ModuleNotFoundError as exc:
            if exc.name != f"sharedq.pipeline.jobs.{module_name}":
                raise
            report.errors[job] = "this job is not installed"
            continue
        except Exception as exc:  # one job's failure is reported, the others still run
            report.errors[job] = f"{type(exc).__name__}: {exc}"
            continue
        finally:
            report.seconds[job] = time.perf_counter() - began
        result.seconds = report.seconds[job]
        result.write_summary(ctx.job_dir(result.job))
        report.results[job] = result

    ctx.step("report: charts")
    ran = [(job, module) for job, module in chosen if job not in report.skipped]
    report.charts = draw_charts(report.results, ctx.output / "charts", jobs={job for job, _ in ran})
    ctx.step("report: HTML")
    sections = [
        Section(
            job,
            report.results[job].summary if job in report.results else "",
            report.seconds.get(job, 0.0),
            report.errors.get(job),
        )
        for job, _ in ran
    ]
    sections += list(extra_sections)
    captions = {
        "depth": "messages on each queue at the end of each interval (stats/queues)",
        "latency": "put-to-get and put-to-commit times of every message (track/messages)",
        "work": "puts, gets, commits and backouts per server (stats/servers)",
        "usage": "list entries and data elements in use (capacity/usage), overflow mode"
        " shaded (capacity/overflow_modes)",
        "events": "queue depth events (High, Low, Full) on their queues' committed depth,"
        " labelled with the coordinator and the event messages issued"
        " (events/groups, events/depth)",
        "ims": "full-function inputs per IMS, local (straight to the lock queue) or global,"
        " and input-to-reply latency percentiles per IMS (ims/inputs, ims/latency_pct)",
    }
    titles = {"work": "Work per server", "events": "Depth events", "ims": "IMS group"}
    chart_list = [
        Chart(titles.get(name, name.capitalize()), path, captions[name])
        for name, path in report.charts.items()
    ]
    chart_list += list(extra_charts)
    source = ", ".join(str(p.log.parent) for p in ctx.pairs)
    report.html = write_report(
        ctx.output / "report.html", title, sections, chart_list, source=source
    )
    return report


def _table(result: JobResult | None, name: str, columns: list[str] | None = None) -> pd.DataFrame:
    """A job table as pandas (empty when the job or the table is missing)."""
    import pandas as pd  # type: ignore[import-untyped, unused-ignore]
    import pyarrow.parquet as pq

    if result is None or name not in result.tables:
        return pd.DataFrame(columns=columns or [])
    path = result.tables[name]
    if columns is not None:
        present = set(pq.read_schema(next(iter(_parquet_files(path)), path)).names)
        columns = [c for c in columns if c in present]
    return pq.read_table(path, columns=columns).to_pandas()


def _parquet_files(path: Path) -> list[Path]:
    return sorted(path.glob("*.parquet")) if path.is_dir() else [path]


def draw_charts(
    results: dict[str, JobResult], directory: Path, jobs: Collection[str] | None = None
) -> dict[str, Path]:
    """The report's PNGs from the jobs' tables: depth, latency, work, usage, events, ims.

    A chart whose job failed says "no data"; one whose job is not in ``jobs`` (default:
    all) is not drawn.
    """
    stats, track, cap = results.get("stats"), results.get("track"), results.get("capacity")
    events, ims = results.get("events"), results.get("ims")
    draw: dict[str, tuple[str, Callable[[], Path]]] = {
        "depth": (
            "stats",
            lambda: charts.depth_chart(
                _table(stats, "queues", ["queue", "interval_start", "depth"]),
                directory / "depth.png",
            ),
        ),
        "latency": (
            "track",
            lambda: charts.latency_chart(
                directory / "latency.png",
                messages=_table(track, "messages", ["put_to_get_ms", "put_to_commit_ms"]),
                latency=_table(track, "latency"),
            ),
        ),
        "work": (
            "stats",
            lambda: charts.work_chart(
                _table(stats, "servers", ["server", "puts", "gets", "commits", "backouts"]),
                directory / "work.png",
            ),
        ),
        "usage": (
            "capacity",
            lambda: charts.usage_chart(
                _table(cap, "usage", ["structure", "seq", "time", "entries", "elements"]),
                directory / "usage.png",
                _table(cap, "overflow_modes", ["structure", "entered", "left"]),
            ),
        ),
        "events": (
            "events",
            lambda: charts.events_chart(
                _table(events, "depth", ["queue", "time", "depth"]),
                _table(
                    events,
                    "groups",
                    ["queue", "time", "event", "coordinator", "messages", "log_depth"],
                ),
                directory / "events.png",
            ),
        ),
        "ims": (
            "ims",
            lambda: charts.ims_chart(
                _table(ims, "inputs", ["cqs", "local", "global", "serial"]),
                _table(ims, "latency_pct", ["scope", "name", "p50_ms", "p90_ms", "p99_ms"]),
                directory / "ims.png",
            ),
        ),
    }
    return {name: chart() for name, (job, chart) in draw.items() if jobs is None or job in jobs}


def report_summary(report: ReportResult) -> str:
    """The report's own summary: where the page is, and what ran."""
    lines = [f"report: {report.html}", ""]
    for job, _ in JOBS:
        if job in report.results:
            lines.append(f"  {job:<9} ok      {report.seconds.get(job, 0.0):6.1f} s")
        elif job in report.skipped:
            lines.append(f"  {job:<9} skipped {report.skipped[job]}")
        else:
            lines.append(f"  {job:<9} FAILED  {report.errors.get(job, 'not run')}")
    lines.append("")
    lines += [f"  chart {name}: {path}" for name, path in report.charts.items()]
    return "\n".join(lines) + "\n"


def run(
    ctx: JobContext,
    *,
    headroom: float = DEFAULT_HEADROOM,
    interval: float | None = None,
    emhq: tuple[str, ...] = (),
    **_: Any,
) -> JobResult:
    """Run every job (recover, print, track, stats, capacity, events, and ims when the log
    holds CQS records) on one reading of the log, draw the charts and write
    OUTPUT/report.html."""
    report = run_all(ctx, headroom=headroom, interval=interval, emhq=emhq)
    figures = report.figures()
    return JobResult(
        "report",
        report_summary(report),
        tables={
            f"{job}/{name}": path
            for job, result in report.results.items()
            for name, path in result.tables.items()
        },
        figures=figures,
    )
