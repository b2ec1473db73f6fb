"""The ``capacity`` job's overflow part: what really overflowed, and the check of the
recommended ``OVFLWMAX`` against it.

Tables (written always, empty when the log has no OVERFLOW record):

- ``capacity/overflow_events``: every OVERFLOW record (type 44), decoded, with the
  pair's elements in use at its time;
- ``capacity/overflow_queues``: each queue's stay in overflow (entered, returned);
- ``capacity/overflow_modes``: each pair's overflow mode intervals, the queues that
  entered in each, the pair's usage at the crossing;
- ``capacity/overflow_check``: for each primary that overflowed, when the pair would
  have started overflow processing with the recommended structure and ``OVFLWMAX``.

The check's rule (docs/pipeline.md): the pair's demand (primary plus overflow
structure, elements in use) is replayed against the recommended structure; each time
it reaches ``OVFLWMAX`` per cent of the recommended elements is a start, and a next
one counts only after demand fell to the relief level (``0.8 x OVFLWMAX``) and rose
again.  No start means the recommendation would have kept the pair out of overflow.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sharedq.pipeline.job import JobContext, write_table
from sharedq.pipeline.sizing import Base, Recommendation
from sharedq.pipeline.transforms import overflow as O

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Starts listed in the summary per structure (the table has them all).
MAX_LISTED = 10


@dataclass
class OverflowFindings:
    """What the overflow part found, for the tables, the figures and the summary."""

    events: list[O.OverflowEvent] = field(default_factory=list)
    stays: list[O.Interval] = field(default_factory=list)
    modes: list[O.Interval] = field(default_factory=list)
    #: primary -> (OVFLWMAX, recommended elements, starts as (time, elements)).
    checks: dict[str, tuple[int, int, list[tuple[dt.datetime, int]]]] = field(default_factory=dict)
    #: primary -> the pair's peak demand in elements.
    pair_peaks: dict[str, int] = field(default_factory=dict)


def find(
    log: DataFrame, deltas: DataFrame, bases: list[Base], recs: list[Recommendation]
) -> OverflowFindings:
    """Decode the OVERFLOW records and check the recommendations of their primaries."""
    from pyspark.sql import functions as F

    events = O.overflow_events(log)
    if not events:
        return OverflowFindings()
    spark = log.sparkSession
    pairs = spark.createDataFrame(
        [(b.structure, b.pair.name if b.pair is not None else b.structure) for b in bases],
        "structure string, pair string",
    )
    demand = O.pair_demand(deltas, pairs).cache()
    try:
        events = O.pair_usage_at(demand, events)
        stays, modes = O.intervals(events)
        found = OverflowFindings(events, stays, modes)
        primaries = {e.structure for e in events}
        for row in demand.groupBy("pair").agg(F.max("elements").alias("peak")).collect():
            if row.pair in primaries:
                found.pair_peaks[row.pair] = int(row.peak)
        for rec in recs:
            if rec.structure not in primaries:
                continue
            limit = rec.overflow_threshold / 100 * rec.elements
            relief = rec.relief_percent / 100 * rec.elements
            starts = O.would_overflow(demand, rec.structure, limit, relief)
            found.checks[rec.structure] = (rec.overflow_threshold, rec.elements, starts)
            peak = found.pair_peaks.get(rec.structure, 0)
            if starts:
                rec.warnings.append(
                    f"with the recommended OVFLWMAX {rec.overflow_threshold} % the pair would "
                    f"have overflowed {len(starts)} time(s): its peak demand, "
                    f"{peak:,} elements with the overflow structure, is above the primary's "
                    "own peak; size it from the pair's peak"
                )
        return found
    finally:
        demand.unpersist()


def write(ctx: JobContext, out: Path, found: OverflowFindings) -> dict[str, Path]:
    """The four overflow tables under ``out``."""
    spark = ctx.spark
    events = spark.createDataFrame(
        [
            (
                e.structure,
                e.seq,
                e.time,
                e.system,
                e.event,
                list(e.queues),
                e.elements,
                e.max_elements,
                e.pair_elements,
            )
            for e in found.events
        ],
        "structure string, seq long, time timestamp, system string, event string, "
        "queues array<string>, elements long, max_elements long, pair_elements long",
    )
    interval = (
        "structure string, entered timestamp, entered_seq long, left timestamp, "
        "left_seq long, pair_elements long, max_elements long, percent double"
    )

    def common(i: O.Interval) -> tuple[Any, ...]:
        return (
            i.structure,
            i.entered,
            i.entered_seq,
            i.left,
            i.left_seq,
            i.pair_elements,
            i.max_elements,
            i.percent,
        )

    queues = spark.createDataFrame(
        [(s.queue, *common(s)) for s in found.stays], f"queue string, {interval}"
    )
    modes = spark.createDataFrame(
        [(list(m.queues), *common(m)) for m in found.modes], f"queues array<string>, {interval}"
    )
    checks = spark.createDataFrame(
        [
            (name, ovflwmax, elements, ovflwmax / 100 * elements, time, used)
            for name, (ovflwmax, elements, starts) in sorted(found.checks.items())
            for time, used in starts
        ],
        "structure string, ovflwmax int, recommended_elements long, limit_elements double, "
        "time timestamp, elements long",
    )
    return {
        name: write_table(frame.coalesce(1), out / name)
        for name, frame in (
            ("overflow_events", events),
            ("overflow_queues", queues),
            ("overflow_modes", modes),
            ("overflow_check", checks),
        )
    }


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.astimezone(dt.UTC).isoformat()


def figures(found: OverflowFindings) -> dict[str, Any]:
    """Per primary that overflowed: its modes, its queues' stays, the check."""
    result: dict[str, Any] = {}
    for name in sorted({e.structure for e in found.events}):
        ovflwmax, elements, starts = found.checks.get(name, (None, None, []))
        result[name] = {
            "events": sum(1 for e in found.events if e.structure == name),
            "altered": sum(1 for e in found.events if e.structure == name and e.event == "altered"),
            "modes": [
                _interval(m) | {"queues": list(m.queues)}
                for m in found.modes
                if m.structure == name
            ],
            "queues": [
                _interval(s) | {"queue": s.queue} for s in found.stays if s.structure == name
            ],
            "pair_peak_elements": found.pair_peaks.get(name),
            "check": {
                "ovflwmax": ovflwmax,
                "recommended_elements": elements,
                "would_overflow": [{"time": _iso(t), "elements": used} for t, used in starts],
            },
        }
    return result


def _interval(i: O.Interval) -> dict[str, Any]:
    return {
        "entered": _iso(i.entered),
        "left": _iso(i.left),
        "pair_elements": i.pair_elements,
        "max_elements": i.max_elements,
        "percent": i.percent,
    }


def summary_lines(found: OverflowFindings) -> list[str]:
    """The summary's overflow section (nothing when nothing overflowed)."""
    if not found.events:
        return []
    lines = ["Overflow (OVERFLOW records, type 44)", ""]
    for name, f in figures(found).items():
        lines.append(
            f"{name}: {len(f['modes'])} overflow mode interval(s), "
            f"{len(f['queues'])} queue stay(s), {f['altered']} alter(s) instead"
        )
        for m in f["modes"]:
            share = "n/a" if m["percent"] is None else f"{m['percent']:.1f} %"
            lines.append(
                f"  mode {m['entered']} -> {m['left'] or 'end of log'}: pair usage at the "
                f"crossing {m['pair_elements']:,} of {m['max_elements']:,} elements "
                f"({share}); queues {', '.join(q.strip() for q in m['queues']) or 'none'}"
            )
        for s in f["queues"]:
            lines.append(
                f"  queue {s['queue'].strip()!r}: entered {s['entered']}, "
                f"returned {s['left'] or 'not before the end of the log'}"
            )
        check = f["check"]
        if check["ovflwmax"] is not None:
            starts = check["would_overflow"]
            head = (
                f"  check: with the recommended structure ({check['recommended_elements']:,} "
                f"elements) and OVFLWMAX {check['ovflwmax']} %, the pair (peak demand "
                f"{f['pair_peak_elements']:,} elements) would have overflowed "
            )
            if not starts:
                lines.append(head + "not at all")
            else:
                lines.append(head + f"{len(starts)} time(s):")
                lines += [
                    f"    at {s['time']} ({s['elements']:,} elements)" for s in starts[:MAX_LISTED]
                ]
        lines.append("")
    return lines
