"""Torn, truncated and bit-flipped segments: the reader stops at the damage, says where,
and loses nothing before it.

Each test writes real segments with a real writer, damages the bytes on disk, and
reads the stream.  The expectation is computed from the bytes alone: every frame that
ends before the first changed byte is yielded, nothing from the frame holding that
byte on is, and the damage is reported at that frame's offset.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sharedq.log import (
    DamageReason,
    LogConfig,
    LogDamaged,
    LogStream,
    RecordType,
)
from sharedq.log.codec import FRAME_HEADER_BYTES, SEGMENT_HEADER_BYTES

from .conftest import SMALL, MakeStream, StepClock, eid, key

#: Settings under which a writer's records all stay in one segment.
ONE_SEGMENT = {"segment_bytes": 1 << 20, "staging_bytes": 1 << 22}


def _fill(stream: LogStream, writer: str, count: int, first_seq: int, step: int = 1) -> None:
    """Append ``count`` put records of varied sizes (and a checkpoint every tenth)."""
    with stream.writer(writer) as w:
        for n in range(count):
            seq = first_seq + n * step
            w.append(
                RecordType.PUT,
                op=1,
                seq=seq,
                entry_id=eid(seq),
                list_number=n % 4,
                key=key(seq),
                data=bytes([0xA0 + n % 16]) * (n * 7 % 40),
                uow=b"U" * 8,
            )
            if n % 10 == 9:
                w.log_event(RecordType.STATISTICS, payload={"n": n})


def _frame_ends(buf: bytes) -> list[int]:
    """Offsets just past each frame of a sound segment."""
    ends, pos = [], SEGMENT_HEADER_BYTES
    while pos < len(buf):
        pos += FRAME_HEADER_BYTES + int.from_bytes(buf[pos : pos + 4], "little")
        ends.append(pos)
    assert pos == len(buf)
    return ends


def _expected(original: bytes, damaged: bytes) -> tuple[int, int | None]:
    """(sound frames to read, offset of the damage or None) for damaged bytes."""
    ends = _frame_ends(original)
    first_change = next(
        (i for i, (a, b) in enumerate(zip(original, damaged, strict=False)) if a != b),
        min(len(original), len(damaged)),
    )
    if damaged == original:
        return len(ends), None
    if first_change < SEGMENT_HEADER_BYTES:
        return 0, 0
    sound = sum(1 for end in ends if end <= first_change)
    start = SEGMENT_HEADER_BYTES if sound == 0 else ends[sound - 1]
    if len(damaged) == start and original.startswith(damaged):
        return sound, None  # cut exactly between frames: a shorter log, not damage
    return sound, start


class Damaged:
    """One writer's single segment, written once, damaged and restored per example."""

    def __init__(self, root: Path) -> None:
        self.stream = LogStream(
            root,
            name="S1.LOG",
            structure="S1",
            config=LogConfig(**{**SMALL, **ONE_SEGMENT}),
            clock=StepClock(),
        )
        _fill(self.stream, "QM1", 30, 100)
        [(_, self.path)] = self.stream.layout.segments("QM1")
        self.original = self.path.read_bytes()
        self.records = list(self.stream.records())
        assert len(self.records) == 33
        assert _frame_ends(self.original)

    def check(self, damaged: bytes) -> None:
        self.path.write_bytes(damaged)
        try:
            reader = self.stream.reader()
            got = list(reader.records())
            sound, offset = _expected(self.original, damaged)
            # Nothing before the damage is lost, nothing from it on is yielded...
            assert got == self.records[:sound]
            # ...and the damage is reported with its file and position.
            if offset is None:
                assert reader.damage == []
            else:
                [damage] = reader.damage
                assert damage.path == str(self.path)
                assert damage.offset == offset
                assert damage.records_before == sound
        finally:
            self.path.write_bytes(self.original)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Damaged]:
    yield Damaged(tmp_path_factory.mktemp("damage") / "log")


def test_truncated_at_every_byte(damaged: Damaged) -> None:
    for size in range(len(damaged.original) + 1):
        damaged.check(damaged.original[:size])


def test_bit_flipped_at_every_byte(damaged: Damaged) -> None:
    for at in range(len(damaged.original)):
        flipped = bytearray(damaged.original)
        flipped[at] ^= 1 << (at % 8)
        damaged.check(bytes(flipped))


@given(data=st.data())
def test_torn_and_corrupted_tails(damaged: Damaged, data: st.DataObject) -> None:
    original = damaged.original
    at = data.draw(st.integers(0, len(original) - 1), label="at")
    kind = data.draw(st.sampled_from(["zeros", "garbage", "flip", "cut+garbage"]), label="kind")
    if kind == "zeros":  # a torn write: the file grew, the data never arrived
        bad = original[:at] + bytes(len(original) - at)
    elif kind == "garbage":
        tail = data.draw(st.binary(min_size=1, max_size=64), label="tail")
        bad = original[:at] + tail + original[at + len(tail) :]
    elif kind == "flip":
        bits = data.draw(st.integers(1, 255), label="bits")
        bad = original[:at] + bytes([original[at] ^ bits]) + original[at + 1 :]
    else:
        tail = data.draw(st.binary(min_size=1, max_size=64), label="tail")
        bad = original[:at] + tail
    damaged.check(bad)


def test_damage_is_logged_as_a_warning(damaged: Damaged, caplog: pytest.LogCaptureFixture) -> None:
    cut = damaged.original[:-3]
    with caplog.at_level(logging.WARNING, logger="sharedq.log"):
        damaged.check(cut)
    assert any("log damage" in r.message and str(damaged.path) in r.message for r in caplog.records)


def test_strict_read_raises_at_the_damage(damaged: Damaged) -> None:
    damaged.path.write_bytes(damaged.original[:-3])
    try:
        with pytest.raises(LogDamaged) as info:
            list(damaged.stream.records(strict=True))
        assert info.value.context["path"] == str(damaged.path)
        assert info.value.context["damage_reason"] == DamageReason.TRUNCATED.value
    finally:
        damaged.path.write_bytes(damaged.original)


def test_damage_in_one_segment_leaves_later_segments_and_other_writers(
    make_stream: MakeStream,
) -> None:
    # Given two writers, QM1 with several segments (and no offload)
    stream = make_stream(staging_bytes=1 << 22)
    _fill(stream, "QM1", 200, 1000, step=2)
    _fill(stream, "QM2", 50, 1001, step=2)
    segments = stream.layout.segments("QM1")
    assert len(segments) >= 3
    everything = list(stream.records())
    # When a bit flips in the middle of QM1's second segment
    _, path = segments[1]
    raw = bytearray(path.read_bytes())
    ends = _frame_ends(bytes(raw))
    raw[ends[3] + 10] ^= 0x40
    path.write_bytes(bytes(raw))
    # Then that segment's records from the fifth on are missing, and only those
    reader = stream.reader()
    got = list(reader.records())
    next_first = segments[2][0]
    lost = [r for r in everything if r.writer == "QM1" and segments[1][0] + 4 <= r.lsn < next_first]
    assert lost and got == [r for r in everything if r not in lost]
    [damage] = reader.damage
    assert (damage.path, damage.offset) == (str(path), ends[3])
    assert damage.reason is DamageReason.BAD_CHECKSUM


def test_reopening_a_damaged_segment_cuts_the_tail_and_appends_after_sound_records(
    make_stream: MakeStream,
) -> None:
    # Given a writer whose last segment ends in a torn frame (a crash mid-write)
    stream = make_stream(**ONE_SEGMENT)
    _fill(stream, "QM1", 30, 10)
    [(_, path)] = stream.layout.segments("QM1")
    raw = path.read_bytes()
    ends = _frame_ends(raw)
    torn = raw[: ends[-2] + 11]
    path.write_bytes(torn)
    before = list(stream.records())
    assert len(before) == len(ends) - 1
    # When the writer opens again and appends
    with stream.writer("QM1") as w:
        assert w.repaired is not None and w.repaired.offset == ends[-2]
        assert w.last_lsn == before[-1].lsn
        w.append(RecordType.PUT, op=1, seq=500, entry_id=eid(500), list_number=0, key=key(500))
    # Then the damaged bytes are kept aside, the new record follows the sound ones,
    # and nothing is damaged any more
    [aside] = stream.damaged_files()
    assert aside.read_bytes() == torn[ends[-2] :]
    reader = stream.reader()
    after = list(reader.records())
    assert reader.damage == []
    assert after[:-1] == before
    assert (after[-1].seq, after[-1].lsn) == (500, before[-1].lsn + 1)


def test_a_frame_being_written_by_a_live_writer_is_not_damage(make_stream: MakeStream) -> None:
    stream = make_stream(**ONE_SEGMENT)
    with stream.writer("QM1") as w:
        w.append(RecordType.PUT, op=1, seq=1, entry_id=eid(1), list_number=0, key=key(1))
        [(_, path)] = stream.layout.segments("QM1")
        sound = path.read_bytes()
        # A reader catches the next frame half written (simulated: half a frame on disk)
        with open(path, "ab") as f:
            f.write(b"\x40\x00\x00\x00\x12\x34")
        reader = stream.reader()
        assert [r.seq for r in reader.records()] == [1]
        assert reader.damage == []
        path.write_bytes(sound)
    # Once nobody writes it, the same tail is damage
    with open(path, "ab") as f:
        f.write(b"\x40\x00\x00\x00\x12\x34")
    reader = stream.reader()
    assert [r.seq for r in reader.records()] == [1]
    [damage] = reader.damage
    assert damage.reason is DamageReason.TRUNCATED and damage.offset == len(sound)


def test_a_damaged_data_set_is_reported_and_skipped(make_stream: MakeStream) -> None:
    stream = make_stream(staging_bytes=1 << 22)
    _fill(stream, "QM1", 120, 1, step=2)
    _fill(stream, "QM2", 40, 2, step=2)
    with stream.writer("QM1") as w:
        w.offload()
    [(_, dataset)] = stream.layout.dataset_files()
    everything = list(stream.records())
    raw = dataset.read_bytes()
    dataset.write_bytes(raw[: len(raw) // 2])
    reader = stream.reader()
    got = list(reader.records())
    assert got == [r for r in everything if r.writer != "QM1" or r.lsn > _last_lsn(dataset)]
    [damage] = reader.damage
    assert damage.path == str(dataset) and damage.reason is DamageReason.BAD_DATASET


def _last_lsn(dataset: Path) -> int:
    return int(dataset.name.split("-")[1].split(".")[0])


def test_damaged_closed_segment_is_offloaded_up_to_the_damage_and_set_aside(
    make_stream: MakeStream,
) -> None:
    stream = make_stream(staging_bytes=1 << 22)
    _fill(stream, "QM1", 120, 1)
    segments = stream.layout.segments("QM1")
    _, path = segments[0]
    raw = path.read_bytes()
    ends = _frame_ends(raw)
    path.write_bytes(raw[: ends[5] + 3])
    expected = [r for r in stream.records()]
    with stream.writer("QM1") as w:
        result = w.offload()
    assert [d.offset for d in result.damage] == [ends[5]]
    assert [p.name for p in stream.damaged_files()] == [f"QM1.{path.name}"]
    reader = stream.reader()
    assert list(reader.records()) == expected
    assert reader.damage == []  # reported once, by the offload; the bytes are kept aside
    assert not path.exists()
