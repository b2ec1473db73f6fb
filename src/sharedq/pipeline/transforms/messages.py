"""The queue manager's meaning of each log record, and one row per message change.

Every record a queue manager writes carries ``payload = {"mq": kind}`` (see
``docs/log-records.md``).  That map is tiny msgpack: fixmap(1) ``0x81``, fixstr "mq"
``0xa2 0x6d 0x71``, then the kind as a fixstr (``0xa0 | length``, the UTF-8 bytes).
:func:`mq_kind` reads it with binary substrings, so the jobs decode the payload of
every record inside the JVM instead of shipping each row to a Python UDF.

:func:`message_events` keeps the records that change a message (put, get, commit,
backout, expire, cold queue...) with the columns tracking and statistics need; the
message's identity in the structure is its ``entry_id`` (a message keeps its entry id
from its put to its removal: moves and backouts do not change it), and its MQ identity
is ``message_id``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: The bytes every ``{"mq": kind}`` payload starts with: fixmap(1), fixstr "mq".
MQ_PREFIX = b"\x81\xa2mq"

#: Kinds of the records that change a message (the others are descriptors, queue
#: definitions, control entries and commit decisions).
PUT = "put"
SYNC_PUT = "sync-put"
COMMIT_PUTS = "commit-puts"
GET = "get"
SYNC_GET = "sync-get"
COMMIT_GETS = "commit-gets"
BACKOUT_PUTS = "backout-puts"
BACKOUT_GETS = "backout-gets"
BACKOUT_LAST = "backout-last"
EXPIRE = "expire"
PURGE = "purge"
COLD_QUEUE = "cold-queue"
REQUEUE = "requeue"
MESSAGE_KINDS = (
    PUT,
    SYNC_PUT,
    COMMIT_PUTS,
    GET,
    SYNC_GET,
    COMMIT_GETS,
    BACKOUT_PUTS,
    BACKOUT_GETS,
    BACKOUT_LAST,
    EXPIRE,
    PURGE,
    COLD_QUEUE,
    REQUEUE,
)
#: A put became visible (took its committed key).
PUT_COMMITS = (SYNC_PUT, COMMIT_PUTS)
#: A gotten message was removed for good, committed.
GET_COMMITS = (SYNC_GET, COMMIT_GETS)


def mq_kind(payload: Column) -> Column:
    """The ``"mq"`` kind of a binary ``payload`` column; null for any other payload.

    Only the exact shape ``{"mq": <fixstr>}`` is read (every kind is shorter than 32
    bytes); a payload of another shape (a checkpoint's, a statistics map) gives null
    rather than a misread.
    """
    from pyspark.sql import functions as F

    header = F.conv(F.hex(F.substring(payload, 5, 1)), 16, 10).cast("int")
    length = header - F.lit(0xA0)
    shaped = (
        (F.substring(payload, 1, 4) == F.lit(bytearray(MQ_PREFIX)))
        & header.between(0xA0, 0xBF)
        & (F.length(payload) == length + F.lit(5))
    )
    return F.when(shaped, payload.substr(F.lit(6), length).cast("string"))


def with_kind(log: DataFrame) -> DataFrame:
    """The log with a ``kind`` column (the ``mq`` kind, null for other records)."""
    from pyspark.sql import functions as F

    return log.withColumn("kind", mq_kind(F.col("payload")))


def message_events(log: DataFrame) -> DataFrame:
    """One row per change of a message, in the columns tracking and statistics use.

    Columns: ``structure, seq, op, writer, lsn, time (timestamp), kind, entry_id,
    message_id, msg_id (hex), queue (string), uow (hex), priority, version``.  Order the
    rows of one structure by ``seq, lsn`` for the order the changes were made in.
    """
    from pyspark.sql import functions as F

    return (
        with_kind(log)
        .where(F.col("kind").isin(*MESSAGE_KINDS) & F.col("entry_id").isNotNull())
        .select(
            "structure",
            "seq",
            "op",
            "writer",
            "lsn",
            F.col("time_us").alias("time"),
            "kind",
            "entry_id",
            "message_id",
            F.lower(F.hex("message_id")).alias("msg_id"),
            F.col("queue").cast("string").alias("queue"),
            F.lower(F.hex("uow")).alias("uow"),
            "priority",
            "version",
        )
    )


def millis_between(start: Column, end: Column) -> Column:
    """Milliseconds from ``start`` to ``end`` (timestamps), as a double."""
    from pyspark.sql import functions as F

    return (F.unix_micros(end) - F.unix_micros(start)) / F.lit(1000.0)
