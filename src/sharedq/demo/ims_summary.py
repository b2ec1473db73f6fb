"""The IMS group's part of the demo's report: the pipeline's ``ims`` job on the group's
log, its chart and section in the HTML page, and the tables the demo prints.

Two accounts are set side by side: the terminals' ledger (every input entered, every
reply delivered: :class:`sharedq.demo.ims_workload.Ledger`) and the log's, read by
Spark (inputs local, global and serial, requests per CQS, latency, the balance per
queue type).  They must agree: the full-function inputs the log shows are those the
terminals entered, and nothing is left on the structures.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table

from sharedq.demo.ims_group import GROUP, VICTIM, IMSGroupResult, ims_recovery

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sharedq.pipeline.html_report import Chart, Section
    from sharedq.pipeline.job import Step


@dataclass(frozen=True)
class IMSSummary:
    """The ``ims`` job's tables, as the demo prints them."""

    work: list[dict[str, Any]]
    inputs: list[dict[str, Any]]
    latency: list[dict[str, Any]]
    balance: list[dict[str, Any]]

    def total(self, rows: list[dict[str, Any]], column: str) -> int:
        return sum(int(r[column] or 0) for r in rows)

    @property
    def log_inputs(self) -> int:
        return sum(self.total(self.inputs, c) for c in ("local", "global", "serial"))

    @property
    def left(self) -> int:
        return self.total(self.balance, "left") + self.total(self.balance, "cold")

    @property
    def balanced(self) -> bool:
        return all(bool(r["balanced"]) for r in self.balance)


def run_ims_job(
    spark: SparkSession, output: Path, pipeline: Path, step: Step
) -> tuple[Section, Chart]:
    """The ``ims`` job on the group's log (its tables under ``pipeline/ims``) and its
    chart (``pipeline/charts/ims.png``), for the report page."""
    from sharedq.pipeline import charts
    from sharedq.pipeline.html_report import Chart, Section
    from sharedq.pipeline.job import JobContext
    from sharedq.pipeline.jobs import ims

    ctx = JobContext.open(spark, ims_recovery(output), pipeline, step)
    began = time.perf_counter()
    try:
        result = ims.run(ctx)
    finally:
        ctx.release()
    result.seconds = time.perf_counter() - began
    result.write_summary(ctx.job_dir("ims"))
    tables = read_ims_summary(pipeline)
    import pandas as pd  # type: ignore[import-untyped, unused-ignore]

    path = charts.ims_chart(
        pd.DataFrame(tables.inputs, columns=["cqs", "local", "global", "serial"]),
        pd.DataFrame(tables.latency, columns=["scope", "name", "p50_ms", "p90_ms", "p99_ms"]),
        pipeline / "charts" / "ims.png",
    )
    caption = (
        "full-function inputs per IMS, local (straight to the lock queue) or global, "
        "and input-to-reply latency percentiles per IMS (ims/inputs, ims/latency_pct)"
    )
    return Section("ims", result.summary, result.seconds), Chart("IMS group", path, caption)


def read_ims_summary(pipeline: Path) -> IMSSummary:
    def rows(name: str) -> list[dict[str, Any]]:
        return list(pq.read_table(pipeline / "ims" / name).to_pylist())

    return IMSSummary(rows("work"), rows("inputs"), rows("latency_pct"), rows("balance"))


def ims_nothing_lost(group: IMSGroupResult, summary: IMSSummary) -> bool:
    """The ledger balances, every full-function input the terminals entered is in the
    log (the local ones as local), and the log leaves on the structures what the
    structures hold."""
    full = sum(1 for _, kind, _, _ in group.ledger.entered.values() if not kind.startswith("fp"))
    local = sum(row.get("local", 0) for row in group.ledger.per_ims().values())
    return (
        group.balanced
        and summary.balanced
        and summary.log_inputs == full
        and summary.total(summary.inputs, "local") == local
        and summary.left == group.still_queued + group.cold
    )


def tell_ims_group(console: Console, group: IMSGroupResult) -> None:
    """What happened to the IMS group, before the pipeline runs."""
    console.print(
        f"IMS group ({', '.join(GROUP)}): {group.entered} inputs entered at six terminals "
        f"in {group.seconds:.1f} s; {VICTIM} was killed with {group.locked_at_kill} messages "
        f"on its lock queue ({group.held_at_kill} held by its regions, the rest output in "
        f"flight to its terminals); its emergency restart requeued {group.requeued}"
    )


def print_ims_summary(
    console: Console, group: IMSGroupResult, summary: IMSSummary, nothing_lost: bool
) -> None:
    ledger = group.ledger.per_ims()
    counts = group.counts
    log_inputs = {r["cqs"]: r for r in summary.inputs}
    log_work = {r["cqs"]: r for r in summary.work}
    work = Table(
        title="IMS group: inputs per IMS",
        caption="entered: at its terminals (the ledger); local, global, serial: its "
        "full-function inputs in the log; FP: Fast Path inputs (local ones never reach "
        "the structure)",
    )
    columns = ("IMS", "entered", "local", "global", "serial", "local %", "FP loc", "FP glob")
    for column in columns:
        work.add_column(column, justify="left" if column == "IMS" else "right")
    for imsid in GROUP:
        got = log_inputs.get(f"CQS{imsid}", {})
        share = got.get("local_share")
        work.add_row(
            imsid,
            str(ledger.get(imsid, {}).get("entered", 0)),
            str(got.get("local", 0)),
            str(got.get("global", 0)),
            str(got.get("serial", 0)),
            "-" if share is None else f"{100 * share:.1f} %",
            str(counts.get(imsid, {}).get("fp_local", 0)),
            str(counts.get(imsid, {}).get("fp_global", 0)),
        )
    console.print(work)
    requests = Table(
        title="IMS group: CQS requests (from the log)",
        caption="local puts: inputs put straight to the lock queue",
    )
    names = ("puts", "local_puts", "reads", "unlocks", "deletes")
    for column in ("CQS", *(n.replace("_", " ") for n in names)):
        requests.add_column(column, justify="left" if column == "CQS" else "right")
    for imsid in GROUP:
        did = log_work.get(f"CQS{imsid}", {})
        requests.add_row(f"CQS{imsid}", *(str(did.get(n, 0)) for n in names))
    console.print(requests)
    latency = Table(title="IMS group: latency, ms (input put to reply deleted, from the log)")
    for column in ("scope", "inputs", "p50", "p90", "p99"):
        latency.add_column(column, justify="left" if column == "scope" else "right")
    order = {"all": 0, "cqs": 1, "routing": 2}
    for row in sorted(summary.latency, key=lambda r: (order.get(r["scope"], 3), str(r["name"]))):
        latency.add_row(
            "all" if row["scope"] == "all" else f"{row['scope']} {row['name']}",
            str(row["count"]),
            *(_ms(row[c]) for c in ("p50_ms", "p90_ms", "p99_ms")),
        )
    console.print(latency)
    sheet = Table(
        title="IMS group: balance sheet",
        caption="entered = answered + still queued + cold; each input answered once",
    )
    for column in ("IMS", "entered", "answered", "answered twice", "queued", "cold"):
        sheet.add_column(column, justify="left" if column == "IMS" else "right")
    for imsid in GROUP:
        mine = ledger.get(imsid, {})
        sheet.add_row(
            imsid,
            str(mine.get("entered", 0)),
            str(mine.get("delivered", 0)),
            str(mine.get("duplicates", 0)),
            "",
            "",
        )
    sheet.add_row(
        "total",
        str(group.entered),
        str(group.delivered),
        str(group.duplicates),
        str(group.still_queued),
        str(group.cold),
        style="bold",
    )
    console.print(sheet)
    log = Table(
        title="IMS group: messages per queue type (from the log)",
        caption="put = deleted + cold + left; left: still on the structure at the log's end",
    )
    for column in ("structure", "queue type", "put", "deleted", "cold", "left"):
        log.add_column(
            column, justify="right" if column in ("put", "deleted", "cold", "left") else "left"
        )
    for row in sorted(summary.balance, key=lambda r: (r["kind"], r["queue_type"] or 0)):
        log.add_row(
            str(row["kind"]),
            str(row["queue"]),
            *(str(row[c]) for c in ("put", "deleted", "cold", "left")),
        )
    console.print(log)
    full = sum(1 for _, kind, _, _ in group.ledger.entered.values() if not kind.startswith("fp"))
    console.print(
        f"IMS: {full} full-function inputs entered, {summary.log_inputs} in the log; "
        f"{VICTIM}'s emergency restart requeued {group.requeued}, each processed once"
    )
    verdict = (
        "[bold green]IMS: nothing lost[/bold green]: every input answered exactly once"
        if nothing_lost
        else "[bold red]IMS: MISMATCH[/bold red]: the ledger, the log and the structures disagree"
    )
    console.print(verdict)


def _ms(value: Any) -> str:
    return "-" if value is None else f"{float(value):.1f}"
