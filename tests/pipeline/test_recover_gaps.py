"""The Spark ``recover`` job checks the log as the servers' recovery does.

A log with a staging segment deleted after the SRDS is refused with ``LOG_INCOMPLETE``
(naming writer, range and file), from the API and from the command line; with
``--accept-loss`` the job goes on and its summary lists the loss; after the servers
recovered past an accepted loss, the job runs and equals what the structure holds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from sharedq.cf.memory import MemoryFacility
from sharedq.cli.pipeline import recover_command
from sharedq.log import LogConfig
from sharedq.mq import QueueManager, structure_params
from sharedq.mq.classify import recoverable_contents
from sharedq.pipeline import PipelineError, PipelineReason
from sharedq.pipeline.job import JobContext
from sharedq.pipeline.jobs import recover as job
from sharedq.recovery import RecoverySettings, accept_loss, contents

ADMIN, APP = "GADMIN", "GAPP"


def _group(root: Path) -> tuple[MemoryFacility, QueueManager]:
    facility = MemoryFacility()
    for name in (ADMIN, APP):
        facility.create(structure_params(name, queues=8, managers=4, messages=3000))
    settings = RecoverySettings(
        root,
        poll_seconds=0.05,
        max_wait_seconds=30,
        log_config=LogConfig(staging_bytes=1 << 20, segment_bytes=64 << 10),
    )
    qm = QueueManager(facility, "QM1", 1, admin=ADMIN, structures=[APP], recovery=settings)
    qm.define_queue("ORDERS", structure=APP, max_depth=1000)
    qm.checkpoint()
    orders = qm.open("ORDERS")
    for n in range(400):
        orders.put(b"m%05d" % n + b"." * 300, persistent=True)
    return facility, qm


def _delete_a_segment(qm: QueueManager) -> tuple[int, Path]:
    assert qm.recovery_log is not None
    segments = qm.recovery_log.pairs[APP].stream.layout.segments("QM1")
    first, path = segments[1]
    path.unlink()
    return first, path


def test_recover_refuses_a_log_with_a_missing_segment(spark: SparkSession, tmp_path: Path) -> None:
    root = tmp_path / "recovery"
    _, qm = _group(root)
    first, path = _delete_a_segment(qm)
    qm.close()
    ctx = JobContext.open(spark, root, tmp_path / "out")
    with pytest.raises(PipelineError) as refused:
        job.run(ctx, structure=APP)
    assert refused.value.reason is PipelineReason.LOG_INCOMPLETE
    assert f"writer QM1: lsns {first}.." in str(refused.value) and path.name in str(refused.value)
    # From the command line: a message and a non-zero exit, no traceback
    command = [sys.executable, "-m", "sharedq", "pipeline", "recover", "--input", str(root)]
    command += ["--output", str(tmp_path / "cli"), "--structure", APP]
    ran = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 1
    assert "sharedq: LOG_INCOMPLETE (4007)" in ran.stderr and "Traceback" not in ran.stderr
    # With --accept-loss the job goes on, and says what was lost
    result = CliRunner().invoke(
        recover_command,
        [
            "--input",
            str(root),
            "--output",
            str(tmp_path / "accepted"),
            "--structure",
            APP,
            "--accept-loss",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = (tmp_path / "accepted" / "recover" / "summary.txt").read_text()
    assert f"LOST:    writer QM1: lsns {first}.." in summary


def test_after_recovery_past_an_accepted_loss_recover_equals_the_structure(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = tmp_path / "recovery"
    facility, qm = _group(root)
    _delete_a_segment(qm)
    for name in (ADMIN, APP):
        facility.delete(name, force=True)
    accept_loss(root, APP)
    qm.reconnect()
    orders = qm.open("ORDERS")
    for n in range(20):
        orders.put(b"after %d" % n, persistent=True)
    qm.close()
    with facility.connect(APP, "AUDITOR") as auditor:
        live = recoverable_contents(contents(auditor))
    ctx = JobContext.open(spark, root, tmp_path / "out")
    result = job.run(ctx, structure=APP)
    rows = spark.read.parquet(str(result.tables["entries"])).collect()
    ids = {e.entry_id for entries in live.lists.values() for e in entries}
    mine = sorted((r.list_number, r.entry_id, r.data) for r in rows if r.entry_id in ids)
    theirs = sorted((n, e.entry_id, e.data) for n, entries in live.lists.items() for e in entries)
    assert mine == theirs and len(theirs) > 20


def test_a_damaged_data_set_is_left_out_when_its_loss_is_accepted(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The check reads the data sets while the first pass runs: a damaged one fails
    Spark's page checks there, and the job leaves it out and runs the pass again."""
    root = tmp_path / "recovery"
    _, qm = _group(root)
    orders = qm.open("ORDERS")
    for n in range(600):
        orders.put(b"d%05d" % n + b"." * 2000, persistent=True)
    assert qm.recovery_log is not None
    datasets = sorted((root / APP / "log" / "datasets").glob("*.parquet"))
    qm.close()
    assert datasets, "the log offloaded nothing"
    raw = bytearray(datasets[0].read_bytes())
    middle = len(raw) // 2
    raw[middle : middle + 64] = bytes(64)
    datasets[0].write_bytes(bytes(raw))
    with pytest.raises(PipelineError) as refused:
        job.run(JobContext.open(spark, root, tmp_path / "out"), structure=APP)
    assert refused.value.reason is PipelineReason.LOG_INCOMPLETE
    result = job.run(
        JobContext.open(spark, root, tmp_path / "accepted"), structure=APP, accept_loss=True
    )
    assert "LOST:" in result.summary and result.figures["log_lost"][APP] > 0
    assert spark.read.parquet(str(result.tables["entries"])).count() == result.figures["entries"]
