"""``sharedq pipeline track``: the life of every message, latencies, stuck messages and
the balance sheet, from the log (and the SRDS image the log starts from); and the
units of work of the Common Queue Servers, followed across systems as figure 72 does.

Writes ``<output>/track/messages``, ``latency``, ``stuck`` and ``balance`` (Parquet,
the queue manager's messages), ``cqs_units`` (every request a CQS logged for a
message, by origin) and a summary; the figures hold the balance sheet totals,
``balance_ok``, the CQS counts and, with ``uow``, the chosen unit's rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgpack

from sharedq.log import ChangeOp
from sharedq.mq import keys
from sharedq.mq.directory import CONTROL_LIST
from sharedq.pipeline.job import JobContext, JobResult, write_table
from sharedq.pipeline.sources import read_srds
from sharedq.pipeline.transforms.cqs_records import STEP_COLUMNS, cqs_steps, of_origin, step_order
from sharedq.pipeline.transforms.messages import message_events
from sharedq.pipeline.transforms.printing import parse_uow
from sharedq.pipeline.transforms.tracking import (
    BALANCE_FIGURES,
    BALANCE_SHEET,
    balance_sheet,
    balance_total,
    latency,
    message_lives,
    opening_messages,
    stuck_messages,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_CLAIM_LOW, _CLAIM_HIGH = keys.control_range(b"C")


def run(
    ctx: JobContext,
    *,
    held_ms: float = 1000.0,
    waiting_seconds: float = 5.0,
    backout_limit: int = 2,
    no_srds: bool = False,
    limit: int = 20,
    uow: str | None = None,
    **_: Any,
) -> JobResult:
    """Track every message: who put and got it, latencies, stuck ones, the balance sheet;
    and follow a CQS unit of work (--uow) across systems."""
    from pyspark.sql import functions as F

    origin = parse_uow(uow)
    out = ctx.job_dir("track")
    log = ctx.log()
    ctx.step("finding the image the log starts from")
    opening = None if no_srds else opening_image(ctx, log)
    ctx.step("following every message")
    events = message_events(log)
    messages = message_lives(events, opening).cache()
    tables = {"messages": write_table(messages, out / "messages")}
    ctx.step("computing latencies")
    lat = latency(messages)
    tables["latency"] = write_table(lat, out / "latency")
    ctx.step("looking for stuck messages")
    end = log.agg(F.max("time_us").alias("end")).first()
    log_end = (
        F.lit(end["end"]) if end is not None and end["end"] is not None else F.current_timestamp()
    )
    stuck = stuck_messages(messages, log_end, held_ms, waiting_seconds * 1000.0, backout_limit)
    tables["stuck"] = write_table(stuck, out / "stuck")
    ctx.step("drawing up the balance sheet")
    sheet = balance_sheet(messages)
    tables["balance"] = write_table(sheet, out / "balance")
    ctx.step("summarising")
    sheet_rows = sheet.orderBy("structure", "queue").collect()
    total = balance_total(sheet).first()
    latency_rows = lat.orderBy("scope", "name").collect()
    outcomes = {r.outcome: r["count"] for r in messages.groupBy("outcome").count().collect()}
    stuck_count = {r.reason: r["count"] for r in stuck.groupBy("reason").count().collect()}
    stuck_shown = stuck.orderBy(F.desc("age_ms")).limit(limit).collect()
    messages.unpersist()
    figures: dict[str, Any] = {
        name: int(total[name]) if total is not None else 0 for name in BALANCE_FIGURES
    }
    figures["balance_ok"] = bool(total["balanced"]) if total is not None else True
    figures["queues_balanced"] = {r.queue: bool(r.balanced) for r in sheet_rows}
    figures["outcomes"] = outcomes
    figures["stuck"] = stuck_count
    figures["messages"] = sum(outcomes.values())
    figures["opening_from_srds"] = opening is not None
    figures["latency"] = {
        f"{r.scope}:{r.name}": {k: r[k] for k in r.asDict() if k not in ("scope", "name")}
        for r in latency_rows
    }
    summary = _summary(sheet_rows, total, latency_rows, outcomes, stuck_count, stuck_shown)
    ctx.step("following the CQS units of work")
    units, unit_lines = cqs_units(log, out, origin, tables)
    figures.update(units)
    if unit_lines:
        summary += "\n\n" + "\n".join(unit_lines)
    return JobResult("track", summary, tables=tables, figures=figures)


#: The most rows of a chosen unit of work the summary shows (all are in the table).
UNIT_ROWS_SHOWN = 200


def cqs_units(
    log: DataFrame, out: Any, origin: str | None, tables: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """Every request a CQS logged for a message, by origin (``track/cqs_units``), and
    with ``origin`` (hex, a prefix of the unit of work) figure 72's rows of that unit:
    the figures and the summary's lines."""
    from pyspark.sql import functions as F

    steps = cqs_steps(log).cache()
    tables["cqs_units"] = write_table(
        steps.orderBy(*step_order()).select(*STEP_COLUMNS), out / "cqs_units"
    )
    counted = steps.agg(
        F.count_distinct("origin").alias("origins"),
        F.count_distinct("structure", "entry_id").alias("messages"),
        F.count("*").alias("requests"),
    ).first()
    figures: dict[str, Any] = {
        f"cqs_{name}": int(counted[name]) if counted is not None else 0
        for name in ("origins", "messages", "requests")
    }
    # A log no CQS wrote keeps the queue manager's summary as it was.
    lines = (
        [
            f"CQS units of work: {figures['cqs_origins']} origin(s), "
            f"{figures['cqs_messages']} message(s), {figures['cqs_requests']} request(s)"
        ]
        if figures["cqs_requests"] or origin is not None
        else []
    )
    if origin is not None:
        rows = of_origin(steps, origin).orderBy(*step_order()).select(*STEP_COLUMNS).collect()
        figures["unit"] = [
            {k: r[k] for k in STEP_COLUMNS if k not in ("time", "origin", "uow")} for r in rows
        ]
        lines += _unit_lines(origin, rows)
    steps.unpersist()
    return figures, lines


def _unit_lines(origin: str, rows: list[Any]) -> list[str]:
    """Figure 72's table for the chosen unit(s) of work."""
    origins = sorted({r.origin for r in rows})
    lines = [
        "",
        f"unit of work {origin}*: {len(origins)} origin(s), "
        f"{len({(r.structure, r.entry_id) for r in rows})} message(s), {len(rows)} request(s)",
    ]
    header = (
        f"{'msg':>3} {'orig':<8} {'orig token':>20} {'proc':<8} {'proc token':>20}"
        f" {'flag':<4} {'action':<11} {'cqs':<12} {'queue':<22} parts"
    )
    for index, r in enumerate(rows):
        if index == 0 or r.origin != rows[index - 1].origin:
            lines += ["", f"origin {r.origin_system}/{r.origin_token} ({r.origin})", header]
        if index >= UNIT_ROWS_SHOWN:
            lines.append(f"... {len(rows) - index} more in track/cqs_units")
            break
        lines.append(
            f"{r.msg:>3} {r.origin_system:<8} {r.origin_token:>20}"
            f" {r.processing_system or '':<8} {r.processing_token or '':>20}"
            f" {r.flag:<4} {r.action:<11} {r.cqs:<12} {r.queue:<22} {r.parts or ''}"
        )
    if not rows:
        lines.append("no CQS record carries that unit of work")
    return lines


def message_table(ctx: JobContext, *, no_srds: bool = False) -> DataFrame:
    """Every message's life (``message_lives``) from the log and, unless ``no_srds``,
    the image it starts from: computed once per context (``ctx.shared``), for the jobs
    that count depth from it (``stats``, ``events``)."""

    def build() -> DataFrame:
        log = ctx.log()
        ctx.step("finding the image the log starts from")
        opening = None if no_srds else opening_image(ctx, log)
        return message_lives(message_events(log), opening)

    return ctx.shared("messages:no-srds" if no_srds else "messages", build)


def opening_image(ctx: JobContext, log: DataFrame) -> DataFrame | None:
    """The messages of the SRDS image each structure's log starts from, if any.

    The image is the valid SRDS slot with the highest ``seq`` below the first change the
    log holds for the structure (the log then holds every change after the image); when
    the log reaches back further than any image, the structure has no opening image.
    Only the control list's claim entries (a few rows) are decoded on the driver.
    """
    from pyspark.sql import functions as F

    firsts = {
        r.structure: r.first
        for r in log.where(F.col("op") != int(ChangeOp.NONE))
        .groupBy("structure")
        .agg(F.min("seq").alias("first"))
        .collect()
    }
    images: list[DataFrame] = []
    for pair in ctx.pairs:
        slots = [s for s in pair.srds_slots() if s.valid and s.seq is not None]
        if not slots:
            continue
        entries = read_srds(ctx.spark, pair, slots[0].slot)
        structures = [r.structure for r in entries.select("structure").distinct().collect()]
        for structure in structures:
            first = firsts.get(structure)
            usable = [s for s in slots if first is not None and (s.seq or 0) < first]
            if not usable:
                continue
            slot = max(usable, key=lambda s: s.seq or 0)
            image = read_srds(ctx.spark, pair, slot.slot).where(F.col("structure") == structure)
            roles = _roles(ctx, image)
            if roles is not None:
                images.append(opening_messages(image, roles))
    if not images:
        return None
    result = images[0]
    for image in images[1:]:
        result = result.unionByName(image)
    return result


def _roles(ctx: JobContext, image: DataFrame) -> DataFrame | None:
    """What each claimed list of an image is for (queue or get list): its claim entries."""
    from pyspark.sql import functions as F

    claims = image.where(
        (F.col("list_number") == CONTROL_LIST)
        & (F.col("key") >= F.lit(bytearray(_CLAIM_LOW)))
        & (F.col("key") <= F.lit(bytearray(_CLAIM_HIGH)))
    ).select("structure", "entry_id", "data")
    rows = []
    for row in claims.collect():
        value = msgpack.unpackb(row.data, raw=False)
        rows.append(
            (row.structure, int.from_bytes(row.entry_id[2:4], "big"), value["use"], value["name"])
        )
    if not rows:
        return None
    return ctx.spark.createDataFrame(
        rows, "structure string, list_number int, use string, name string"
    )


def _summary(
    sheet: list[Any],
    total: Any,
    latency_rows: list[Any],
    outcomes: dict[str, int],
    stuck_count: dict[str, int],
    stuck_shown: list[Any],
) -> str:
    lines = ["message tracking", ""]
    lines.append(
        "messages: " + (", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())) or "none")
    )
    lines += ["", "balance sheet (opening + put committed = got committed + still queued"]
    lines.append("               + expired + cold queued)")
    header = f"{'structure':<10} {'queue':<12}" + "".join(
        f" {name:>9}" for name in ("opening", "put", "got", "queued", "expired", "cold")
    )
    lines.append(header + "  balanced")
    for r in [*sheet, total]:
        if r is None:
            continue
        structure = r.asDict().get("structure")
        lines.append(
            f"{structure or '':<10} {r.queue or '?':<12}"
            + "".join(f" {r[c]:>9}" for c in BALANCE_SHEET)
            + f"  {'yes' if r.balanced else 'NO'}"
        )
    ok = total is None or bool(total.balanced)
    lines.append("balance: " + ("OK" if ok else "DOES NOT BALANCE"))
    lines += ["", "latency, ms (put->get p50/p90/p99 | put->commit p50/p90/p99)"]
    for r in latency_rows:
        lines.append(
            f"{r.scope:<7} {r.name!s:<12} n={r['count']:<6}"
            f" {_ms(r.get_p50_ms)}/{_ms(r.get_p90_ms)}/{_ms(r.get_p99_ms)}"
            f" | {_ms(r.commit_p50_ms)}/{_ms(r.commit_p90_ms)}/{_ms(r.commit_p99_ms)}"
        )
    lines += [
        "",
        "stuck: " + (", ".join(f"{k} {v}" for k, v in sorted(stuck_count.items())) or "none"),
    ]
    for r in stuck_shown:
        lines.append(
            f"  {r.reason:<13} {r.queue or '?':<12} {r.message_id or '?'}"
            f" {r.age_ms:.0f} ms ({r.server or '?'}, {r.outcome})"
        )
    return "\n".join(lines)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
