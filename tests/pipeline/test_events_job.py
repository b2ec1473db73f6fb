"""``events``: depth events from the log, grouped by CorrelId, on each queue's depth."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd  # type: ignore[import-untyped, unused-ignore]
import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from sharedq.pipeline import charts
from sharedq.pipeline.job import JobContext, JobResult
from sharedq.pipeline.jobs import events, report
from sharedq.pipeline.transforms.events import EVENT_COLUMNS, GROUP_COLUMNS, decode_payload
from tests.pipeline import depth_events_log as handmade
from tests.pipeline.handmade import T0

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _ms(when: dt.datetime) -> int:
    return round(when.timestamp() * 1000) - T0 // 1000


@pytest.fixture(scope="module")
def events_run(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, JobResult]:
    root = tmp_path_factory.mktemp("events")
    log_dir = handmade.write_events_log(root / "in")
    ctx = JobContext.open(spark, log_dir, root / "out")
    return root / "out", events.run(ctx)


def test_one_group_per_correl_id(spark: SparkSession, events_run: tuple[Path, JobResult]) -> None:
    out, result = events_run
    groups = spark.read.parquet(str(out / "events" / "groups"))
    assert tuple(groups.columns) == GROUP_COLUMNS
    rows = {bytes.fromhex(r.correl_id): r for r in groups.collect()}
    assert set(rows) == {handmade.correl_id(n) for n in handmade.GROUPS}
    for number, expected in handmade.GROUPS.items():
        row = rows[handmade.correl_id(number)].asDict()
        assert _ms(row.pop("time")) == expected["ms"], number
        assert row.pop("structure") == handmade.STRUCTURE
        del row["correl_id"]
        assert row == {k: v for k, v in expected.items() if k != "ms"}, number
    assert result.figures["groups"] == 3
    assert result.figures["groups_per_type"] == {"high": 1, "low": 1, "full": 1}
    assert result.figures["messages"] == 5
    assert result.figures["records"] == 6
    assert [g["event"] for g in result.figures["event_groups"]] == ["high", "low", "full"]
    assert result.figures["event_groups"][1]["managers"] == ["QM1", "QM3"]


def test_every_record_with_the_depth_in_the_log_at_it(
    spark: SparkSession, events_run: tuple[Path, JobResult]
) -> None:
    out, _ = events_run
    table = spark.read.parquet(str(out / "events" / "events"))
    assert tuple(table.columns) == EVENT_COLUMNS
    rows = sorted(table.collect(), key=lambda r: (r.time, r.writer))
    assert [(_ms(r.time), r.writer, r.role, r.issued, r.log_depth) for r in rows] == [
        (42, "QM1", "coordinator", True, 4),
        (43, "QM2", "peer", True, 4),
        (132, "QM2", "coordinator", False, 2),
        (133, "QM1", "peer", True, 2),
        (134, "QM3", "peer", True, 2),
        (200, "QM3", "coordinator", True, 0),
    ]
    # an idle peer's statistics are null, as it wrote them
    idle = rows[1]
    assert (idle.enqueues, idle.dequeues, idle.high_depth, idle.since_reset_s) == (
        None,
        None,
        None,
        None,
    )
    assert (rows[0].depth, rows[0].max_depth, rows[0].since_reset_s) == (6, 10, 1.5)


def test_depth_over_time(spark: SparkSession, events_run: tuple[Path, JobResult]) -> None:
    out, _ = events_run
    depth = spark.read.parquet(str(out / "events" / "depth"))
    q1 = depth.where("queue = 'Q1'").orderBy("seq").collect()
    assert [(_ms(r.time), r.depth) for r in q1] == handmade.Q1_DEPTH
    assert depth.where("queue = 'Q2'").count() == 0


def test_the_summary_lists_each_group(events_run: tuple[Path, JobResult]) -> None:
    out, result = events_run
    assert "events: 3 (high 1, low 1, full 1); event messages: 5; records: 6" in result.summary
    lines = [line.split() for line in result.summary.splitlines()]
    assert ["high", "Q1", "QM1", "2", "6", "0", "6", "4", "QM1,", "QM2"] in [
        line[1:] for line in lines if len(line) > 1
    ]
    assert (out / "events").is_dir()


def test_a_log_without_events(spark: SparkSession, tmp_path: Path) -> None:
    from tests.pipeline import handmade as plain

    log_dir = plain.write_handmade_log(tmp_path / "in")
    result = events.run(JobContext.open(spark, log_dir, tmp_path / "out"))
    assert result.figures["groups"] == 0
    assert result.figures["event_groups"] == []
    assert "no depth events (0 DEPTH_EVENT records)" in result.summary
    depth = spark.read.parquet(str(tmp_path / "out" / "events" / "depth"))
    # the handmade log's Q2 ends at 2 (stats agrees: the rule is one)
    last = depth.where("queue = 'Q2'").orderBy("seq").collect()[-1]
    assert last.depth == 2


def test_payloads_decode_leniently() -> None:
    import msgpack

    assert decode_payload(None) is None
    assert decode_payload(b"\xc1") is None
    assert decode_payload(msgpack.packb([1, 2])) is None
    decoded = decode_payload(msgpack.packb({"event": "low", "since_reset_s": 3}))
    assert decoded is not None
    assert decoded[0] == "low" and decoded[-1] == 3.0 and isinstance(decoded[-1], float)
    assert decoded[1:-1] == (None,) * 7


def test_the_report_draws_the_events_chart(spark: SparkSession, tmp_path: Path) -> None:
    log_dir = handmade.write_events_log(tmp_path / "in")
    ctx = JobContext.open(spark, log_dir, tmp_path / "out")
    done = report.run_all(ctx, jobs=["events"])
    assert done.errors == {}
    assert sorted(done.charts) == ["events"]
    assert done.charts["events"].read_bytes().startswith(PNG_MAGIC)
    page = (tmp_path / "out" / "report.html").read_text()
    assert 'data-file="events.png"' in page
    assert '<h2 id="events">' in page
    assert "events by CorrelId" in page
    assert done.figures()["events.groups"] == 3


def test_the_events_chart_without_events(tmp_path: Path) -> None:
    path = charts.events_chart(
        pd.DataFrame(columns=["queue", "time", "depth"]),
        pd.DataFrame(columns=["queue", "time", "event", "coordinator", "log_depth"]),
        tmp_path / "events.png",
    )
    assert path.read_bytes().startswith(PNG_MAGIC)


def test_the_events_command(tmp_path: Path) -> None:
    from sharedq.cli.main import cli

    log_dir = handmade.write_events_log(tmp_path / "in")
    result = CliRunner().invoke(
        cli,
        [
            *("pipeline", "events", "--input", str(log_dir)),
            *("--output", str(tmp_path / "out"), "--master", "local[2]", "--limit", "1"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "... and 2 more (events/groups)" in result.output
    assert (tmp_path / "out" / "events" / "summary.txt").is_file()
