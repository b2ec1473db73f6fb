"""The ``recover`` job's fold against in-process replay on every kind of list change.

The group workload of ``test_recover`` is what queue managers do; this log is what the
list structure allows: writes at the head and the tail with and without secondary
keys, moves with and without a new key and with version increments, bulk moves,
updates of the data, deletes and list controls (``tests.recovery.changes``'s
random work), with an SRDS in the middle.  The Spark job must give, entry for entry
and position for position, what the servers' own ``rebuild`` gives from the same SRDS
and records, at the end of the log and at points before and after the SRDS.
"""

from __future__ import annotations

import random
from dataclasses import asdict
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from sharedq.cf.memory import MemoryFacility
from sharedq.log import LogStream, RecordType
from sharedq.pipeline.inprocess import recover_inprocess
from sharedq.pipeline.job import JobContext
from sharedq.pipeline.jobs import recover as job
from sharedq.pipeline.sources import find_pairs
from sharedq.recovery import write_srds
from tests.pipeline.helpers import entry_rows, list_rows
from tests.recovery.changes import NAME, PARAMS, random_work, srds_image


def _few_keys(rng: random.Random) -> bytes:
    """Four keys in all, so that most entries share theirs with others: their order
    within a key is what placements at the head and the tail decide."""
    return bytes([rng.choice((1, 4, 9, 0xF6))]) + bytes(15)


def _write_pair(root: Path, seed: int) -> list[int]:
    """A pair directory (log and SRDS) of random work; the seqs of its changes."""
    rng = random.Random(seed)
    facility = MemoryFacility()
    facility.create(PARAMS)
    conn = facility.connect(NAME, "QM1")
    stream = LogStream(root / "log", name="APP1.LOG", structure=NAME)
    with stream.writer("QM1") as log:
        log.log_event(
            RecordType.STRUCTURE_INITIALIZATION,
            payload={"params": asdict(PARAMS), "by": "QM1"},
            structure=NAME,
            commit=True,
        )
        random_work(conn, log, rng, 250, key=_few_keys)
        write_srds(root / "srds", srds_image(conn, 1))
        random_work(conn, log, rng, 250, key=_few_keys)
    return [r.seq for r in stream.records(structures={NAME}) if r.op != 127]


@pytest.mark.parametrize("seed", [11, 12])
def test_the_fold_equals_replay_for_every_kind_of_change(
    spark: SparkSession, tmp_path: Path, seed: int
) -> None:
    root = tmp_path / "pair"
    seqs = _write_pair(root, seed)
    (pair,) = find_pairs(root)
    # The end and a point after the SRDS start from it; a point before it, from scratch.
    points = [(None, True), (seqs[len(seqs) * 3 // 4], True), (seqs[len(seqs) // 3], False)]
    for n, (at_seq, from_image) in enumerate(points):
        reference = recover_inprocess(pair, NAME, at_seq=at_seq)
        ctx = JobContext.open(spark, root, tmp_path / f"out{n}")
        result = job.run(ctx, structure=NAME, at_seq=at_seq)
        got = (
            spark.read.parquet(str(result.tables["entries"]))
            .orderBy("list_number", "position")
            .collect()
        )
        want = sorted(entry_rows(NAME, reference.contents), key=lambda row: row[1:3])
        assert [tuple(r) for r in got] == want, f"seed {seed}, at seq {at_seq}"
        lists = spark.read.parquet(str(result.tables["lists"])).collect()
        assert sorted(tuple(r) for r in lists) == sorted(list_rows(NAME, reference.contents))
        assert result.figures["records_applied"] == reference.records
        assert reference.records > 0 and len(want) > 0
        assert (result.figures["image_seq"][NAME] is not None) is from_image


def test_the_fold_equals_replay_when_the_live_entries_are_too_many_to_broadcast(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``BROADCAST_LIVE_ENTRIES`` the second pass shuffles the log's records to meet
    the live entries instead of sending the entries to every task: the same result."""
    monkeypatch.setattr(job, "BROADCAST_LIVE_ENTRIES", 0)
    root = tmp_path / "pair"
    _write_pair(root, 13)
    (pair,) = find_pairs(root)
    reference = recover_inprocess(pair, NAME)
    result = job.run(JobContext.open(spark, root, tmp_path / "out"), structure=NAME)
    got = (
        spark.read.parquet(str(result.tables["entries"]))
        .orderBy("list_number", "position")
        .collect()
    )
    want = sorted(entry_rows(NAME, reference.contents), key=lambda row: row[1:3])
    assert [tuple(r) for r in got] == want and want
