"""Structure usage over time, computed from the log: entries and data elements in use.

A structure's storage is counted in list entries and data elements (an entry of ``n``
data bytes takes ``ceil(n / element_size)`` elements).  The log holds every change
of every recoverable object, so replaying only the *sizes* of those changes gives the
structure's usage at every sequence number without building the image:

- a write adds one entry of ``ceil(len(data) / element_size)`` elements;
- a delete removes the entry and the elements it last had;
- an update that carries data resizes the entry (the difference in elements);
- moves and list controls change neither.

When the log starts after the structure's start (older records were purged after a
structure checkpoint), the count starts from an SRDS image: its recoverable entries
enter as writes at the sequence number the image covers (``base_seq``), so that a
later delete or update of an entry older than the log still knows its size.

Every function here is pure: DataFrames in, DataFrames out.  The job
(:mod:`sharedq.pipeline.jobs.capacity`) reads the inputs and turns the peaks into a
recommendation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: Op codes of the log (docs/log-records.md): the ones that change usage.
OP_WRITE, OP_DELETE, OP_UPDATE = 1, 3, 4
#: The record type of a message put (its ``data`` is the whole message entry).
TYPE_PUT = 0x07

#: Columns of :func:`usage_over_time`.
USAGE_COLUMNS = ("structure", "seq", "time", "changes", "entries", "elements")
#: Columns of :func:`peaks`.
PEAK_COLUMNS = (
    "structure",
    "first_seq",
    "last_seq",
    "peak_entries",
    "peak_entries_seq",
    "peak_entries_time",
    "peak_elements",
    "peak_elements_seq",
    "peak_elements_time",
    "final_entries",
    "final_elements",
)


def _elements(length: Column, element_size: Column) -> Column:
    """``ceil(length / element_size)`` in integers (no floating point rounding)."""
    return F.floor((length + element_size - F.lit(1)) / element_size).cast("long")


def size_events(log: DataFrame, bases: DataFrame, base_entries: DataFrame) -> DataFrame:
    """Each change of usage as a row: its entry, its op and the elements it leaves.

    Args:
        log: log records (the log record schema).
        bases: one row per structure: ``structure``, ``element_size``, ``base_seq``
            (changes at or before it are already counted in ``base_entries``; ``-1``
            when the log reaches back to the structure's start) and ``base_time``
            (a timestamp: when the base image was taken).
        base_entries: the base image's entries: ``structure``, ``entry_id``,
            ``elements``.

    Returns ``structure, seq, time, op, entry_id, elements`` where ``elements`` is
    the entry's size after the change (null for a delete, or for an update that left
    the data unchanged).
    """
    sized = bases.select("structure", "element_size", "base_seq", "base_time")
    changes = (
        log.where(F.col("op").isin(OP_WRITE, OP_DELETE, OP_UPDATE) & F.col("entry_id").isNotNull())
        .join(F.broadcast(sized), "structure")
        .where(F.col("seq") > F.col("base_seq"))
        .select(
            "structure",
            "seq",
            F.col("time_us").alias("time"),
            F.col("op").cast("int").alias("op"),
            "entry_id",
            F.when(
                F.col("op").isin(OP_WRITE, OP_UPDATE) & F.col("data").isNotNull(),
                _elements(F.length("data"), F.col("element_size")),
            ).alias("elements"),
        )
    )
    base = base_entries.join(F.broadcast(sized), "structure").select(
        "structure",
        F.col("base_seq").alias("seq"),
        F.col("base_time").alias("time"),
        F.lit(OP_WRITE).alias("op"),
        "entry_id",
        F.col("elements").cast("long").alias("elements"),
    )
    return base.unionByName(changes)


def usage_deltas(events: DataFrame) -> DataFrame:
    """The entries and elements each event adds (negative: removes).

    An entry's previous size is the last size it was given (by a write, an update with
    data, or the base image) before this event, found with a window over the entry.
    A delete or update of an entry the log never showed (``known`` false) changes
    nothing: the log would contradict itself, and the job reports how often.
    """
    history = (
        Window.partitionBy("structure", "entry_id")
        .orderBy("seq")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    before = events.withColumn("previous", F.last("elements", ignorenulls=True).over(history))
    op = F.col("op")
    known = F.col("previous").isNotNull()
    return before.select(
        "structure",
        "seq",
        "time",
        "op",
        "entry_id",
        F.when(op == OP_WRITE, F.lit(1))
        .when((op == OP_DELETE) & known, F.lit(-1))
        .otherwise(F.lit(0))
        .cast("long")
        .alias("d_entries"),
        F.when(op == OP_WRITE, F.col("elements"))
        .when((op == OP_DELETE) & known, -F.col("previous"))
        .when(
            (op == OP_UPDATE) & known & F.col("elements").isNotNull(),
            F.col("elements") - F.col("previous"),
        )
        .otherwise(F.lit(0))
        .cast("long")
        .alias("d_elements"),
        ((op != OP_WRITE) & ~known).alias("unknown"),
    )


def usage_over_time(deltas: DataFrame) -> DataFrame:
    """Entries and elements in use after each sequence number, per structure.

    One row per structure and ``seq`` that changed usage (the base image is one row at
    ``base_seq``): ``structure, seq, time, changes, entries, elements``.  The running
    sum is a window over each structure in ``seq`` order.
    """
    per_seq = deltas.groupBy("structure", "seq").agg(
        F.max("time").alias("time"),
        F.count(F.lit(1)).alias("changes"),
        F.sum("d_entries").alias("d_entries"),
        F.sum("d_elements").alias("d_elements"),
    )
    running = (
        Window.partitionBy("structure")
        .orderBy("seq")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return per_seq.select(
        "structure",
        "seq",
        "time",
        "changes",
        F.sum("d_entries").over(running).cast("long").alias("entries"),
        F.sum("d_elements").over(running).cast("long").alias("elements"),
    )


def peaks(usage: DataFrame) -> DataFrame:
    """Per structure: the most entries and elements in use, when first reached, and the last.

    Each peak's ``seq`` and ``time`` are the first change at which the peak was
    reached.  Columns :data:`PEAK_COLUMNS`.
    """

    def first_at(column: str) -> DataFrame:
        order = Window.partitionBy("structure").orderBy(F.col(column).desc(), F.col("seq"))
        return (
            usage.withColumn("_rank", F.row_number().over(order))
            .where(F.col("_rank") == 1)
            .select(
                "structure",
                F.col(column).alias(f"peak_{column}"),
                F.col("seq").alias(f"peak_{column}_seq"),
                F.col("time").alias(f"peak_{column}_time"),
            )
        )

    last_order = Window.partitionBy("structure").orderBy(F.col("seq").desc())
    last = (
        usage.withColumn("_rank", F.row_number().over(last_order))
        .where(F.col("_rank") == 1)
        .select(
            "structure",
            F.col("entries").alias("final_entries"),
            F.col("elements").alias("final_elements"),
        )
    )
    span = usage.groupBy("structure").agg(
        F.min("seq").alias("first_seq"), F.max("seq").alias("last_seq")
    )
    return (
        span.join(first_at("entries"), "structure")
        .join(first_at("elements"), "structure")
        .join(last, "structure")
        .select(*PEAK_COLUMNS)
    )


def object_sizes(log: DataFrame, bases: DataFrame) -> DataFrame:
    """Average sizes of what is written, per structure (the seeds' ``OBJAVGSZ``).

    ``writes``/``avg_entry_bytes``: every entry written (messages, control entries,
    descriptors); ``puts``/``avg_message_bytes``/``max_message_bytes``: message puts
    only (header and body: what a queue manager writes per message);
    ``avg_entry_elements``: elements per written entry.
    """
    sized = bases.select("structure", "element_size", "base_seq")
    writes = (
        log.where((F.col("op") == OP_WRITE) & F.col("data").isNotNull())
        .join(F.broadcast(sized), "structure")
        .where(F.col("seq") > F.col("base_seq"))
        .select(
            "structure",
            F.length("data").alias("bytes"),
            _elements(F.length("data"), F.col("element_size")).alias("elements"),
            (F.col("type") == TYPE_PUT).alias("is_put"),
        )
    )
    put_bytes = F.when(F.col("is_put"), F.col("bytes"))
    return writes.groupBy("structure").agg(
        F.count(F.lit(1)).alias("writes"),
        F.avg("bytes").alias("avg_entry_bytes"),
        F.avg("elements").alias("avg_entry_elements"),
        F.count(put_bytes).alias("puts"),
        F.avg(put_bytes).alias("avg_message_bytes"),
        F.max(put_bytes).alias("max_message_bytes"),
    )
