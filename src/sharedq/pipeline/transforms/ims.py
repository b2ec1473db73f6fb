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
  LTERM's reply queue.  Local Fast Path work never reaches the structure;
- a **conversational** message (redbook §9.14, ``docs/ims.md`` "Conversations") is one
  whose IMS message has format 2: its first segment is the SPA, whose first 8 bytes
  name the transaction the next input goes to (blank: the conversation ended with this
  response).  A put record's ``data`` is the whole entry: the CQS prefix
  (:data:`sharedq.cqs.messages.PREFIX_LENGTH` bytes; a multi-part message's part 1
  holds the start of the body), then the IMS message (format byte, source LTERM, then
  LLZZ segments), so the format, the LTERM and the SPA's code are read from fixed
  offsets of part 1 with binary substrings, no row going to a Python worker.

The log does not say whether a structure is an MSGQ or an EMHQ: a structure whose
name contains ``EMHQ`` is taken for an EMHQ, unless the caller names them.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from sharedq.cqs import Private
from sharedq.cqs.journal import Request
from sharedq.cqs.messages import FORMAT as CQS_FORMAT
from sharedq.cqs.messages import PREFIX_LENGTH
from sharedq.cqs.names import STAGING_TYPE
from sharedq.ims.messages import FORMAT as IMS_FORMAT
from sharedq.ims.messages import FORMAT_SPA
from sharedq.ims.spa import CODE_BYTES
from sharedq.pipeline.transforms.cqs_records import (
    ORIGIN_BYTES,
    QUEUE_TYPES,
    is_cqs_uow,
    message_tag,
    origin_system,
    processing_system,
    queue_imsid,
    queue_resource,
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
#: An IMS message's prefix after the CQS's: format (1), source LTERM (8), as
#: ``sharedq.ims.messages`` packs it (its struct is private there; the pipeline's tests
#: hold these offsets to what ``sharedq.ims.messages.decode`` reads from real records).
LTERM_BYTES = 8
IMS_PREFIX_BYTES = 1 + LTERM_BYTES
#: A segment's ``LLZZ`` (length and two zero bytes) before its data.
LLZZ_BYTES = 4
#: Where (1-based, as Spark's ``substring`` counts) a put record's data has the CQS
#: prefix's part number (0: part 1), the IMS format byte, the source LTERM and the
#: SPA's transaction code (the first segment's data of a format 2 message).
PART_AT = 3
FORMAT_AT = PREFIX_LENGTH + 1
LTERM_AT = FORMAT_AT + 1
SPA_CODE_AT = PREFIX_LENGTH + IMS_PREFIX_BYTES + LLZZ_BYTES + 1


def is_emhq(structure: Column, emhq: Collection[str] | None = None) -> Column:
    from pyspark.sql import functions as F

    if emhq:
        return structure.isin(*sorted(emhq))
    return F.upper(structure).contains("EMHQ")


def ims_message(data: Column) -> Column:
    """Whether a record's ``data`` is part 1 of a CQS message holding an IMS message:
    the CQS prefix's format, part 0, then an IMS format byte (ordinary or
    conversational) and a whole LTERM.  False for a staged part (its body is not the
    message's start) and for a record without data (read, delete, ...): only a put
    carries the entry."""
    from pyspark.sql import functions as F

    return F.coalesce(
        (F.length(data) >= PREFIX_LENGTH + IMS_PREFIX_BYTES)
        & (F.substring(data, 1, 1) == F.lit(bytearray([CQS_FORMAT])))
        & (F.substring(data, PART_AT, 2) == F.lit(bytearray(2)))
        & F.substring(data, FORMAT_AT, 1).isin(bytearray([IMS_FORMAT]), bytearray([FORMAT_SPA])),
        F.lit(False),
    )


def source_lterm(data: Column) -> Column:
    """The IMS message's source LTERM, trimmed (blank on a program's reply: the
    destination is its queue); null when ``data`` is not an IMS message."""
    from pyspark.sql import functions as F

    text = F.rtrim(F.decode(F.substring(data, LTERM_AT, LTERM_BYTES), "US-ASCII"))
    return F.when(ims_message(data), text)


def has_spa(data: Column) -> Column:
    """Whether ``data`` is an IMS message of format 2: a conversation's, the SPA first."""
    from pyspark.sql import functions as F

    return ims_message(data) & (F.substring(data, FORMAT_AT, 1) == F.lit(bytearray([FORMAT_SPA])))


def spa_code(data: Column) -> Column:
    """The SPA's transaction code, trimmed: where the conversation's next input goes,
    ``""`` when this response ended it; null when ``data`` carries no SPA.  (Part 1
    always holds it: a queue buffer is far longer than the prefixes and the code.)"""
    from pyspark.sql import functions as F

    code = F.rtrim(F.decode(F.substring(data, SPA_CODE_AT, CODE_BYTES), "US-ASCII"))
    return F.when(has_spa(data) & (F.length(data) >= SPA_CODE_AT - 1 + CODE_BYTES), code)


def requests(log: DataFrame, emhq: Collection[str] | None = None) -> DataFrame:
    """Every message record a CQS wrote, one row each: ``structure, kind`` (MSGQ or
    EMHQ), ``cqs`` (the writer), ``action`` (the request's tag), ``queue_type``,
    ``queue_name`` (words), ``resource`` (the queue's transaction code or LTERM),
    ``table_entry`` (a Fast Path PSB table entry), ``local`` (a put straight to the
    lock queue), ``entry_id``, ``origin`` (hex of the unit of work's first 16 bytes),
    ``origin_system``, ``input`` (a put of a message entered at a terminal),
    ``conversational`` (a full-function put of a conversation's message, its SPA
    first), ``source_lterm`` (the IMS message's LTERM on a put; null elsewhere),
    ``spa_code`` (the SPA's next transaction on a conversational put: ``""`` ended
    the conversation), ``seq``, ``time``."""
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
    put = F.col("action") == Request.PUT.tag
    conversational = put & ~emhq_col & has_spa(F.col("data"))
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
            queue_resource(F.col("queue")).alias("resource"),
            F.coalesce(table_entry, F.lit(False)).alias("table_entry"),
            F.coalesce(local, F.lit(False)).alias("local"),
            F.lower(F.hex("entry_id")).alias("entry_id"),
            F.lower(F.hex(F.substring("uow", 1, ORIGIN_BYTES))).alias("origin"),
            origin_system(F.col("uow")).alias("origin_system"),
            F.coalesce(put & ~emhq_col & qtype.isin(1, 4) & original, F.lit(False)).alias("input"),
            F.coalesce(conversational, F.lit(False)).alias("conversational"),
            F.when(put, source_lterm(F.col("data"))).alias("source_lterm"),
            F.when(conversational, spa_code(F.col("data"))).alias("spa_code"),
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
    their sum, the local share, and ``conversational``: how many of them were a
    conversation's iterations (each is an input the terminal entered, the SPA first)."""
    from pyspark.sql import functions as F

    def count(condition: Column) -> Column:
        return F.sum(F.when(condition, 1).otherwise(0)).cast("long")

    inputs = reqs.where(F.col("input"))
    routing = (
        F.when(F.col("local"), F.lit("local"))
        .when(F.col("queue_type") == 4, F.lit("serial"))
        .otherwise(F.lit("global"))
    )
    counted = (
        inputs.withColumn("routing", routing)
        .groupBy("cqs")
        .agg(
            *[count(F.col("routing") == r).alias(r) for r in ("local", "global", "serial")],
            count(F.col("conversational")).alias("conversational"),
        )
    )
    total = F.col("local") + F.col("global") + F.col("serial")
    return counted.select(
        "cqs",
        "local",
        "global",
        "serial",
        total.cast("long").alias("inputs"),
        F.when(total > 0, F.col("local") / total).alias("local_share"),
        "conversational",
    )


def input_latency(reqs: DataFrame) -> DataFrame:
    """Per full-function input (by origin): when it was put, by which CQS, how
    (local, global, serial), its replies, when the last was read to be sent and when
    it was deleted (the terminal's acknowledgement): ``origin, cqs, routing,
    conversational, put_time, replies, reply_sent, reply_deleted, latency_ms``.

    ``latency_ms`` runs to the reply's delete, null when none was deleted; for a
    conversational input to the reply's read: a conversation's response that does not
    end it stays on the lock queue, held with its SPA, until the terminal's next input
    (§10.3), so its delete would count the time the user took to answer."""
    from pyspark.sql import functions as F

    inputs = reqs.where(F.col("input")).select(
        "origin",
        "cqs",
        F.when(F.col("local"), F.lit("local"))
        .when(F.col("queue_type") == 4, F.lit("serial"))
        .otherwise(F.lit("global"))
        .alias("routing"),
        "conversational",
        F.col("time").alias("put_time"),
    )
    deleted = F.col("action") == Request.DELETE.tag
    replies = (
        reqs.where(
            (F.col("kind") == "MSGQ")
            & (F.col("queue_type") == 5)
            & F.col("action").isin(Request.DELETE.tag, Request.READ.tag)
        )
        .groupBy("origin")
        .agg(
            F.sum(F.when(deleted, 1).otherwise(0)).cast("long").alias("replies"),
            F.max(F.when(~deleted, F.col("time"))).alias("reply_sent"),
            F.max(F.when(deleted, F.col("time"))).alias("reply_deleted"),
        )
    )
    until = F.when(F.col("conversational"), F.col("reply_sent")).otherwise(F.col("reply_deleted"))
    micros = F.unix_micros(until) - F.unix_micros(F.col("put_time"))
    return (
        inputs.join(replies, "origin", "left")
        .na.fill(0, ["replies"])
        .withColumn("latency_ms", micros / 1000.0)
    )


def conversations(reqs: DataFrame) -> DataFrame:
    """Per front-end IMS (the CQS that put the input: where the conversation's CCB is)
    and the terminal's LTERM: ``iterations`` (conversational inputs entered there) and
    ``ended`` (conversational responses put to that LTERM's ready queue with a blank
    SPA code: the conversation ended with them).

    A response carries its input's unit of work origin and, as a reply, a blank source
    LTERM: it is matched to its input by origin for the front end, and counted under
    the LTERM its queue names (the input's, where the I/O PCB's reply goes).  A
    response whose input is not in the log (the log starts after it) has a null
    ``cqs``."""
    from pyspark.sql import functions as F

    inputs = reqs.where(F.col("input") & F.col("conversational"))
    iterations = inputs.groupBy("cqs", "source_lterm").agg(
        F.count("*").cast("long").alias("iterations")
    )
    front_end = inputs.select("origin", "cqs")
    ends = (
        reqs.where(
            F.col("conversational")
            & (F.col("queue_type") == 5)
            & (F.col("action") == Request.PUT.tag)
            & (F.col("spa_code") == "")
        )
        .select("origin", F.col("resource").alias("source_lterm"))
        .join(front_end, "origin", "left")
        .groupBy("cqs", "source_lterm")
        .agg(F.count("*").cast("long").alias("ended"))
    )
    return (
        iterations.join(ends, ["cqs", "source_lterm"], "full")
        .na.fill(0, ["iterations", "ended"])
        .select("cqs", "source_lterm", "iterations", "ended")
    )


def latency_percentiles(latencies: DataFrame) -> DataFrame:
    """Input to reply percentiles (:func:`input_latency`), all inputs and per CQS and routing:
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
