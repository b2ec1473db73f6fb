"""Reading what the system writes: log streams and SRDS files, as DataFrames.

A job is given a path: a recovery root (one directory per structure pair), one pair's
directory (``log/`` and ``srds/``), or a bare log stream.  Log data sets are read by
Spark in parallel; records still in staging are decoded by the log's own code (CRC
checks, damage handling), as the log's reader decides (the lsn bookkeeping that tells
which segments a data set already holds), and handed to Spark as one Parquet file per
segment (:mod:`sharedq.pipeline.staging`), so that every record the in-process reader
yields is seen once, and no other.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from sharedq.log import ARROW_SCHEMA, LogStream, ReadPlan
from sharedq.log.datasets import read_dataset_meta
from sharedq.log.segment import merge_ranges
from sharedq.pipeline.errors import PipelineReason, pipeline_error
from sharedq.pipeline.staging import stage_segments, write_empty
from sharedq.recovery.srds import ENTRY_SCHEMA as SRDS_ENTRY_SCHEMA
from sharedq.recovery.srds import SLOTS, SlotStatus, slot_status, srds_path

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

_STREAM_FILE = "STREAM"


@dataclass(frozen=True)
class PairInput:
    """One structure pair's files: its log stream and, when it has one, its SRDS directory."""

    name: str
    log: Path
    srds: Path | None

    def srds_slots(self) -> list[SlotStatus]:
        """Both SRDS slots (valid or not, the seq each covers); empty without a directory."""
        if self.srds is None or not self.srds.is_dir():
            return []
        return slot_status(self.srds)


def find_pairs(path: str | Path) -> list[PairInput]:
    """The pairs under ``path``: a recovery root, a pair directory, or a log stream.

    ``NO_INPUT`` when none is found, naming the path, so that a typo is not read as an
    empty log.
    """
    root = Path(path)
    if not root.is_dir():
        raise pipeline_error(PipelineReason.NO_INPUT, f"{root} is not a directory", path=str(root))
    if (root / _STREAM_FILE).is_file():
        srds = root.parent / "srds"
        name = root.parent.name if root.name == "log" else root.name
        return [PairInput(name, root, srds if srds.is_dir() else None)]
    if (root / "log" / _STREAM_FILE).is_file():
        return [_pair(root)]
    pairs = [_pair(d) for d in sorted(root.iterdir()) if (d / "log" / _STREAM_FILE).is_file()]
    if not pairs:
        raise pipeline_error(
            PipelineReason.NO_INPUT,
            f"{root} holds no log stream: give a recovery root, a pair directory or a log",
            path=str(root),
        )
    return pairs


def _pair(directory: Path) -> PairInput:
    srds = directory / "srds"
    return PairInput(directory.name, directory / "log", srds if srds.is_dir() else None)


@dataclass(frozen=True)
class StagedLog:
    """The pairs' logs ready for Spark: the Parquet files to read, the retention points,
    and, when every file's footer tells them, the structures the records are about.

    ``structures``: per structure, the lowest and highest seq of its records kept
    after retention (from the data sets' footers and the staging records, without
    reading a record of a data set); ``None`` when a footer does not tell.  ``plans``:
    per pair, the log reader's account of the files (what each writer's lsns are, in
    which file), to check that the records a job needs are whole
    (:meth:`sharedq.log.ReadPlan.check`).
    """

    paths: list[str]
    retention: dict[str, int]
    structures: dict[str, tuple[int, int]] | None
    plans: dict[str, ReadPlan] = field(default_factory=dict)
    #: Where an empty file in the record schema goes, for a scan left with nothing else.
    empty: str = ""

    def without(self, dropped: set[str]) -> StagedLog:
        """The same log without some data set files (damaged ones, accepted as lost)."""
        kept = [p for p in self.paths if p not in dropped]
        return replace(self, paths=kept or [write_empty(Path(self.empty))])


def stage_log(
    pairs: list[PairInput], work_dir: str | Path, spark: SparkSession | None = None
) -> StagedLog:
    """Decode the records still in staging into Parquet files under ``work_dir`` and list
    what Spark must read; see :func:`read_log`.

    With ``spark``, several segments are decoded in its Python workers at once
    (:mod:`sharedq.pipeline.staging`); without, here.
    """
    staged = Path(work_dir) / "staging"
    if staged.exists():
        shutil.rmtree(staged)
    paths: list[str] = []
    retention: dict[str, int] = {}
    ranges: dict[str, tuple[int, int]] | None = {}
    plans: dict[str, ReadPlan] = {}
    for pair in pairs:
        directory = staged / pair.name
        directory.mkdir(parents=True)
        stream = LogStream.open_existing(pair.log)
        sources = stream.decoded_sources(partial(stage_segments, spark, directory=directory))
        plans[pair.name] = sources.plan
        paths.extend(staged_file.path for _, staged_file in sources.segments)
        paths.extend(str(p) for p in sources.datasets)
        for structure, point in sources.retention.items():
            retention[structure] = max(point, retention.get(structure, 0))
        if ranges is not None:
            for _, staged_file in sources.segments:
                merge_ranges(ranges, staged_file.ranges)
            for path in sources.datasets:
                try:
                    merge_ranges(ranges, read_dataset_meta(path).ranges)
                except (OSError, KeyError, ValueError):
                    ranges = None
                    break
    staged.mkdir(parents=True, exist_ok=True)
    empty = staged / "empty.parquet"
    if not paths:
        paths.append(write_empty(empty))
    kept = None
    if ranges is not None:
        kept = {
            name: (max(low, retention.get(name, 0)), high)
            for name, (low, high) in ranges.items()
            if high >= retention.get(name, 0)
        }
    return StagedLog(paths, retention, kept, plans, str(empty))


def log_frame(spark: SparkSession, staged: StagedLog) -> DataFrame:
    """Every record of a staged log, one row per record (see :func:`read_log`)."""
    # Parquet's dictionary filter would expand every row group's dictionary of seqs
    # (unique values) into a hash set to test ``seq > image``, a tenth of recover's
    # JVM time; the row groups' min/max statistics prune as well for such ranges.
    frame = (
        spark.read.schema(_spark_schema())
        .option("parquet.filter.dictionary.enabled", "false")
        .parquet(*staged.paths)
    )
    kept = _retention_filter(staged.retention)
    return frame if kept is None else frame.where(kept)


def read_log(spark: SparkSession, pairs: list[PairInput], work_dir: str | Path) -> DataFrame:
    """Every record of the pairs' logs, one row per record, in the log record schema.

    Rows come in no particular order; sort by ``seq, op, writer, lsn`` for the merged
    order.  Staging records are written under ``work_dir`` first (Spark must be able to
    read that directory: on a cluster, shared storage).
    """
    return log_frame(spark, stage_log(pairs, work_dir, spark))


def read_srds(spark: SparkSession, pair: PairInput, slot: int) -> DataFrame:
    """The entry rows of one SRDS slot (``sharedq.recovery.srds.ENTRY_SCHEMA``)."""
    if pair.srds is None or slot not in SLOTS:
        raise pipeline_error(PipelineReason.BAD_ARGUMENT, f"pair {pair.name} has no SRDS {slot}")
    # The schema is known: given, Spark need not open the file to infer it.
    return spark.read.schema(_srds_schema()).parquet(str(srds_path(pair.srds, slot)))


def _retention_filter(points: dict[str, int]) -> Column | None:
    from pyspark.sql import functions as F

    condition: Column | None = None
    for structure, point in sorted(points.items()):
        if point <= 0:
            continue
        kept = (F.col("structure") != structure) | (F.col("seq") >= point)
        condition = kept if condition is None else condition & kept
    return condition


def _srds_schema() -> StructType:
    """The SRDS entry schema as Spark infers it from the file (every column nullable)."""
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StructField, StructType

    schema: StructType = from_arrow_schema(SRDS_ENTRY_SCHEMA)
    return StructType([StructField(f.name, f.dataType, True) for f in schema.fields])


def _spark_schema() -> StructType:
    """The log record schema as Spark sees the Parquet columns."""
    from pyspark.sql.pandas.types import from_arrow_schema

    schema: StructType = from_arrow_schema(ARROW_SCHEMA)
    return schema
