"""The session's JVM options: the ones ``DEFAULT_CONF`` names reach the JVM it runs in."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sharedq.pipeline.session import DEFAULT_CONF

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JIT = "-XX:CompileThresholdScaling=2"


def _java_children() -> list[list[str]]:
    """The command lines of the ``java`` processes this one started."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            parent = int(stat[stat.rindex(")") + 2 :].split()[1])
            if stat[stat.index("(") + 1 : stat.rindex(")")] != "java" or parent != os.getpid():
                continue
            found.append(Path(f"/proc/{entry}/cmdline").read_bytes().decode().split("\0"))
        except (OSError, ValueError):
            continue
    return found


def test_the_defaults_keep_the_parallel_collector_and_raise_the_jit_thresholds() -> None:
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        options = DEFAULT_CONF[key].split()
        assert "-XX:+UseParallelGC" in options
        assert JIT in options


def test_the_suites_jvm_runs_with_them(spark: SparkSession) -> None:
    options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions") or ""
    assert JIT in options.split()
    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc: the JVM's command line is not readable here")
    commands = _java_children()
    if not commands:
        pytest.skip("the session's JVM was not started by this process")
    assert any(JIT in command and "-XX:+UseParallelGC" in command for command in commands)
