"""``sharedq pipeline print``: the log print utility (after the redbook's Appendix B.5).

Every record that passes the filters goes to Parquet (``<output>/print/records``) and,
one line each, to ``<output>/print/records.txt``; the summary shows the first
``--limit`` lines and how many records of each type were chosen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from sharedq.pipeline.cli_support import job_command
from sharedq.pipeline.errors import PipelineError
from sharedq.pipeline.job import JobContext, JobResult, write_table
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


def _checked(parse: Callable[[Any], Any]) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A click callback that refuses a bad value before Spark starts (same message)."""

    def callback(_: click.Context, param: click.Parameter, value: Any) -> Any:
        try:
            parse(value)
        except PipelineError as exc:
            raise click.BadParameter(str(exc), param=param) from None
        return value

    return callback


#: The order records are printed in: the log's merged order, per structure.
ORDER = ("structure", "seq", "op", "writer", "lsn")


@click.option(
    "--from",
    "start",
    default=None,
    callback=_checked(lambda v: parse_time(v, "--from")),
    help="first time to print (ISO, UTC if naive)",
)
@click.option(
    "--to",
    "end",
    default=None,
    callback=_checked(lambda v: parse_time(v, "--to")),
    help="last time to print (ISO, UTC if naive)",
)
@click.option(
    "--type",
    "types",
    multiple=True,
    callback=_checked(parse_types),
    help="record type: a name (PUT) or hex code (07); repeatable",
)
@click.option("--queue", "queues", multiple=True, help="queue name; repeatable")
@click.option(
    "--server", "servers", multiple=True, help="writer (server, queue manager); repeatable"
)
@click.option(
    "--uow",
    default=None,
    callback=_checked(parse_uow),
    help="unit of work id in hex, or its leading bytes",
)
@click.option("--structure", "structures", multiple=True, help="structure name; repeatable")
@click.option(
    "--limit", default=50, show_default=True, type=click.IntRange(min=0), help="rows shown"
)
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
    printed = format_records(select_records(log, chosen)).cache()
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


command = job_command("print")(run)
