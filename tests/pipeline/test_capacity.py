"""The capacity job counts what the structures held exactly as a plain replay of the log does."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from sharedq.cf.params import StructureParams, capacity_of
from sharedq.log import LogStream
from sharedq.pipeline import PipelineError, PipelineReason
from sharedq.pipeline.job import JobContext, JobResult
from sharedq.pipeline.jobs import capacity
from sharedq.recovery.srds import read_srds, slot_status
from tests.pipeline.conftest import STRUCTURES, GroupLog


def plain_replay(group_log: GroupLog) -> dict[str, dict[str, Any]]:
    """Entries and elements in use, replayed in Python from the log's own reader.

    Independent of Spark: starts from the oldest SRDS the log continues (its
    recoverable entries), then applies writes, deletes and data updates in order.
    """
    found: dict[str, dict[str, Any]] = {}
    for pair in group_log.pairs:
        stream = LogStream.open_existing(pair.log)
        point = stream.sources().retention.get(pair.name, 0)
        sizes: dict[bytes, int] = {}
        base_seq = -1
        element_size = 256
        if point > 0:
            assert pair.srds is not None
            slot = min(
                (s for s in slot_status(pair.srds) if s.valid and (s.seq or 0) >= point - 1),
                key=lambda s: s.seq or 0,
            )
            image = read_srds(slot.path)
            base_seq = image.seq
            element_size = image.structures[pair.name].params.element_size
            for row in image.entries_of(pair.name).to_pylist():
                if row["recoverable"]:
                    sizes[row["entry_id"]] = row["elements"]
        entries, elements = len(sizes), sum(sizes.values())
        peak_entries, peak_elements = entries, elements
        unknown = 0
        for record in stream.records(structures=[pair.name]):
            if record.seq <= base_seq or record.op not in (1, 3, 4) or record.entry_id is None:
                continue
            if record.op == 1:
                size = math.ceil(len(record.data or b"") / element_size)
                sizes[record.entry_id] = size
                entries, elements = entries + 1, elements + size
            elif record.entry_id not in sizes:
                unknown += 1
            elif record.op == 3:
                entries, elements = entries - 1, elements - sizes.pop(record.entry_id)
            elif record.data is not None:
                size = math.ceil(len(record.data) / element_size)
                elements += size - sizes[record.entry_id]
                sizes[record.entry_id] = size
            peak_entries, peak_elements = max(peak_entries, entries), max(peak_elements, elements)
        found[pair.name] = {
            "peak_entries": peak_entries,
            "peak_elements": peak_elements,
            "final_entries": entries,
            "final_elements": elements,
            "unknown": unknown,
        }
    return found


@pytest.fixture(scope="module")
def capacity_result(
    spark: SparkSession, group_log: GroupLog, tmp_path_factory: pytest.TempPathFactory
) -> JobResult:
    ctx = JobContext.open(spark, group_log.root, tmp_path_factory.mktemp("capacity"))
    return capacity.run(ctx, headroom=30)


def test_peaks_match_a_plain_replay_of_the_log(
    capacity_result: JobResult, group_log: GroupLog
) -> None:
    expected = plain_replay(group_log)
    got = capacity_result.figures["structures"]
    assert set(got) == set(STRUCTURES)
    for name, want in expected.items():
        assert want["unknown"] == 0
        figures = got[name]
        assert figures["peak_entries"] == want["peak_entries"], name
        assert figures["peak_elements"] == want["peak_elements"], name
        assert figures["final_entries"] == want["final_entries"], name
        assert figures["final_elements"] == want["final_elements"], name
        assert not figures["warnings"], figures["warnings"]


def test_the_count_at_the_end_is_what_the_structures_held(
    capacity_result: JobResult, group_log: GroupLog
) -> None:
    for name, contents in group_log.final.items():
        held = [entry for entries in contents.lists.values() for entry in entries]
        figures = capacity_result.figures["structures"][name]
        assert figures["final_entries"] == len(held)
        assert figures["final_elements"] == sum(entry.elements for entry in held)


def test_the_recommendation_holds_the_peaks_with_the_headroom(
    capacity_result: JobResult,
) -> None:
    for name, figures in capacity_result.figures["structures"].items():
        params = StructureParams(**figures["params"])
        assert params.name == name
        room = capacity_of(params)
        assert room.max_entries >= math.ceil(figures["peak_entries"] * 1.3 - 1e-9)
        assert room.max_elements >= math.ceil(figures["peak_elements"] * 1.3 - 1e-9)
        assert figures["recommended_entries"] == math.ceil(figures["peak_entries"] * 1.3 - 1e-9)
        # the peak stays below the threshold, which leaves room above it
        assert figures["peak_percent"] < figures["overflow_threshold"] < 100
        assert figures["relief_percent"] == pytest.approx(0.8 * figures["overflow_threshold"])
    assert "OVFLWMAX" in capacity_result.summary
    assert "StructureParams.for_capacity" in capacity_result.summary
    assert "ceil((peak% + 100) / 2)" in capacity_result.summary


def test_tables_have_the_documented_columns(capacity_result: JobResult) -> None:
    usage = pq.read_table(capacity_result.tables["usage"])
    assert usage.column_names == ["structure", "seq", "time", "changes", "entries", "elements"]
    frame = usage.to_pandas()
    for name, figures in capacity_result.figures["structures"].items():
        rows = frame[frame.structure == name]
        assert rows.entries.max() == figures["peak_entries"]
        assert rows.elements.max() == figures["peak_elements"]
        assert list(rows.seq) == sorted(rows.seq)
    rec = pq.read_table(capacity_result.tables["recommendation"])
    for column in (
        "structure",
        "peak_entries",
        "peak_elements",
        "avg_message_bytes",
        "recommended_entries",
        "recommended_elements",
        "size",
        "max_size",
        "element_size",
        "overflow_threshold",
    ):
        assert column in rec.column_names
    assert sorted(rec.column("structure").to_pylist()) == sorted(STRUCTURES)


def test_overflow_threshold_formula() -> None:
    assert capacity.overflow_threshold(100 / 1.3) == (89, 71.2)
    assert capacity.overflow_threshold(100.0) == (100, 80.0)
    assert capacity.overflow_threshold(50.0) == (75, 60.0)


@pytest.mark.parametrize("headroom", [-5.0, float("nan"), float("inf")])
def test_a_bad_headroom_is_refused(spark: SparkSession, tmp_path: Path, headroom: float) -> None:
    ctx = JobContext(spark, [], tmp_path)
    with pytest.raises(PipelineError) as caught:
        capacity.run(ctx, headroom=headroom)
    assert caught.value.reason is PipelineReason.BAD_ARGUMENT
    assert "--headroom" in str(caught.value)
