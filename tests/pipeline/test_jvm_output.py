"""Spark's start-up chatter stays off the terminal; its errors do not."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
import textwrap

import pytest
from pyspark.sql import SparkSession

from sharedq.pipeline import jvm_output

#: What a JVM under PySpark 4 printed at start-up before, on a host whose name
#: resolves to a loopback address (the lines the demo showed a new user).
CHATTER = """\
WARNING: Using incubator modules: jdk.incubator.vector
Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties
Setting default log level to "WARN".
To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).
"""


def test_forward_drops_chatter_and_passes_the_rest_with_a_level() -> None:
    errors = (
        "06:05:22 ERROR Executor: Exception in task 1.0 in stage 3.0 (TID 4)\n"
        "\tat org.apache.spark.executor.Executor$TaskRunner.run(Executor.scala:906)\n"
        "Caused by: java.io.IOException: No space left on device\n"
    )
    other = "Something the JVM says that nobody foresaw\n"
    seen: list[tuple[int, str]] = []
    stream = io.BytesIO((CHATTER + errors + "\n" + other).encode())
    jvm_output.forward(stream, lambda level, line: seen.append((level, line)))
    assert seen == [
        (logging.ERROR, "06:05:22 ERROR Executor: Exception in task 1.0 in stage 3.0 (TID 4)"),
        (
            logging.ERROR,
            "\tat org.apache.spark.executor.Executor$TaskRunner.run(Executor.scala:906)",
        ),
        (logging.ERROR, "Caused by: java.io.IOException: No space left on device"),
        (logging.WARNING, "Something the JVM says that nobody foresaw"),
    ]
    assert stream.closed


def test_forward_logs_to_the_jvm_logger(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="sharedq.pipeline.jvm"):
        jvm_output.forward(io.BytesIO(b"ERROR boom\nWARNING: Using incubator modules: x\n"))
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("sharedq.pipeline.jvm", logging.ERROR, "ERROR boom")
    ]


def test_the_log4j_configuration_is_added_unless_the_caller_names_one() -> None:
    assert jvm_output.LOG4J2_CONFIG.is_file()
    quiet = jvm_output.quiet_java_options("-XX:+UseParallelGC")
    assert quiet == (
        f"-XX:+UseParallelGC -Dlog4j2.configurationFile={jvm_output.LOG4J2_CONFIG.as_uri()}"
    )
    own = "-Dlog4j2.configurationFile=file:///etc/mine.properties"
    assert jvm_output.quiet_java_options(own) == own
    assert jvm_output.quiet_java_options(None).startswith("-Dlog4j2.configurationFile=")


def test_the_suites_session_runs_with_it(spark: SparkSession) -> None:
    options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions") or ""
    assert "-XX:+UseParallelGC" in options
    assert jvm_output.LOG4J2_CONFIG.as_uri() in options


def test_a_new_session_is_quiet_and_its_errors_are_not() -> None:
    """In a process of its own (the JVM starts there): nothing on stderr but the error
    a failing task reports."""
    script = textwrap.dedent(
        """
        from pyspark.sql import functions as F
        from sharedq.pipeline.session import start_session

        spark = start_session("local[1]").spark
        print("rows", spark.range(5).count(), flush=True)

        @F.udf("int")
        def fails(value):
            raise ValueError("a task that fails on purpose")

        try:
            spark.range(1).select(fails("id")).collect()
        except Exception as exc:
            print("raised", type(exc).__name__, flush=True)
        spark.stop()
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "rows 5" in result.stdout
    assert "raised PythonException" in result.stdout
    for chatter in CHATTER.splitlines():
        assert chatter not in result.stderr
    for noise in ("WARN Utils", "WARN NativeCodeLoader", "log4j"):
        assert noise not in result.stderr
    # The failed task's error is still shown, with the Python traceback it carries.
    assert "ERROR Executor" in result.stderr
    assert "a task that fails on purpose" in result.stderr
