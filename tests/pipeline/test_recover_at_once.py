"""The ``recover`` job folds one structure in one Spark action when its live entries
surely fit a broadcast (the log's and the image's rows together are few enough), else
it runs the first pass alone and counts them: both give the same tables.  Written
beside the log check, the entries are moved into place only once the check let the
job through: a refused job leaves none.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from sharedq.log import LogStream
from sharedq.pipeline import PipelineError, PipelineReason
from sharedq.pipeline.job import JobContext, JobResult
from sharedq.pipeline.jobs import recover as job
from sharedq.pipeline.sources import find_pairs
from tests.pipeline.test_recover_fold import _write_pair
from tests.pipeline.test_recover_gaps import APP, _delete_a_segment, _group
from tests.recovery.changes import NAME


def _tables(
    spark: SparkSession, result: JobResult
) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    entries = spark.read.parquet(str(result.tables["entries"]))
    lists = spark.read.parquet(str(result.tables["lists"]))
    return (
        [tuple(r) for r in entries.orderBy("list_number", "position").collect()],
        sorted(tuple(r) for r in lists.collect()),
    )


def test_at_once_and_with_the_first_pass_alone_the_tables_are_the_same(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "pair"
    _write_pair(root, 14)
    (pair,) = find_pairs(root)
    ctx = JobContext.open(spark, root, tmp_path / "once")
    # The bound counts every record of the log's files.
    every = sum(1 for _ in LogStream.open_existing(pair.log).records())
    assert ctx.stage().records == every > 0
    at_once = job.run(ctx, structure=NAME)
    assert not (ctx.work / "entries").exists()
    monkeypatch.setattr(job, "_few_enough", lambda *_: False)
    apart = job.run(JobContext.open(spark, root, tmp_path / "apart"), structure=NAME)
    assert _tables(spark, at_once) == _tables(spark, apart)
    assert at_once.figures == apart.figures and at_once.summary == apart.summary
    assert at_once.figures["entries"] > 0


def test_run_again_over_its_output_the_entries_are_replaced(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = tmp_path / "pair"
    _write_pair(root, 15)
    first = job.run(JobContext.open(spark, root, tmp_path / "out"), structure=NAME)
    want = _tables(spark, first)
    again = job.run(JobContext.open(spark, root, tmp_path / "out"), structure=NAME)
    assert again.tables["entries"] == first.tables["entries"]
    assert _tables(spark, again) == want


def test_a_refused_job_leaves_no_entries(spark: SparkSession, tmp_path: Path) -> None:
    root = tmp_path / "recovery"
    _, qm = _group(root)
    _delete_a_segment(qm)
    qm.close()
    ctx = JobContext.open(spark, root, tmp_path / "out")
    with pytest.raises(PipelineError) as refused:
        job.run(ctx, structure=APP)
    assert refused.value.reason is PipelineReason.LOG_INCOMPLETE
    assert not (tmp_path / "out" / "recover" / "entries").exists()
