"""``events``: depth events from the log, grouped by CorrelId, on each queue's depth."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd  # type: ignore[import-untyped, unused-ignore]
import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from sharedq.cf.memory import MemoryFacility
from sharedq.clock import retry_until
from sharedq.log import LogStream, RecordType
from sharedq.mq import (
    EVENT_QUEUE,
    DepthEvent,
    DepthEvents,
    QueueManager,
    read_depth_event,
    structure_params,
)
from sharedq.pipeline import charts
from sharedq.pipeline.job import JobContext, JobResult
from sharedq.pipeline.jobs import events, report
from sharedq.pipeline.sources import find_pairs
from sharedq.pipeline.transforms.events import EVENT_COLUMNS, GROUP_COLUMNS, decode_payload
from sharedq.recovery import RecoverySettings
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


# -- a log the system wrote ----------------------------------------------------------------

E2E_QUEUE = "BURSTS"
#: High at 16 of 20 messages (80 %), Low back at 4 (20 %).
E2E_EVENTS = DepthEvents(high_limit=80, low_limit=20, high_enabled=True, low_enabled=True)


def _event_messages(qm: QueueManager, n: int) -> list[DepthEvent]:
    """The next ``n`` messages on the event queue (each waited for: a peer issues its
    own when the broadcast reaches it)."""
    queue = qm.open(EVENT_QUEUE)
    return [read_depth_event(queue.get(wait=30)) for _ in range(n)]


def _depth_event_records(log_dir: Path) -> int:
    return sum(
        1 for r in LogStream.open_existing(log_dir).records() if r.type == RecordType.DEPTH_EVENT
    )


def test_events_of_a_group_that_crossed_high_then_low(spark: SparkSession, tmp_path: Path) -> None:
    # Given three managers with a recovery log, PERFMEV enabled, and a queue with
    # High and Low events enabled
    facility = MemoryFacility()
    for name in ("EADMIN", "EAPP"):
        facility.create(structure_params(name, queues=4, managers=4, messages=2_000))
    settings = RecoverySettings(tmp_path / "recovery", poll_seconds=0.05)
    managers = [
        QueueManager(
            facility,
            f"QM{n}",
            n,
            admin="EADMIN",
            structures=["EAPP"],
            recovery=settings,
            performance_events=True,
        )
        for n in (1, 2, 3)
    ]
    qm1, qm2, _ = managers
    qm1.define_queue(
        E2E_QUEUE, structure="EAPP", max_depth=20, default_persistent=True, depth_events=E2E_EVENTS
    )
    log_dir = next(p.log for p in find_pairs(settings.root) if p.name == "EAPP")
    try:
        # When QM1 puts 16 messages (High) and QM2 gets 12 of them (Low)
        for i in range(16):
            qm1.open(E2E_QUEUE).put(f"m{i}".encode())
        high = _event_messages(qm1, 3)
        for _ in range(12):
            qm2.open(E2E_QUEUE).get()
        low = _event_messages(qm1, 3)
        # every message issued is logged (a peer logs just after it puts its message)
        assert retry_until(
            lambda: _depth_event_records(log_dir) == 6, timeout_s=30, first_pause_s=0.01
        )
    finally:
        for qm in managers:
            qm.close()
    assert {(e.event, e.coordinator) for e in high} == {("high", "QM1")}
    assert {(e.event, e.coordinator) for e in low} == {("low", "QM2")}

    # Then the job finds two events of three messages each, at the depths they crossed
    result = events.run(JobContext.open(spark, settings.root, tmp_path / "out"))
    groups = {g["event"]: g for g in result.figures["event_groups"]}
    assert sorted(groups) == ["high", "low"]
    assert groups["high"]["correl_id"] == high[0].correl_id.hex()
    assert groups["low"]["correl_id"] == low[0].correl_id.hex()
    # Low fires at the get that takes the message off the put list; its delete, which
    # lowers the committed depth, is logged after the event: the log says 5 there
    for kind, coordinator, depth, log_depth in (("high", "QM1", 16, 16), ("low", "QM2", 4, 5)):
        group = groups[kind]
        assert group["queue"] == E2E_QUEUE
        assert group["coordinator"] == coordinator
        assert (group["messages"], group["managers"]) == (3, ["QM1", "QM2", "QM3"])
        assert (group["depth"], group["log_depth"]) == (depth, log_depth)
    # the statistics of the High messages: QM1 put 16, the others nothing yet
    assert (groups["high"]["enqueues"], groups["high"]["dequeues"]) == (16, 0)
    assert (groups["low"]["enqueues"], groups["low"]["dequeues"]) == (0, 12)
    depth = spark.read.parquet(str(tmp_path / "out" / "events" / "depth"))
    series = [r.depth for r in depth.where(f"queue = '{E2E_QUEUE}'").orderBy("seq").collect()]
    assert series == [*range(1, 17), *range(15, 3, -1)]
