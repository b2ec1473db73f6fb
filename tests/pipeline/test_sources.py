"""The pipeline reads exactly the records the log's own reader yields, and refuses bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from sharedq.log import LogRecord, LogStream
from sharedq.pipeline import PipelineError, PipelineReason
from sharedq.pipeline.sources import find_pairs, read_log
from tests.pipeline.conftest import STRUCTURES, GroupLog


def test_the_log_as_spark_reads_it_is_the_log_as_the_reader_yields_it(
    spark: SparkSession, group_log: GroupLog, tmp_path: Path
) -> None:
    expected: list[tuple[object, ...]] = []
    offloaded = 0
    for pair in group_log.pairs:
        stream = LogStream.open_existing(pair.log)
        expected.extend(tuple(r) for r in stream.records())
        offloaded += len(list(stream.layout.datasets.glob("*.parquet")))
    assert offloaded, "the fixture must offload, so that data sets and staging are both read"
    frame = read_log(spark, group_log.pairs, tmp_path)
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
