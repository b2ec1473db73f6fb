"""``track`` and ``ims`` on a log written by real IMS systems: figure 72 across two IMSs.

``tests/ims/test_group.py``'s ``figure_72`` runs the flow with two IMSs (IMSA, IMSB)
whose CQSs log to one recovery root: MSG1 entered at IMSA from LTERMA (processed
local: put straight to IMSA's lock queue), PGMA switches to TRANB (MSG2), PGMB on IMSB
answers LTERMA (MSG3, delivered by IMSA) and writes to LTERMB (MSG4, delivered by
IMSB).  ``sharedq pipeline track --uow IMSA/T1`` must follow the four messages across
the two systems, and ``sharedq pipeline ims`` must count them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from sharedq.cf.memory import MemoryFacility
from sharedq.cqs import Uow, structure_params
from sharedq.ims import IMS, SystemDefinition
from sharedq.ims.dli import Program
from sharedq.pipeline.job import JobContext
from sharedq.pipeline.jobs import ims as ims_job
from sharedq.pipeline.jobs import track
from sharedq.recovery import RecoverySettings
from sharedq.testing import ManualClock
from tests.ims.test_group import figure_72

MSGQ = "MSGQ01"


@dataclass(frozen=True)
class Flow:
    root: Path
    uows: dict[str, Uow]


@pytest.fixture(scope="module")
def flow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flow]:
    root = tmp_path_factory.mktemp("ims72") / "recovery"
    facility = MemoryFacility()
    facility.create(structure_params(MSGQ, messages=200))
    clock = ManualClock(tick_s=0.000_01)
    started: list[IMS] = []

    def make(definition: SystemDefinition, programs: Mapping[str, Program], **options: Any) -> IMS:
        ims = IMS(facility, definition, programs, msgq=MSGQ, clock=clock, **options)
        started.append(ims)
        return ims.start()

    try:
        uows = figure_72(make, recovery=RecoverySettings(root))
    finally:
        for ims in started:
            with contextlib.suppress(Exception):
                ims.shutdown()
        facility.close()
    yield Flow(root, uows)


def _origin(uow: Uow) -> str:
    return f"{uow.origin.decode().rstrip()}/{uow.arrival}"


def test_track_follows_msg1_to_msg4_across_two_ims_systems(
    spark: SparkSession, flow: Flow, tmp_path: Path
) -> None:
    u = flow.uows
    result = track.run(JobContext.open(spark, flow.root, tmp_path), uow=_origin(u["MSG1"]))
    rows = result.figures["unit"]
    by_msg: dict[int, list[tuple[str, str, str]]] = {}
    for r in rows:
        by_msg.setdefault(r["msg"], []).append((r["action"], r["cqs"], r["queue"]))
    # MSG1 was processed local: put straight to IMSA's lock queue, never read.
    assert by_msg == {
        1: [("put", "CQSIMSA", "01.TRANA"), ("delete", "CQSIMSA", "01.TRANA")],
        2: [
            ("put", "CQSIMSA", "01.TRANB"),
            ("read", "CQSIMSB", "01.TRANB"),
            ("delete", "CQSIMSB", "01.TRANB"),
        ],
        3: [
            ("put", "CQSIMSB", "05.LTERMA"),
            ("read", "CQSIMSA", "05.LTERMA"),
            ("delete", "CQSIMSA", "05.LTERMA"),
        ],
        4: [
            ("put", "CQSIMSB", "05.LTERMB"),
            ("read", "CQSIMSB", "05.LTERMB"),
            ("delete", "CQSIMSB", "05.LTERMB"),
        ],
    }
    # The origin stays IMSA/T1; the processing half names the system that made each.
    t1 = u["MSG1"].arrival
    systems = {
        r["msg"]: (
            r["origin_system"],
            r["origin_token"],
            r["processing_system"],
            r["processing_token"],
        )
        for r in rows
    }
    assert systems == {
        1: ("IMSA", t1, None, None),
        2: ("IMSA", t1, "IMSA", u["MSG2"].processed),
        3: ("IMSA", t1, "IMSB", u["MSG3"].processed),
        4: ("IMSA", t1, "IMSB", u["MSG4"].processed),
    }
    assert result.figures["cqs_origins"] == 1 and result.figures["cqs_messages"] == 4


def test_the_track_and_ims_commands_on_the_ims_log(
    spark: SparkSession, flow: Flow, tmp_path: Path
) -> None:
    """Through the CLI: track's summary shows the four messages' puts by both systems;
    ``pipeline ims`` counts one local input at IMSA and its two replies."""
    from sharedq.cli.main import cli

    origin = _origin(flow.uows["MSG1"])
    common = ["--input", str(flow.root), "--output", str(tmp_path)]
    result = CliRunner().invoke(cli, ["pipeline", "track", *common, "--uow", origin])
    assert result.exit_code == 0, result.output
    summary = (tmp_path / "track" / "summary.txt").read_text()
    assert f"origin {origin}" in summary
    rows = [line.split() for line in summary.splitlines()]
    puts = [p for p in rows if len(p) > 5 and p[0].isdigit() and p[-4] == "put"]
    assert [(p[0], p[-3], p[-2]) for p in puts] == [
        ("1", "CQSIMSA", "01.TRANA"),
        ("2", "CQSIMSA", "01.TRANB"),
        ("3", "CQSIMSB", "05.LTERMA"),
        ("4", "CQSIMSB", "05.LTERMB"),
    ]
    result = CliRunner().invoke(cli, ["pipeline", "ims", *common])
    assert result.exit_code == 0, result.output
    assert "balance: OK" in (tmp_path / "ims" / "summary.txt").read_text()
    figures = ims_job.run(JobContext.open(spark, flow.root, tmp_path / "api")).figures
    assert figures["inputs"] == {"local": 1, "global": 0, "serial": 0}
    assert figures["local_share"] == 1.0
    assert figures["work"]["CQSIMSA"]["local_puts"] == 1
    assert figures["work"]["CQSIMSB"]["reads"] == 2  # MSG2 and MSG4
    assert figures["unanswered"] == 0
    assert figures["latency"]["all:all"]["count"] == 1
    assert figures["balance"] == {"opening": 0, "put": 4, "deleted": 4, "cold": 0, "left": 0}
    assert figures["balance_ok"]


def test_the_report_runs_ims_on_a_log_with_cqs_records(flow: Flow, tmp_path: Path) -> None:
    """``pipeline report`` on the IMSs' log runs the ims job with the others: its section
    and chart are on the page, its tables where ``pipeline ims`` writes them."""
    from sharedq.cli.main import cli

    out = tmp_path / "report"
    args = ["pipeline", "report", "--input", str(flow.root), "--output", str(out)]
    result = CliRunner().invoke(cli, [*args, "--emhq", "EMHQ01"])
    assert result.exit_code == 0, result.output
    summary = (out / "report" / "summary.txt").read_text()
    assert "  ims       ok" in summary, summary
    assert "FAILED" not in summary, summary
    page = (out / "report.html").read_text()
    assert '<h2 id="ims">' in page
    assert 'data-file="ims.png"' in page
    assert (out / "charts" / "ims.png").read_bytes().startswith(b"\x89PNG")
    assert "balance: OK" in (out / "ims" / "summary.txt").read_text()
