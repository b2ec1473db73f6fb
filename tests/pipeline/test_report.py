"""Charts, the HTML page, and the report job that runs every job on one reading of the log."""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd  # type: ignore[import-untyped, unused-ignore]
import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from sharedq.pipeline import charts
from sharedq.pipeline.html_report import Chart, Section, render_report, write_report
from sharedq.pipeline.job import JobContext, JobResult
from sharedq.pipeline.jobs import report
from tests.pipeline.conftest import GroupLog

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
JOBS = ("recover", "print", "track", "stats", "capacity", "events")


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC), path
    assert len(data) > 1000, path


def _times(n: int) -> list[dt.datetime]:
    start = dt.datetime(2024, 5, 1, 12, tzinfo=dt.UTC)
    return [start + dt.timedelta(seconds=i) for i in range(n)]


# -- charts from hand-made frames --------------------------------------------------------


def test_charts_are_pngs(tmp_path: Path) -> None:
    times = _times(5)
    queues = pd.DataFrame(
        {
            "queue": [f"Q{i % 10}" for i in range(50)],
            "interval_start": [times[i % 5] for i in range(50)],
            "depth": list(range(50)),
        }
    )
    messages = pd.DataFrame(
        {"put_to_get_ms": [0.5, 1.0, 2.0, 40.0, None], "put_to_commit_ms": [1, 2, 3, 50, 9]}
    )
    latency = pd.DataFrame(
        {
            "scope": ["queue", "queue", "all"],
            "name": ["A", "B", "all"],
            "get_p50_ms": [1.0, 2.0, 1.5],
            "get_p90_ms": [5.0, 6.0, 5.5],
            "get_p99_ms": [9.0, None, 9.0],
        }
    )
    servers = pd.DataFrame(
        {
            "server": ["QM2", "QM1"],
            "puts": [10, 20],
            "gets": [15, 15],
            "commits": [8, 9],
            "backouts": [1, 0],
            "share_of_gets": [0.5, 0.5],
        }
    )
    usage = pd.DataFrame(
        {
            "structure": ["S1", "S1", "S2"],
            "seq": [1, 2, 1],
            "time": times[:3],
            "changes": [1, 1, 1],
            "entries": [1, 2, 1],
            "elements": [2, 4, 1],
        }
    )
    drawn = [
        charts.depth_chart(queues, tmp_path / "depth.png"),
        charts.latency_chart(tmp_path / "latency.png", messages=messages),
        charts.latency_chart(tmp_path / "latency-bars.png", latency=latency),
        charts.work_chart(servers, tmp_path / "work.png"),
        charts.usage_chart(usage, tmp_path / "usage.png"),
    ]
    for path in drawn:
        assert_png(path)


def test_empty_frames_still_give_charts(tmp_path: Path) -> None:
    empty = pd.DataFrame()
    drawn = [
        charts.depth_chart(
            pd.DataFrame(columns=["queue", "interval_start", "depth"]), tmp_path / "d.png"
        ),
        charts.latency_chart(tmp_path / "l.png", messages=empty, latency=None),
        charts.work_chart(pd.DataFrame(columns=["server"]), tmp_path / "w.png"),
        charts.usage_chart(pd.DataFrame(columns=["structure", "time"]), tmp_path / "u.png"),
    ]
    for path in drawn:
        assert_png(path)


@pytest.mark.parametrize(
    ("span", "offset"),
    [
        # The demo: a second or two.  Each tick was "50:39.600000" before.
        (dt.timedelta(seconds=1.2), "2024-May-01 12:00"),
        (dt.timedelta(minutes=40), "2024-May-01"),
        (dt.timedelta(hours=30), "2024-May"),  # the day shown at the end, where it is
    ],
)
def test_time_axes_are_readable_at_any_span(span: dt.timedelta, offset: str) -> None:
    """Short tick labels, and the date (and time) they lie in once, at the axis' end."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    start = dt.datetime(2024, 5, 1, 12, 0, 0, 300_000)
    times = pd.Series([start + span * i / 20 for i in range(21)])
    figure = Figure()
    canvas = FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    axes.plot(times, range(21))
    charts.time_axis(axes)
    canvas.draw()
    labels = [t.get_text() for t in axes.get_xticklabels() if t.get_text()]
    assert len(labels) >= 3, labels
    assert all(len(label) <= 6 for label in labels), labels
    assert axes.xaxis.get_offset_text().get_text().startswith(offset)
    assert axes.get_xlabel() == "time (UTC)"


def test_charts_of_jobs_not_run_are_left_out(tmp_path: Path) -> None:
    drawn = report.draw_charts({}, tmp_path, jobs={"track", "stats"})
    assert sorted(drawn) == ["depth", "latency", "work"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["depth.png", "latency.png", "work.png"]
    with pytest.raises(ValueError, match="no such report job: nope"):
        report.run_all(None, jobs=["nope"])  # type: ignore[arg-type]


def test_the_page_embeds_every_chart_and_escapes_text(tmp_path: Path) -> None:
    chart_path = charts.work_chart(
        pd.DataFrame(
            {"server": ["QM1"], "puts": [1], "gets": [1], "commits": [1], "backouts": [0]}
        ),
        tmp_path / "charts" / "work.png",
    )
    sections = [
        Section("stats", "queue <script>alert(1)</script> & more", 1.0),
        Section("track", "", error="boom <b>"),
    ]
    page_path = write_report(
        tmp_path / "report.html", "T & <x>", sections, [Chart("Work", chart_path, "per server")]
    )
    page = page_path.read_text()
    assert "<script>" not in page
    assert "queue &lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in page
    assert "boom &lt;b&gt;" in page
    assert "<title>T &amp; &lt;x&gt;</title>" in page
    assert 'href="charts/work.png"' in page
    assert 'data-file="work.png"' in page
    assert "data:image/png;base64," in page
    rendered = render_report("t", [], [])
    assert "No charts." in rendered


# -- the report on the group's log ---------------------------------------------------------


@pytest.fixture(scope="module")
def report_result(
    spark: SparkSession, group_log: GroupLog, tmp_path_factory: pytest.TempPathFactory
) -> tuple[JobContext, JobResult]:
    ctx = JobContext.open(spark, group_log.root, tmp_path_factory.mktemp("report"))
    return ctx, report.run(ctx, headroom=30)


def test_the_report_runs_every_job_and_writes_one_page(
    report_result: tuple[JobContext, JobResult],
) -> None:
    ctx, result = report_result
    figures = result.figures
    assert figures["report.failed"] == [], result.summary
    page_path = Path(figures["report.html"])
    assert page_path == ctx.output / "report.html"
    page = page_path.read_text()
    for name in ("depth", "latency", "work", "usage", "events"):
        path = Path(figures["report.charts"][name])
        assert_png(path)
        assert f'data-file="{name}.png"' in page
        assert f'href="charts/{name}.png"' in page
    assert len(re.findall(r'<img src="data:image/png;base64,', page)) == 5
    for job in JOBS:
        assert f'<h2 id="{job}">' in page
        summary = (ctx.output / job / "summary.txt").read_text().strip()
        assert summary
        first_line = summary.splitlines()[0]
        assert first_line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in page
        assert any(key.startswith(f"{job}.") for key in figures), job
    assert figures["capacity.structures"]["PAPP"]["peak_entries"] > 0
    assert "OVFLWMAX" in page
    # Queue managers wrote this log: ims has nothing to read, so it is skipped, not failed.
    assert figures["report.skipped"] == ["ims"]
    assert '<h2 id="ims">' not in page
    assert "ims" not in figures["report.charts"]
    assert "ims       skipped the log holds no CQS message records" in result.summary


def test_the_report_job_reads_the_log_once(report_result: tuple[JobContext, JobResult]) -> None:
    ctx, _ = report_result
    log = ctx.log()
    assert log.is_cached


def test_the_report_command(group_log: GroupLog, tmp_path: Path) -> None:
    from sharedq.cli.main import cli

    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli,
        [
            "pipeline",
            "report",
            "--input",
            str(group_log.root),
            "--output",
            str(out),
            "--master",
            "local[2]",
            "--headroom",
            "50",
        ],
    )
    assert result.exit_code == 0, result.output
    assert (out / "report.html").is_file()
    assert (out / "report" / "summary.txt").is_file()
    assert "headroom 50 %" in (out / "capacity" / "summary.txt").read_text()


def _sharedq(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("sharedq")
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_a_missing_input_directory_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    done = _sharedq("pipeline", "report", "--input", str(missing), "--output", str(tmp_path))
    assert done.returncode != 0
    assert "nowhere" in done.stderr


def test_a_negative_headroom_is_refused(group_log: GroupLog, tmp_path: Path) -> None:
    for job in ("report", "capacity"):
        done = _sharedq(
            "pipeline",
            job,
            "--input",
            str(group_log.root),
            "--output",
            str(tmp_path),
            "--headroom",
            "-5",
        )
        assert done.returncode != 0
        assert "BAD_ARGUMENT" in done.stderr
        assert "--headroom -5" in done.stderr
