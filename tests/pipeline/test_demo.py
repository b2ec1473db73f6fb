"""``sharedq demo`` end to end, with few rounds: the README's main job must balance.

On the embedded default (threads) and on a private Redis server (a process per
manager, the last one SIGKILLed inside a unit of work).  The balance sheet is read
from the pipeline's tables and checked against the queues' depths after the
structures were destroyed and recovered; what the demo prints is checked for its
order, for the line that reconciles its two counts of puts, and for Spark's chatter.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from rich.console import Console

from sharedq.cf import open_facility
from sharedq.demo.group import create_structures
from sharedq.demo.ims_group import create_ims_structures
from sharedq.demo.run import (
    SUMMARY_JOBS,
    DemoOptions,
    DemoOutcome,
    delete_structures_code,
    run_demo,
)
from sharedq.testing.redis_server import RedisServer


def _check(outcome_output: Path, options: DemoOptions) -> tuple[DemoOutcome, str]:
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
    # The work table's puts are records, the balance sheet's committed messages: the
    # line under them says so, and the figures add up.
    assert summary.puts_reconcile
    assert summary.put_records > summary.put_committed
    reconciled = (
        f"puts: {summary.put_records} put records (the work table's puts) = "
        f"{summary.put_committed} committed (the balance sheet's put) + "
        f"{summary.total('backed_out_puts')} backed out"
    )
    assert reconciled in " ".join(text.split())
    # Work per manager: all three managers show up, the dead one too.
    assert {row["server"] for row in summary.servers} >= {"QM1", "QM2", "QM3"}
    assert outcome.report_path.is_file()
    assert str(outcome.report_path) in text.replace("\n", "")
    assert list((outcome_output / "pipeline").rglob("*.png"))
    # QM1's burst on BURSTS: a High on the way up (at 16 of 20), a Low on the way down
    # (at 4), each coordinated by QM1 and issued by every manager alive (PERFMEV on).
    events = [(g["event"], g["queue"], g["coordinator"], g["depth"]) for g in summary.events]
    assert events == [("high", "BURSTS", "QM1", 16), ("low", "BURSTS", "QM1", 4)]
    assert all("QM1" in g["managers"] and g["messages"] >= 2 for g in summary.events)
    assert "queue depth events (from the log)" in text
    # The IMS group: an IMS killed with messages on its lock queue, its emergency
    # restart requeued them, and every input was answered exactly once; the ledger,
    # the log (read by the ims job) and the structures agree.
    ims = outcome.ims
    assert ims is not None and outcome.ims_summary is not None
    assert ims.requeued == ims.locked_at_kill > 0
    assert ims.delivered == ims.entered > 0 and ims.duplicates == 0 and ims.balanced
    assert outcome.ims_nothing_lost
    assert {r["cqs"] for r in outcome.ims_summary.work} == {"CQSIMSA", "CQSIMSB", "CQSIMSC"}
    _in_order(
        text,
        "IMS group (IMSA, IMSB, IMSC)",
        f"its emergency restart requeued {ims.requeued}",
        "nothing lost",
        "IMS group: inputs per IMS",
        "IMS group: balance sheet",
        "IMS: nothing lost",
    )
    # Nothing the operator must act on happened, and Spark said nothing either.
    for noise in ("WARNING", "WARN ", "log4j", "incubator", "setLogLevel"):
        assert noise not in text
    return outcome, text


def _in_order(text: str, *parts: str) -> None:
    """Each part appears in ``text``, each after the one before."""
    at = 0
    flat = " ".join(text.split())
    for part in parts:
        found = flat.find(part, at)
        assert found >= 0, f"{part!r} missing, or not after what comes before it"
        at = found + len(part)


def test_the_demo_balances_on_the_embedded_default(spark: SparkSession, tmp_path: Path) -> None:
    options = DemoOptions(tmp_path / "demo", rounds=30, master="local[2]", verbose=True)
    outcome, text = _check(tmp_path / "demo", options)
    assert outcome.structures_deleted
    # The group's log lines come out on the demo's console, in order with its own
    # lines: a structure recovered is INFO (shown with verbose), after the workload
    # and before the demo says the structures came back.
    _in_order(
        text,
        "workload (3 managers)",
        "QM3 was stopped dead in the middle of a unit of work",
        "INFO QM1 recovered structure DEMOADMIN",
        "INFO QM1 recovered structure DEMOAPP",
        "then both structures were destroyed",
        "work per manager",
        "balance sheet",
        "nothing lost",
    )
    # Every report job ran (the demo without --short).
    assert {p.name for p in (tmp_path / "demo" / "pipeline" / "charts").iterdir()} == {
        "depth.png",
        "latency.png",
        "work.png",
        "usage.png",
        "events.png",
        "ims.png",
    }


@pytest.mark.slow
def test_the_demo_balances_with_managers_in_processes_on_redis(
    spark: SparkSession, tmp_path: Path, redis_servers: object
) -> None:
    """A process per manager; the last is killed inside a unit of work, so that the
    peer's recovery has work to do; the demo deletes its structures from the server."""
    server: RedisServer = redis_servers()  # type: ignore[operator]
    options = DemoOptions(
        tmp_path / "demo",
        backend=f"{server.url}?lease=2&retry=2",
        rounds=30,
        master="local[2]",
        jobs=SUMMARY_JOBS,  # as --short
    )
    outcome, text = _check(tmp_path / "demo", options)
    # Killed with puts and a get made and not committed: the peer deleted the puts and
    # put the gotten message back.  A depth-event message its event responder was
    # putting (out of syncpoint, a unit of its own) may be in flight at the kill too:
    # the peer deletes that put as well, so it may find one more than the workload's.
    assert outcome.workload.in_flight is not None
    puts, gets = outcome.workload.in_flight
    report = outcome.workload.peer_recovery
    assert report is not None
    assert puts >= 1 and puts <= report.puts_deleted <= puts + 1
    assert report.gets_returned == gets
    assert report.puts_deleted + report.gets_returned + report.committed + report.backed_out > 0
    _in_order(
        text,
        "workload (3 managers)",
        f"QM3 was killed (SIGKILL) inside a unit of work, with {puts} put",
        f"QM1 declared it failed and recovered its units: {report.puts_deleted} uncommitted",
        "then both structures were destroyed",
        "structures DEMOADMIN, DEMOAPP, DEMOMSGQ and DEMOEMHQ deleted from",
        "nothing lost",
    )
    # The structures are gone from the server; --short ran only the jobs it prints.
    assert outcome.structures_deleted
    assert server.command("KEYS", "*") == []
    assert {p.name for p in (tmp_path / "demo" / "pipeline" / "charts").iterdir()} == {
        "depth.png",
        "latency.png",
        "work.png",
        "events.png",
        "ims.png",
    }


def test_kept_structures_are_deleted_as_the_demo_says(redis_server: RedisServer) -> None:
    """``--keep`` leaves the structures (the IMS group's too) and prints a line of Python
    that deletes them."""
    redis_server.flush()
    facility = open_facility(redis_server.url)
    try:
        create_structures(facility, messages=100)
        create_ims_structures(facility, messages=100)
    finally:
        facility.close()
    assert redis_server.command("KEYS", "*") != []
    code = delete_structures_code(redis_server.url)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert redis_server.command("KEYS", "*") == []
