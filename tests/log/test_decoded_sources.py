"""A reader that decodes the staging segments its own way (the Spark pipeline) sees
exactly what the log's reader yields: the same records, the same damage, and a data
set written while it decoded replaces the segments it holds."""

from __future__ import annotations

from collections.abc import Callable

from sharedq.log import (
    ChangeOp,
    Damage,
    DamageReason,
    LogRecord,
    LogStream,
    RecordType,
    SegmentDecoded,
    StagingSegment,
)
from sharedq.log.datasets import lsn_runs, read_dataset
from sharedq.log.reader import decode_segment

from .helpers import MakeStream, eid, fill, frames, key

Decode = Callable[[list[StagingSegment]], list[SegmentDecoded[list[LogRecord]]]]


def _decode(segments: list[StagingSegment]) -> list[SegmentDecoded[list[LogRecord]]]:
    """Decode as a worker would: each segment alone, the file gone or not."""
    decoded: list[SegmentDecoded[list[LogRecord]]] = []
    for segment in segments:
        contents = decode_segment(segment)
        if contents is None:
            decoded.append(SegmentDecoded(False, []))
            continue
        lsns = tuple(lsn_runs([r.lsn for r in contents.records]))
        decoded.append(
            SegmentDecoded(
                True, contents.records, tuple(contents.damages), tuple(contents.repaired), lsns
            )
        )
    return decoded


def _everything(
    stream: LogStream, decode: Decode = _decode
) -> tuple[list[LogRecord], list[Damage]]:
    """Every record the decoded sources stand for (retention applied), and their damage."""
    sources = stream.decoded_sources(decode)
    records = [r for _, records in sources.segments for r in records]
    for path in sources.datasets:
        records.extend(read_dataset(path))
    kept = [r for r in records if r.seq >= sources.retention.get(r.structure, 0)]
    return sorted(kept), list(sources.damage)


def test_decoded_sources_hold_what_the_reader_yields(make_stream: MakeStream) -> None:
    # Given two writers, one with data sets and several segments, after a purge
    stream = make_stream(staging_bytes=1 << 22)
    fill(stream, "QM1", 240, 1, step=2)
    with stream.writer("QM1") as w:
        w.offload()
    fill(stream, "QM1", 200, 481, step=2)
    fill(stream, "QM2", 60, 2, step=2)
    stream.delete_before("S1", 101)
    assert len(stream.layout.segments("QM1")) >= 3 and stream.layout.dataset_files()
    seen: list[StagingSegment] = []

    def decode(segments: list[StagingSegment]) -> list[SegmentDecoded[list[LogRecord]]]:
        seen.extend(segments)
        return _decode(segments)

    # When a reader of its own decodes the segments, then it has every record once
    got, damage = _everything(stream, decode)
    assert got == list(stream.records())
    assert damage == []
    # and it was given each staging segment no data set holds, none twice
    listed = [path for w in ("QM1", "QM2") for _, path in stream.layout.segments(w)]
    assert sorted(s.path for s in seen) == sorted(listed)
    assert not any(s.may_be_writing for s in seen)  # nobody is writing


def test_damage_found_by_the_decoder_is_reported_as_the_reader_reports_it(
    make_stream: MakeStream,
) -> None:
    stream = make_stream(staging_bytes=1 << 22)
    fill(stream, "QM1", 200, 1000, step=2)
    segments = stream.layout.segments("QM1")
    _, path = segments[1]
    raw = bytearray(path.read_bytes())
    raw[frames(bytes(raw))[4][0] + 10] ^= 0x40
    path.write_bytes(bytes(raw))
    reader = stream.reader()
    expected = list(reader.records())
    got, damage = _everything(stream)
    assert got == expected
    assert damage == reader.damage and len(damage) == 1
    assert damage[0].reason is DamageReason.BAD_CHECKSUM
    # and the decoded sources' plan finds the same gap the reader's check finds
    [gap] = stream.decoded_sources(_decode).plan.check(starts=None, needed_seq=None).gaps
    assert gap == stream.check().gaps[0] and gap.count == 1


def test_the_frame_a_live_writer_is_appending_is_not_damage(make_stream: MakeStream) -> None:
    stream = make_stream(segment_bytes=1 << 20, staging_bytes=1 << 22)
    with stream.writer("QM1") as w:
        w.append(
            RecordType.PUT, op=ChangeOp.WRITE, seq=1, entry_id=eid(1), list_number=0, key=key(1)
        )
        [(_, path)] = stream.layout.segments("QM1")
        with open(path, "ab") as f:
            f.write(b"\x40\x00\x00\x00\x12\x34")  # half a frame, being written
        sources = stream.decoded_sources(_decode)
        [(segment, records)] = sources.segments
        assert segment.may_be_writing and [r.seq for r in records] == [1]
        assert sources.damage == []


def test_a_data_set_written_while_decoding_replaces_its_segments(
    make_stream: MakeStream,
) -> None:
    # Given a writer with several closed segments and no data set
    stream = make_stream(staging_bytes=1 << 22)
    fill(stream, "QM1", 200, 1, step=2)
    expected = list(stream.records())
    assert len(stream.layout.segments("QM1")) >= 3 and not stream.layout.dataset_files()

    # When the writer offloads them right after the decoder has read them
    def decode_then_offload(
        segments: list[StagingSegment],
    ) -> list[SegmentDecoded[list[LogRecord]]]:
        decoded = _decode(segments)
        with stream.writer("QM1") as w:
            w.offload()
        return decoded

    sources = stream.decoded_sources(decode_then_offload)
    # Then the data set stands for them: every record is had once
    assert sources.datasets and not sources.segments
    records = [r for path in sources.datasets for r in read_dataset(path)]
    assert sorted(records) == expected
