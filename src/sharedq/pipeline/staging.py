"""Staging segments decoded for Spark, each into a Parquet file, several at once.

Only the log's own code decodes a staging segment (frames, CRC-32C, where damage
starts).  On the driver alone that was most of a second per 165,000 records with
every core but one idle.  So when there is more than one segment, each is decoded in
Spark's Python workers (a task per core, each decoding its share of the segments in
turn; the workers kept between jobs) and written as a Parquet file beside the job's
scratch; the job's scan then
reads those files as it reads the data sets.  On two cores that halves the time; on a
cluster it spreads over the executors.  A single segment is decoded on the driver:
one task has nothing to run beside, and no job is worth starting for it.

Which segments to decode, which damage counts and which segments a data set written
meanwhile replaces stay the log reader's decisions
(:meth:`sharedq.log.LogStream.decoded_sources`); this module only decodes.

The workers must import ``sharedq``: in local mode they run the driver's Python
(:func:`sharedq.pipeline.session.start_session` sees to it); on a cluster, install
``sharedq`` where the executors run and give them the segments' and the scratch
directory's paths on shared storage, as the data sets already need.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sharedq.log import ARROW_SCHEMA, SegmentDecoded, StagingSegment
from sharedq.log.config import DEFAULT_ROW_GROUP_ROWS
from sharedq.log.datasets import records_to_table
from sharedq.log.segment import SeqRanges, read_copies
from sharedq.pipeline.errors import PipelineReason, pipeline_error

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


#: The columns a staging file encodes with a dictionary: those whose values repeat.
#: Seqs, lsns, times, entry ids, keys, data and message ids are each record's own: a
#: dictionary of them was built and then dropped for plain encoding: 21 ms of a
#: 41.6k-record segment's write, 13 ms without (pyarrow, CPU time, medians of 7).
DICTIONARY_COLUMNS: list[str] = [
    name
    for name in ARROW_SCHEMA.names
    if name not in {"seq", "lsn", "time_us", "entry_id", "key", "data", "message_id", "payload"}
]


@dataclass(frozen=True)
class StagedSegment:
    """A segment's records as a Parquet file: where, how many, and per structure the
    lowest and highest seq among them."""

    path: str
    records: int
    ranges: SeqRanges = field(default_factory=dict)


def stage_segment(paths: list[str], target: str) -> SegmentDecoded[StagedSegment]:
    """Decode one segment (from its copies) and write its sound records to ``target``.

    Runs in a Python worker (or on the driver): it takes and returns only plain,
    picklable values.  Row groups of a data set's size let Spark split the file; no
    compression, since the file is read once, on this machine or a neighbour; no
    dictionary for the columns whose values are each record's own
    (:data:`DICTIONARY_COLUMNS`).  The
    segment is read as the log's reader reads it (``read_copies``: damage skipped,
    made good from a dual log's other copy), and what was skipped is returned for
    the reader to judge.
    """
    contents = read_copies([Path(path) for path in paths])
    if contents is None:
        return SegmentDecoded(False, StagedSegment("", 0))
    records = contents.records
    table = records_to_table(records)
    pq.write_table(
        table,
        target,
        compression="none",
        row_group_size=DEFAULT_ROW_GROUP_ROWS,
        use_dictionary=DICTIONARY_COLUMNS,
    )
    return SegmentDecoded(
        True,
        StagedSegment(target, len(records), table_seq_ranges(table)),
        tuple(contents.damages),
        tuple(contents.repaired),
        table_lsn_runs(table),
    )


def table_seq_ranges(table: pa.Table) -> SeqRanges:
    """Per structure, the lowest and highest seq of a table of records.

    ``sharedq.log.segment.seq_ranges`` on the columns, not on the records: the loop
    over every record in Python was a tenth of a segment's staging.
    """
    if table.num_rows == 0:
        return {}
    grouped = table.group_by("structure").aggregate([("seq", "min"), ("seq", "max")])
    return {
        str(name): (int(low), int(high))
        for name, low, high in zip(
            grouped.column("structure").to_pylist(),
            grouped.column("seq_min").to_pylist(),
            grouped.column("seq_max").to_pylist(),
            strict=True,
        )
    }


def table_lsn_runs(table: pa.Table) -> tuple[tuple[int, int], ...]:
    """A table's lsns as runs of consecutive numbers ``(first, last)``, as
    ``sharedq.log.datasets.lsn_runs`` gives them (sorted, repeats counted once)."""
    lsns = pc.unique(table.column("lsn")).sort()
    if len(lsns) == 0:
        return ()
    # Where an lsn is not its predecessor's successor, a run starts.
    steps = pc.fill_null(pc.not_equal(pc.pairwise_diff(lsns), 1), False)
    breaks = pc.indices_nonzero(steps).to_pylist()
    firsts = pc.take(lsns, [0, *breaks]).to_pylist()
    lasts = pc.take(lsns, [b - 1 for b in breaks] + [len(lsns) - 1]).to_pylist()
    return tuple(zip(firsts, lasts, strict=True))


def _stage(item: tuple[list[str], str]) -> SegmentDecoded[StagedSegment]:
    return stage_segment(*item)


def stage_segments(
    spark: SparkSession | None, segments: list[StagingSegment], *, directory: Path
) -> list[SegmentDecoded[StagedSegment]]:
    """Decode ``segments`` into Parquet files under ``directory``, in order.

    In Spark's Python workers when there are several and a session is given, else
    here.  ``WORKERS_FAILED`` when the workers could not (``sharedq`` not installed
    where they run, a path they cannot reach), with Spark's reason.
    """
    items = [
        ([str(p) for p in s.paths], str(directory / f"{s.writer}.{s.first_lsn:020d}.parquet"))
        for s in segments
    ]
    if spark is None or len(items) < 2:
        return [stage_segment(*item) for item in items]
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    # A task per core, each decoding its share of the segments in turn: a task per
    # segment waited 0.05 to 0.1 s between one segment and the next for the next task
    # to be launched (local[2], 4 segments).
    tasks = min(len(items), max(1, spark.sparkContext.defaultParallelism))
    try:
        decoded: list[SegmentDecoded[StagedSegment]] = (
            spark.sparkContext.parallelize(items, tasks).map(_stage).collect()
        )
    except (Py4JJavaError, PySparkException) as exc:
        raise pipeline_error(
            PipelineReason.WORKERS_FAILED,
            "Spark's Python workers could not decode the staging segments (they must "
            "import sharedq and reach the log and scratch directories): " + _last_error(str(exc)),
        ) from exc
    return decoded


def write_empty(target: Path) -> str:
    """An empty file in the log record schema, for a scan that has nothing else."""
    pq.write_table(ARROW_SCHEMA.empty_table(), target, compression="none")
    return str(target)


def _last_error(text: str) -> str:
    """The line naming the error in a worker's traceback (its last such line)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if "Error" in line or "Exception" in line:
            return line
    return lines[-1] if lines else text
