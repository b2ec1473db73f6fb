"""An IMS shared-queues group's work, read from its CQSs' log records.

Each IMS is the client of its own CQS, so the CQS that wrote a record (``writer``) is
the IMS that made the request.  What the records say (``docs/cqs.md``, "Log records"):

- an **input** is a PUT to a transaction ready queue (type 1) or serial queue (type 4)
  of an MSGQ structure whose unit of work has a blank processing half (figure 71:
  the message entered the system there, it was not made by a program);
- a **local** input is put straight to the lock queue (``list_number`` in the lock
  queue's headers: :class:`sharedq.cqs.Private`), a global one on its queue's header;
- a **reply** is a message on an LTERM ready queue (type 5), put by the IMS whose
  program answered and deleted by the IMS that delivered it, when the terminal
  acknowledged it: input to reply delete is what the terminal waited, matched by the
  unit of work's first 16 bytes (its origin);
- on an EMHQ structure (Fast Path), type 1 is a PSB's program ready queue (a global
  Fast Path input; with an IMSID in the name, an IMS's PSB table entry), type 5 an
  LTERM's reply queue.  Local Fast Path work never reaches the structure.

The log does not say whether a structure is an MSGQ or an EMHQ: a structure whose
name contains ``EMHQ`` is taken for an EMHQ, unless the caller names them.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from sharedq.cqs import Private
from sharedq.cqs.journal import Request
from sharedq.cqs.names import STAGING_TYPE
from sharedq.pipeline.transforms.cqs_records import (
    ORIGIN_BYTES,
    QUEUE_TYPES,
    is_cqs_uow,
    message_tag,
    origin_system,
    processing_system,
    queue_imsid,
    queue_type,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: Names of the EMHQ's queue types (the MSGQ's are ``cqs_records.QUEUE_TYPES``).
EMHQ_TYPES = {1: "program ready", 5: "LTERM ready (Fast Path)"}
LOCK_HEADERS = Private.LOCK.headers()
#: The MSGQ's staging queue types: a staged part is counted with its message.
STAGING_TYPES = tuple(sorted(set(STAGING_TYPE.values())))
#: The latency percentiles the job reports.
PERCENTILES = (0.5, 0.9, 0.99)


def is_emhq(structure: Column, emhq: Collection[str] | None = None) -> Column:
    from pyspark.sql import functions as F

    if emhq:
        return structure.isin(*sorted(emhq))
    return F.upper(structure).contains("EMHQ")


def requests(log: DataFrame, emhq: Collection[str] | None = None) -> DataFrame:
    """Every message record a CQS wrote, one row each: ``structure, kind`` (MSGQ or
    EMHQ), ``cqs`` (the writer), ``action`` (the request's tag), ``queue_type``,
    ``queue_name`` (words), ``table_entry`` (a Fast Path PSB table entry), ``local``
    (a put straight to the lock queue), ``entry_id``, ``origin`` (hex of the unit of
    work's first 16 bytes), ``origin_system``, ``input`` (a put of a message entered
    at a terminal), ``seq``, ``time``."""
    from pyspark.sql import functions as F

    tag = message_tag(F.col("payload"))
    emhq_col = is_emhq(F.col("structure"), emhq)
    qtype = queue_type(F.col("queue"))
    msgq_names = F.create_map(*[x for k, v in QUEUE_TYPES.items() for x in (F.lit(k), F.lit(v))])
    emhq_names = F.create_map(*[x for k, v in EMHQ_TYPES.items() for x in (F.lit(k), F.lit(v))])
    table_entry = emhq_col & (qtype == 1) & queue_imsid(F.col("queue")).isNotNull()
    local = (F.col("action") == Request.PUT.tag) & F.col("list_number").between(
        LOCK_HEADERS.start, LOCK_HEADERS.stop - 1
    )
    original = is_cqs_uow(F.col("uow")) & processing_system(F.col("uow")).isNull()
    return (
        log.where(tag.isNotNull() & F.col("entry_id").isNotNull())
        .withColumn("action", tag)
        .select(
            "structure",
            F.when(emhq_col, F.lit("EMHQ")).otherwise(F.lit("MSGQ")).alias("kind"),
            F.col("writer").alias("cqs"),
            "action",
            qtype.alias("queue_type"),
            F.when(table_entry, F.lit("PSB table entry"))
            .when(emhq_col, F.coalesce(emhq_names[qtype], F.lit("?")))
            .otherwise(F.coalesce(msgq_names[qtype], F.lit("?")))
            .alias("queue_name"),
            F.coalesce(table_entry, F.lit(False)).alias("table_entry"),
            F.coalesce(local, F.lit(False)).alias("local"),
            F.lower(F.hex("entry_id")).alias("entry_id"),
            F.lower(F.hex(F.substring("uow", 1, ORIGIN_BYTES))).alias("origin"),
            origin_system(F.col("uow")).alias("origin_system"),
            F.coalesce(
                (F.col("action") == Request.PUT.tag) & ~emhq_col & qtype.isin(1, 4) & original,
                F.lit(False),
            ).alias("input"),
            "seq",
            F.col("time_us").alias("time"),
        )
    )


def work_per_cqs(reqs: DataFrame) -> DataFrame:
    """Per CQS (its IMS): puts (local ones too), reads, moves, unlocks, deletes,
    moves to the cold queue, and full-function and Fast Path inputs."""
    from pyspark.sql import functions as F

    def count(condition: Column) -> Column:
        return F.sum(F.when(condition, 1).otherwise(0)).cast("long")

    action = F.col("action")
    fp_input = (
        (F.col("kind") == "EMHQ") & (action == Request.PUT.tag) & (F.col("queue_type") == 1)
    ) & ~F.col("table_entry")
    return reqs.groupBy("cqs").agg(
        count(action == Request.PUT.tag).alias("puts"),
        count(F.col("local")).alias("local_puts"),
        count(action == Request.READ.tag).alias("reads"),
        count(action.isin(Request.MOVE.tag, Request.MOVE_STEP.tag)).alias("moves"),
        count(action == Request.UNLOCK.tag).alias("unlocks"),
        count(action == Request.DELETE.tag).alias("deletes"),
        count(action == Request.COLD.tag).alias("cold"),
        count(F.col("input")).alias("inputs"),
        count(fp_input).alias("fp_global_inputs"),
    )


def input_shares(reqs: DataFrame) -> DataFrame:
    """Per IMS that took the input (its CQS), full-function inputs: local (straight to
    the lock queue), global (the transaction ready queue), serial (its serial queue),
    and the local share."""
    from pyspark.sql import functions as F

    inputs = reqs.where(F.col("input"))
    routing = (
        F.when(F.col("local"), F.lit("local"))
        .when(F.col("queue_type") == 4, F.lit("serial"))
        .otherwise(F.lit("global"))
    )
    counted = (
        inputs.withColumn("routing", routing)
        .groupBy("cqs")
        .pivot("routing", ["local", "global", "serial"])
        .count()
        .na.fill(0)
    )
    total = F.col("local") + F.col("global") + F.col("serial")
    return counted.select(
        "cqs",
        F.col("local").cast("long").alias("local"),
        F.col("global").cast("long").alias("global"),
        F.col("serial").cast("long").alias("serial"),
        total.cast("long").alias("inputs"),
        F.when(total > 0, F.col("local") / total).alias("local_share"),
    )


def input_latency(reqs: DataFrame) -> DataFrame:
    """Per full-function input (by origin): when it was put, by which CQS, how
    (local, global, serial), its replies and when the last was deleted (the terminal's
    acknowledgement): ``origin, cqs, routing, put_time, replies, reply_deleted,
    latency_ms``; ``latency_ms`` null when no reply was deleted."""
    from pyspark.sql import functions as F

    inputs = reqs.where(F.col("input")).select(
        "origin",
        "cqs",
        F.when(F.col("local"), F.lit("local"))
        .when(F.col("queue_type") == 4, F.lit("serial"))
        .otherwise(F.lit("global"))
        .alias("routing"),
        F.col("time").alias("put_time"),
    )
    replies = (
        reqs.where(
            (F.col("kind") == "MSGQ")
            & (F.col("queue_type") == 5)
            & (F.col("action") == Request.DELETE.tag)
        )
        .groupBy("origin")
        .agg(F.count("*").alias("replies"), F.max("time").alias("reply_deleted"))
    )
    micros = F.unix_micros(F.col("reply_deleted")) - F.unix_micros(F.col("put_time"))
    return (
        inputs.join(replies, "origin", "left")
        .na.fill(0, ["replies"])
        .withColumn("latency_ms", micros / 1000.0)
    )


def latency_percentiles(latencies: DataFrame) -> DataFrame:
    """Input to reply-delete percentiles, all inputs and per CQS and routing:
    ``scope, name, count, p50_ms, p90_ms, p99_ms``."""
    from pyspark.sql import functions as F

    answered = latencies.where(F.col("latency_ms").isNotNull())

    def agg(frame: DataFrame, scope: str, name: Column) -> DataFrame:
        pct = F.percentile_approx("latency_ms", list(PERCENTILES), 10_000)
        return (
            frame.groupBy(name.alias("name"))
            .agg(
                F.count("*").alias("count"),
                pct[0].alias("p50_ms"),
                pct[1].alias("p90_ms"),
                pct[2].alias("p99_ms"),
            )
            .select(F.lit(scope).alias("scope"), "name", "count", "p50_ms", "p90_ms", "p99_ms")
        )

    return (
        agg(answered, "all", F.lit("all"))
        .unionByName(agg(answered, "cqs", F.col("cqs")))
        .unionByName(agg(answered, "routing", F.col("routing")))
    )


def balance(reqs: DataFrame) -> DataFrame:
    """Per structure kind and queue type: messages ``opening`` (on the structure when
    the log starts: records but no put), ``put``, ``deleted``, ``cold`` (moved to the
    cold queue and not deleted) and ``left`` (neither: still on the structure), each
    message counted once under the queue type it was put to; ``balanced``: opening +
    put = deleted + cold + left."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    staging = (F.col("kind") == "MSGQ") & F.col("queue_type").isin(*STAGING_TYPES)
    parts = reqs.where((F.col("action") != Request.STAGE.tag) & ~staging)
    entry = Window.partitionBy("structure", "entry_id")
    first = F.min_by(F.struct("queue_type", "queue_name"), F.col("seq")).over(entry)
    messages = (
        parts.withColumn("first", first)
        .groupBy("structure", "kind", "entry_id")
        .agg(
            F.first("first").alias("first"),
            F.max(F.when(F.col("action") == Request.PUT.tag, 1).otherwise(0)).alias("put"),
            F.max(F.when(F.col("action") == Request.DELETE.tag, 1).otherwise(0)).alias("deleted"),
            F.max_by("action", "seq").alias("last"),
        )
    )
    cold = (F.col("deleted") == 0) & (F.col("last") == Request.COLD.tag)
    per_type = (
        messages.select(
            "kind",
            F.col("first.queue_type").alias("queue_type"),
            F.col("first.queue_name").alias("queue"),
            (1 - F.col("put")).alias("opening"),
            "put",
            "deleted",
            F.when(cold, 1).otherwise(0).alias("cold"),
            F.when((F.col("deleted") == 0) & ~cold, 1).otherwise(0).alias("left"),
        )
        .groupBy("kind", "queue_type", "queue")
        .agg(
            *[F.sum(c).cast("long").alias(c) for c in ("opening", "put", "deleted", "cold", "left")]
        )
    )
    return per_type.withColumn(
        "balanced",
        F.col("opening") + F.col("put") == F.col("deleted") + F.col("cold") + F.col("left"),
    )
