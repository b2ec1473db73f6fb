"""Preallocated segments: room allocated ahead is not damage, and damage is still damage.

A writer's open segment has room allocated ahead of its last frame (zeros), and its
header carries the mark that says so (``codec.PREALLOCATED_MARK``).  These tests hold
what the readers, the writer that reopens, and the accounting make of it: the room is
never a loss, never counted as records, and gone when the segment closes; a torn
frame before the room, bytes after it, and zeros in the middle are reported as
before.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from sharedq.log import LogConfig, LogError, LogReason, LogStream, RecordType
from sharedq.log.codec import (
    PREALLOCATED_HEADER,
    SEGMENT_HEADER,
    SEGMENT_HEADER_BYTES,
    DamageReason,
    decode_frames,
)
from sharedq.log.segment import PREALLOCATE_BYTES, read_segment
from tests.mq.small_disk import small_disk

from .helpers import MakeStream, crashed_writer, eid, frames, key

ONE_SEGMENT = {"segment_bytes": 1 << 20, "staging_bytes": 1 << 22}


def _put(w: object, n: int) -> None:
    w.append(  # type: ignore[attr-defined]
        RecordType.PUT, op=1, seq=n, entry_id=eid(n), list_number=0, key=key(n), data=b"d" * 40
    )


def _room_start(path: Path) -> int:
    """Where the room of a preallocated segment starts (after its last frame)."""
    return frames(path.read_bytes())[-1][1]


def test_an_open_segment_has_room_ahead_that_no_reader_takes_for_damage(
    make_stream: MakeStream,
) -> None:
    # Given a running writer with ten records committed
    stream = make_stream(segment_bytes=1 << 20, staging_bytes=1 << 22)
    with stream.writer("QM1") as w:
        for n in range(1, 11):
            _put(w, n)
        w.commit()
        [(_, path)] = stream.layout.segments("QM1")
        raw = path.read_bytes()
        # Then the segment is marked and holds room (zeros) after its frames, frames
        # written in place: the file's size does not move with each record
        assert raw[:SEGMENT_HEADER_BYTES] == PREALLOCATED_HEADER
        end = _room_start(path)
        assert len(raw) == SEGMENT_HEADER_BYTES + PREALLOCATE_BYTES and not any(raw[end:])
        _put(w, 11)
        w.commit()
        assert path.stat().st_size == len(raw)
        # and readers read every record and report nothing
        reader = stream.reader()
        assert [r.seq for r in reader.records()] == list(range(1, 12))
        assert reader.damage == [] and stream.check().gaps == []
        # and the room is not counted as staged records, nor against the log's size
        assert w.staging_bytes == _room_start(path)
        assert stream.space.refresh() == _room_start(path) + _other_files(stream)
    # When the writer closes, the room is cut off and the mark cleared: the closed
    # segment is a plain one
    raw = path.read_bytes()
    assert raw[:SEGMENT_HEADER_BYTES] == SEGMENT_HEADER
    assert frames(raw)[-1][1] == len(raw)
    assert [r.seq for r in stream.records()] == list(range(1, 12))


def _other_files(stream: LogStream) -> int:
    """Bytes of the stream's files other than QM1's segments (state files and such)."""
    total = 0
    for directory in [stream.layout.datasets, *map(stream.layout.writer_dir, ["QM1"])]:
        if directory.is_dir():
            for entry in directory.iterdir():
                if entry.is_file() and not entry.name.endswith(".seg"):
                    total += entry.stat().st_size
    return total


def test_room_grows_a_chunk_at_a_time_and_never_past_the_segment_size(
    make_stream: MakeStream,
) -> None:
    # Given segments of 4 KiB (smaller than a chunk of room)
    stream = make_stream(segment_bytes=4096)
    with stream.writer("QM1") as w:
        _put(w, 1)
        w.commit()
        [(_, path)] = stream.layout.segments("QM1")
        # Then the open segment's room stops at the segment's size
        assert path.stat().st_size == 4096
        for n in range(2, 200):
            _put(w, n)
        w.commit()
        segments = stream.layout.segments("QM1")
        assert len(segments) > 1
        # and every closed one holds its frames and nothing else
        for _, closed in segments[:-1]:
            raw = closed.read_bytes()
            assert raw[:SEGMENT_HEADER_BYTES] == SEGMENT_HEADER
            assert frames(raw)[-1][1] == len(raw) <= 4096
    assert [r.seq for r in stream.records()] == list(range(1, 200))


def test_without_preallocation_frames_are_appended(make_stream: MakeStream) -> None:
    stream = make_stream(segment_bytes=1 << 20, staging_bytes=1 << 22, preallocate=False)
    with stream.writer("QM1") as w:
        _put(w, 1)
        w.commit()
        [(_, path)] = stream.layout.segments("QM1")
        raw = path.read_bytes()
        assert raw[:SEGMENT_HEADER_BYTES] == SEGMENT_HEADER and frames(raw)[-1][1] == len(raw)
    assert LogConfig(preallocate=False).preallocate is False


def test_a_died_writers_room_is_not_damage_and_it_goes_on_in_the_same_segment(
    make_stream: MakeStream,
) -> None:
    # Given a writer that died with 30 records synced and room after them
    stream = make_stream(**ONE_SEGMENT)
    crashed_writer(stream.root)
    [(_, path)] = stream.layout.segments("QM1")
    assert read_segment(path).preallocated
    end = _room_start(path)
    assert path.stat().st_size > end
    # Then readers read all 30 and report nothing: no damage, no gap, no torn frame
    reader = stream.reader()
    assert [r.lsn for r in reader.records()] == list(range(1, 31))
    assert reader.damage == []
    coverage = stream.check()
    assert coverage.gaps == [] and not any("torn" in note for note in coverage.skipped)
    # When it opens again: nothing to repair, nothing set aside, the same segment
    with stream.writer("QM1") as w:
        assert w.repaired is None and w.found_damage == []
        _put(w, 500)
    assert stream.damaged_files() == []
    assert stream.layout.segments("QM1") == [(1, path)]
    assert [r.lsn for r in stream.records()] == list(range(1, 32))


def test_a_torn_last_frame_then_room_is_a_torn_tail_as_before(make_stream: MakeStream) -> None:
    # Given a writer that died writing its 31st frame in place: half of it, then room
    stream = make_stream(**ONE_SEGMENT)
    crashed_writer(stream.root)
    [(_, path)] = stream.layout.segments("QM1")
    end = _room_start(path)
    torn = b"\x40\x00\x00\x00\x12\x34\x56\x78\x90\x01"
    with open(path, "r+b") as f:
        f.seek(end)
        f.write(torn)
    # Then the decoder reports a tail where the frame starts (not room: not zeros)
    contents = read_segment(path)
    assert contents.tail is not None and contents.tail.offset == end
    assert contents.tail.reason is DamageReason.TRUNCATED or contents.tail.reason in (
        DamageReason.BAD_CHECKSUM,
        DamageReason.BAD_LENGTH,
    )
    # and readers take it for the frame being written when the writer died
    reader = stream.reader()
    assert [r.lsn for r in reader.records()] == list(range(1, 31)) and reader.damage == []
    assert any("torn last frame" in note for note in stream.check().skipped)
    # When the writer opens again it sets the torn bytes aside (not the room) and cuts them
    with stream.writer("QM1") as w:
        assert w.repaired is not None and w.repaired.offset == end
        _put(w, 500)
    [aside] = stream.damaged_files()
    assert aside.read_bytes() == torn
    assert [r.lsn for r in stream.records()] == list(range(1, 32))


def test_bytes_after_the_room_are_a_tail_that_starts_where_they_do(
    make_stream: MakeStream,
) -> None:
    # Given a died writer's segment with garbage some way into its room
    stream = make_stream(**ONE_SEGMENT)
    crashed_writer(stream.root)
    [(_, path)] = stream.layout.segments("QM1")
    end = _room_start(path)
    garbage = b"\x99\x98\x97\x96\x95"
    with open(path, "r+b") as f:
        f.seek(end + 300)
        f.write(garbage)
    # Then it is reported, as a tail (nothing sound after it) at its own offset
    contents = read_segment(path)
    assert contents.good_end == end
    assert [(d.offset, d.at_tail) for d in contents.damages] == [(end + 300, True)]
    # and the writer that opens again keeps exactly those bytes aside
    with stream.writer("QM1") as w:
        assert w.repaired is not None and w.repaired.offset == end + 300
    [aside] = stream.damaged_files()
    assert aside.read_bytes() == garbage


def test_zeros_in_the_middle_of_a_preallocated_segment_are_damage(
    make_stream: MakeStream,
) -> None:
    # Given a died writer's segment whose frames 10 to 12 were zeroed (lost), with
    # sound frames after them and room after those
    stream = make_stream(**ONE_SEGMENT)
    crashed_writer(stream.root)
    [(_, path)] = stream.layout.segments("QM1")
    raw = bytearray(path.read_bytes())
    spans = frames(bytes(raw))
    start, stop = spans[9][0], spans[11][1]
    raw[start:stop] = bytes(stop - start)
    path.write_bytes(bytes(raw))
    # Then the zeros are damage, where they start, with reading resumed after them
    contents = read_segment(path)
    [damage] = contents.damages
    assert damage.offset == start and damage.resumed_at == stop
    assert damage.reason is DamageReason.BAD_LENGTH
    # and readers report it, and the check names the three lost records
    reader = stream.reader()
    assert [r.lsn for r in reader.records()] == [n for n in range(1, 31) if not 10 <= n <= 12]
    assert [d.offset for d in reader.damage] == [start]
    [gap] = stream.check().gaps
    assert (gap.first_lsn, gap.last_lsn) == (10, 12)


def test_zeros_at_the_end_of_a_closed_segment_are_damage(make_stream: MakeStream) -> None:
    # Given a writer that closed cleanly (its segment cut to its frames, the mark
    # cleared), whose last two frames were zeroed afterwards
    stream = make_stream(**ONE_SEGMENT)
    with stream.writer("QM1") as w:
        for n in range(1, 11):
            _put(w, n)
    [(_, path)] = stream.layout.segments("QM1")
    raw = bytearray(path.read_bytes())
    spans = frames(bytes(raw))
    raw[spans[-2][0] :] = bytes(len(raw) - spans[-2][0])
    path.write_bytes(bytes(raw))
    # Then the zeros are damage (no mark: no room), and the check names the records
    reader = stream.reader()
    assert [r.seq for r in reader.records()] == list(range(1, 9))
    assert [d.offset for d in reader.damage] == [spans[-2][0]]
    [gap] = stream.check().gaps
    assert (gap.first_lsn, gap.last_lsn) == (9, 10)


def test_the_decoder_takes_zeros_for_room_only_where_the_header_says_so() -> None:
    # A frame-less segment body of zeros: room with the mark, damage without it
    body = bytes(100)
    records, good_end, damages = decode_frames(
        PREALLOCATED_HEADER + body, "p", SEGMENT_HEADER_BYTES, zero_tail=True
    )
    assert (records, good_end, damages) == ([], SEGMENT_HEADER_BYTES, [])
    records, good_end, damages = decode_frames(SEGMENT_HEADER + body, "p")
    assert records == [] and [d.offset for d in damages] == [SEGMENT_HEADER_BYTES]
    # and fewer zeros than a frame header at the very end: room too
    _, _, damages = decode_frames(PREALLOCATED_HEADER + bytes(3), "p", zero_tail=True)
    assert damages == []


def test_on_a_full_disk_records_go_into_the_room_and_then_fail_whole() -> None:
    # Given a writer on a small file system of its own, with room allocated ahead
    with small_disk() as disk:
        stream = LogStream(disk.path / "log", name="S1.LOG", structure="S1")
        w = stream.writer("QM1")
        try:
            _put(w, 1)
            w.commit()
            [(_, path)] = stream.layout.segments("QM1")
            room = path.stat().st_size - _room_start(path)
            assert room > 60_000
            # When the disk fills up
            disk.fill()
            # Then records still go into the room, durable at each commit
            n = 1
            while _room_start(path) + 200 < path.stat().st_size:
                n += 1
                _put(w, n)
                w.commit()
            assert n > 100
            # and the first one that needs more than the room (and the page it ends
            # in) fails as an append on a full disk does, leaving no torn frame
            with pytest.raises(LogError) as failed:
                for extra in range(n + 1, n + 100):
                    _put(w, extra)
            assert failed.value.reason is LogReason.IO_FAILED
            assert isinstance(failed.value.__cause__, OSError)
            assert failed.value.__cause__.errno == errno.ENOSPC
            contents = read_segment(path)
            assert contents.damages == []
            written = [r.seq for r in contents.records]
            assert written[:n] == list(range(1, n + 1))
            assert written == list(range(1, len(written) + 1))
            # When room is made again, the writer goes on where it stopped
            disk.free()
            _put(w, 10_000)
            w.commit()
            assert [r.seq for r in stream.records()][-1] == 10_000
            assert stream.reader().damage == []
        finally:
            w.close()
            stream.close()
