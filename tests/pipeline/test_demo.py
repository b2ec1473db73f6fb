"""``sharedq demo`` end to end, in its short mode: the README's main job must balance.

On the embedded default (threads) and on a private Redis server (a process per
manager, the last one SIGKILLed mid-work).  The balance sheet is read from the
pipeline's tables and checked against the queues' depths after the structures were
destroyed and recovered.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from rich.console import Console

from sharedq.demo.run import DemoOptions, run_demo
from sharedq.testing.redis_server import RedisServer


def _check(outcome_output: Path, options: DemoOptions) -> None:
    console = Console(record=True, width=140)
    outcome = run_demo(options, console)
    text = console.export_text()
    summary = outcome.summary
    # Somebody died and was recovered; the structures came back with every message.
    assert outcome.workload.crashed == "QM3"
    assert outcome.workload.checkpoints == 1
    assert outcome.depth_before_loss == outcome.depth_after_recovery
    # The balance sheet: opening (the SRDS the log starts from) + put = gotten + still
    # queued + expired + cold, from the log and that image alone.
    assert summary.put_committed > 0
    assert summary.total("opening") + summary.put_committed == (
        summary.total("got_committed")
        + summary.total("still_queued")
        + summary.total("expired")
        + summary.total("cold_queued")
    )
    assert summary.still_queued == sum(outcome.depth_after_recovery.values())
    assert summary.total("expired") == outcome.expired_purged > 0
    assert outcome.nothing_lost
    assert "nothing lost" in text
    # Work per manager: all three managers show up, the dead one too.
    assert {row["server"] for row in summary.servers} >= {"QM1", "QM2", "QM3"}
    assert outcome.report_path.is_file()
    assert str(outcome.report_path) in text.replace("\n", "")
    assert list((outcome_output / "pipeline").rglob("*.png"))


def test_the_demo_balances_on_the_embedded_default(spark: SparkSession, tmp_path: Path) -> None:
    options = DemoOptions(tmp_path / "demo", rounds=30, master="local[2]")
    _check(tmp_path / "demo", options)


@pytest.mark.slow
def test_the_demo_balances_with_managers_in_processes_on_redis(
    spark: SparkSession, tmp_path: Path, redis_servers: object
) -> None:
    server: RedisServer = redis_servers()  # type: ignore[operator]
    options = DemoOptions(
        tmp_path / "demo", backend=f"{server.url}?lease=2&retry=2", rounds=30, master="local[2]"
    )
    _check(tmp_path / "demo", options)
