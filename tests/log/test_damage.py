"""Torn, truncated, bit-flipped and missing log files: the reader skips damage, reads
every sound record around it, says where it was, and the continuity check names
exactly which of the writer's records are missing and which file should hold them.

Each test writes real segments with a real writer, damages the bytes on disk (or
kills the writer for real), and reads the stream.  Expectations are computed from
the bytes alone: a frame that holds a changed byte, or ends past a cut, is lost;
every other frame is read.
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
    LogReason,
    LogStream,
    RecordType,
)
from sharedq.log.codec import SEGMENT_HEADER_BYTES
from sharedq.log.records import LSN_JUMP

from .helpers import SMALL, MakeStream, crashed_writer, eid, fill, frames, key, step_clock

#: Settings under which a writer's records all stay in one segment.
ONE_SEGMENT = {"segment_bytes": 1 << 20, "staging_bytes": 1 << 22}


def _runs(numbers: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], n)
        else:
            runs.append((n, n))
    return runs


class Damaged:
    """One cleanly closed writer's single segment, damaged and restored per example."""

    def __init__(self, root: Path) -> None:
        self.stream = LogStream(
            root,
            name="S1.LOG",
            structure="S1",
            config=LogConfig(**{**SMALL, **ONE_SEGMENT}),
            clock=step_clock(),
        )
        fill(self.stream, "QM1", 30, 100)
        [(_, self.path)] = self.stream.layout.segments("QM1")
        self.original = self.path.read_bytes()
        self.records = list(self.stream.records())
        assert len(self.records) == 33
        self.frames = frames(self.original)
        assert [r.lsn for r in self.records] == list(range(1, 34))

    def check(self, damaged: bytes) -> None:
        self.path.write_bytes(damaged)
        try:
            self._check(damaged)
        finally:
            self.path.write_bytes(self.original)

    def _check(self, damaged: bytes) -> None:
        original, size = self.original, len(damaged)
        changed = [i for i in range(min(len(original), size)) if original[i] != damaged[i]]
        lost = [
            n
            for n, (start, end) in enumerate(self.frames)
            if end > size or any(start <= c < end for c in changed)
        ]
        header_changed = any(c < SEGMENT_HEADER_BYTES for c in changed) or size < 8
        if header_changed and size < SEGMENT_HEADER_BYTES:
            lost = list(range(len(self.frames)))
        reader = self.stream.reader()
        got = list(reader.records())
        # Every frame the damage did not touch is read, before and after it...
        assert got == [r for n, r in enumerate(self.records) if n not in lost]
        # ...the damage is reported with its file and where it starts...
        boundaries = {SEGMENT_HEADER_BYTES, *(end for _, end in self.frames)}
        clean_cut = not changed and size in boundaries
        if not header_changed and (not lost or clean_cut):
            assert reader.damage == []
        else:
            assert reader.damage and all(d.path == str(self.path) for d in reader.damage)
            first = 0 if header_changed else self.frames[lost[0]][0]
            assert reader.damage[0].offset == first
        # ...and the check names every lost record of the writer, which closed cleanly
        # at lsn 33, and the file that should hold it.
        coverage = self.stream.check()
        assert [(g.first_lsn, g.last_lsn) for g in coverage.gaps] == _runs([n + 1 for n in lost])
        assert all(g.writer == "QM1" and str(self.path) in g.files for g in coverage.gaps)


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


def test_one_flipped_byte_costs_one_record_and_the_check_names_it(
    make_stream: MakeStream,
) -> None:
    # Given two writers, QM1 with several segments (and no offload)
    stream = make_stream(staging_bytes=1 << 22)
    fill(stream, "QM1", 200, 1000, step=2)
    fill(stream, "QM2", 50, 1001, step=2)
    segments = stream.layout.segments("QM1")
    assert len(segments) >= 3
    everything = list(stream.records())
    assert stream.check().gaps == []
    # When a bit flips in the fifth frame of QM1's second segment
    first, path = segments[1]
    raw = bytearray(path.read_bytes())
    spans = frames(bytes(raw))
    raw[spans[4][0] + 10] ^= 0x40
    path.write_bytes(bytes(raw))
    # Then that one record is missing, and only it: reading went on after it
    reader = stream.reader()
    got = list(reader.records())
    [lost] = [r for r in everything if r.writer == "QM1" and r.lsn == first + 4]
    assert got == [r for r in everything if r is not lost]
    [damage] = reader.damage
    assert (damage.path, damage.offset) == (str(path), spans[4][0])
    assert damage.reason is DamageReason.BAD_CHECKSUM
    assert damage.resumed_at == spans[5][0]
    # And the check says which record, of which writer, in which file
    [gap] = stream.check().gaps
    assert (gap.writer, gap.first_lsn, gap.last_lsn) == ("QM1", first + 4, first + 4)
    assert gap.files == (str(path),) and "bad checksum" in gap.why
    assert str(gap).startswith(f"writer QM1: lsn {first + 4} missing")


def test_damage_before_where_recovery_starts_loses_nothing(make_stream: MakeStream) -> None:
    # Given a writer whose first segment is damaged
    stream = make_stream(staging_bytes=1 << 22)
    fill(stream, "QM1", 200, 1000)
    segments = stream.layout.segments("QM1")
    first, path = segments[0]
    raw = bytearray(path.read_bytes())
    raw[frames(bytes(raw))[2][0] + 9] ^= 1
    path.write_bytes(bytes(raw))
    # When recovery needs only what comes after that segment (its SRDS covers it)
    starts = {"QM1": segments[1][0] - 1}
    coverage = stream.plan().check(starts=starts, needed_seq={"S1": 0})
    # Then nothing is missing, and the report says what was passed over and why
    assert coverage.gaps == []
    assert any("before lsn" in note and "QM1" in note for note in coverage.skipped)
    # But a recovery from the start would miss one record
    [gap] = stream.plan().check(starts={}, needed_seq={"S1": 0}).gaps
    assert (gap.first_lsn, gap.last_lsn) == (first + 2, first + 2)


def test_a_torn_last_frame_of_a_writer_that_died_is_never_written(
    make_stream: MakeStream,
) -> None:
    # Given a writer killed mid-write: its last frame half on disk
    stream = make_stream(**ONE_SEGMENT)
    crashed_writer(stream.root)
    [(_, path)] = stream.layout.segments("QM1")
    sound = path.read_bytes()
    with open(path, "ab") as f:
        f.write(b"\x40\x00\x00\x00\x12\x34\x56")
    # Then readers read all 30 records and see no damage and no gap: the frame being
    # written was never acknowledged
    reader = stream.reader()
    assert [r.lsn for r in reader.records()] == list(range(1, 31))
    assert reader.damage == []
    coverage = stream.check()
    assert coverage.gaps == []
    assert any("torn last frame" in note for note in coverage.skipped)
    # When the writer opens again it cuts the torn frame off, keeps it aside, and
    # appends right after the sound records, reusing the lsn never written
    with stream.writer("QM1") as w:
        assert w.repaired is not None and w.repaired.offset == len(sound)
        assert w.found_damage == []
        w.append(RecordType.PUT, op=1, seq=500, entry_id=eid(500), list_number=0, key=key(500))
    [aside] = stream.damaged_files()
    assert aside.read_bytes() == b"\x40\x00\x00\x00\x12\x34\x56"
    assert stream.layout.segments("QM1") == [(1, path)]
    reader = stream.reader()
    assert [r.lsn for r in reader.records()] == list(range(1, 32))
    assert reader.damage == [] and stream.check().gaps == []


def test_a_cleanly_closed_writers_damaged_tail_is_damage_and_is_not_cut(
    make_stream: MakeStream,
) -> None:
    # Given a writer that closed cleanly, whose segment lost its last frames later
    stream = make_stream(**ONE_SEGMENT)
    fill(stream, "QM1", 30, 10)
    [(_, path)] = stream.layout.segments("QM1")
    raw = path.read_bytes()
    spans = frames(raw)
    path.write_bytes(raw[: spans[-3][0] + 11])
    # Then the lost records are damage and a gap, named with the file
    reader = stream.reader()
    assert len(list(reader.records())) == 30
    [damage] = reader.damage
    assert damage.at_tail and damage.offset == spans[-3][0]
    [gap] = stream.check().gaps
    assert (gap.first_lsn, gap.last_lsn) == (31, 33) and str(path) in gap.files
    # When the writer opens again, it leaves the damage for the readers, starts a new
    # segment, and gives no lsn twice
    with stream.writer("QM1") as w:
        assert w.repaired is None and [d.offset for d in w.found_damage] == [spans[-3][0]]
        position = w.append(RecordType.PUT, op=1, seq=900, entry_id=eid(900), list_number=0)
    assert position is not None and position.lsn == 34
    assert [first for first, _ in stream.layout.segments("QM1")] == [1, 34]
    assert path.read_bytes() == raw[: spans[-3][0] + 11]
    [gap] = stream.check().gaps
    assert (gap.first_lsn, gap.last_lsn) == (31, 33)


def test_damage_inside_a_died_writers_segment_makes_it_start_a_new_one(
    make_stream: MakeStream,
) -> None:
    stream = make_stream(**ONE_SEGMENT)
    crashed_writer(stream.root)
    [(_, path)] = stream.layout.segments("QM1")
    raw = bytearray(path.read_bytes())
    spans = frames(bytes(raw))
    raw[spans[10][0] + 12] ^= 0x10
    path.write_bytes(bytes(raw))
    with stream.writer("QM1") as w:
        assert w.repaired is None and [d.offset for d in w.found_damage] == [spans[10][0]]
        w.append(RecordType.PUT, op=1, seq=900, entry_id=eid(900), list_number=0)
    assert [first for first, _ in stream.layout.segments("QM1")] == [1, 31]
    reader = stream.reader()
    assert [r.lsn for r in reader.records()] == [n for n in range(1, 32) if n != 11]
    [gap] = stream.check().gaps
    assert (gap.first_lsn, gap.last_lsn) == (11, 11)


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
        assert stream.check().gaps == []
        path.write_bytes(sound)


def test_damage_in_a_live_writers_segment_makes_it_move_on(make_stream: MakeStream) -> None:
    # Given a running writer whose open segment is damaged under it
    stream = make_stream(**ONE_SEGMENT)
    with stream.writer("QM1") as w:
        for n in range(1, 11):
            w.append(RecordType.PUT, op=1, seq=n, entry_id=eid(n), list_number=0, key=key(n))
        w.commit()
        [(_, path)] = stream.layout.segments("QM1")
        raw = bytearray(path.read_bytes())
        spans = frames(bytes(raw))
        raw[spans[3][0] + 9] ^= 0x01
        with open(path, "r+b") as f:
            f.write(bytes(raw))
        # When a reader finds it
        reader = stream.reader()
        assert len(list(reader.records())) == 9 and len(reader.damage) == 1
        # Then the writer's next sync starts a new segment: nothing more goes after it
        w.append(RecordType.PUT, op=1, seq=11, entry_id=eid(11), list_number=0, key=key(11))
        w.commit()
        w.append(RecordType.PUT, op=1, seq=12, entry_id=eid(12), list_number=0, key=key(12))
        w.commit()
        assert [first for first, _ in stream.layout.segments("QM1")] == [1, 12]
        assert not stream.layout.roll_request("QM1").exists()
    assert [r.seq for r in stream.records()] == [n for n in range(1, 13) if n != 4]


def test_a_damaged_data_set_is_reported_and_named_in_the_gap(make_stream: MakeStream) -> None:
    stream = make_stream(staging_bytes=1 << 22)
    fill(stream, "QM1", 120, 1, step=2)
    fill(stream, "QM2", 40, 2, step=2)
    with stream.writer("QM1") as w:
        w.offload()
    [(name, dataset)] = stream.layout.dataset_files()
    everything = list(stream.records())
    raw = dataset.read_bytes()
    dataset.write_bytes(raw[: len(raw) // 2])
    reader = stream.reader()
    got = list(reader.records())
    assert got == [r for r in everything if r.writer != "QM1" or r.lsn > name.last_lsn]
    [damage] = reader.damage
    assert damage.path == str(dataset) and damage.reason is DamageReason.BAD_DATASET
    [gap] = stream.check().gaps
    assert (gap.writer, gap.first_lsn, gap.last_lsn) == ("QM1", 1, name.last_lsn)
    assert gap.files == (str(dataset),) and "unreadable" in gap.why


def test_a_flipped_byte_in_a_data_set_page_is_caught_by_its_checksum(
    make_stream: MakeStream,
) -> None:
    stream = make_stream(staging_bytes=1 << 22)
    fill(stream, "QM1", 120, 1)
    with stream.writer("QM1") as w:
        w.offload()
    [(name, dataset)] = stream.layout.dataset_files()
    raw = bytearray(dataset.read_bytes())
    raw[len(raw) // 3] ^= 0x20  # inside the data pages, far from the footer
    dataset.write_bytes(bytes(raw))
    [gap] = stream.check().gaps
    assert (gap.first_lsn, gap.last_lsn) == (1, name.last_lsn) and gap.files == (str(dataset),)


def test_a_damaged_closed_segment_is_offloaded_with_what_it_lacks_recorded(
    make_stream: MakeStream,
) -> None:
    stream = make_stream(staging_bytes=1 << 22)
    fill(stream, "QM1", 120, 1)
    segments = stream.layout.segments("QM1")
    first, path = segments[0]
    raw = bytearray(path.read_bytes())
    spans = frames(bytes(raw))
    raw[spans[5][0] + 9] ^= 0x08
    path.write_bytes(bytes(raw))
    expected = list(stream.records())
    with stream.writer("QM1") as w:
        result = w.offload()
    assert [d.offset for d in result.damage] == [spans[5][0]]
    assert [p.name for p in stream.damaged_files()] == [f"QM1.{path.name}"]
    reader = stream.reader()
    assert list(reader.records()) == expected
    assert reader.damage == []  # reported once, by the offload; the bytes are kept aside
    assert not path.exists()
    [gap] = stream.check().gaps
    assert (gap.first_lsn, gap.last_lsn) == (first + 5, first + 5)
    assert gap.files[0].endswith(".parquet") and "bad checksum" in gap.why


def test_a_deleted_segment_is_a_gap_naming_what_is_missing(make_stream: MakeStream) -> None:
    stream = make_stream(staging_bytes=1 << 22)
    fill(stream, "QM1", 200, 1)
    segments = stream.layout.segments("QM1")
    (first, path), (after, _) = segments[1], segments[2]
    path.unlink()
    reader = stream.reader()
    assert all(not first <= r.lsn < after for r in reader.records())
    assert reader.damage == []  # nothing damaged: a file is gone
    [gap] = stream.check().gaps
    assert (gap.writer, gap.first_lsn, gap.last_lsn) == ("QM1", first, after - 1)
    assert "a file is missing" in gap.why


def test_a_deleted_newest_segment_is_a_gap_even_after_the_writer_reopens(
    make_stream: MakeStream,
) -> None:
    # Given a writer whose segment in use vanished while it was down
    stream = make_stream(staging_bytes=1 << 22)
    crashed_writer(stream.root, count=40)
    [(first, path)] = stream.layout.segments("QM1")
    path.unlink()
    [gap] = stream.check().gaps
    assert (gap.first_lsn, gap.last_lsn) == (first, None)
    assert "appending to is missing" in gap.why
    # When it reopens, it gives no lsn twice: it jumps ahead and records the loss
    with stream.writer("QM1") as w:
        assert w.lost and w.lost[0][0] == first
        position = w.append(RecordType.PUT, op=1, seq=900, entry_id=eid(900), list_number=0)
    assert position is not None and position.lsn == first + LSN_JUMP
    [gap] = stream.check().gaps
    assert (gap.first_lsn, gap.last_lsn) == (first, first + LSN_JUMP - 1)
    assert "was missing when the writer reopened" in gap.why


def test_a_garbage_retention_file_is_refused_with_a_reason(make_stream: MakeStream) -> None:
    stream = make_stream()
    fill(stream, "QM1", 20, 1)
    stream.delete_before("S1", 5)
    stream.layout.retention_file.write_bytes(b'{"S1": 5, garbage')
    with pytest.raises(LogDamaged) as info:
        list(stream.records())
    assert info.value.reason is LogReason.LOG_DAMAGED
    assert str(stream.layout.retention_file) in str(info.value)


def test_a_retention_file_with_a_changed_point_does_not_verify(make_stream: MakeStream) -> None:
    stream = make_stream()
    fill(stream, "QM1", 20, 1)
    stream.delete_before("S1", 5)
    text = stream.layout.retention_file.read_text()
    stream.layout.retention_file.write_text(text.replace('"S1":5', '"S1":9'))
    with pytest.raises(LogDamaged, match="digest"):
        stream.retention_points()


def test_a_damaged_writer_state_makes_the_end_unknown_until_it_writes_again(
    make_stream: MakeStream,
) -> None:
    stream = make_stream(**ONE_SEGMENT)
    fill(stream, "QM1", 10, 1)
    state = stream.layout.writer_state("QM1")
    state.write_bytes(state.read_bytes()[:-5])
    [gap] = stream.check().gaps
    assert gap.last_lsn is None and "state file is damaged" in gap.why
    with stream.writer("QM1") as w:  # sets the damaged state aside, writes a new one
        w.append(RecordType.PUT, op=1, seq=50, entry_id=eid(50), list_number=0)
    assert stream.check().gaps == []
    assert any(p.name.startswith("QM1.WRITER") for p in stream.damaged_files())
