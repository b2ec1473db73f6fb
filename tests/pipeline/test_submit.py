"""The jobs run under ``spark-submit``, as on a cluster: the same commands, one entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

import sharedq.cli.submit
from tests.pipeline.conftest import GroupLog


def test_spark_submit_runs_a_job(group_log: GroupLog, tmp_path: Path) -> None:
    spark_submit = Path(sys.executable).parent / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    out = tmp_path / "out"
    result = subprocess.run(
        [
            str(spark_submit),
            "--master",
            "local[2]",
            sharedq.cli.submit.__file__,
            "print",
            "--input",
            str(group_log.root),
            "--output",
            str(out),
            "--type",
            "PUT",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    records = pq.read_table(out / "print" / "records")
    assert records.num_rows > 0
    assert set(records.column("type_name").to_pylist()) == {"PUT"}
    assert "record(s) chosen" in (out / "print" / "summary.txt").read_text()


def test_spark_submit_entry_point_refuses_bad_input(tmp_path: Path) -> None:
    code = sharedq.cli.submit.main(
        ["print", "--input", str(tmp_path), "--output", str(tmp_path / "out")]
    )
    assert code == 1
