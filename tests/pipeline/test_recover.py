"""The Spark ``recover`` job equals the servers' in-process recovery, object for object.

Both are given the same input, the recovery root the group wrote (``group_log``), and
the same point: the end of the log, a sequence number, a time.  The job's tables are
compared with the reference's ``contents()`` as DataFrames, schemas included; at the
end of the log both are compared with what the live structures held.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import DataFrame, SparkSession
from pyspark.testing import assertDataFrameEqual, assertSchemaEqual

from sharedq.cli.pipeline import recover_command
from sharedq.log import LogStream
from sharedq.mq.classify import recoverable_contents
from sharedq.pipeline import PipelineError, PipelineReason
from sharedq.pipeline.inprocess import InprocessRecovery, recover_inprocess
from sharedq.pipeline.job import JobContext
from sharedq.pipeline.jobs import recover as job
from sharedq.recovery.srds import version_to_i64
from tests.pipeline.conftest import APP, STRUCTURES, GroupLog
from tests.pipeline.helpers import entry_rows, list_rows

ENTRY_SCHEMA = (
    "structure string, list_number int, position long, entry_id binary, key binary, "
    "secondary_key binary, version long, adjunct binary, data binary"
)
LIST_SCHEMA = "structure string, list_number int, limit long, authority long"


def _expected(spark: SparkSession, results: list[InprocessRecovery]) -> tuple[DataFrame, DataFrame]:
    entries = [row for r in results for row in entry_rows(r.structure, r.contents)]
    lists = [row for r in results for row in list_rows(r.structure, r.contents)]
    return (
        spark.createDataFrame(entries, ENTRY_SCHEMA),
        spark.createDataFrame(lists, LIST_SCHEMA),
    )


def _run(
    spark: SparkSession, group_log: GroupLog, out: Path, **point: object
) -> tuple[DataFrame, DataFrame, dict[str, object]]:
    ctx = JobContext.open(spark, group_log.root, out)
    result = job.run(ctx, **point)  # type: ignore[arg-type]
    assert (out / "recover" / "summary.txt").exists() or result.summary
    entries = spark.read.parquet(str(result.tables["entries"]))
    lists = spark.read.parquet(str(result.tables["lists"]))
    return entries, lists, result.figures


def _compare(
    spark: SparkSession,
    group_log: GroupLog,
    out: Path,
    **point: object,
) -> tuple[DataFrame, list[InprocessRecovery], dict[str, object]]:
    entries, lists, figures = _run(spark, group_log, out, **point)
    pairs = {p.name: p for p in group_log.pairs}
    reference = [recover_inprocess(pairs[name], name, **point) for name in STRUCTURES]  # type: ignore[arg-type]
    want_entries, want_lists = _expected(spark, reference)
    assertSchemaEqual(entries.schema, want_entries.schema)
    assertSchemaEqual(lists.schema, want_lists.schema)
    assertDataFrameEqual(entries, want_entries, checkRowOrder=False)
    assertDataFrameEqual(lists, want_lists, checkRowOrder=False)
    assert figures["entries"] == want_entries.count()
    assert figures["records_applied"] == sum(r.records for r in reference)
    assert figures["image_seq"] == {
        r.structure: (r.image.seq if r.image.slot is not None else None) for r in reference
    }
    return entries, reference, figures


def _change_seqs(group_log: GroupLog, structure: str) -> list[tuple[int, int]]:
    pair = next(p for p in group_log.pairs if p.name == structure)
    stream = LogStream.open_existing(pair.log)
    return [(r.seq, r.time_us) for r in stream.records(structures={structure}) if r.op != 127]


def test_at_the_end_of_the_log_it_equals_in_process_recovery_and_the_live_structures(
    spark: SparkSession, group_log: GroupLog, tmp_path: Path
) -> None:
    entries, reference, figures = _compare(spark, group_log, tmp_path)
    assert figures["entries"] > 0 and figures["records_applied"] > 0
    got = entries.orderBy("structure", "list_number", "position").collect()
    for recovered in reference:
        name = recovered.structure
        kept = recoverable_contents(recovered.contents)
        ids = {e.entry_id for entries_ in kept.lists.values() for e in entries_}
        mine = [
            (r.list_number, r.entry_id, r.key, r.secondary_key, r.version, r.adjunct, r.data)
            for r in got
            if r.structure == name and r.entry_id in ids
        ]
        live = [
            (n, e.entry_id, e.key, e.secondary_key, version_to_i64(e.version), e.adjunct, e.data)
            for n, entries_ in group_log.final[name].lists.items()
            for e in entries_
        ]
        assert mine == live, name
        assert kept.controls == group_log.final[name].controls


def test_at_a_sequence_number_it_equals_in_process_recovery(
    spark: SparkSession, group_log: GroupLog, tmp_path: Path
) -> None:
    seqs = [seq for seq, _ in _change_seqs(group_log, APP)]
    for n, at_seq in enumerate((seqs[len(seqs) // 3], seqs[len(seqs) * 5 // 6])):
        _compare(spark, group_log, tmp_path / str(n), at_seq=at_seq)


def test_at_a_time_it_equals_in_process_recovery(
    spark: SparkSession, group_log: GroupLog, tmp_path: Path
) -> None:
    from datetime import UTC, datetime

    changes = _change_seqs(group_log, APP)
    _, time_us = changes[len(changes) * 3 // 4]
    at = datetime.fromtimestamp(time_us / 1e6, tz=UTC)
    _, _, figures = _compare(spark, group_log, tmp_path / "aware", at_time=at)
    naive = at.replace(tzinfo=None).isoformat()
    _, _, same = _compare(spark, group_log, tmp_path / "naive", at_time=naive)
    assert same["target_seq"] == figures["target_seq"]
    target = figures["target_seq"]
    assert isinstance(target, dict)
    assert target[APP] == max(seq for seq, t in changes if t <= time_us)


def test_a_point_before_the_oldest_srds_without_the_log_from_the_start_is_refused(
    spark: SparkSession, group_log: GroupLog, tmp_path: Path
) -> None:
    retained = group_log.retained[APP]  # > 0: the fixture checks it
    ctx = JobContext.open(spark, group_log.root, tmp_path)
    with pytest.raises(PipelineError) as caught:
        job.run(ctx, structure=APP, at_seq=retained - 1)
    assert caught.value.reason is PipelineReason.POINT_UNRECOVERABLE


def test_the_command_writes_parquet_and_a_summary(
    spark: SparkSession, group_log: GroupLog, tmp_path: Path
) -> None:
    result = CliRunner().invoke(
        recover_command,
        ["--input", str(group_log.root), "--output", str(tmp_path), "--structure", APP],
    )
    assert result.exit_code == 0, result.output
    summary = (tmp_path / "recover" / "summary.txt").read_text()
    assert APP in summary and "change records applied" in summary
    assert spark.read.parquet(str(tmp_path / "recover" / "entries")).count() > 0
