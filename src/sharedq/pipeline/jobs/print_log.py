"""``sharedq pipeline print``: the log print utility (after the redbook's Appendix B.5).

A Common Queue Server's records are shown with Appendix B's names, their 16-byte queue
names and 32-byte units of work decoded (``transforms.cqs_records``).

Every record that passes the filters goes to Parquet (``<output>/print/records``) and,
one line each, to ``<output>/print/records.txt``; the summary shows the first
``--limit`` lines and how many records of each type were chosen.
"""

from __future__ import annotations

from typing import Any

from sharedq.pipeline.job import JobContext, JobResult, write_table
from sharedq.pipeline.transforms.cqs_records import with_cqs_writer
from sharedq.pipeline.transforms.printing import (
    RecordFilter,
    format_records,
    parse_time,
    parse_types,
    parse_uow,
    payload_text,
    select_records,
    type_counts,
)

#: The order records are printed in: the log's merged order, per structure.
ORDER = ("structure", "seq", "op", "writer", "lsn")


def run(
    ctx: JobContext,
    *,
    start: str | None = None,
    end: str | None = None,
    types: tuple[str, ...] = (),
    queues: tuple[str, ...] = (),
    servers: tuple[str, ...] = (),
    uow: str | None = None,
    structures: tuple[str, ...] = (),
    limit: int = 50,
    **_: Any,
) -> JobResult:
    """Print log records for people, filtered by time, type, queue, server or unit of work."""
    chosen = RecordFilter(
        start=parse_time(start, "--from"),
        end=parse_time(end, "--to"),
        types=tuple(parse_types(types)),
        queues=tuple(queues),
        servers=tuple(servers),
        uow=parse_uow(uow),
        structures=tuple(structures),
    )
    out = ctx.job_dir("print")
    log = ctx.log()
    ctx.step("choosing and formatting records")
    printed = format_records(select_records(with_cqs_writer(log), chosen)).cache()
    ctx.step("writing records")
    table = write_table(printed.orderBy(*ORDER), out / "records")
    ctx.step("writing records.txt")
    text = out / "records.txt"
    shown: list[str] = []
    count = 0
    with text.open("w") as handle:
        for row in printed.orderBy(*ORDER).select("line", "payload").toLocalIterator():
            line = row.line
            detail = payload_text(row.payload)
            if detail is not None:
                line += f" payload={detail}"
            handle.write(line + "\n")
            if count < limit:
                shown.append(line)
            count += 1
    ctx.step("counting records by type")
    by_type = {f"{r.type:02X} {r.type_name}": r["count"] for r in type_counts(printed).collect()}
    printed.unpersist()
    lines = [
        f"log print: {count} record(s) chosen"
        + (f", first {len(shown)} shown" if count > len(shown) else ""),
        "filters: " + _describe(chosen),
        "by type: " + (", ".join(f"{k}: {v}" for k, v in by_type.items()) or "none"),
        "",
        *shown,
    ]
    return JobResult(
        "print",
        "\n".join(lines),
        tables={"records": table, "text": text},
        figures={"records": count, "by_type": by_type, "shown": len(shown)},
    )


def _describe(chosen: RecordFilter) -> str:
    parts = []
    if chosen.start is not None:
        parts.append(f"from {chosen.start.isoformat()}")
    if chosen.end is not None:
        parts.append(f"to {chosen.end.isoformat()}")
    if chosen.types:
        parts.append("type " + ",".join(f"{t:02X}" for t in chosen.types))
    for label, values in (
        ("queue", chosen.queues),
        ("server", chosen.servers),
        ("structure", chosen.structures),
    ):
        if values:
            parts.append(f"{label} " + ",".join(values))
    if chosen.uow:
        parts.append(f"uow {chosen.uow}*")
    return "; ".join(parts) or "none (every record)"
