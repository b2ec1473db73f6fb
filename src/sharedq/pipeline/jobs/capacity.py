"""``sharedq pipeline capacity``: how big each structure should be, from what it really held.

The redbook sizes a structure from the number and average size of the data objects it
must hold (§5.8.1.1: ``OBJAVGSZ``, list entries and data elements) and warns that an
undersized structure first pays for overflow processing, then rejects puts when full
(§6.5.3).  This job measures instead of guessing: it follows the entries and elements
in use through the log (:mod:`sharedq.pipeline.transforms.capacity`), finds the peaks
and when they happened, the average object size, and recommends

- a structure holding the peaks plus ``--headroom`` per cent, as the
  :class:`~sharedq.cf.StructureParams` ``StructureParams.for_capacity`` computes, and
- an overflow threshold (``OVFLWMAX``): see :func:`overflow_threshold`.

Tables: ``capacity/usage`` (entries and elements after each change),
``capacity/recommendation`` (one row per structure: peaks, sizes, recommendation),
and the overflow tables of :mod:`sharedq.pipeline.jobs.capacity_overflow` (what really
overflowed, from the OVERFLOW records, and the recommended ``OVFLWMAX`` checked
against it).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from sharedq.log import LogStream
from sharedq.log.records import RecordType, unpack_payload
from sharedq.pipeline.job import JobContext, JobResult, write_table
from sharedq.pipeline.jobs import capacity_overflow as overflow
from sharedq.pipeline.sizing import (
    DEFAULT_HEADROOM,
    Base,
    Recommendation,
    check_headroom,
    overflow_threshold,
    recommend,
)
from sharedq.pipeline.sources import PairInput, read_srds
from sharedq.recovery.srds import METADATA_KEY

__all__ = [
    "DEFAULT_HEADROOM",
    "Base",
    "Recommendation",
    "capacity_summary",
    "check_headroom",
    "overflow_threshold",
    "recommend",
    "run",
]

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# -- inputs ---------------------------------------------------------------------------


def _params_from_log(log: DataFrame) -> dict[str, dict[str, Any]]:
    """The latest allocation each structure's log states (initialization, rebuild)."""
    from pyspark.sql import functions as F

    rows = (
        log.where(
            F.col("type").isin(int(RecordType.STRUCTURE_INITIALIZATION), int(RecordType.REBUILD))
            & F.col("payload").isNotNull()
        )
        .select("structure", "seq", "payload")
        .collect()
    )
    found: dict[str, tuple[int, dict[str, Any]]] = {}
    for row in rows:
        try:
            value = unpack_payload(bytes(row.payload))
        except Exception:  # a payload this job cannot read says nothing about size
            continue
        params = value.get("params") if isinstance(value, dict) else None
        if isinstance(params, dict) and (
            row.structure not in found or row.seq >= found[row.structure][0]
        ):
            found[row.structure] = (row.seq, params)
    return {name: params for name, (_, params) in found.items()}


def _srds_descriptions(pair: PairInput) -> list[tuple[int, dict[str, Any]]]:
    """The valid SRDS slots of a pair with their metadata (slot, description)."""
    described = []
    for status in pair.srds_slots():
        if not status.valid:
            continue
        metadata = pq.read_schema(status.path).metadata or {}
        raw = metadata.get(METADATA_KEY)
        if raw is not None:
            described.append((status.slot, json.loads(raw)))
    return described


def _seq_of(description: dict[str, Any], structure: str) -> int:
    """The seq an SRDS covers for one structure: each structure of a pair numbers its
    records apart (the overflow structure's are not the primary's)."""
    own = description.get("structures", {}).get(structure, {}).get("seq")
    return int(description["seq"] if own is None else own)


def _bases(ctx: JobContext, structures: list[str], log_params: dict[str, Any]) -> list[Base]:
    """Where each structure's count starts, and its parameters."""
    owner: dict[str, PairInput] = {}
    retention: dict[str, int] = {}
    descriptions: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for pair in ctx.pairs:
        # Only the retention points: the records themselves come through the job's scan.
        points = LogStream.open_existing(pair.log).retention_points()
        descriptions[pair.name] = _srds_descriptions(pair)
        named = {pair.name, *points}
        for _, description in descriptions[pair.name]:
            named.update(description.get("structures", {}))
        for name in named:
            owner.setdefault(name, pair)
        for name, point in points.items():
            retention[name] = max(point, retention.get(name, 0))
    bases = []
    for name in structures:
        owning = owner.get(name)
        images = []
        if owning is not None:
            images = [
                (slot, d)
                for slot, d in descriptions[owning.name]
                if name in d.get("structures", {})
            ]
        params = log_params.get(name)
        if params is None and images:
            newest = max(images, key=lambda image: int(image[1]["seq"]))
            params = newest[1]["structures"][name].get("params")
        point = retention.get(name, 0)
        if point <= 0:
            bases.append(Base(name, params, pair=owning))
            continue
        usable = [(slot, d) for slot, d in images if _seq_of(d, name) >= point - 1]
        if not usable:
            bases.append(
                Base(
                    name,
                    params,
                    pair=owning,
                    warning=(
                        f"the log starts at seq {point} and no SRDS covers the records "
                        "before it: counts start at zero there and miss older entries"
                    ),
                )
            )
            continue
        slot, description = min(usable, key=lambda image: _seq_of(image[1], name))
        bases.append(
            Base(
                name,
                params,
                base_seq=_seq_of(description, name),
                base_time_us=int(description["taken_at_us"]),
                srds_slot=slot,
                pair=owning,
            )
        )
    return bases


def _base_frames(ctx: JobContext, bases: list[Base]) -> tuple[DataFrame, DataFrame]:
    """The bases as a small DataFrame, and the entries of the SRDS images they start from."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import (
        BinaryType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    schema = StructType(
        [
            StructField("structure", StringType(), False),
            StructField("element_size", LongType(), False),
            StructField("base_seq", LongType(), False),
            StructField("base_time", TimestampType(), True),
        ]
    )
    rows = [
        (
            b.structure,
            b.element_size,
            b.base_seq,
            None
            if b.base_time_us is None
            else dt.datetime.fromtimestamp(b.base_time_us / 1e6, dt.UTC),
        )
        for b in bases
    ]
    frame = ctx.spark.createDataFrame(rows, schema)
    entries = ctx.spark.createDataFrame(
        [],
        StructType(
            [
                StructField("structure", StringType(), False),
                StructField("entry_id", BinaryType(), False),
                StructField("elements", LongType(), False),
            ]
        ),
    )
    for b in bases:
        if b.srds_slot is None or b.pair is None:
            continue
        image = (
            read_srds(ctx.spark, b.pair, b.srds_slot)
            .where((F.col("structure") == b.structure) & F.col("recoverable"))
            .select("structure", "entry_id", F.col("elements").cast("long").alias("elements"))
        )
        entries = entries.unionByName(image)
    return frame, entries


# -- the job --------------------------------------------------------------------------


def run(ctx: JobContext, headroom: float = DEFAULT_HEADROOM) -> JobResult:
    """Peak entries and elements per structure, and the structure and overflow
    threshold they call for with HEADROOM per cent to spare."""
    from pyspark.sql import functions as F

    from sharedq.pipeline.transforms import capacity as T

    check_headroom(headroom)
    log = ctx.log()
    out = ctx.job_dir("capacity")
    ctx.step("capacity: finding each structure's starting point")
    structures = sorted(r.structure for r in log.select("structure").distinct().collect())
    bases = _bases(ctx, structures, _params_from_log(log))
    base_frame, base_entries = _base_frames(ctx, bases)

    ctx.step("capacity: entries and elements in use over time")
    deltas = T.usage_deltas(T.size_events(log, base_frame, base_entries)).cache()
    usage = T.usage_over_time(deltas)
    usage_path = write_table(usage.orderBy("structure", "seq"), out / "usage")
    usage = ctx.spark.read.parquet(str(usage_path))
    unknown = {
        r.structure: r.n
        for r in deltas.where("unknown")
        .groupBy("structure")
        .agg(F.count(F.lit(1)).alias("n"))
        .collect()
    }

    ctx.step("capacity: peaks and object sizes")
    peak_rows = {r.structure: r.asDict() for r in T.peaks(usage).collect()}
    size_rows = {r.structure: r.asDict() for r in T.object_sizes(log, base_frame).collect()}

    ctx.step("capacity: recommendation")
    recommendations = []
    by_name = {b.structure: b for b in bases}
    for name in structures:
        if name not in peak_rows:
            continue
        rec = recommend(name, peak_rows[name], size_rows.get(name), by_name[name], headroom)
        if unknown.get(name):
            rec.warnings.append(
                f"{unknown[name]} deletes or updates of entries the log never showed (ignored)"
            )
        recommendations.append(rec)
    ctx.step("capacity: overflow entries and exits, OVFLWMAX checked against them")
    found = overflow.find(log, deltas, bases, recommendations)
    deltas.unpersist()
    tables = overflow.write(ctx, out, found)
    table = _recommendation_frame(ctx, recommendations)
    rec_path = write_table(table, out / "recommendation")
    figures: dict[str, Any] = {
        "headroom_percent": headroom,
        "structures": {r.structure: _figures(r) for r in recommendations},
    }
    if found.events:
        figures["overflow"] = overflow.figures(found)
    summary = capacity_summary(recommendations, headroom)
    if found.events:
        summary += "\n" + "\n".join(overflow.summary_lines(found))
    return JobResult(
        "capacity",
        summary,
        tables={"usage": usage_path, "recommendation": rec_path, **tables},
        figures=figures,
    )


def _figures(rec: Recommendation) -> dict[str, Any]:
    return {
        "peak_entries": rec.peak_entries,
        "peak_entries_time": _iso(rec.peak_entries_time),
        "peak_elements": rec.peak_elements,
        "peak_elements_time": _iso(rec.peak_elements_time),
        "final_entries": rec.final_entries,
        "final_elements": rec.final_elements,
        "avg_entry_bytes": rec.avg_entry_bytes,
        "avg_message_bytes": rec.avg_message_bytes,
        "recommended_entries": rec.entries,
        "recommended_elements": rec.elements,
        "params": asdict(rec.params),
        "peak_percent": rec.peak_percent,
        "overflow_threshold": rec.overflow_threshold,
        "relief_percent": rec.relief_percent,
        "base": rec.base,
        "current": rec.current,
        "warnings": list(rec.warnings),
    }


def _recommendation_frame(ctx: JobContext, recs: list[Recommendation]) -> DataFrame:
    from pyspark.sql.types import (
        DoubleType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    longs = (
        "peak_entries",
        "peak_elements",
        "final_entries",
        "final_elements",
        "recommended_entries",
        "recommended_elements",
        "size",
        "max_size",
        "entry_ratio",
        "element_ratio",
    )
    fields = [StructField("structure", StringType(), False)]
    fields += [StructField(name, LongType(), False) for name in longs[:6]]
    fields += [
        StructField("peak_entries_time", TimestampType(), True),
        StructField("peak_elements_time", TimestampType(), True),
        StructField("avg_entry_bytes", DoubleType(), True),
        StructField("avg_message_bytes", DoubleType(), True),
        StructField("headroom_percent", DoubleType(), False),
        StructField("list_count", IntegerType(), False),
        StructField("element_size", IntegerType(), False),
        StructField("emc_percent", IntegerType(), False),
    ]
    fields += [StructField(name, LongType(), False) for name in longs[6:]]
    fields += [
        StructField("peak_percent", DoubleType(), False),
        StructField("overflow_threshold", IntegerType(), False),
        StructField("relief_percent", DoubleType(), False),
    ]
    rows = [
        (
            r.structure,
            r.peak_entries,
            r.peak_elements,
            r.final_entries,
            r.final_elements,
            r.entries,
            r.elements,
            r.peak_entries_time,
            r.peak_elements_time,
            None if r.avg_entry_bytes is None else float(r.avg_entry_bytes),
            None if r.avg_message_bytes is None else float(r.avg_message_bytes),
            float(r.headroom_percent),
            r.params.list_count,
            r.params.element_size,
            r.params.emc_percent,
            r.params.size,
            r.params.effective_max_size,
            r.params.entry_ratio,
            r.params.element_ratio,
            float(r.peak_percent),
            r.overflow_threshold,
            float(r.relief_percent),
        )
        for r in recs
    ]
    return ctx.spark.createDataFrame(rows, StructType(fields)).coalesce(1)


def _iso(value: dt.datetime | None) -> str | None:
    """ISO 8601 in UTC (Spark hands timestamps back naive, in the local time zone)."""
    return None if value is None else value.astimezone(dt.UTC).isoformat()


def _bytes(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f} bytes"


def capacity_summary(recs: list[Recommendation], headroom: float) -> str:
    """The job's report for people: peaks, recommendation, and how it was computed."""
    lines = [f"Structure capacity (headroom {headroom:g} %)", ""]
    if not recs:
        lines.append("No structure changed in the log: nothing to size.")
    for r in recs:
        p = r.params
        lines += [
            f"{r.structure}  (counted from {r.base}; element size {r.element_size} bytes)",
            f"  peak list entries in use:  {r.peak_entries:,}  at {_iso(r.peak_entries_time)}",
            f"  peak data elements in use: {r.peak_elements:,}  at {_iso(r.peak_elements_time)}",
            f"  at the end of the log:     {r.final_entries:,} entries, "
            f"{r.final_elements:,} elements",
            f"  average entry written:     {_bytes(r.avg_entry_bytes)}; "
            f"average message ({r.puts:,} puts): {_bytes(r.avg_message_bytes)}",
        ]
        if r.current:
            c = r.current
            elements_share = (
                "n/a"
                if c["peak_elements_percent"] is None
                else f"{c['peak_elements_percent']:.1f} %"
            )
            lines.append(
                f"  current structure:         {c['size']:,} bytes, {c['max_entries']:,} "
                f"entries, {c['max_elements']:,} elements; the peaks used "
                f"{c['peak_entries_percent']:.1f} % of entries, {elements_share} of elements"
            )
        lines += [
            f"  recommended: entries = ceil({r.peak_entries:,} x {1 + headroom / 100:g}) = "
            f"{r.entries:,}; elements = ceil({r.peak_elements:,} x {1 + headroom / 100:g}) "
            f"= {r.elements:,}",
            "  StructureParams.for_capacity(...):",
            f"    name={p.name} list_count={p.list_count} size={p.size:,} "
            f"(INITSIZE {math.ceil(p.size / 1024):,} KB) max_size={p.effective_max_size:,}",
            f"    entry_ratio={p.entry_ratio} element_ratio={p.element_ratio} "
            f"element_size={p.element_size} emc_percent={p.emc_percent} "
            f"lock_count={p.lock_count}",
            f"  overflow threshold (OVFLWMAX): {r.overflow_threshold} %  "
            f"(peak = {r.peak_percent:.1f} % of the recommended structure; "
            f"overflow processing relieves to {r.relief_percent:g} %)",
        ]
        lines += [f"  warning: {w}" for w in r.warnings]
        lines.append("")
    lines += [
        "How: entries and elements in use are replayed from the log (a write adds one entry",
        "of ceil(len(data)/element_size) elements, a delete removes the entry's last size,",
        "an update with data resizes it), starting from the SRDS image the log continues",
        "when older records were purged.  Recommended = peak x (1 + headroom), each of",
        "entries and elements at its own peak.  Overflow threshold T = ceil((peak% + 100) / 2):",
        "peak% is the peak's share of the recommended structure (the larger of entries and",
        "elements); normal peaks stay below T, since overflow processing quiesces the",
        "structure and forces a structure checkpoint (redbook 6.5.3), and the space above T",
        "is left for the structure alter and queue moves overflow processing makes while",
        "puts go on (seed 000).  It relieves usage to 20 % below T (0.8 x T, seed 000).",
    ]
    return "\n".join(lines) + "\n"
