"""``sharedq pipeline ims``: an IMS shared-queues group's work, from its CQSs' log records.

Writes ``<output>/ims/work`` (per CQS, that is per IMS: puts, local puts, reads, moves,
unlocks, deletes, cold, inputs), ``inputs`` (per IMS: full-function inputs local, global
and serial, the local share, and how many were a conversation's iterations), ``latency``
(each input: put to the delete of its last reply, matched by the unit of work's first 16
bytes; a conversational input's to its reply's read), ``latency_pct`` (percentiles: all,
per IMS, per routing), ``conversations`` (per front-end IMS and LTERM: conversational
inputs, and responses that ended a conversation) and ``balance`` (per structure kind and
queue type: opening + put = deleted + cold + left); the figures hold the totals. How the
records are read: :mod:`sharedq.pipeline.transforms.ims`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from sharedq.pipeline.job import JobContext, JobResult, write_table
from sharedq.pipeline.transforms.ims import (
    balance,
    conversations,
    input_latency,
    input_shares,
    latency_percentiles,
    requests,
    work_per_cqs,
)


def run(ctx: JobContext, *, emhq: tuple[str, ...] = (), **_: Any) -> JobResult:
    """An IMS group's work per IMS, local vs global inputs, input-to-reply latency and
    the balance per queue type, from the CQS log records (EMHQ structures: --emhq, or
    those whose name contains EMHQ)."""
    out = ctx.job_dir("ims")
    ctx.step("ims: reading the CQS records")
    reqs = requests(ctx.log(), emhq or None).cache()
    tables: dict[str, Any] = {}
    ctx.step("ims: work per IMS")
    work = work_per_cqs(reqs)
    tables["work"] = write_table(work, out / "work")
    shares = input_shares(reqs)
    tables["inputs"] = write_table(shares, out / "inputs")
    ctx.step("ims: latency")
    tables["latency"] = write_table(input_latency(reqs), out / "latency")
    # From the table just written: the join is not computed again for the percentiles.
    pct = latency_percentiles(ctx.spark.read.parquet(str(out / "latency")))
    tables["latency_pct"] = write_table(pct, out / "latency_pct")
    ctx.step("ims: conversations")
    tables["conversations"] = write_table(conversations(reqs), out / "conversations")
    ctx.step("ims: balance")
    sheet = balance(reqs)
    tables["balance"] = write_table(sheet, out / "balance")
    # The tables are small (a row per IMS, queue type or scope): read back from the
    # files, not collected through Spark again.
    work_rows = _rows(out / "work", "cqs")
    share_rows = _rows(out / "inputs", "cqs")
    pct_rows = _rows(out / "latency_pct", "scope", "name")
    sheet_rows = _rows(out / "balance", "kind", "queue_type", "queue")
    conversation_rows = _rows(out / "conversations", "cqs", "source_lterm")
    answered = pq.read_table(out / "latency", columns=["latency_ms"]).column(0)
    unanswered = answered.null_count
    reqs.unpersist()
    total = {
        c: sum(int(r[c] or 0) for r in sheet_rows)
        for c in ("opening", "put", "deleted", "cold", "left")
    }
    inputs = {c: sum(int(r[c] or 0) for r in share_rows) for c in ("local", "global", "serial")}
    figures: dict[str, Any] = {
        "work": {r["cqs"]: {k: v for k, v in r.items() if k != "cqs"} for r in work_rows},
        "inputs": inputs,
        "local_share": inputs["local"] / sum(inputs.values()) if sum(inputs.values()) else None,
        "conversational_inputs": sum(int(r["conversational"] or 0) for r in share_rows),
        "latency": {f"{r['scope']}:{r['name']}": r for r in pct_rows},
        "unanswered": unanswered,
        "balance": total,
        "balance_ok": all(bool(r["balanced"]) for r in sheet_rows),
    }
    summary = _summary(
        work_rows, share_rows, pct_rows, conversation_rows, sheet_rows, total, unanswered
    )
    return JobResult("ims", summary, tables=tables, figures=figures)


def _summary(
    work: list[dict[str, Any]],
    shares: list[dict[str, Any]],
    pct: list[dict[str, Any]],
    talks: list[dict[str, Any]],
    sheet: list[dict[str, Any]],
    total: dict[str, int],
    unanswered: int,
) -> str:
    lines = ["IMS shared-queues group (from the CQS log records)", "", "work per IMS (its CQS)"]
    columns = ("puts", "local_puts", "reads", "moves", "unlocks", "deletes", "cold", "inputs")
    lines.append(f"{'cqs':<12}" + "".join(f" {c:>10}" for c in columns))
    for r in work:
        lines.append(f"{r['cqs']:<12}" + "".join(f" {int(r[c] or 0):>10}" for c in columns))
    lines += ["", "full-function inputs: local (straight to the lock queue) vs global"]
    lines.append(f"{'cqs':<12} {'local':>7} {'global':>7} {'serial':>7} {'local %':>8} {'conv':>7}")
    for r in shares:
        share = "-" if r["local_share"] is None else f"{100 * r['local_share']:.1f}"
        lines.append(
            f"{r['cqs']:<12} {r['local']:>7} {r['global']:>7} {r['serial']:>7} {share:>8}"
            f" {r['conversational']:>7}"
        )
    lines += ["", "latency, ms (input put to reply deleted)"]
    for r in pct:
        lines.append(
            f"{r['scope']:<8} {r['name']!s:<12} n={r['count']:<6}"
            f" p50 {_ms(r['p50_ms'])} p90 {_ms(r['p90_ms'])} p99 {_ms(r['p99_ms'])}"
        )
    lines.append(f"inputs with no reply deleted: {unanswered}")
    if talks:
        # A response that goes on with the conversation is held until the next input.
        lines.append("(a conversation that goes on holds its reply until the next input)")
        lines += ["", "conversations per front end and LTERM (cqs ?: input not in the log)"]
        lines.append(f"{'cqs':<12} {'lterm':<8} {'iterations':>10} {'ended':>7}")
        for r in talks:
            lines.append(
                f"{r['cqs'] or '?':<12} {r['source_lterm']!s:<8}"
                f" {r['iterations']:>10} {r['ended']:>7}"
            )
    lines += ["", "balance (opening + put = deleted + cold + left)"]
    for r in [*sheet, {"kind": "total", "queue": "", **total}]:
        lines.append(
            f"{r['kind']:<6} {r['queue']:<24}"
            + "".join(
                f" {int(r[c] or 0):>8}" for c in ("opening", "put", "deleted", "cold", "left")
            )
        )
    ok = all(bool(r["balanced"]) for r in sheet)
    lines.append("balance: " + ("OK" if ok else "DOES NOT BALANCE"))
    return "\n".join(lines)


def _rows(path: Path, *order: str) -> list[dict[str, Any]]:
    rows = pq.read_table(path).to_pylist()
    return sorted(rows, key=lambda r: tuple((r[k] is not None, r[k]) for k in order))


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
