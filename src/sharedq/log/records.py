"""The log record: its types, its fields, and its Arrow schema, defined once.

Everything that stores or reads log records takes the field list from here: the
staging codec packs a record as a msgpack array in :data:`FIELDS` order, the offload
writes Parquet with :data:`ARROW_SCHEMA`, and the Spark pipeline reads those Parquet
files with the same names and types.  ``docs/log-records.md`` documents the fields;
a test keeps it in step with :data:`FIELDS`.

A record carries two things at once (one flat row, so that Spark sees plain nullable
columns):

* what replay needs to repeat a structure change exactly: ``op`` and the entry's id,
  list, key, secondary key, version, data, adjunct, position and list controls;
* what tracking needs: the Appendix B record type, the writer, the structure and its
  sequence number, the writer's own log sequence number, the time, and the unit of
  work, queue and message the change was made for.

Ordering.  Records sort by :class:`LogPosition`, the first four fields
``(seq, op, writer, lsn)``: a structure change carries the change's own sequence
number; a record that is not a change carries the last sequence number its writer
observed and ``op = ChangeOp.NONE`` (127), which sorts it after the change with that
number; ``(writer, lsn)`` breaks the remaining ties and is unique.  Because the key is
a prefix of the record, a list of records sorts by plain tuple comparison.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Any, NamedTuple

import msgpack

from sharedq.log.errors import LogReason, log_error

if TYPE_CHECKING:
    import pyarrow as pa

#: How far a writer's lsn jumps past records it cannot account for (a segment that
#: vanished, a logging structure that lost its copy): beyond any number of records
#: it could have written meanwhile, so that no lsn is ever given twice.
LSN_JUMP = 2**40

#: Version of the record layout, written in every segment header and data set footer.
SCHEMA_VERSION = 1
#: The most bytes of a unit-of-work id (the redbook's 32-byte CQS form; the patent's
#: MQ id is 8 bytes).
MAX_UOW = 32
#: The ``limit`` value that means "no limit" in a list-controls record.
LIMIT_NONE = -1
#: The largest version number (versions are 8-byte unsigned, as in ``sharedq.cf``).
MAX_VERSION = 2**64 - 1


class RecordType(IntEnum):
    """What a record means, with the codes of the redbook's Appendix B (Table 1).

    ``UNLOCK``, ``CHANGE``, ``COMMIT`` and ``DEPTH_EVENT`` are sharedq's: Appendix B
    lists no unlock record although unlock is a CQS request, no record for list-control
    or in-place updates (the MQ queue manager's list header control entry), no syncpoint
    record (a queue manager's commit decision between the two calls of commit, which
    the patent's restart reads from the owner's log), and no queue depth event (seed
    004, an MQ notion).  They take codes the table leaves unused, next to their
    neighbours: 0C between move and delete, 0E and 0F after it, 61 after statistics.
    """

    CONNECT = 0x03
    DISCONNECT = 0x04
    PUT = 0x07
    READ = 0x08
    MOVE = 0x0B
    UNLOCK = 0x0C
    DELETE = 0x0D
    CHANGE = 0x0E
    COMMIT = 0x0F
    SHUTDOWN = 0x10
    SYSTEM_CHECKPOINT = 0x32
    STRUCTURE_INITIALIZATION = 0x40
    STRUCTURE_CHECKPOINT = 0x42
    REBUILD = 0x43
    OVERFLOW = 0x44
    STATISTICS = 0x60
    DEPTH_EVENT = 0x61

    @property
    def carries_uow(self) -> bool:
        """Whether records of this type carry a unit-of-work id (redbook §B.2)."""
        return self in _UOW_TYPES


_UOW_TYPES = frozenset(
    {
        RecordType.PUT,
        RecordType.READ,
        RecordType.MOVE,
        RecordType.UNLOCK,
        RecordType.DELETE,
        RecordType.COMMIT,
    }
)


class ChangeOp(IntEnum):
    """The structure change a record repeats on replay; ``NONE`` for other records.

    ``NONE`` is the largest ``int8`` so that a record that is not a change sorts after
    the change whose sequence number it carries.
    """

    WRITE = 1
    MOVE = 2
    DELETE = 3
    UPDATE = 4
    LIST_CONTROLS = 5
    NONE = 127


@dataclass(frozen=True)
class Field:
    """One column of the record: name, Arrow type, whether it may be null, and meaning.

    The type is kept by its name (``str()`` of the pyarrow type: ``"int64"``,
    ``"timestamp[us, tz=UTC]"``) so that defining the fields imports no pyarrow
    (``sharedq.log``'s docstring says why); :attr:`arrow_type` is the type itself.
    """

    name: str
    type_name: str
    nullable: bool
    meaning: str

    @property
    def arrow_type(self) -> pa.DataType:
        """The column's pyarrow type (imports pyarrow)."""
        import pyarrow as pa

        if self.type_name == _TIME_TYPE:
            return pa.timestamp("us", tz="UTC")
        return pa.type_for_alias(self.type_name)


_TIME_TYPE = "timestamp[us, tz=UTC]"


#: The record's fields, in order: msgpack array order, Parquet column order.
FIELDS: tuple[Field, ...] = (
    Field(
        "seq",
        "int64",
        False,
        "structure sequence number: the change's, or the "
        "last one the writer observed for a record that is not a change",
    ),
    Field(
        "op",
        "int8",
        False,
        "ChangeOp: 1 write, 2 move, 3 delete, 4 update, 5 list controls, 127 none (not a change)",
    ),
    Field("writer", "string", False, "the server or queue manager that wrote it"),
    Field(
        "lsn",
        "int64",
        False,
        "the writer's log sequence number, from 1, "
        "strictly increasing across its segments and restarts",
    ),
    Field("type", "int16", False, "RecordType, the Appendix B code"),
    Field("structure", "string", False, "the structure the record is about"),
    Field("time_us", _TIME_TYPE, False, "when it was written, microseconds since 1970 UTC"),
    Field("entry_id", "binary", True, "the list entry's 12-byte id"),
    Field(
        "list_number",
        "int32",
        True,
        "the list the entry is on after the change "
        "(delete: the list it was on; list controls: the list changed)",
    ),
    Field("from_list", "int32", True, "move: the list the entry came from, when known"),
    Field(
        "key",
        "binary",
        True,
        "the entry's 16-byte key after the change; null on a move that kept its key",
    ),
    Field("secondary_key", "binary", True, "the secondary key, when set_secondary_key"),
    Field(
        "set_secondary_key",
        "bool",
        True,
        "true: the entry's secondary key "
        "becomes secondary_key (null clears it); null or false: unchanged",
    ),
    Field(
        "version",
        "int64",
        True,
        "the entry's version after the change, an 8-byte "
        "unsigned value stored as two's complement; null: unchanged",
    ),
    Field("increment_version", "bool", True, "the change added one to the version"),
    Field(
        "data",
        "binary",
        True,
        "write: the entry's data; update: the new data, null when unchanged",
    ),
    Field(
        "adjunct",
        "binary",
        True,
        "write: the adjunct; update: the new adjunct, null when unchanged",
    ),
    Field(
        "at_head",
        "bool",
        True,
        "write or move placed the entry at the head of "
        "its sublist of equal keys (false or null: the tail)",
    ),
    Field(
        "limit",
        "int64",
        True,
        "list controls: the new list limit, -1 for none, null when unchanged",
    ),
    Field(
        "increment_authority",
        "bool",
        True,
        "update or list controls added one to the list's authority",
    ),
    Field(
        "ignore_limit",
        "bool",
        True,
        "write or move overrode the target list's limit (a backout)",
    ),
    Field("uow", "binary", True, "unit-of-work id, up to 32 bytes"),
    Field("queue", "binary", True, "queue name (CQS: the 16-byte name; MQ: UTF-8)"),
    Field("message_id", "binary", True, "message id"),
    Field("correl_id", "binary", True, "correlation id"),
    Field("priority", "int16", True, "message priority"),
    Field(
        "persistent",
        "bool",
        True,
        "message persistence (nonpersistent "
        "messages are never logged, so false does not occur in the log)",
    ),
    Field(
        "payload",
        "binary",
        True,
        "msgpack: type-specific content, e.g. the restart state of a system checkpoint",
    ),
)

#: Field names in order.
FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in FIELDS)
if TYPE_CHECKING:
    #: The Arrow schema of log data sets (and of the Spark pipeline's input), made
    #: (and pyarrow imported) at its first use by the module's ``__getattr__``.
    ARROW_SCHEMA: pa.Schema


def __getattr__(name: str) -> Any:
    """Make :data:`ARROW_SCHEMA` at its first use: importing pyarrow costs a process
    0.2 s and 90 MB, and a writer that only stages records never needs it."""
    if name != "ARROW_SCHEMA":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import pyarrow as pa

    schema = pa.schema(
        [pa.field(f.name, f.arrow_type, nullable=f.nullable) for f in FIELDS],
        metadata={"sharedq.log.schema_version": str(SCHEMA_VERSION)},
    )
    globals()["ARROW_SCHEMA"] = schema
    return schema


class LogPosition(NamedTuple):
    """Where a record stands in the merged stream: the sort key of every record.

    The first four fields of a :class:`LogRecord`; comparable with records' prefixes
    and with each other.  A system checkpoint's position is what a server keeps in its
    checkpoint file to warm start from.
    """

    seq: int
    op: int
    writer: str
    lsn: int


class LogRecord(NamedTuple):
    """One log record.  See :data:`FIELDS` and ``docs/log-records.md`` for each field.

    Integer codes (``op``, ``type``) are kept as plain ints so that decoding a million
    records costs no enum lookups; :attr:`record_type` and :attr:`change_op` give the
    enums.  ``version`` is unsigned here (two's complement only in Parquet).
    """

    seq: int
    op: int
    writer: str
    lsn: int
    type: int
    structure: str
    time_us: int
    entry_id: bytes | None = None
    list_number: int | None = None
    from_list: int | None = None
    key: bytes | None = None
    secondary_key: bytes | None = None
    set_secondary_key: bool | None = None
    version: int | None = None
    increment_version: bool | None = None
    data: bytes | None = None
    adjunct: bytes | None = None
    at_head: bool | None = None
    limit: int | None = None
    increment_authority: bool | None = None
    ignore_limit: bool | None = None
    uow: bytes | None = None
    queue: bytes | None = None
    message_id: bytes | None = None
    correl_id: bytes | None = None
    priority: int | None = None
    persistent: bool | None = None
    payload: bytes | None = None

    @property
    def position(self) -> LogPosition:
        return LogPosition(self.seq, self.op, self.writer, self.lsn)

    @property
    def record_type(self) -> RecordType:
        return RecordType(self.type)

    @property
    def change_op(self) -> ChangeOp:
        return ChangeOp(self.op)

    @property
    def is_change(self) -> bool:
        """Whether replay applies this record to the structure."""
        return self.op != ChangeOp.NONE

    @property
    def time(self) -> _dt.datetime:
        return _EPOCH + _dt.timedelta(microseconds=self.time_us)

    def payload_value(self) -> Any:
        """The payload unpacked, or ``None`` when there is none."""
        return None if self.payload is None else unpack_payload(self.payload)


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)

if LogRecord._fields != FIELD_NAMES:  # pragma: no cover - caught by any import
    raise AssertionError("LogRecord and FIELDS disagree")

#: The number of fields of a record.
FIELD_COUNT = len(FIELDS)


def pack_payload(value: Any) -> bytes:
    """Encode a payload (any msgpack-able value: dicts, lists, bytes, str, numbers)."""
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


class PackedPayload:
    """A payload packed once (:func:`pack_payload`) for the many records that carry it.

    An append given one writes its bytes as they are: the record is the same as with
    the value itself, without packing it again for each record (a server's few
    meanings, ``{"mq": "put"}`` and the like, are in almost every record it writes).
    """

    __slots__ = ("packed", "value")

    def __init__(self, value: Any) -> None:
        self.value = value
        self.packed = pack_payload(value)

    def __repr__(self) -> str:
        return f"PackedPayload({self.value!r})"


def unpack_payload(payload: bytes) -> Any:
    """Decode a payload written by :func:`pack_payload`."""
    return msgpack.unpackb(payload, raw=False, strict_map_key=False)


# -- checking values before they are written ------------------------------------------

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
#: Exact or maximum byte lengths of binary fields: (least, most).
_BYTE_LENGTHS = {
    "entry_id": (12, 12),
    "key": (16, 16),
    "secondary_key": (0, 32),
    "data": (0, 65536),
    "adjunct": (0, 64),
    "uow": (0, MAX_UOW),
    "queue": (0, 64),
    "message_id": (0, 64),
    "correl_id": (0, 64),
}
#: Tighter integer ranges than the column type gives: (least, most).
_INT_LIMITS = {
    "seq": (0, 2**63 - 1),
    "lsn": (1, 2**63 - 1),
    "time_us": (0, 2**63 - 1),
    "list_number": (0, 2**31 - 1),
    "from_list": (0, 2**31 - 1),
    "version": (0, MAX_VERSION),
    "limit": (LIMIT_NONE, 2**63 - 1),
}
_CODES = {"op": frozenset(int(o) for o in ChangeOp), "type": frozenset(int(t) for t in RecordType)}


def _check_of(field: Field) -> tuple[type, int, int, frozenset[int] | None]:
    arrow = field.type_name
    if arrow == "binary":
        least, most = _BYTE_LENGTHS.get(field.name, (0, 16 * 1024 * 1024))
        return bytes, least, most, None
    if arrow == "string":
        return str, 1, 64, None
    if arrow == "bool":
        return bool, 0, 0, None
    least, most = _INT_LIMITS.get(field.name, _INT_RANGES.get(arrow, (0, 2**63 - 1)))
    return int, least, most, _CODES.get(field.name)


_CHECKS: list[tuple[Field, type, int, int, frozenset[int] | None]] = [
    (field, *_check_of(field)) for field in FIELDS
]


#: Every field's index.
ALL_FIELDS = range(len(FIELDS))
_REQUIRED = frozenset(index for index, field in enumerate(FIELDS) if not field.nullable)


def check_values(values: list[Any] | tuple[Any, ...], indexes: Iterable[int] = ALL_FIELDS) -> None:
    """Raise ``InvalidLogRequest`` unless ``values`` (at ``indexes``) are storable.

    Checked at append time because a value of the wrong type or size would otherwise
    be found only when offload converts it to Parquet, long after the caller left.
    A writer's few sets of ``indexes`` (tuples and ranges) are checked by a function
    made for each (:func:`_checker`): the same checks, unrolled; the loop below runs
    only to name what failed.
    """
    known = _checkers.get(id(indexes))
    if known is None or known[0] is not indexes:
        known = _remember_checker(indexes)
    if known[1] is not None and known[1](values):
        return
    problem = None
    for index in indexes:
        value: Any = values[index]
        if value is None:
            if index in _REQUIRED:
                field = FIELDS[index]
                problem = "is required"
                break
            continue
        field, kind, least, most, codes = _CHECKS[index]
        if type(value) is not kind:
            problem = f"must be {kind.__name__}, not {type(value).__name__}"
            break
        checked: Any = value  # (mypy narrows ``value`` to ``object`` above)
        if kind is bytes or kind is str:
            if not least <= len(checked) <= most:
                problem = f"must be {least} to {most} long, not {len(checked)}"
                break
        elif kind is int and (
            not least <= checked <= most or (codes is not None and checked not in codes)
        ):
            problem = f"{checked} is out of range"
            break
    if problem is not None:
        raise log_error(LogReason.BAD_RECORD, f"field {field.name} {problem}", field=field.name)


Checker = Callable[[Sequence[Any]], bool]
#: The checker of each set of indexes seen, by its id: the set itself (kept alive, so
#: that its id is not another's) and its checker (``None``: the loop checks it).
_checkers: dict[int, tuple[object, Checker | None]] = {}
_CHECKERS_KEPT = 64


def checker(indexes: tuple[int, ...] | range) -> Checker:
    """The unrolled check of the fields at ``indexes``: true when :func:`check_values`
    would pass them (call that to learn what failed).  For a caller that checks the
    same fields of every record it writes, without :func:`check_values`' look-up."""
    made = _remember_checker(indexes)[1]
    assert made is not None
    return made


def _remember_checker(indexes: Iterable[int]) -> tuple[object, Checker | None]:
    # Only sets that cannot change (a list could, under the same id) get a checker.
    made = _checker(indexes) if isinstance(indexes, (tuple, range)) else None
    known = (indexes, made)
    global _checkers
    checkers = _checkers if len(_checkers) < _CHECKERS_KEPT else {}
    checkers[id(indexes)] = known
    _checkers = checkers
    return known


def _checker(indexes: Iterable[int]) -> Checker:
    """A function of ``values`` that is true when every field at ``indexes`` passes
    :func:`check_values`'s checks (the same, written out field by field)."""
    lines = ["def check(values):"]
    names: dict[str, Any] = {}
    for index in indexes:
        _, kind, least, most, codes = _CHECKS[index]
        lines.append(f"    v = values[{index}]")
        lines.append("    if v is None:")
        lines.append("        return False" if index in _REQUIRED else "        pass")
        if kind is bytes or kind is str:
            lines.append(
                f"    elif type(v) is not {kind.__name__} or not {least} <= len(v) <= {most}:"
            )
        elif kind is bool:
            lines.append("    elif type(v) is not bool:")
        else:
            test = f"type(v) is not int or not {least} <= v <= {most}"
            if codes is not None:
                names[f"codes{index}"] = codes
                test += f" or v not in codes{index}"
            lines.append(f"    elif {test}:")
        lines.append("        return False")
    lines.append("    return True")
    exec("\n".join(lines), names)  # our own text, from FIELDS
    check: Checker = names["check"]
    return check
