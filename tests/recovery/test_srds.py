"""The SRDS file format: round trip, nonrecoverable objects, damage and slot choice."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sharedq.cf import ListEntry, StructureParams
from sharedq.recovery import (
    ENTRY_SCHEMA,
    EntryRow,
    InvalidRecoveryRequest,
    ListControls,
    SrdsImage,
    SrdsUnreadable,
    StructureImage,
    newest_readable,
    read_srds,
    rows_to_table,
    slot_status,
    srds_path,
    table_to_entries,
    target_slot,
    version_from_i64,
    version_to_i64,
    write_srds,
)

PARAMS = StructureParams.for_capacity("APP1", list_count=4, entries=100, elements=100)


def _entry(n: int, *, list_number: int = 1, version: int = 0, data: bytes = b"") -> ListEntry:
    return ListEntry(
        entry_id=b"\x01" + n.to_bytes(11, "big"),
        list_number=list_number,
        key=bytes([4]) + n.to_bytes(15, "big"),
        data=data or b"message %d" % n,
        adjunct=b"adj",
        secondary_key=b"ID%d" % n if n % 2 else None,
        version=version,
        elements=1,
    )


def _image(slot: int, seq: int, checkpoint_id: int, count: int = 5) -> SrdsImage:
    rows = [EntryRow("APP1", _entry(n), n, recoverable=True, queue=b"Q1") for n in range(count)]
    rows.append(
        EntryRow(
            "APP1", _entry(99, list_number=2), 0, recoverable=False, queue=b"FP.IN", uow=b"U" * 8
        )
    )
    return SrdsImage(
        pair="APP1",
        slot=slot,
        seq=seq,
        taken_at_us=1_700_000_000_000_000,
        master="QM1",
        checkpoint_id=checkpoint_id,
        structures={
            "APP1": StructureImage(
                "APP1", PARAMS, seq, (ListControls(1, 11, 3), ListControls(2, None, 0)), count + 1
            )
        },
        entries=rows_to_table(rows),
    )


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    image = _image(1, seq=500, checkpoint_id=1)
    path = write_srds(tmp_path, image)
    assert path == srds_path(tmp_path, 1)
    again = read_srds(path)
    assert (again.pair, again.slot, again.seq, again.master, again.checkpoint_id) == (
        "APP1",
        1,
        500,
        "QM1",
        1,
    )
    assert again.structures == image.structures
    assert again.entries.equals(image.entries)
    assert again.entries.schema == ENTRY_SCHEMA


def test_nonrecoverable_objects_keep_only_queue_and_uow(tmp_path: Path) -> None:
    image = read_srds(write_srds(tmp_path, _image(1, 10, 1)))
    rows = image.entries.to_pylist()
    (fast_path,) = [r for r in rows if not r["recoverable"]]
    assert fast_path["data"] is None
    assert (fast_path["queue"], fast_path["uow"]) == (b"FP.IN", b"U" * 8)
    entries = list(table_to_entries(image.entries))
    assert [e.data for e in entries] == [b"message %d" % n for n in range(5)]
    assert entries[1] == _entry(1)


def test_versions_keep_all_64_bits() -> None:
    for version in (0, 1, 2**63 - 1, 2**63, 2**64 - 1):
        assert version_from_i64(version_to_i64(version)) == version
        assert -(2**63) <= version_to_i64(version) < 2**63
    table = rows_to_table([EntryRow("S", _entry(1, version=2**64 - 2), 0, True)])
    (entry,) = table_to_entries(table)
    assert entry.version == 2**64 - 2


def test_slots_alternate_and_the_older_is_overwritten(tmp_path: Path) -> None:
    assert target_slot(slot_status(tmp_path)) == 1
    write_srds(tmp_path, _image(1, seq=100, checkpoint_id=1))
    assert target_slot(slot_status(tmp_path)) == 2
    write_srds(tmp_path, _image(2, seq=200, checkpoint_id=2))
    assert target_slot(slot_status(tmp_path)) == 1
    newest, statuses = newest_readable(tmp_path)
    assert newest is not None and newest.seq == 200
    assert [(s.slot, s.valid, s.seq) for s in statuses] == [(1, True, 100), (2, True, 200)]


def test_a_damaged_newest_srds_falls_back_to_the_older(tmp_path: Path) -> None:
    write_srds(tmp_path, _image(1, seq=100, checkpoint_id=1))
    newest_path = write_srds(tmp_path, _image(2, seq=200, checkpoint_id=2, count=300))
    raw = bytearray(newest_path.read_bytes())
    checked = 0
    for offset in range(4, len(raw) - 8, max(1, len(raw) // 40)):
        damaged = bytearray(raw)
        damaged[offset] ^= 0xFF
        newest_path.write_bytes(bytes(damaged))
        try:
            image = read_srds(newest_path)
        except SrdsUnreadable:
            chosen, statuses = newest_readable(tmp_path)
            assert chosen is not None and chosen.seq == 100
            assert not statuses[1].valid and statuses[1].problem
            checked += 1
            continue
        # A flip the formats cannot see (padding, unused bytes) must leave the data intact.
        assert image.entries.equals(_image(2, 200, 2, count=300).entries)
    assert checked > 20
    # And the next checkpoint goes to the unusable slot, not over the good one.
    assert target_slot(slot_status(tmp_path)) == 2


def test_a_truncated_or_foreign_file_is_unreadable(tmp_path: Path) -> None:
    path = write_srds(tmp_path, _image(1, 10, 1))
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(SrdsUnreadable) as info:
        read_srds(path)
    assert info.value.reason_name == "SRDS_UNREADABLE"
    assert newest_readable(tmp_path)[0] is None
    other = tmp_path / "other"
    write_srds(other, _image(2, 10, 1))
    shutil.copy(srds_path(other, 2), srds_path(tmp_path, 1))
    with pytest.raises(SrdsUnreadable, match="says it is slot 2"):
        read_srds(srds_path(tmp_path, 1))


def test_no_temporary_file_is_left_behind(tmp_path: Path) -> None:
    write_srds(tmp_path, _image(1, 10, 1))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["SRDS1.parquet"]


def test_bad_slot_and_schema_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidRecoveryRequest):
        srds_path(tmp_path, 3)
    image = _image(1, 10, 1)
    bad = SrdsImage(**{**image.__dict__, "entries": image.entries.drop_columns(["uow"])})
    with pytest.raises(InvalidRecoveryRequest):
        write_srds(tmp_path, bad)
    assert not srds_path(tmp_path, 1).exists()
