"""The demo's IMS group on its own: three IMSs, a mixed workload, IMSB killed with work
in progress and emergency-restarted; every input answered exactly once.  Then the
pipeline's ``ims`` job on the group's log agrees with the terminals' ledger.

The group runs on memory and on the session's Redis server (in this process: the
kill is ``IMS.stop_dead``), with few batches; ``test_demo.py`` runs it in the whole
demo.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from sharedq.cf import CouplingFacility
from sharedq.cf.memory import MemoryFacility
from sharedq.demo.ims_group import (
    CLASS1_REGIONS,
    GROUP,
    IMS_STRUCTURES,
    VICTIM,
    IMSGroupResult,
    count_entries,
    ims_recovery,
    run_ims_group,
)
from sharedq.demo.ims_summary import ims_nothing_lost, read_ims_summary, run_ims_job
from tests.conftest import facility_on


@pytest.fixture(params=["memory", "redis"])
def facility(request: pytest.FixtureRequest) -> Iterator[CouplingFacility]:
    with facility_on(request.param, request) as fac:
        yield fac


def _check(result: IMSGroupResult, facility: CouplingFacility) -> None:
    # The kill happened with work in progress: the victim's two class-1 regions held
    # an input each, and one reply was in flight to its terminal; the emergency
    # restart requeued exactly what the lock queue held.
    assert result.held_at_kill == CLASS1_REGIONS
    assert result.locked_at_kill == CLASS1_REGIONS + 1
    assert result.requeued == result.locked_at_kill
    # Every input answered exactly once; nothing left on the structures.
    assert result.entered > 0 and result.delivered == result.entered
    assert result.duplicates == 0 and result.still_queued == 0 and result.cold == 0
    assert result.balanced
    for name in IMS_STRUCTURES:
        assert count_entries(facility, name) == {"lock": 0, "cold": 0, "client": 0}
    # The mix: every kind of input at every IMS, and each routing somewhere.
    per_ims = result.ledger.per_ims()
    assert set(per_ims) == set(GROUP)
    totals = {k: sum(row[k] for row in per_ims.values()) for k in per_ims["IMSA"]}
    for routing in ("local", "global", "serial", "fp_local", "fp_global"):
        assert totals[routing] > 0, routing
    kinds = {kind for _, kind, _, _ in result.ledger.entered.values()}
    assert kinds == {"ff", "big", "switch", "serial", "fp-local", "fp-global"}
    # The victim's two incarnations are counted together: it processed inputs again.
    assert result.counts[VICTIM]["processed"] > 0


def test_the_ims_group_answers_every_input_once_across_a_kill(
    facility: CouplingFacility, tmp_path: Path
) -> None:
    result = run_ims_group(facility, tmp_path, batches=3, seed=11)
    _check(result, facility)


def test_the_ims_job_agrees_with_the_terminals(spark: SparkSession, tmp_path: Path) -> None:
    facility = MemoryFacility()
    try:
        result = run_ims_group(facility, tmp_path, batches=3)
        _check(result, facility)
    finally:
        facility.close()
    assert (ims_recovery(tmp_path) / "DEMOMSGQ" / "log").is_dir()
    pipeline = tmp_path / "pipeline"
    section, chart = run_ims_job(spark, tmp_path, pipeline, lambda _: None)
    assert section.job == "ims" and "balance: OK" in section.summary
    assert chart.path.is_file() and chart.path.stat().st_size > 0
    summary = read_ims_summary(pipeline)
    assert ims_nothing_lost(result, summary)
    # The log's inputs, per IMS and routing, are the terminals' own.
    ledger = result.ledger.per_ims()
    by_cqs = {r["cqs"]: r for r in summary.inputs}
    for imsid in GROUP:
        for routing in ("local", "global", "serial"):
            assert by_cqs[f"CQS{imsid}"][routing] == ledger[imsid][routing], (imsid, routing)
    # Each full-function input has a latency (its replies were deleted).
    full = sum(1 for _, k, _, _ in result.ledger.entered.values() if not k.startswith("fp"))
    everyone = next(r for r in summary.latency if r["scope"] == "all")
    assert everyone["count"] == full and everyone["p50_ms"] > 0
    # Per queue type, every message put was deleted, on both structures.
    kinds = {(r["kind"], r["queue"]) for r in summary.balance}
    assert ("MSGQ", "transaction serial") in kinds and ("EMHQ", "program ready") in kinds
    assert all(r["put"] == r["deleted"] and r["left"] == 0 for r in summary.balance)
    # Both CQSs that lived under IMSB wrote as CQSIMSB: its unlocks are the requeues.
    victim = next(r for r in summary.work if r["cqs"] == f"CQS{VICTIM}")
    assert victim["unlocks"] == result.requeued
