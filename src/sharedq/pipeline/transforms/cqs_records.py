"""What a Common Queue Server's log records say, decoded inside Spark.

A CQS writes its records with the redbook's Appendix B types and, as payload, a msgpack
map whose first key is ``"cqs"``: ``{"cqs": tag}`` on a message record (the request's
step, :class:`sharedq.cqs.journal.Request`), ``{"cqs": event, "system": ..., ...}`` on
its own connect, disconnect and statistics records.  Its ``queue`` is the 16-byte
queue name (type byte, resource name, IMSID, three blanks; ``docs/cqs.md``) and its
``uow`` the 32-byte unit of work of figure 71 (originating system and arrival token,
processing system and token, 8 bytes each, tokens big-endian microseconds).

Everything here reads those layouts with binary substrings, as
:func:`sharedq.pipeline.transforms.messages.mq_kind` does, so that no row goes to a
Python worker.  The layout constants come from :mod:`sharedq.cqs`, which owns them
(the pipeline is above it); ``tests/pipeline/test_track_cqs.py`` holds each decoder
to what the CQS itself writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sharedq.cqs.journal import PAYLOAD_KEY, Request
from sharedq.cqs.names import NAME_LENGTH, STAGING_TYPE
from sharedq.cqs.uow import UOW_LENGTH
from sharedq.log import RecordType

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: Appendix B's names of the record types (Table 1), and sharedq's 0C (unlock).
APPENDIX_B: dict[int, str] = {
    RecordType.CONNECT: "Connect to Structure",
    RecordType.DISCONNECT: "Disconnect from Structure",
    RecordType.PUT: "Put Message on Client Queue",
    RecordType.READ: "Read Message and Move to Lock Queue",
    RecordType.MOVE: "Move Message to Another Queue",
    RecordType.UNLOCK: "Unlock Message (sharedq)",
    RecordType.DELETE: "Delete Message from Structure",
    RecordType.SHUTDOWN: "CQS Shutdown",
    RecordType.SYSTEM_CHECKPOINT: "System Checkpoint",
    RecordType.STRUCTURE_INITIALIZATION: "Structure Initialization",
    RecordType.STRUCTURE_CHECKPOINT: "Structure Checkpoint",
    RecordType.REBUILD: "Structure Rebuild",
    RecordType.OVERFLOW: "Overflow Processing",
    RecordType.STATISTICS: "Structure Statistics",
}

#: Client queue types by their type byte (redbook §2.3, MSGQ).  On an EMHQ structure
#: type 01 is the program ready queue (a PSB name): the log does not say which kind
#: of structure a record is about, so the MSGQ name is shown.
QUEUE_TYPES: dict[int, str] = {
    1: "transaction ready",
    2: "transaction staging",
    3: "transaction suspend",
    4: "transaction serial",
    5: "LTERM ready",
    6: "LTERM staging",
    7: "APPC ready",
    8: "remote ready",
    9: "OTMA ready",
}

#: The tag of every message record, and the one-letter flag a unit of work shows for
#: it (figure 72's P and R, and sharedq's M move, U unlock, C cold queue, D delete).
#: ``stage`` (a staged part's put) is a part of its message, not a message.
FLAGS: dict[str, str] = {
    Request.PUT.tag: "P",
    Request.READ.tag: "R",
    Request.MOVE_STEP.tag: "M",
    Request.MOVE.tag: "M",
    Request.UNLOCK.tag: "U",
    Request.COLD.tag: "C",
    Request.DELETE_STEP.tag: "D",
    Request.DELETE.tag: "D",
}
STAGE = Request.STAGE.tag
MESSAGE_TAGS: tuple[str, ...] = tuple(r.tag for r in Request)

#: Where a message prefix keeps its part count (format 1, flags 1, part 2, parts 2:
#: ``sharedq.cqs.messages``), 1-based as Spark's ``substring`` counts.
PARTS_AT = 5
#: Bytes of one system id, and of the first half of a unit of work (its origin).
SYSTEM_BYTES = 8
ORIGIN_BYTES = 16

_KEY = PAYLOAD_KEY.encode("ascii")
#: A fixstr header, then the key: what a payload has after its fixmap byte.
_KEY_BYTES = bytes((0xA0 | len(_KEY),)) + _KEY

#: The columns of a unit of work's steps (the ``track`` job's ``cqs_units`` table).
STEP_COLUMNS = (
    "origin",
    "origin_system",
    "origin_token",
    "msg",
    "processing_system",
    "processing_token",
    "flag",
    "action",
    "cqs",
    "queue",
    "queue_type",
    "parts",
    "structure",
    "seq",
    "lsn",
    "time",
    "entry_id",
    "uow",
    "uow_text",
)


def _byte(column: Column, position: int) -> Column:
    """One byte of a binary column as an int (1-based ``position``)."""
    from pyspark.sql import functions as F

    return F.conv(F.hex(F.substring(column, position, 1)), 16, 10).cast("int")


def _unsigned(column: Column, position: int, length: int) -> Column:
    """Big-endian unsigned bytes of a binary column as a long."""
    from pyspark.sql import functions as F

    return F.conv(F.hex(F.substring(column, position, length)), 16, 10).cast("long")


def _ascii(column: Column, position: int, length: int) -> Column:
    """Blank-padded ASCII bytes as a string without its trailing blanks."""
    from pyspark.sql import functions as F

    return F.rtrim(F.decode(F.substring(column, position, length), "US-ASCII"))


def lead_value(payload: Column) -> Column:
    """The value of a payload map's first key when that key is ``"cqs"`` and the value
    a short string (a fixstr): the request's tag, or the CQS event's name.  Null for
    any other payload (a queue manager's ``{"mq": ...}``, checkpoints)."""
    from pyspark.sql import functions as F

    header = _byte(payload, 2 + len(_KEY_BYTES))
    length = header - F.lit(0xA0)
    shaped = (
        _byte(payload, 1).between(0x81, 0x8F)
        & (F.substring(payload, 2, len(_KEY_BYTES)) == F.lit(bytearray(_KEY_BYTES)))
        & header.between(0xA0, 0xBF)
        & (F.length(payload) >= length + F.lit(2 + len(_KEY_BYTES)))
    )
    return F.when(shaped, payload.substr(F.lit(3 + len(_KEY_BYTES)), length).cast("string"))


def message_tag(payload: Column) -> Column:
    """The tag of a CQS message record: a payload that is exactly ``{"cqs": tag}``."""
    from pyspark.sql import functions as F

    value = lead_value(payload)
    exact = (_byte(payload, 1) == 0x81) & (
        F.length(payload) == F.length(value) + F.lit(2 + len(_KEY_BYTES))
    )
    return F.when(exact & value.isin(*MESSAGE_TAGS), value)


def is_cqs_queue(queue: Column) -> Column:
    """Whether a ``queue`` is a CQS queue name: 16 bytes ending in three blanks (a
    queue manager's names have no blanks)."""
    from pyspark.sql import functions as F

    return (F.length(queue) == NAME_LENGTH) & (
        F.substring(queue, NAME_LENGTH - 2, 3) == F.lit(bytearray(b"   "))
    )


def queue_type(queue: Column) -> Column:
    """A CQS queue name's type byte (null for other names)."""
    from pyspark.sql import functions as F

    return F.when(is_cqs_queue(queue), _byte(queue, 1))


def queue_type_name(queue: Column) -> Column:
    """The type of a CQS queue name as words (``transaction ready``)."""
    from pyspark.sql import functions as F

    names = F.create_map(*[x for k, v in QUEUE_TYPES.items() for x in (F.lit(k), F.lit(v))])
    return F.when(is_cqs_queue(queue), F.coalesce(names[_byte(queue, 1)], F.lit("?")))


def queue_resource(queue: Column) -> Column:
    """The resource name of a CQS queue name (transaction code, LTERM, ...)."""
    from pyspark.sql import functions as F

    return F.when(is_cqs_queue(queue), _ascii(queue, 2, 8))


def queue_imsid(queue: Column) -> Column:
    """The IMSID of a CQS queue name; null when any system may process the queue."""
    from pyspark.sql import functions as F

    imsid = _ascii(queue, 10, 4)
    return F.when(is_cqs_queue(queue) & (imsid != ""), imsid)


def queue_text(queue: Column) -> Column:
    """A queue name as people read it: a CQS name as ``TT.RESOURCE[.IMSID]`` (its type
    byte in hex: ``01.TRANA``, ``04.TRANA.IMSA``), any other as its UTF-8 text."""
    from pyspark.sql import functions as F

    imsid = queue_imsid(queue)
    cqs = F.concat(
        F.hex(F.substring(queue, 1, 1)),
        F.lit("."),
        queue_resource(queue),
        F.when(imsid.isNotNull(), F.concat(F.lit("."), imsid)).otherwise(F.lit("")),
    )
    return F.when(is_cqs_queue(queue), cqs).otherwise(queue.cast("string"))


def is_cqs_uow(uow: Column) -> Column:
    from pyspark.sql import functions as F

    return F.length(uow) == UOW_LENGTH


def origin_system(uow: Column) -> Column:
    """Figure 71's originating system id (bytes 0-7)."""
    from pyspark.sql import functions as F

    return F.when(is_cqs_uow(uow), _ascii(uow, 1, SYSTEM_BYTES))


def origin_token(uow: Column) -> Column:
    """Figure 71's arrival token (bytes 8-15): microseconds, the STCK's stand-in."""
    from pyspark.sql import functions as F

    return F.when(is_cqs_uow(uow), _unsigned(uow, 9, 8))


def processing_system(uow: Column) -> Column:
    """Figure 71's processing system id (bytes 16-23); null when blank (the original)."""
    from pyspark.sql import functions as F

    system = _ascii(uow, 17, SYSTEM_BYTES)
    return F.when(is_cqs_uow(uow) & (system != ""), system)


def processing_token(uow: Column) -> Column:
    """Figure 71's processing token (bytes 24-31); null when zero (the original)."""
    from pyspark.sql import functions as F

    token = _unsigned(uow, 25, 8)
    return F.when(is_cqs_uow(uow) & (token != 0), token)


def uow_text(uow: Column) -> Column:
    """A 32-byte unit of work as ``IMSA/T1:IMSB/T3`` (``-/0`` for blank processing
    fields), the form of ``str(sharedq.cqs.Uow)``; null for other ids."""
    from pyspark.sql import functions as F

    return F.when(
        is_cqs_uow(uow),
        F.concat(
            origin_system(uow),
            F.lit("/"),
            origin_token(uow).cast("string"),
            F.lit(":"),
            F.coalesce(processing_system(uow), F.lit("-")),
            F.lit("/"),
            F.coalesce(processing_token(uow), F.lit(0)).cast("string"),
        ),
    )


def with_cqs_writer(log: DataFrame) -> DataFrame:
    """The log with ``cqs_writer``: whether the record's writer is a CQS (it wrote some
    record whose payload leads with the ``"cqs"`` key), so that its checkpoints and
    shutdown get Appendix B's names too."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    leads = lead_value(F.col("payload")).isNotNull()
    return log.withColumn(
        "cqs_writer", F.bool_or(leads).over(Window.partitionBy("writer")).eqNullSafe(True)
    )


def cqs_steps(log: DataFrame) -> DataFrame:
    """Every request a CQS logged for a message, as figure 72's rows (``STEP_COLUMNS``).

    A message is the entry of its part 1 (its id stays through reads, moves and
    unlocks); staged parts are counted in ``parts`` (from part 1's prefix) and their
    own records are left out.  ``msg`` numbers the messages of one origin (the first 16
    bytes of the unit of work) in the order of their first record; rows are in the log's
    order (``seq``, the structure's own order; an origin on several structures is shown
    structure by structure, in the order each was first touched).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    tag = message_tag(F.col("payload"))
    records = log.where(
        tag.isNotNull() & F.col("entry_id").isNotNull() & is_cqs_uow(F.col("uow"))
    ).withColumn("action", tag)
    entry = Window.partitionBy("structure", "entry_id")
    staging_delete = (F.col("action") == Request.DELETE.tag) & _byte(F.col("queue"), 1).isin(
        *sorted(set(STAGING_TYPE.values()))
    )
    parts = F.when(F.col("action") == Request.PUT.tag, _unsigned(F.col("data"), PARTS_AT, 2))
    messages = (
        records.withColumn("staged_part", F.bool_or(F.col("action") == STAGE).over(entry))
        .withColumn("only_staging_deletes", F.bool_and(staging_delete).over(entry))
        .where(~F.col("staged_part") & ~F.col("only_staging_deletes"))
        .withColumn("parts", F.max(parts).over(entry).cast("int"))
        .withColumn("origin", F.lower(F.hex(F.substring("uow", 1, ORIGIN_BYTES))))
    )
    by_origin = Window.partitionBy("origin")
    structure_first = F.min("time_us").over(Window.partitionBy("origin", "structure"))
    messages = messages.withColumn("structure_first", structure_first)
    first = F.min(F.struct("structure_first", "structure", "seq", "lsn")).over(entry)
    numbered = messages.withColumn("first", first).withColumn(
        "msg", F.dense_rank().over(by_origin.orderBy("first", "entry_id"))
    )
    flags = F.create_map(*[x for k, v in FLAGS.items() for x in (F.lit(k), F.lit(v))])
    uow = F.col("uow")
    return numbered.select(
        "origin",
        origin_system(uow).alias("origin_system"),
        origin_token(uow).alias("origin_token"),
        F.col("msg").cast("int").alias("msg"),
        processing_system(uow).alias("processing_system"),
        processing_token(uow).alias("processing_token"),
        flags[F.col("action")].alias("flag"),
        "action",
        F.col("writer").alias("cqs"),
        queue_text(F.col("queue")).alias("queue"),
        queue_type(F.col("queue")).alias("queue_type"),
        "parts",
        "structure",
        "seq",
        "lsn",
        F.col("time_us").alias("time"),
        F.lower(F.hex("entry_id")).alias("entry_id"),
        F.lower(F.hex("uow")).alias("uow"),
        uow_text(uow).alias("uow_text"),
        "structure_first",
    )


def step_order() -> list[str]:
    """The columns that put :func:`cqs_steps`' rows in figure 72's order."""
    return ["origin", "structure_first", "structure", "seq", "lsn"]


def of_origin(steps: DataFrame, origin_hex: str) -> DataFrame:
    """The steps of the units of work whose id starts with ``origin_hex`` (lower-case
    hex: the first 16 bytes name one origin, fewer may name several)."""
    from pyspark.sql import functions as F

    return steps.where(F.col("uow").startswith(origin_hex))
