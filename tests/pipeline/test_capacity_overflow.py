"""The capacity job on logs real CQSs wrote: one through a structure overflow and back
(``tests.pipeline.overflow_log``), one without overflow, read on the Spark session."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from sharedq.cqs.names import text
from sharedq.pipeline import charts
from sharedq.pipeline.job import JobContext, JobResult
from sharedq.pipeline.jobs import capacity
from sharedq.pipeline.jobs.report import draw_charts
from sharedq.pipeline.transforms import overflow as O
from tests.pipeline.overflow_log import OVERFLOW, PRIMARY, A, OverflowFlow, write_overflow_log

QUEUE_A = text(A)
TABLES = ("overflow_events", "overflow_queues", "overflow_modes", "overflow_check")


def run(spark: SparkSession, flow: OverflowFlow, out: Path) -> JobResult:
    return capacity.run(JobContext.open(spark, flow.root, out), headroom=25)


@pytest.fixture(scope="module")
def result(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> JobResult:
    flow = write_overflow_log(tmp_path_factory.mktemp("overflow"))
    assert flow.entered_us is not None and flow.returned_us is not None
    return run(spark, flow, tmp_path_factory.mktemp("capacity"))


@pytest.fixture(scope="module")
def plain(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> JobResult:
    flow = write_overflow_log(tmp_path_factory.mktemp("plain"), overflow=False)
    assert flow.entered_us is None
    return run(spark, flow, tmp_path_factory.mktemp("capacity"))


def rows(result: JobResult, table: str) -> list[dict[str, object]]:
    return pq.read_table(result.tables[table]).to_pylist()


def test_every_overflow_record_is_in_the_events_table(result: JobResult) -> None:
    events = rows(result, "overflow_events")
    assert [e["event"] for e in events] == ["overflow", "returned", "normal"]
    assert [e["queues"] for e in events] == [[QUEUE_A], [QUEUE_A], []]
    assert {e["structure"] for e in events} == {PRIMARY}
    assert {e["system"] for e in events} == {"IMSA"}
    assert {e["max_elements"] for e in events} == {1000}
    # The pair held A's 30 and the other queues' 40 messages of ten elements when A
    # moved (a move changes the pair's total by nothing); A drained before it returned.
    assert [e["pair_elements"] for e in events] == [700, 400, 400]


def test_the_overflow_structure_counts_from_its_own_seq(result: JobResult) -> None:
    """The SRDS covers each structure of the pair at a seq of its own: A's 30 messages
    in the overflow structure, then IMSB's 30 deletes after the checkpoint."""
    figures = result.figures["structures"][OVERFLOW]
    assert (figures["peak_entries"], figures["peak_elements"]) == (30, 300)
    assert (figures["final_entries"], figures["final_elements"]) == (0, 0)
    assert figures["warnings"] == []


def test_the_queue_entered_and_returned(result: JobResult) -> None:
    events = {e["event"]: e for e in rows(result, "overflow_events")}
    (stay,) = rows(result, "overflow_queues")
    assert stay["queue"] == QUEUE_A and stay["structure"] == PRIMARY
    assert stay["entered"] == events["overflow"]["time"]
    assert stay["left"] == events["returned"]["time"]
    assert stay["pair_elements"] == 700 and stay["percent"] == 70.0
    (mode,) = rows(result, "overflow_modes")
    assert mode["queues"] == [QUEUE_A]
    assert mode["entered"] == events["overflow"]["time"]
    assert mode["left"] == events["normal"]["time"]
    assert (mode["pair_elements"], mode["max_elements"], mode["percent"]) == (700, 1000, 70.0)


def test_the_recommended_ovflwmax_is_checked_against_the_real_overflow(
    result: JobResult,
) -> None:
    primary = result.figures["structures"][PRIMARY]
    # The primary's own count starts after the moves (the checkpoint that followed
    # them purged what came before): 40 messages and one put after A returned.
    assert (primary["peak_elements"], primary["recommended_elements"]) == (401, 502)
    assert primary["overflow_threshold"] == 90
    (start,) = rows(result, "overflow_check")
    assert (start["structure"], start["ovflwmax"], start["recommended_elements"]) == (
        PRIMARY,
        90,
        502,
    )
    assert start["limit_elements"] == pytest.approx(451.8)
    assert start["elements"] == 700
    figures = result.figures["overflow"][PRIMARY]
    assert figures["pair_peak_elements"] == 700
    assert len(figures["modes"]) == 1 and len(figures["queues"]) == 1
    assert [s["elements"] for s in figures["check"]["would_overflow"]] == [700]
    assert any("would have overflowed 1 time(s)" in w for w in primary["warnings"])
    assert "pair usage at the crossing 700 of 1,000 elements (70.0 %)" in result.summary
    assert "would have overflowed 1 time(s)" in result.summary


def test_the_usage_chart_shades_overflow_mode(result: JobResult, tmp_path: Path) -> None:
    drawn = draw_charts({"capacity": result}, tmp_path, jobs={"capacity"})
    assert set(drawn) == {"usage"} and drawn["usage"].stat().st_size > 0
    usage = pq.read_table(result.tables["usage"]).to_pandas()
    modes = pq.read_table(result.tables["overflow_modes"]).to_pandas()
    open_mode = modes.assign(left=None)  # a mode still open at the end of the log
    assert charts.usage_chart(usage, tmp_path / "open.png", open_mode).stat().st_size > 0


def test_a_log_without_overflow_changes_nothing(plain: JobResult) -> None:
    for table in TABLES:
        assert rows(plain, table) == []
    assert "overflow" not in plain.figures
    assert "Overflow (OVERFLOW records" not in plain.summary
    primary = plain.figures["structures"][PRIMARY]
    assert primary["warnings"] == []
    assert set(plain.figures["structures"]) == {PRIMARY}


def test_would_overflow_counts_a_start_again_only_after_relief(spark: SparkSession) -> None:
    t0 = dt.datetime(2026, 11, 24, 10, 0)
    demand = spark.createDataFrame(
        [
            ("P", t0 + dt.timedelta(minutes=i), used)
            for i, used in enumerate([0, 500, 460, 500, 300, 455, 100])
        ],
        "pair string, time timestamp, elements long",
    )
    starts = O.would_overflow(demand, "P", 450.0, 360.0)
    assert [(t - t0, used) for t, used in starts] == [
        (dt.timedelta(minutes=1), 500),
        (dt.timedelta(minutes=5), 455),
    ]
    assert O.would_overflow(demand, "P", 600.0, 480.0) == []  # not at all


def test_intervals_from_events_with_a_take_over_and_no_overflow_structure() -> None:
    t0 = dt.datetime(2026, 11, 24, 10, 0)

    def at(minute: int, event: str, *queues: str) -> O.OverflowEvent:
        return O.OverflowEvent(
            "P", minute, t0 + dt.timedelta(minutes=minute), "S", event, queues, 0, 1000
        )

    stays, modes = O.intervals(
        [
            at(0, "altered"),
            at(1, "overflow", "A"),
            at(2, "overflow", "A", "B"),  # a master that took over names A again
            at(15, "returned", "A"),
            at(20, "normal", "B"),  # without an overflow structure B leaves with the mode
            at(30, "overflow", "C"),  # still open at the end of the log
        ]
    )
    assert [(s.queue, s.entered_seq, s.left_seq) for s in stays] == [
        ("A", 1, 15),
        ("B", 2, 20),
        ("C", 30, None),
    ]
    assert [(m.queues, m.entered_seq, m.left_seq) for m in modes] == [
        (["A", "B"], 1, 20),
        (["C"], 30, None),
    ]
