"""``print``: the log print utility, against the in-process reader; the ``mq`` kind
decoded in Spark against ``unpack_payload``; the command end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from sharedq.log import LogStream, RecordType, pack_payload, unpack_payload
from sharedq.pipeline import PipelineError, PipelineReason
from sharedq.pipeline.job import JobContext
from sharedq.pipeline.jobs import print_log
from sharedq.pipeline.transforms.messages import MESSAGE_KINDS, mq_kind
from sharedq.pipeline.transforms.printing import PRINT_COLUMNS, parse_types
from tests.pipeline.conftest import APP, GroupLog


def test_mq_kind_reads_what_unpack_payload_reads(spark: SparkSession) -> None:
    payloads: list[bytes | None] = [
        pack_payload({"mq": kind})
        for kind in (*MESSAGE_KINDS, "descriptor", "definition", "control", "commit-decided")
    ]
    payloads += [
        pack_payload({"qmgr": "QM1"}),
        pack_payload({"mq": "x" * 40}),  # str8, not a fixstr: not read
        pack_payload({"mq": 7}),
        pack_payload({"mq": "put", "other": 1}),
        pack_payload(["mq", "put"]),
        b"\x81\xa2mq\xa5pu",  # truncated
        b"",
        None,
    ]
    frame = spark.createDataFrame([(i, p) for i, p in enumerate(payloads)], "i int, payload binary")
    got = {r.i: r.kind for r in frame.select("i", mq_kind(frame.payload).alias("kind")).collect()}
    for i, payload in enumerate(payloads):
        want = None
        if payload:
            try:
                value = unpack_payload(payload)
            except Exception:
                value = None
            if isinstance(value, dict) and set(value) == {"mq"} and isinstance(value["mq"], str):
                want = value["mq"] if len(value["mq"]) < 32 else None
        assert got[i] == want, (i, payload)


def test_type_names_and_codes() -> None:
    assert parse_types(["PUT", "read", "0B", "0x0d", "commit"]) == [7, 8, 11, 13, 15]
    with pytest.raises(PipelineError) as caught:
        parse_types(["NOPE"])
    assert caught.value.reason is PipelineReason.BAD_ARGUMENT
    assert "NOPE" in str(caught.value)


def test_print_chooses_the_records_the_reader_yields(
    spark: SparkSession, group_log: GroupLog, tmp_path: Path
) -> None:
    records = [r for p in group_log.pairs for r in LogStream.open_existing(p.log).records()]
    ctx = JobContext.open(spark, group_log.root, tmp_path)
    result = print_log.run(ctx, types=("PUT", "08"), queues=("ORDERS",), limit=3)
    want = [
        r for r in records if r.type in (RecordType.PUT, RecordType.READ) and r.queue == b"ORDERS"
    ]
    assert result.figures["records"] == len(want) > 0
    frame = spark.read.parquet(str(tmp_path / "print" / "records"))
    assert frame.columns == list(PRINT_COLUMNS)
    assert dict(frame.dtypes)["time"] == "timestamp" and dict(frame.dtypes)["line"] == "string"
    assert sorted((r.writer, r.lsn) for r in frame.collect()) == sorted(
        (r.writer, r.lsn) for r in want
    )
    lines = (tmp_path / "print" / "records.txt").read_text().splitlines()
    assert len(lines) == len(want)
    assert all("ORDERS" in line and (" PUT " in line or " READ " in line) for line in lines)
    assert result.summary.count("\n") >= 3 and result.figures["shown"] == 3

    # one unit of work, by its id, and by server and time
    uow = next(r.uow for r in want if r.type == RecordType.PUT and r.uow is not None)
    result = print_log.run(ctx, uow=uow.hex().upper())
    assert result.figures["records"] == sum(1 for r in records if r.uow == uow)
    first = sorted(r.time_us for r in records)[len(records) // 2]
    from datetime import UTC, datetime

    start = datetime.fromtimestamp(first / 1e6, UTC).isoformat()
    result = print_log.run(ctx, start=start, servers=("QM2",), structures=(APP,))
    assert result.figures["records"] == sum(
        1 for r in records if r.time_us >= first and r.writer == "QM2" and r.structure == APP
    )


def test_print_refuses_a_bad_type_before_reading(
    spark: SparkSession, group_log: GroupLog, tmp_path: Path
) -> None:
    ctx = JobContext.open(spark, group_log.root, tmp_path)
    with pytest.raises(PipelineError) as caught:
        print_log.run(ctx, types=("NOPE",))
    assert caught.value.reason is PipelineReason.BAD_ARGUMENT


def test_the_command_end_to_end(spark: SparkSession, group_log: GroupLog, tmp_path: Path) -> None:
    from sharedq.cli.main import cli

    result = CliRunner().invoke(
        cli,
        [
            *("pipeline", "print", "--input", str(group_log.root)),
            *("--output", str(tmp_path), "--type", "COMMIT", "--limit", "2"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "record(s) chosen" in result.output
    assert (tmp_path / "print" / "summary.txt").read_text().startswith("log print:")
    assert (tmp_path / "print" / "records.txt").is_file()


def test_the_command_names_a_bad_type(group_log: GroupLog, tmp_path: Path) -> None:
    sharedq = Path(sys.executable).with_name("sharedq")
    done = subprocess.run(
        [
            *(str(sharedq), "pipeline", "print", "--input", str(group_log.root)),
            *("--output", str(tmp_path), "--type", "NOPE"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "NOPE" in done.stderr and "not a record type" in done.stderr
