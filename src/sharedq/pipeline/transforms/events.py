"""Queue depth events from the log: each record, each event's group, the depth around them.

A queue manager writes one ``DEPTH_EVENT`` record (type ``0x61``, ``op`` none) when it
toggles a queue's event attributes as the event's coordinator, and one for every event
message it issues, coordinator or peer (``docs/log-records.md``).  All the records of
one event share its 24-byte CorrelId (``correl_id``): one event is one group, with
1 to n messages for n active managers.

The payload is a msgpack map of ten keys; Spark has no msgpack reader, so
:func:`depth_event_records` decodes it in a Python UDF, after the filter on the type
has left only these records (a handful per threshold crossing), and never on the
driver.

Depth here is the committed depth of the ``stats`` job (one rule:
:func:`sharedq.pipeline.transforms.statistics.depth_changes`), followed change by
change; the depth a manager saw when it detected the event (its put list's entries,
uncommitted puts included) is the record's own ``depth``.  Both are kept, since they
differ by the units of work in flight, and by a message gotten out of syncpoint
between its get (off the put list: the manager's depth drops) and its delete (the
committed depth drops).  An event's place in the log is its coordinator's record
(:func:`event_anchors`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgpack

from sharedq.log import RecordType

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: The payload's keys and their Spark types, in the order of the decoded struct.
PAYLOAD_FIELDS: tuple[tuple[str, str], ...] = (
    ("event", "string"),
    ("role", "string"),
    ("issued", "boolean"),
    ("depth", "bigint"),
    ("max_depth", "bigint"),
    ("high_depth", "bigint"),
    ("enqueues", "bigint"),
    ("dequeues", "bigint"),
    ("since_reset_s", "double"),
)
#: The event types, in the order summaries list them.
EVENT_TYPES = ("high", "low", "full")
#: The role of the manager whose compare-and-swap toggled the queue's attributes.
COORDINATOR = "coordinator"

#: Columns of the ``events`` table (one row per DEPTH_EVENT record), in order.
EVENT_COLUMNS = (
    "structure",
    "queue",
    "time",
    "correl_id",
    "event",
    "writer",
    "role",
    "issued",
    "depth",
    "log_depth",
    "max_depth",
    "high_depth",
    "enqueues",
    "dequeues",
    "since_reset_s",
    "seq",
    "lsn",
)
#: Columns of the ``groups`` table (one row per CorrelId), in order.
GROUP_COLUMNS = (
    "correl_id",
    "structure",
    "queue",
    "event",
    "time",
    "coordinator",
    "messages",
    "managers",
    "enqueues",
    "dequeues",
    "depth",
    "log_depth",
    "records",
)


def decode_payload(payload: bytes | None) -> tuple[Any, ...] | None:
    """A DEPTH_EVENT payload as a tuple in :data:`PAYLOAD_FIELDS` order (a key missing
    gives null); null for a payload that is not a map.  Runs in Spark's Python workers."""
    if payload is None:
        return None
    try:
        value = msgpack.unpackb(payload, raw=False)
    except (ValueError, msgpack.UnpackException):
        return None
    if not isinstance(value, dict):
        return None
    out: list[Any] = []
    for name, kind in PAYLOAD_FIELDS:
        item = value.get(name)
        if kind == "double" and isinstance(item, int) and not isinstance(item, bool):
            item = float(item)
        out.append(item)
    return tuple(out)


def depth_event_records(log: DataFrame) -> DataFrame:
    """One row per DEPTH_EVENT record: where, when, who, and its payload's values.

    Columns: ``structure, queue, seq, op, writer, lsn, time, correl_id`` (hex) and those
    of :data:`PAYLOAD_FIELDS`.
    """
    from pyspark.sql import functions as F

    schema = ",".join(f"{name}:{kind}" for name, kind in PAYLOAD_FIELDS)
    # useArrow given: PySpark would otherwise guess a pandas UDF from the type hints.
    decode = F.udf(decode_payload, f"struct<{schema}>", useArrow=False)
    records = log.where(F.col("type") == int(RecordType.DEPTH_EVENT)).select(
        "structure",
        F.col("queue").cast("string").alias("queue"),
        "seq",
        "op",
        "writer",
        "lsn",
        F.col("time_us").alias("time"),
        F.lower(F.hex("correl_id")).alias("correl_id"),
        decode(F.col("payload")).alias("p"),
    )
    return records.select(
        *(c for c in records.columns if c != "p"),
        *(F.col(f"p.{name}").alias(name) for name, _ in PAYLOAD_FIELDS),
    )


def _event_key() -> Column:
    """What ties a record to its event: its CorrelId (else the record alone)."""
    from pyspark.sql import functions as F

    return F.coalesce(F.col("correl_id"), F.concat_ws(":", "writer", F.col("lsn").cast("string")))


def event_anchors(records: DataFrame) -> DataFrame:
    """One record per event, the one that places it in the log: its coordinator's
    record, else (a coordinator that died before logging) its first in the log's order.

    A record that is not a change carries the last seq its writer saw: the
    coordinator's is the change that crossed (or the toggle just after it), a peer's
    may be much older, since the peer answers whatever it was doing.  So an event's
    depth in the log is taken at its anchor, for every record of the event.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    first = Window.partitionBy("event_key").orderBy(
        F.when(F.col("role") == COORDINATOR, F.lit(0)).otherwise(F.lit(1)),
        "seq",
        "op",
        "writer",
        "lsn",
    )
    return (
        records.withColumn("event_key", _event_key())
        .withColumn("rank", F.row_number().over(first))
        .where(F.col("rank") == 1)
        .drop("rank")
    )


def depth_at_changes(changes: DataFrame, opening: DataFrame, anchors: DataFrame) -> DataFrame:
    """Each queue's committed depth after every change and at every event's anchor.

    ``changes`` come from ``depth_changes`` (``structure, queue, seq, op, writer, lsn,
    time, depth_change``), ``opening`` from ``opening_depths``, ``anchors`` from
    :func:`event_anchors`.  The rows of both are put in the log's order (``seq, op,
    writer, lsn``: an event record, op none, sorts after the change whose seq it
    carries) and the changes summed from the opening depth.  Columns: ``structure,
    queue, seq, op, writer, lsn, time, depth_change, event_key`` (null for a change),
    ``depth``.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    position = ["seq", "op", "writer", "lsn"]
    moves = changes.where(F.col("queue").isNotNull()).select(
        "structure",
        "queue",
        *position,
        "time",
        F.col("depth_change").cast("long").alias("depth_change"),
        F.lit(None).cast("string").alias("event_key"),
    )
    marks = anchors.select(
        "structure",
        "queue",
        *position,
        "time",
        F.lit(0).cast("long").alias("depth_change"),
        "event_key",
    )
    running = (
        Window.partitionBy("structure", "queue")
        .orderBy(*position)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return (
        moves.unionByName(marks)
        .join(opening, ["structure", "queue"], "left")
        .withColumn(
            "depth",
            (
                F.coalesce(F.col("opening_depth"), F.lit(0)) + F.sum("depth_change").over(running)
            ).cast("long"),
        )
        .drop("opening_depth")
    )


def depth_series(at_changes: DataFrame) -> DataFrame:
    """The ``depth`` table: a row per change that moved a queue's committed depth
    (``structure, queue, seq, time, depth``)."""
    from pyspark.sql import functions as F

    return at_changes.where(F.col("event_key").isNull() & (F.col("depth_change") != 0)).select(
        "structure", "queue", "seq", "time", "depth"
    )


def event_rows(records: DataFrame, at_changes: DataFrame) -> DataFrame:
    """The ``events`` table: every record with ``log_depth``, its queue's committed
    depth in the log at its event's anchor (columns :data:`EVENT_COLUMNS`)."""
    from pyspark.sql import functions as F

    marks = at_changes.where(F.col("event_key").isNotNull()).select(
        "event_key", F.col("depth").alias("log_depth")
    )
    return (
        records.withColumn("event_key", _event_key())
        .join(marks, "event_key", "left")
        .select(*EVENT_COLUMNS)
    )


def event_groups(events: DataFrame) -> DataFrame:
    """The ``groups`` table: one row per CorrelId (columns :data:`GROUP_COLUMNS`).

    ``time`` is the group's first record's; ``coordinator`` the writer of its
    coordinator record (null when the log lacks it); ``messages`` the event messages
    issued (records with ``issued``), ``managers`` their writers, sorted;
    ``enqueues``/``dequeues`` the issuing managers' counts summed (an idle peer's null
    counts as 0); ``depth``/``log_depth`` those of the coordinator's record (else the
    first record's); ``records`` every record of the group.
    """
    from pyspark.sql import functions as F

    coordinator = F.col("role") == COORDINATOR
    issued = F.coalesce(F.col("issued"), F.lit(False))
    order = F.struct(F.when(coordinator, F.lit(0)).otherwise(F.lit(1)), F.col("time"), F.col("lsn"))
    return (
        events.where(F.col("correl_id").isNotNull())
        .groupBy("correl_id")
        .agg(
            F.min_by("structure", order).alias("structure"),
            F.min_by("queue", order).alias("queue"),
            F.min_by("event", order).alias("event"),
            F.min("time").alias("time"),
            F.min(F.when(coordinator, F.col("writer"))).alias("coordinator"),
            F.count(F.when(issued, True)).cast("long").alias("messages"),
            F.array_sort(F.collect_set(F.when(issued, F.col("writer")))).alias("managers"),
            F.coalesce(F.sum(F.when(issued, F.col("enqueues"))), F.lit(0))
            .cast("long")
            .alias("enqueues"),
            F.coalesce(F.sum(F.when(issued, F.col("dequeues"))), F.lit(0))
            .cast("long")
            .alias("dequeues"),
            F.min_by("depth", order).alias("depth"),
            F.min_by("log_depth", order).alias("log_depth"),
            F.count("*").cast("long").alias("records"),
        )
        .select(*GROUP_COLUMNS)
    )
