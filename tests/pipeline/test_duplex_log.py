"""The Spark pipeline reads a duplex log whose writer's machine crashed: the records only
the logging structure held are copied back before Spark stages the log, so every
committed record is read, once (``sharedq.pipeline.sources.stage_log`` opens the stream,
whose reader copies back; see tests/log/test_duplex.py for the crash itself)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pyspark.sql import SparkSession

from sharedq.pipeline.sources import find_pairs, read_log
from sharedq.testing.redis_server import RedisServer
from tests.log.test_duplex import crash_machine, run_child


def test_spark_reads_every_committed_record_after_a_machine_crash(
    spark: SparkSession,
    tmp_path: Path,
    boot: Path,
    redis_servers: Callable[..., RedisServer],
) -> None:
    root = tmp_path / "log"
    seen = run_child(root, redis_servers().url, boot, 120)
    assert seen["durable"] == 0  # the segment on disk holds none of them
    assert crash_machine(root, seen["durable"], boot) == 0
    rows = read_log(spark, find_pairs(root), tmp_path / "work").where("data is not null")
    assert sorted(bytes(r.data) for r in rows.select("data").collect()) == [
        b"m%06d" % n for n in range(120)
    ]
