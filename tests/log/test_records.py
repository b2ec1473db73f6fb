"""The record schema: one definition, documented in one place, checked on append."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest

from sharedq.log import (
    ARROW_SCHEMA,
    FIELDS,
    ChangeOp,
    InvalidLogRequest,
    LogPosition,
    LogRecord,
    RecordType,
    pack_payload,
    unpack_payload,
)
from sharedq.log.records import check_values

DOCS = Path(__file__).resolve().parents[2] / "docs" / "log-records.md"


def test_record_tuple_and_arrow_schema_follow_fields() -> None:
    names = [f.name for f in FIELDS]
    assert list(LogRecord._fields) == names
    assert ARROW_SCHEMA.names == names
    assert names[:4] == list(LogPosition._fields), "the sort key is the record's prefix"
    for field in FIELDS:
        assert ARROW_SCHEMA.field(field.name).type == field.arrow_type


def test_docs_list_every_field_in_order_with_its_type() -> None:
    # Given the schema document's field table
    section = DOCS.read_text().split("\n## Fields\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| `([^`]+)` \|", section, re.MULTILINE)
    # Then it lists exactly the fields, in order, with their Arrow types
    assert [name for name, _ in rows] == [f.name for f in FIELDS]
    for (name, arrow), field in zip(rows, FIELDS, strict=True):
        assert arrow == str(field.arrow_type), name


def test_docs_list_every_record_type_with_its_code() -> None:
    text = DOCS.read_text()
    for record_type in RecordType:
        assert re.search(rf"\| `{record_type.value:02X}` \| `{record_type.name}` \|", text), (
            record_type
        )


def test_appendix_b_codes() -> None:
    assert RecordType.CONNECT == 0x03
    assert RecordType.PUT == 0x07 and RecordType.READ == 0x08
    assert RecordType.MOVE == 0x0B and RecordType.DELETE == 0x0D
    assert RecordType.SHUTDOWN == 0x10 and RecordType.SYSTEM_CHECKPOINT == 0x32
    assert RecordType.STRUCTURE_CHECKPOINT == 0x42 and RecordType.STATISTICS == 0x60
    assert RecordType.PUT.carries_uow and not RecordType.CONNECT.carries_uow


def test_positions_sort_changes_before_other_records_of_their_seq() -> None:
    change = LogPosition(5, ChangeOp.MOVE, "QM2", 9)
    event = LogPosition(5, ChangeOp.NONE, "QM1", 1)
    later = LogPosition(6, ChangeOp.WRITE, "QM1", 2)
    assert sorted([later, event, change]) == [change, event, later]


def test_payload_round_trip() -> None:
    value = {"lists": [1, 2], "token": b"\x00\x01", "name": "CQS1", 7: None}
    assert unpack_payload(pack_payload(value)) == value


def _values(**changes: object) -> list[object]:
    record = LogRecord(1, int(ChangeOp.WRITE), "QM1", 1, int(RecordType.PUT), "S1", 0)
    return list(record._replace(**changes))


@pytest.mark.parametrize(
    "changes",
    [
        {"writer": None},
        {"key": b"short"},
        {"entry_id": b"x" * 13},
        {"uow": b"u" * 33},
        {"version": -1},
        {"version": 2**64},
        {"type": 0x99},
        {"op": 6},
        {"data": "text"},
        {"at_head": 1},
        {"priority": 2**15},
        {"list_number": -1},
    ],
)
def test_check_values_refuses_what_parquet_or_the_schema_cannot_hold(
    changes: dict[str, object],
) -> None:
    with pytest.raises(InvalidLogRequest) as info:
        check_values(_values(**changes))
    assert info.value.reason_name == "BAD_RECORD"


def test_check_values_accepts_the_extremes() -> None:
    check_values(_values(version=2**64 - 1, uow=b"u" * 32, key=bytes(16), limit=-1))


def test_arrow_schema_is_spark_friendly() -> None:
    # No unsigned types (Spark has none); time as a UTC timestamp.
    for field in ARROW_SCHEMA:
        assert not pa.types.is_unsigned_integer(field.type), field.name
    assert ARROW_SCHEMA.field("time_us").type == pa.timestamp("us", tz="UTC")
