"""Offload: HIGHOFFLOAD/LOWOFFLOAD, Parquet log data sets, one stream across both."""

from __future__ import annotations

import shutil
import threading

import pyarrow.parquet as pq

from sharedq.log import ARROW_SCHEMA, ChangeOp, LogRecord, LogWriter, RecordType
from sharedq.log.datasets import read_dataset, read_dataset_meta

from .helpers import MakeStream, eid, key


def _put(w: LogWriter, seq: int, size: int = 40, **extra: object) -> None:
    w.append(
        RecordType.PUT,
        op=ChangeOp.WRITE,
        seq=seq,
        entry_id=eid(seq),
        list_number=seq % 8,
        key=key(seq),
        data=b"d" * size,
        **extra,  # type: ignore[arg-type]
    )


def test_offload_starts_past_high_and_goes_down_to_low(make_stream: MakeStream) -> None:
    # Given staging of 16 KiB, offload at 50 % down to 0 %
    stream = make_stream(staging_bytes=16384, segment_bytes=4096, high_offload=50, low_offload=0)
    high = 16384 // 2
    with stream.writer("QM1") as w:
        offloads = 0
        for seq in range(1, 600):
            _put(w, seq)
            # Then staging never grows past HIGHOFFLOAD by more than a record
            assert w.staging_bytes < high + 200
            if w.last_offload is not None and offloads == 0:
                offloads += 1
                # and an offload takes it down to LOWOFFLOAD (the new, empty segment)
                assert w.staging_bytes <= 8 + 200
        assert w.last_offload is not None
    assert len(stream.layout.dataset_files()) >= 3
    assert [r.seq for r in stream.records()] == list(range(1, 600))


def test_offload_stops_at_low(make_stream: MakeStream) -> None:
    stream = make_stream(staging_bytes=16384, segment_bytes=2048, high_offload=75, low_offload=25)
    with stream.writer("QM1") as w:
        seq = 0
        while w.last_offload is None:
            seq += 1
            _put(w, seq)
        # Closed segments above LOWOFFLOAD stay in staging
        remaining = w.staging_bytes
        assert 0 < remaining <= 16384 * 25 // 100 + 2048
        assert len(stream.layout.segments("QM1")) >= 2
    assert [r.seq for r in stream.records()] == list(range(1, seq + 1))


def test_data_sets_are_plain_parquet_with_the_record_schema(make_stream: MakeStream) -> None:
    stream = make_stream(staging_bytes=1 << 22)
    with stream.writer("QM1") as w:
        for seq in range(1, 300):
            _put(w, seq, version=2**64 - seq, uow=b"U" * 32)
        w.log_event(RecordType.SYSTEM_CHECKPOINT, payload={"restart": True})
        w.offload()
    [(name, path)] = stream.layout.dataset_files()
    assert (name.writer, name.first_lsn, name.last_lsn) == ("QM1", 1, 300)
    table = pq.read_table(stream.layout.datasets)  # pyarrow reads the directory directly
    assert table.schema.remove_metadata() == ARROW_SCHEMA.remove_metadata()
    assert table.num_rows == 300
    meta = read_dataset_meta(path)
    assert meta.ranges == {"S1": (1, 299)} and meta.rows == 300
    # Versions above 2**63 go through Parquet's int64 and come back unsigned
    records = read_dataset(path)
    assert [r.version for r in records[:299]] == [2**64 - s for s in range(1, 300)]
    assert records == list(stream.records())


def test_one_stream_across_staging_and_data_sets(make_stream: MakeStream) -> None:
    stream = make_stream(staging_bytes=1 << 22)
    with stream.writer("QM1") as q1, stream.writer("QM2") as q2:
        for seq in range(1, 401):
            _put(q1 if seq % 3 else q2, seq)
            if seq == 200:
                q1.offload()
    kinds = {path.parent.name for _, path in stream.layout.dataset_files()}
    assert kinds == {"datasets"} and stream.layout.segments("QM1")
    assert [r.seq for r in stream.records()] == list(range(1, 401))
    # A start seq skips what lies before it; a stop seq ends the read
    assert [r.seq for r in stream.records(from_seq=150, to_seq=250)] == list(range(150, 251))
    assert [r.seq for r in stream.records(writers={"QM2"}, from_seq=390)] == [390, 393, 396, 399]


def test_row_groups_before_the_start_are_skipped(make_stream: MakeStream) -> None:
    stream = make_stream(staging_bytes=1 << 22, row_group_rows=50)
    with stream.writer("QM1") as w:
        for seq in range(1, 501):
            _put(w, seq)
        w.offload()
    [(_, path)] = stream.layout.dataset_files()
    assert pq.ParquetFile(path).num_row_groups == 10
    assert [r.seq for r in read_dataset(path, from_seq=420)] == list(range(401, 501))


def test_background_offload_keeps_every_record(make_stream: MakeStream) -> None:
    stream = make_stream(background_offload=True, staging_bytes=16384, segment_bytes=2048)
    with stream.writer("QM1") as w:
        for seq in range(1, 3001):
            _put(w, seq)
        assert w.wait_offload(10)
    assert len(stream.layout.dataset_files()) > 5
    assert [r.seq for r in stream.records()] == list(range(1, 3001))


def test_a_crash_between_data_set_and_segment_deletion_duplicates_nothing(
    make_stream: MakeStream,
) -> None:
    # Given segments offloaded while a copy of them survives (a crash before deletion)
    stream = make_stream(staging_bytes=1 << 22)
    w = stream.writer("QM1")
    for seq in range(1, 300):
        _put(w, seq)
    closed = stream.layout.segments("QM1")
    saved = stream.root / "saved"
    shutil.copytree(stream.layout.writer_dir("QM1"), saved, ignore=shutil.ignore_patterns(".lock"))
    w.offload()
    for _first, path in closed[:-1]:
        shutil.copy(saved / path.name, path)
    # Then each record is read once
    assert [r.seq for r in stream.records()] == list(range(1, 300))
    # and the next offload removes the leftovers
    _put(w, 300)
    w.offload()
    w.close()
    assert [p for _, p in stream.layout.segments("QM1")] == [stream.layout.segments("QM1")[-1][1]]
    assert [r.seq for r in stream.records()] == list(range(1, 301))


def test_records_of_several_structures_in_one_data_set(make_stream: MakeStream) -> None:
    stream = make_stream(staging_bytes=1 << 22, structure="PRIMARY")
    with stream.writer("QM1") as w:
        for seq in range(1, 101):
            _put(w, seq)
            _put(w, seq * 2, structure="OVERFLOW")
        w.offload()
    [(_, path)] = stream.layout.dataset_files()
    assert read_dataset_meta(path).ranges == {"PRIMARY": (1, 100), "OVERFLOW": (2, 200)}
    over = list(stream.records(structures={"OVERFLOW"}, from_seq=150))
    assert [r.seq for r in over] == list(range(150, 201, 2))
    assert all(isinstance(r, LogRecord) and r.structure == "OVERFLOW" for r in over)


def test_last_seq_reads_footers_and_staging(make_stream: MakeStream) -> None:
    stream = make_stream(staging_bytes=1 << 22, structure="PRIMARY")
    assert stream.last_seq() == 0
    with stream.writer("QM1") as w, stream.writer("QM2") as w2:
        for seq in range(1, 201):
            _put(w, seq)
        _put(w, 999, structure="OVERFLOW")
        w.offload()
        _put(w2, 250)
        w2.log_event(RecordType.STATISTICS)
    assert stream.last_seq() == 250
    assert stream.last_seq("OVERFLOW") == 999
    assert stream.last_seq("NONE") == 0


def test_reads_during_appends_and_offloads_see_each_record_once(make_stream: MakeStream) -> None:
    # Given a writer appending while its offload thread moves segments to data sets
    stream = make_stream(background_offload=True, staging_bytes=8192, segment_bytes=1024)
    w = stream.writer("QM1")
    done = threading.Event()

    def append() -> None:
        for seq in range(1, 4001):
            _put(w, seq)
        done.set()

    appender = threading.Thread(target=append)
    appender.start()
    reads = 0
    while not done.is_set() or reads < 3:
        # Then every read sees a gapless, duplicate-free prefix of what was appended
        lsns = [r.lsn for r in stream.records()]
        assert lsns == list(range(1, len(lsns) + 1))
        reads += 1
    appender.join()
    w.close()
    assert [r.seq for r in stream.records()] == list(range(1, 4001))


def test_a_read_can_stop_at_a_point_in_time(make_stream: MakeStream) -> None:
    stream = make_stream(staging_bytes=1 << 22)
    with stream.writer("QM1") as w:
        for seq in range(1, 101):
            _put(w, seq)
            if seq == 50:
                w.offload()
    records = list(stream.records())
    cut = records[69].time_us
    assert list(stream.records(until_time_us=cut)) == records[:70]
    assert list(stream.records(from_seq=40, until_time_us=cut)) == records[39:70]
