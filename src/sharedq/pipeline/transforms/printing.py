"""The log print utility: records chosen by time, type, queue, server or unit of work,
formatted one line each for people (after the redbook's Appendix B.5).

:func:`parse_types` turns what an operator types (``PUT``, ``put``, ``07``, ``0x07``)
into record type codes and refuses the rest by name, so that a typo is an error and
not an empty listing.  :func:`select_records` applies the filters and
:func:`format_records` adds the readable columns and the ``line``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sharedq.log import RecordType
from sharedq.log.records import ChangeOp, unpack_payload
from sharedq.pipeline.errors import PipelineReason, pipeline_error
from sharedq.pipeline.transforms import cqs_records as cqs
from sharedq.pipeline.transforms.messages import mq_kind

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: Columns of the printed table, in order (``line`` is the formatted record).
PRINT_COLUMNS = (
    "structure",
    "seq",
    "op",
    "writer",
    "lsn",
    "time",
    "type",
    "type_name",
    "record_name",
    "op_name",
    "kind",
    "cqs",
    "queue",
    "queue_type",
    "queue_type_name",
    "resource",
    "imsid",
    "uow",
    "origin_system",
    "origin_token",
    "processing_system",
    "processing_token",
    "message_id",
    "entry_id",
    "list_number",
    "from_list",
    "priority",
    "version",
    "payload",
    "line",
)


def parse_types(values: Iterable[str]) -> list[int]:
    """Record type codes from names (``PUT``) or hex codes (``07``, ``0x07``).

    ``BAD_ARGUMENT`` naming the value and the known types when one is neither.
    """
    codes: list[int] = []
    for value in values:
        text = value.strip()
        by_name = RecordType.__members__.get(text.upper().replace("-", "_"))
        if by_name is not None:
            codes.append(int(by_name))
            continue
        try:
            code = int(text, 16)
        except ValueError:
            code = -1
        if code not in {int(t) for t in RecordType}:
            known = ", ".join(f"{t.name} ({int(t):02X})" for t in RecordType)
            raise pipeline_error(
                PipelineReason.BAD_ARGUMENT,
                f"--type {value!r} is not a record type; known: {known}",
                value=value,
            )
        codes.append(code)
    return codes


def parse_time(value: str | None, option: str) -> datetime | None:
    """An ISO time (naive means UTC); ``BAD_ARGUMENT`` naming the option otherwise."""
    if value is None:
        return None
    from datetime import UTC

    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise pipeline_error(
            PipelineReason.BAD_ARGUMENT, f"{option} {value!r} is not an ISO time", value=value
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def parse_uow(value: str | None) -> str | None:
    """A unit-of-work id (or its prefix) as lower-case hex; ``BAD_ARGUMENT`` otherwise.

    Hex, or a CQS unit of work as ``print`` shows it (figure 71): ``IMSA/T1`` (its
    origin, the first 16 bytes: the message and all it spawned) or ``IMSA/T1:IMSB/T3``
    (one message's 32 bytes; ``-/0`` is a blank processing half).
    """
    if value is None:
        return None
    if "/" in value:
        return _cqs_uow(value)
    text = value.strip().lower().removeprefix("0x")
    if not text or len(text) % 2 or any(c not in "0123456789abcdef" for c in text):
        raise pipeline_error(
            PipelineReason.BAD_ARGUMENT, f"--uow {value!r} is not hexadecimal bytes", value=value
        )
    return text


def _cqs_uow(value: str) -> str:
    """``SYSTEM/TOKEN[:SYSTEM/TOKEN]`` as the hex of its 16 or 32 bytes."""
    raw = b""
    for half in value.strip().split(":"):
        system, _, token = half.partition("/")
        blank = system == "-"
        try:
            number = int(token)
            code = b"" if blank else system.encode("ascii")
            ok = 0 <= number < 2**64 and (blank or 1 <= len(code) <= cqs.SYSTEM_BYTES)
        except (ValueError, UnicodeEncodeError):
            ok = False
        if not ok or len(raw) >= cqs.ORIGIN_BYTES * 2:
            raise pipeline_error(
                PipelineReason.BAD_ARGUMENT,
                f"--uow {value!r} is neither hex nor SYSTEM/TOKEN[:SYSTEM/TOKEN] "
                "(a system id of 1 to 8 ASCII characters or -, a token in decimal)",
                value=value,
            )
        raw += code.ljust(cqs.SYSTEM_BYTES, b" ") + number.to_bytes(8, "big")
    return raw.hex()


@dataclass(frozen=True)
class RecordFilter:
    """Which records to print; ``None`` or empty means no condition.

    ``uow`` matches a prefix of the unit of work's hex, so that the first 16 bytes of a
    CQS UOW follow a transaction across systems (figure 71).
    """

    start: datetime | None = None
    end: datetime | None = None
    types: tuple[int, ...] = ()
    queues: tuple[str, ...] = ()
    servers: tuple[str, ...] = ()
    uow: str | None = None
    structures: tuple[str, ...] = ()


def select_records(log: DataFrame, chosen: RecordFilter) -> DataFrame:
    """The records of ``log`` that pass every condition of ``chosen``."""
    from pyspark.sql import functions as F

    condition: Column = F.lit(True)
    if chosen.start is not None:
        condition = condition & (F.col("time_us") >= F.lit(chosen.start))
    if chosen.end is not None:
        condition = condition & (F.col("time_us") <= F.lit(chosen.end))
    if chosen.types:
        condition = condition & F.col("type").isin(*chosen.types)
    if chosen.queues:
        queue = F.col("queue")
        condition = condition & (
            queue.cast("string").isin(*chosen.queues)
            | cqs.queue_text(queue).isin(*chosen.queues)
            | cqs.queue_resource(queue).isin(*chosen.queues)
        )
    if chosen.servers:
        condition = condition & F.col("writer").isin(*chosen.servers)
    if chosen.uow:
        condition = condition & F.lower(F.hex("uow")).startswith(chosen.uow)
    if chosen.structures:
        condition = condition & F.col("structure").isin(*chosen.structures)
    return log.where(condition)


def _name_map(names: dict[int, str]) -> Column:
    from itertools import chain

    from pyspark.sql import functions as F

    return F.create_map(*chain.from_iterable((F.lit(k), F.lit(v)) for k, v in names.items()))


def payload_text(payload: bytes | bytearray | None, limit: int = 120) -> str | None:
    """A payload that is not ``{"mq": kind}`` (checkpoints, statistics) as short text."""
    if payload is None:
        return None
    try:
        text = repr(unpack_payload(bytes(payload)))
    except Exception:  # a damaged payload is shown, not fatal
        text = f"<{len(payload)} bytes undecodable>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def format_records(records: DataFrame) -> DataFrame:
    """The records with readable columns and a one-line ``line`` for people.

    ``kind`` is the queue manager's meaning (decoded in the JVM); the ``payload`` of the
    other records (checkpoints, statistics) stays binary: :func:`payload_text` shows it
    where the lines are written (the driver reads them one by one anyway), so that no
    Python worker is needed.

    A CQS's records (:mod:`~sharedq.pipeline.transforms.cqs_records`) also get
    ``record_name`` (Appendix B's name of the type, on every record of a writer that is
    a CQS), ``cqs`` (the request's step, or the CQS event), the 16-byte queue name
    decoded (``queue`` as ``01.TRANA[.IMSA]``, ``queue_type``, ``queue_type_name``,
    ``resource``, ``imsid``) and the 32-byte unit of work of figure 71 (``origin_system``,
    ``origin_token``, ``processing_system``, ``processing_token``).  Which writers are
    CQSs is read from ``records`` unless they carry ``cqs_writer`` already
    (:func:`~sharedq.pipeline.transforms.cqs_records.with_cqs_writer` over the whole
    log, before a filter leaves out the records that tell).
    """
    from pyspark.sql import functions as F

    types = _name_map({int(t): t.name for t in RecordType})
    ops = _name_map({int(o): o.name.lower() for o in ChangeOp})
    titles = _name_map({int(t): name for t, name in cqs.APPENDIX_B.items()})
    kind = mq_kind(F.col("payload"))
    payload, queue, uow = F.col("payload"), F.col("queue"), F.col("uow")
    if "cqs_writer" not in records.columns:
        records = cqs.with_cqs_writer(records)
    framed = records.select(
        "structure",
        "seq",
        "op",
        "writer",
        "lsn",
        F.col("time_us").alias("time"),
        "type",
        F.coalesce(types[F.col("type").cast("int")], F.lit("?")).alias("type_name"),
        F.when(F.col("cqs_writer"), titles[F.col("type").cast("int")]).alias("record_name"),
        F.coalesce(ops[F.col("op").cast("int")], F.lit("?")).alias("op_name"),
        kind.alias("kind"),
        cqs.lead_value(payload).alias("cqs"),
        cqs.queue_text(queue).alias("queue"),
        cqs.queue_type(queue).alias("queue_type"),
        cqs.queue_type_name(queue).alias("queue_type_name"),
        cqs.queue_resource(queue).alias("resource"),
        cqs.queue_imsid(queue).alias("imsid"),
        F.lower(F.hex("uow")).alias("uow"),
        cqs.origin_system(uow).alias("origin_system"),
        cqs.origin_token(uow).alias("origin_token"),
        cqs.processing_system(uow).alias("processing_system"),
        cqs.processing_token(uow).alias("processing_token"),
        cqs.uow_text(uow).alias("uow_text"),
        F.lower(F.hex("message_id")).alias("message_id"),
        F.lower(F.hex("entry_id")).alias("entry_id"),
        "list_number",
        "from_list",
        "priority",
        "version",
        F.when(kind.isNull() & cqs.message_tag(payload).isNull(), payload).alias("payload"),
    )

    def part(label: str, column: str) -> Column:
        value = F.col(column).cast("string")
        return F.when(F.col(column).isNotNull(), F.concat(F.lit(f" {label}="), value))

    # A CQS's record shows Appendix B's name, its queue's type and its unit of work
    # decoded (figure 71); the hex of the id stays in the ``uow`` column.
    named = F.col("record_name").isNotNull()
    queue_kind = F.when(
        F.col("queue_type_name").isNotNull(),
        F.concat(F.lit(" ("), F.col("queue_type_name"), F.lit(")")),
    )
    line = F.concat(
        F.date_format("time", "yyyy-MM-dd HH:mm:ss.SSSSSS"),
        F.format_string(
            " %-8s %8d %-8s %6d %02X ",
            F.col("structure"),
            F.col("seq"),
            F.col("writer"),
            F.col("lsn"),
            F.col("type").cast("int"),
        ),
        F.when(named, F.format_string("%-36s", F.col("record_name"))).otherwise(
            F.format_string("%-24s", F.col("type_name"))
        ),
        F.concat_ws(
            "",
            F.concat(F.lit(" op="), F.col("op_name")),
            part("mq", "kind"),
            part("cqs", "cqs"),
            part("queue", "queue"),
            queue_kind,
            F.when(
                F.col("uow_text").isNotNull(), F.concat(F.lit(" uow="), F.col("uow_text"))
            ).otherwise(part("uow", "uow")),
            part("msgid", "message_id"),
            part("entry", "entry_id"),
            part("list", "list_number"),
            part("from", "from_list"),
            part("prio", "priority"),
            part("version", "version"),
        ),
    )
    return framed.withColumn("line", line).select(*PRINT_COLUMNS)


def type_counts(records: DataFrame) -> DataFrame:
    """How many records of each type (``type``, ``type_name``, ``count``)."""
    return records.groupBy("type", "type_name").count().orderBy("type")
