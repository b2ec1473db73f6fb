"""``--master spark://HOST:PORT`` proven: the ``recover`` job on a real standalone cluster.

The test starts a Spark standalone master and one worker (one core, a little memory)
from PySpark's own launcher (``spark-class org.apache.spark.deploy.master.Master`` and
``...worker.Worker``: the classes ``sbin/start-master.sh`` and ``start-worker.sh``
run), runs ``sharedq pipeline recover --master spark://127.0.0.1:PORT`` in a process of
its own (a JVM holds one SparkContext, and the suite's is ``local[2]``), and compares
the entries it wrote with the in-process recovery of the same log.  The executor's
Python workers decode the staging segments, so they import ``sharedq`` as a
cluster's must (``spark.pyspark.python``).  Master and worker are stopped at the end,
whatever happened.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow.parquet as pq

from sharedq.clock import retry_until
from sharedq.pipeline.inprocess import recover_inprocess
from tests.pipeline.conftest import APP, GroupLog
from tests.pipeline.helpers import entry_rows

HOST = "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def _listening(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1):
            return True
    except OSError:
        return False


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:] if path.exists() else ""


def _environment(work: Path) -> dict[str, str]:
    """What the master, the worker and the job share: this Python, local addresses only,
    logs and scratch under the test's directory."""
    return {
        **os.environ,
        "SPARK_LOCAL_IP": HOST,
        "SPARK_LOG_DIR": str(work / "logs"),
        "SPARK_WORKER_DIR": str(work / "worker"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }


@contextmanager
def standalone_cluster(work: Path) -> Iterator[str]:
    """A master and a one-core worker registered with it; yields the master's URL."""
    spark_class = str(Path(sys.executable).parent / "spark-class")
    env = _environment(work)
    (work / "worker").mkdir(parents=True)
    port, ui, worker_ui = _free_port(), _free_port(), _free_port()
    url = f"spark://{HOST}:{port}"
    started: list[subprocess.Popen[bytes]] = []
    try:
        with open(work / "master.out", "wb") as master_out:
            started.append(
                subprocess.Popen(
                    [
                        *(spark_class, "org.apache.spark.deploy.master.Master"),
                        *("--host", HOST, "--port", str(port), "--webui-port", str(ui)),
                    ],
                    env=env,
                    stdout=master_out,
                    stderr=subprocess.STDOUT,
                )
            )
        assert retry_until(lambda: _listening(port), timeout_s=90, first_pause_s=0.2), (
            f"the Spark master did not listen on port {port}: " + _tail(work / "master.out")
        )
        with open(work / "worker.out", "wb") as worker_out:
            started.append(
                subprocess.Popen(
                    [
                        *(spark_class, "org.apache.spark.deploy.worker.Worker", url),
                        *("--host", HOST, "--cores", "1", "--memory", "1g"),
                        *("--webui-port", str(worker_ui), "--work-dir", str(work / "worker")),
                    ],
                    env=env,
                    stdout=worker_out,
                    stderr=subprocess.STDOUT,
                )
            )
        assert retry_until(
            lambda: "Registering worker" in _tail(work / "master.out"),
            timeout_s=90,
            first_pause_s=0.2,
        ), "the worker did not register: " + _tail(work / "worker.out")
        yield url
    finally:
        for process in reversed(started):
            process.terminate()
        for process in reversed(started):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def test_recover_on_a_standalone_cluster_equals_in_process_recovery(
    group_log: GroupLog, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    with standalone_cluster(tmp_path / "cluster") as master:
        command = [sys.executable, "-m", "sharedq", "pipeline", "recover"]
        command += ["--input", str(group_log.root), "--output", str(out), "--structure", APP]
        command += ["--master", master]
        for setting in (
            f"spark.pyspark.python={sys.executable}",
            "spark.executor.memory=512m",
            "spark.executor.cores=1",
            "spark.cores.max=1",
        ):
            command += ["--conf", setting]
        ran = subprocess.run(
            command,
            env=_environment(tmp_path / "cluster"),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert ran.returncode == 0, ran.stderr[-3000:]
    # The job ran as an application of this master, with executors on the worker.
    assert "Registered app sharedq-pipeline" in (tmp_path / "cluster" / "master.out").read_text()
    assert list((tmp_path / "cluster" / "worker").glob("app-*/*/stderr")), "no executor ran"
    got = pq.read_table(out / "recover" / "entries").to_pylist()
    pair = next(p for p in group_log.pairs if p.name == APP)
    want = entry_rows(APP, recover_inprocess(pair, APP).contents)
    assert sorted(tuple(row.values()) for row in got) == sorted(want) and want
