"""The SparkSession every job runs in, and how long the JVM took to start.

Session creation is kept apart from the transformations (pure functions of
DataFrames) and from reading and writing, so that tests share one session and a
cluster deployment only changes ``--master`` and ``--conf``.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sharedq.pipeline import jvm_output
from sharedq.pipeline.errors import PipelineReason, pipeline_error

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The JVM options of the driver (local mode: the whole job) and of the executors.
_JAVA_OPTIONS = "-XX:+UseParallelGC -XX:CompileThresholdScaling=2"

#: Settings every job starts from; ``conf`` given by the caller overrides them.
DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    # The jobs show their own progress; Spark's stage bars would garble it.
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    # Logs of a queue-sharing group are small next to what Spark's default 200
    # partitions are sized for; a few partitions per core keep tasks busy.
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.driver.memory": "2g",
    # The throughput collector: a job is a batch that builds and drops millions of
    # short-lived rows; with G1 (Java's default) a quarter of the fold's time on two
    # cores went to collection, with it a fiftieth.  Takes effect for a JVM this
    # session starts (local mode, the driver) and for executors.
    # JIT thresholds doubled: a warm run of recover at 1M spent 1.7 to 1.9 of its 3.8
    # JVM CPU seconds in the compiler threads (mostly Spark's planner code, still
    # warming, on the two cores the job has), 1.3 to 1.4 of 3.3 to 3.5 with them; at
    # 5M 2.5 of 9.0 against 2.8 of 9.2 (docs/pipeline.md, Performance).
    "spark.driver.extraJavaOptions": _JAVA_OPTIONS,
    "spark.executor.extraJavaOptions": _JAVA_OPTIONS,
    "spark.sql.parquet.binaryAsString": "false",
    # An aggregation per entry (recover's fold, a message's life) keeps a buffer per
    # key in a hash map; past 128 keys (Spark's default) it sorts every row instead.
    "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": "262144",
    # Log data sets carry a CRC on every page: have Spark's reader check them, so a
    # damaged page fails the job instead of being read as records.
    "spark.hadoop.parquet.page.verify-checksum.enabled": "true",
}


#: The Spark masters there are (Spark's own rule: yarn, or spark://, k8s://, local...).
_MASTER = re.compile(
    r"local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?|local-cluster\[\d+,\d+,\d+\]|yarn"
    r"|spark://\S+|k8s://\S+"
)


def check_master(master: str | None) -> None:
    """``BAD_ARGUMENT`` unless ``master`` is a Spark master (or ``None``, the default).

    Checked before the JVM starts: Spark's own refusal comes as a Java stack trace on
    the terminal and a gateway error, seconds later.
    """
    if master is not None and (not isinstance(master, str) or not _MASTER.fullmatch(master)):
        raise pipeline_error(
            PipelineReason.BAD_ARGUMENT,
            f"--master {master!r} is not a Spark master: local, local[N], local[*], yarn, "
            "spark://HOST:PORT or k8s://URL",
        )


@dataclass(frozen=True)
class StartedSession:
    """A session and the seconds its JVM and context took to come up."""

    spark: SparkSession
    startup_seconds: float


def start_session(
    master: str = "local[*]",
    conf: Mapping[str, str] | None = None,
    app_name: str = "sharedq-pipeline",
) -> StartedSession:
    """Start (or join) a SparkSession with the pipeline's defaults.

    ``SPARK_UNAVAILABLE`` when PySpark is missing or no Java runtime is found, with the
    command that installs it, instead of Py4J's traceback.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise pipeline_error(
            PipelineReason.SPARK_UNAVAILABLE,
            "PySpark is not installed: pip install 'sharedq[spark]'",
        ) from None
    if shutil.which("java") is None and not _java_home():
        raise pipeline_error(
            PipelineReason.SPARK_UNAVAILABLE,
            "no Java runtime found: install Java 17 "
            "(Debian: apt-get install openjdk-17-jre-headless)",
        )
    check_master(master)
    settings = {**DEFAULT_CONF, **(conf or {})}
    if master.startswith("local"):
        _workers_run_this_python(settings)
    # Spark's start-up chatter stays off the terminal; its errors do not (jvm_output).
    settings["spark.driver.extraJavaOptions"] = jvm_output.quiet_java_options(
        settings.get("spark.driver.extraJavaOptions")
    )
    started = time.perf_counter()
    if not jvm_output.jvm_running():
        jvm_output.start_context({**settings, "spark.master": master, "spark.app.name": app_name})
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return StartedSession(spark, time.perf_counter() - started)


def _workers_run_this_python(settings: Mapping[str, str]) -> None:
    """In local mode, Spark's Python workers run this Python, which imports ``sharedq``.

    PySpark starts workers with ``PYSPARK_PYTHON``, else ``python3`` from the ``PATH``,
    which need not be the virtual environment the job runs in (``.venv/bin/sharedq``
    runs without ``.venv/bin`` on the ``PATH``).  A ``spark.pyspark.python`` setting
    or an exported ``PYSPARK_PYTHON`` is kept.
    """
    chosen = settings.get("spark.pyspark.python") or os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = chosen or sys.executable


def parse_conf(pairs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``key=value`` strings (the CLI's ``--conf``) as a mapping; ``BAD_ARGUMENT`` otherwise."""
    conf: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise pipeline_error(
                PipelineReason.BAD_ARGUMENT, f"--conf {pair!r}: expected KEY=VALUE"
            )
        conf[key.strip()] = value
    return conf


def _java_home() -> bool:
    home = os.environ.get("JAVA_HOME")
    return bool(home) and os.path.exists(os.path.join(str(home), "bin", "java"))
