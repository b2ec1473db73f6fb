"""The ``recover`` job's fold against in-process replay on every kind of list change.

The group workload of ``test_recover`` is what queue managers do; this log is what the
list structure allows: writes at the head and the tail with and without secondary
keys, moves with and without a new key and with version increments, bulk moves,
updates of the data, deletes and list controls (``tests.recovery.test_restore``'s
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
from sharedq.recovery.srds import version_to_i64
from tests.recovery.test_restore import NAME, PARAMS, _image, _work

COLUMNS = ("list_number", "position", "entry_id", "key", "secondary_key", "version")
COLUMNS += ("adjunct", "data")


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
        _work(conn, log, rng, 250)
        write_srds(root / "srds", _image(conn, 1))
        _work(conn, log, rng, 250)
    return [r.seq for r in stream.records(structures={NAME}) if r.op != 127]


@pytest.mark.parametrize("seed", [11, 12])
def test_the_fold_equals_replay_for_every_kind_of_change(
    spark: SparkSession, tmp_path: Path, seed: int
) -> None:
    root = tmp_path / "pair"
    seqs = _write_pair(root, seed)
    (pair,) = find_pairs(root)
    image_seq = LogStream.open_existing(pair.log).retention_points().get(NAME, 0)
    points: list[int | None] = [None, seqs[len(seqs) * 3 // 4], seqs[len(seqs) // 3]]
    for n, at_seq in enumerate(points):
        reference = recover_inprocess(pair, NAME, at_seq=at_seq)
        ctx = JobContext.open(spark, root, tmp_path / f"out{n}")
        result = job.run(ctx, structure=NAME, at_seq=at_seq)
        got = (
            spark.read.parquet(str(result.tables["entries"]))
            .select(*COLUMNS)
            .orderBy("list_number", "position")
            .collect()
        )
        want = [
            (
                number,
                position,
                e.entry_id,
                e.key,
                e.secondary_key,
                version_to_i64(e.version),
                e.adjunct,
                e.data,
            )
            for number, entries in sorted(reference.contents.lists.items())
            for position, e in enumerate(entries)
        ]
        assert [tuple(r) for r in got] == want, f"seed {seed}, at seq {at_seq}"
        lists = {
            r.list_number: (r.limit, r.authority)
            for r in spark.read.parquet(str(result.tables["lists"])).collect()
        }
        assert lists == {
            c.list_number: (c.limit, c.authority) for c in reference.contents.controls.values()
        }
        assert result.figures["records_applied"] == reference.records
        assert reference.records > 0 and len(want) > 0
    assert image_seq == 0  # the log still reaches back: the early point replays from scratch
