"""The pipeline reads exactly the records the log's own reader yields, and refuses bad input."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from sharedq.log import (
    ChangeOp,
    LogConfig,
    LogRecord,
    LogStream,
    RecordType,
    SegmentDecoded,
    StagingSegment,
)
from sharedq.pipeline import PipelineError, PipelineReason
from sharedq.pipeline.sources import find_pairs, read_log
from sharedq.pipeline.staging import DICTIONARY_COLUMNS, StagedSegment, stage_segments
from tests.pipeline.conftest import STRUCTURES, GroupLog


def test_the_log_as_spark_reads_it_is_the_log_as_the_reader_yields_it(
    spark: SparkSession, group_log: GroupLog, tmp_path: Path
) -> None:
    expected: list[tuple[object, ...]] = []
    offloaded = 0
    segments = 0
    for pair in group_log.pairs:
        stream = LogStream.open_existing(pair.log)
        expected.extend(tuple(r) for r in stream.records())
        offloaded += len(list(stream.layout.datasets.glob("*.parquet")))
        segments += sum(len(stream.layout.segments(w)) for w in stream.layout.writers())
    assert offloaded, "the fixture must offload, so that data sets and staging are both read"
    assert segments > len(group_log.pairs), "several segments a stream: decoded by workers"
    frame = read_log(spark, group_log.pairs, tmp_path)
    # Each segment became a file of its own, decoded by Spark's Python workers.
    assert len(list((tmp_path / "staging").rglob("*.parquet"))) == segments
    assert [f.name for f in frame.schema.fields] == list(LogRecord._fields)
    rows = frame.orderBy("structure", "seq", "op", "writer", "lsn").collect()
    got = [(r.seq, r.op, r.writer, r.lsn, r.structure, r.type) for r in rows]
    want = sorted((e[0], e[1], e[2], e[3], e[5], e[4]) for e in expected)
    assert sorted(got) == want
    assert {r.structure for r in rows} == set(STRUCTURES)


def test_find_pairs_takes_a_root_a_pair_or_a_stream(group_log: GroupLog) -> None:
    root = group_log.root
    assert [p.name for p in find_pairs(root)] == sorted(STRUCTURES)
    (pair,) = find_pairs(root / "PAPP")
    assert pair.srds == root / "PAPP" / "srds"
    (bare,) = find_pairs(root / "PAPP" / "log")
    assert bare == pair


def test_a_path_without_a_log_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PipelineError) as caught:
        find_pairs(tmp_path)
    assert caught.value.reason is PipelineReason.NO_INPUT
    with pytest.raises(PipelineError) as caught:
        find_pairs(tmp_path / "missing")
    assert caught.value.reason is PipelineReason.NO_INPUT


def _small_stream(root: Path, records: int, segment_bytes: int) -> LogStream:
    stream = LogStream(
        root / "S1" / "log",
        name="S1.LOG",
        structure="S1",
        config=LogConfig(segment_bytes=segment_bytes, staging_bytes=1 << 24),
    )
    with stream.writer("QM1") as w:
        for seq in range(1, records + 1):
            w.append(
                RecordType.PUT,
                op=ChangeOp.WRITE,
                seq=seq,
                entry_id=seq.to_bytes(12, "big"),
                list_number=seq % 3,
                key=bytes(16),
                data=bytes(seq % 50),
            )
    return stream


def _spark_rows(spark: SparkSession, root: Path, work: Path) -> list[tuple[object, ...]]:
    frame = read_log(spark, find_pairs(root / "S1"), work)
    return sorted((r.seq, r.writer, r.lsn, bytes(r.data or b"")) for r in frame.collect())


def _reader_rows(stream: LogStream) -> list[tuple[object, ...]]:
    return sorted((r.seq, r.writer, r.lsn, r.data or b"") for r in stream.records())


def test_a_single_segment_is_decoded_on_the_driver(spark: SparkSession, tmp_path: Path) -> None:
    stream = _small_stream(tmp_path, 300, 1 << 20)
    assert len(stream.layout.segments("QM1")) == 1
    assert _spark_rows(spark, tmp_path, tmp_path / "work") == _reader_rows(stream)


def test_damage_a_worker_finds_is_reported_and_nothing_before_it_is_lost(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a stream of several segments, the second damaged in its middle
    stream = _small_stream(tmp_path, 600, 4096)
    segments = stream.layout.segments("QM1")
    assert len(segments) >= 3
    _, damaged = segments[1]
    raw = bytearray(damaged.read_bytes())
    raw[len(raw) // 2] ^= 0x55
    damaged.write_bytes(bytes(raw))
    reader = stream.reader()
    expected = sorted((r.seq, r.writer, r.lsn, r.data or b"") for r in reader.records())
    assert len(expected) < 600 and len(reader.damage) == 1
    # When Spark reads it (the segments decoded in its Python workers)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sharedq.log"):
        got = _spark_rows(spark, tmp_path, tmp_path / "work")
    # Then it has what the log's reader yields, and the damage is reported, with where
    assert got == expected
    assert any(str(damaged) in r.getMessage() for r in caplog.records)


def test_workers_that_cannot_import_sharedq_are_a_clear_error(
    spark: SparkSession, tmp_path: Path
) -> None:
    stream = _small_stream(tmp_path, 600, 4096)
    assert len(stream.layout.segments("QM1")) >= 2
    # A Python without this environment's packages (-S: no site-packages), as on an
    # executor where sharedq was never installed.
    bare = tmp_path / "bare-python"
    bare.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    bare.chmod(0o755)
    context = spark.sparkContext
    python = context.pythonExec
    context.pythonExec = str(bare)
    try:
        with pytest.raises(PipelineError) as caught:
            read_log(spark, find_pairs(tmp_path / "S1"), tmp_path / "work")
    finally:
        context.pythonExec = python
    assert caught.value.reason is PipelineReason.WORKERS_FAILED
    assert "No module named 'sharedq'" in str(caught.value)
    # Nothing was harmed: with the right Python the same log reads whole.
    assert _spark_rows(spark, tmp_path, tmp_path / "work") == _reader_rows(stream)


def test_segments_decoded_several_to_a_task_come_back_in_order_as_on_the_driver(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Given more segments than the session has cores (a task per core decodes several)
    stream = _small_stream(tmp_path, 900, 4096)
    seen: list[list[StagingSegment]] = []

    def keep(segments: list[StagingSegment]) -> list[SegmentDecoded[StagedSegment]]:
        seen.append(segments)
        return stage_segments(None, segments, directory=tmp_path / "driver")

    (tmp_path / "driver").mkdir()
    (tmp_path / "workers").mkdir()
    stream.decoded_sources(keep)
    (segments,) = seen
    assert len(segments) > 2 * spark.sparkContext.defaultParallelism
    # When the workers decode them, and the driver
    workers = stage_segments(spark, segments, directory=tmp_path / "workers")
    driver = stage_segments(None, segments, directory=tmp_path / "driver")
    # Then each segment's file, in the segments' order, holds what the driver's does
    assert [Path(d.value.path).name for d in workers] == [Path(d.value.path).name for d in driver]
    for got, want in zip(workers, driver, strict=True):
        assert (got.found, got.value.records, got.value.ranges) == (
            want.found,
            want.value.records,
            want.value.ranges,
        )
        assert pq.read_table(got.value.path).equals(pq.read_table(want.value.path))
    # and only the columns whose values repeat are dictionary-encoded
    columns = pq.ParquetFile(workers[0].value.path).metadata.row_group(0)
    encoded = {
        columns.column(i).path_in_schema
        for i in range(columns.num_columns)
        if "RLE_DICTIONARY" in columns.column(i).encodings
    }
    assert "data" not in encoded and "seq" not in encoded
    assert {"structure", "writer", "op"} <= encoded <= set(DICTIONARY_COLUMNS)
