"""``stats``: per queue and interval and per server, against the reader and the
structure the group left behind."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from sharedq.log import LogStream, unpack_payload
from sharedq.mq import keys
from sharedq.mq.classify import list_roles
from sharedq.mq.directory import CONTROL_LIST, USE_QUEUE
from sharedq.pipeline.job import JobContext
from sharedq.pipeline.jobs import stats
from tests.pipeline import handmade
from tests.pipeline.conftest import APP, GroupLog


def _kind(payload: bytes | None) -> str | None:
    value = unpack_payload(payload) if payload is not None else None
    return value.get("mq") if isinstance(value, dict) else None


def test_stats_of_the_group(spark: SparkSession, group_log: GroupLog, tmp_path: Path) -> None:
    ctx = JobContext.open(spark, group_log.root, tmp_path)
    result = stats.run(ctx, interval=0.05)
    queues = spark.read.parquet(str(tmp_path / "stats" / "queues"))
    types = dict(queues.dtypes)
    assert {
        k: types[k] for k in ("queue", "interval_start", "puts", "gets", "backouts", "depth")
    } == {
        "queue": "string",
        "interval_start": "timestamp",
        "puts": "bigint",
        "gets": "bigint",
        "backouts": "bigint",
        "depth": "bigint",
    }
    servers = spark.read.parquet(str(tmp_path / "stats" / "servers"))
    assert servers.columns[:6] == ["server", "puts", "gets", "commits", "backouts", "share_of_gets"]

    records = [r for p in group_log.pairs for r in LogStream.open_existing(p.log).records()]
    kinds = [(r, _kind(r.payload)) for r in records]
    gets = Counter(r.writer for r, k in kinds if k == "get")
    puts = Counter((r.queue or b"").decode() for r, k in kinds if k == "put")
    assert result.figures["gets_per_server"] == {
        w: gets.get(w, 0) for w in {r.writer for r in records}
    }
    per_queue = {
        r.queue: r for r in queues.groupBy("queue").sum("puts", "gets", "backouts").collect()
    }
    assert {q: r["sum(puts)"] for q, r in per_queue.items()} == dict(puts)
    backouts = Counter(
        (r.queue or b"").decode() for r, k in kinds if k in ("backout-gets", "backout-puts")
    )
    assert {q: r["sum(backouts)"] for q, r in per_queue.items() if r["sum(backouts)"]} == dict(
        backouts
    )
    shares = {r.server: r.share_of_gets for r in servers.collect()}
    assert sum(shares.values()) == pytest.approx(1.0)
    mean = sum(gets.values()) / len(shares)
    assert result.figures["max_over_mean"] == pytest.approx(max(gets.values()) / mean, abs=1e-3)

    # the depth at the end is what the structure holds (committed, on its queue)
    final = group_log.final[APP]
    roles = list_roles(final.lists.get(CONTROL_LIST, ()))
    live = Counter(
        roles[n].name
        for n, entries in final.lists.items()
        if n in roles and roles[n].use == USE_QUEUE
        for e in entries
        if e.key != keys.LHQC_KEY and keys.is_committed(e.key)
    )
    depths = result.figures["final_depth"]
    assert {q: d for q, d in depths.items() if d} == dict(live)
    # every interval of the span is there, for every queue, one step apart
    steps = queues.where("queue = 'ORDERS'").orderBy("interval_start").collect()
    gaps = {(b.interval_start - a.interval_start).total_seconds() for a, b in pairwise(steps)}
    assert gaps <= {0.05}
    assert all(r.depth >= 0 for r in queues.collect())


def test_depth_over_time_of_a_handmade_log(spark: SparkSession, tmp_path: Path) -> None:
    log_dir = handmade.write_handmade_log(tmp_path / "in")
    ctx = JobContext.open(spark, log_dir, tmp_path / "out")
    result = stats.run(ctx, interval=1.0)
    rows = spark.read.parquet(str(tmp_path / "out" / "stats" / "queues")).collect()
    depth = {(r.queue, int(r.interval_start.timestamp()) - handmade.T0 // 10**6): r for r in rows}
    assert [depth[("Q1", s)].depth for s in range(3)] == [1, 1, 1]
    assert [depth[("Q2", s)].depth for s in range(3)] == [3, 2, 2]
    assert (depth[("Q1", 0)].puts, depth[("Q1", 0)].gets, depth[("Q1", 0)].backouts) == (4, 4, 3)
    assert depth[("Q1", 2)].puts == 2 and depth[("Q1", 2)].gets == 2
    servers = {
        r.server: r
        for r in spark.read.parquet(str(tmp_path / "out" / "stats" / "servers")).collect()
    }
    assert {s: r.gets for s, r in servers.items()} == {"QM1": 2, "QM2": 6, "QM3": 1}
    assert servers["QM2"].share_of_gets == pytest.approx(6 / 9)
    # QM1 committed unit a1 and an out-of-syncpoint put; QM2 b1 and a sync get; QM3 c1
    assert {s: r.commits for s, r in servers.items()} == {"QM1": 2, "QM2": 2, "QM3": 1}
    assert result.figures["gets_per_server"] == {"QM1": 2, "QM2": 6, "QM3": 1}
    assert result.figures["max_over_mean"] == pytest.approx(2.0, abs=1e-3)


def test_the_command_refuses_a_bad_interval(group_log: GroupLog, tmp_path: Path) -> None:
    from sharedq.cli.main import cli

    result = CliRunner().invoke(
        cli,
        [
            *("pipeline", "stats", "--input", str(group_log.root)),
            *("--output", str(tmp_path), "--interval", "0"),
        ],
    )
    assert result.exit_code != 0
    assert "--interval" in str(result.exception) or "--interval" in result.output
