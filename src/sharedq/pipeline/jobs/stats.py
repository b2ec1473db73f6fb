"""``sharedq pipeline stats``: per queue and interval, and per server, from the log.

Writes ``<output>/stats/queues`` (one row per queue and interval: puts, gets, backouts,
depth at the interval's end) and ``<output>/stats/servers`` (each server's puts, gets,
commits, backouts and share of the gets), and a summary; the figures hold the gets of
each server and how evenly they are spread.
"""

from __future__ import annotations

from typing import Any

from sharedq.pipeline.errors import PipelineReason, pipeline_error
from sharedq.pipeline.job import JobContext, JobResult, write_table
from sharedq.pipeline.jobs.track import message_table
from sharedq.pipeline.transforms.messages import message_events
from sharedq.pipeline.transforms.statistics import get_balance, queue_intervals, server_shares


def run(ctx: JobContext, *, interval: float = 1.0, no_srds: bool = False, **_: Any) -> JobResult:
    """Statistics per queue and interval (puts, gets, backouts, depth) and per server."""
    from pyspark.sql import functions as F

    if not interval > 0 or interval < 1e-6:
        raise pipeline_error(
            PipelineReason.BAD_ARGUMENT,
            f"--interval {interval}: must be a positive number of seconds (at least 1 us)",
        )
    out = ctx.job_dir("stats")
    log = ctx.log()
    messages = message_table(ctx, no_srds=no_srds)
    ctx.step("collecting message changes")
    events = message_events(log).cache()
    ctx.step("counting per queue and interval")
    queues = queue_intervals(events, messages, interval)
    tables = {"queues": write_table(queues, out / "queues")}
    ctx.step("counting per server")
    servers = server_shares(events, log)
    tables["servers"] = write_table(servers, out / "servers")
    ctx.step("summarising")
    server_rows = servers.orderBy("server").collect()
    balance = get_balance(servers).first()
    per_queue = (
        queues.groupBy("structure", "queue")
        .agg(
            F.sum("puts").alias("puts"),
            F.sum("gets").alias("gets"),
            F.sum("backouts").alias("backouts"),
            F.max("depth").alias("max_depth"),
            F.max_by("depth", "interval_start").alias("final_depth"),
            F.count("*").alias("intervals"),
        )
        .orderBy("structure", "queue")
        .collect()
    )
    events.unpersist()
    figures: dict[str, Any] = {
        "gets_per_server": {r.server: int(r.gets) for r in server_rows},
        "puts_per_server": {r.server: int(r.puts) for r in server_rows},
        "max_over_mean": _float(balance, "max_over_mean"),
        "coefficient_of_variation": _float(balance, "coefficient_of_variation"),
        "final_depth": {r.queue: int(r.final_depth) for r in per_queue},
        "interval_seconds": interval,
    }
    lines = [f"statistics ({interval:g} s intervals)", "", "per queue"]
    lines.append(
        f"{'structure':<10} {'queue':<12} {'puts':>6} {'gets':>6} {'backouts':>8}"
        f" {'max depth':>9} {'final':>6} {'intervals':>9}"
    )
    for r in per_queue:
        lines.append(
            f"{r.structure:<10} {r.queue:<12} {r.puts:>6} {r.gets:>6} {r.backouts:>8}"
            f" {r.max_depth:>9} {r.final_depth:>6} {r.intervals:>9}"
        )
    lines += ["", "per server"]
    lines.append(
        f"{'server':<10} {'puts':>6} {'gets':>6} {'commits':>8} {'backouts':>8} {'gets %':>7}"
    )
    for r in server_rows:
        lines.append(
            f"{r.server:<10} {r.puts:>6} {r.gets:>6} {r.commits:>8} {r.backouts:>8}"
            f" {100 * r.share_of_gets:>6.1f}%"
        )
    lines.append(
        f"get balance: max/mean {_text(figures['max_over_mean'])},"
        f" coefficient of variation {_text(figures['coefficient_of_variation'])}"
    )
    return JobResult("stats", "\n".join(lines), tables=tables, figures=figures)


def _float(row: Any, name: str) -> float | None:
    if row is None or row[name] is None:
        return None
    return round(float(row[name]), 4)


def _text(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
