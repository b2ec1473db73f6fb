"""Log data sets: offloaded records as Parquet files, written whole and then renamed.

A data set holds one writer's records with lsns ``first..last`` (whole staging
segments), sorted by :class:`~sharedq.log.records.LogPosition`, in the columns of
:data:`~sharedq.log.records.ARROW_SCHEMA`.  pyarrow and Spark read them directly
(``spark.read.parquet("<root>/datasets")``).  The footer's key-value metadata carries
what a reader needs to skip a data set without reading it: the writer, the lsn range
and, per structure, the lowest and highest seq; every row group's statistics on
``seq`` let a reader skip row groups before a starting seq.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sharedq.log.codec import gc_paused
from sharedq.log.layout import Layout, dataset_name, fsync_dir
from sharedq.log.records import (
    ARROW_SCHEMA,
    FIELD_NAMES,
    FIELDS,
    SCHEMA_VERSION,
    LogRecord,
)
from sharedq.log.segment import SeqRanges, seq_ranges

_META_PREFIX = "sharedq.log."
_VERSION_COLUMN = FIELD_NAMES.index("version")
_TIME_COLUMN = FIELD_NAMES.index("time_us")
_WRAP = 2**64
#: A record as one Arrow struct, its version unsigned: pyarrow converts the record
#: tuples row by row in C++, several times faster than building each column from
#: Python lists, and the version's int64 form is then a reinterpreting cast.
_ROW_TYPE = pa.struct(
    [
        pa.field(f.name, pa.uint64() if index == _VERSION_COLUMN else f.arrow_type)
        for index, f in enumerate(FIELDS)
    ]
)


@dataclass(frozen=True)
class DatasetMeta:
    """What a data set's footer says about it."""

    path: Path
    writer: str
    first_lsn: int
    last_lsn: int
    rows: int
    ranges: SeqRanges
    bytes: int

    @property
    def min_seq(self) -> int:
        return min((low for low, _ in self.ranges.values()), default=0)


def records_to_table(records: list[LogRecord]) -> pa.Table:
    """An Arrow table of ``records`` in :data:`ARROW_SCHEMA` (versions as int64)."""
    columns = pa.array(records, type=_ROW_TYPE).flatten()
    columns[_VERSION_COLUMN] = pc.cast(columns[_VERSION_COLUMN], pa.int64(), safe=False)
    return pa.Table.from_arrays(columns, schema=ARROW_SCHEMA)


def table_to_records(table: pa.Table) -> list[LogRecord]:
    """Records from a table of :data:`ARROW_SCHEMA` columns, in row order."""
    rows = table.num_rows
    columns: list[Any] = []
    for index in range(len(FIELDS)):
        column = table.column(index)
        if column.null_count == rows:
            columns.append(repeat(None, rows))
        elif index == _TIME_COLUMN:
            columns.append(column.cast(pa.int64()).to_pylist())
        elif index == _VERSION_COLUMN:
            values = column.to_pylist()
            columns.append([v + _WRAP if v is not None and v < 0 else v for v in values])
        else:
            columns.append(column.to_pylist())
    new = tuple.__new__
    with gc_paused():
        return [new(LogRecord, row) for row in zip(*columns, strict=True)]


def write_dataset(
    layout: Layout, writer: str, records: list[LogRecord], *, row_group_rows: int
) -> DatasetMeta:
    """Write one writer's records (sorted by position) as a data set; durable on return.

    The file is written under a hidden temporary name, synced, renamed into place and
    the directory synced, so a reader (or Spark) sees either no data set or a whole one.
    """
    lsns = [r.lsn for r in records]
    first, last = min(lsns), max(lsns)
    ranges = seq_ranges(records)
    table = records_to_table(records)
    metadata = dict(table.schema.metadata or {})
    metadata.update(
        {
            f"{_META_PREFIX}writer".encode(): writer.encode(),
            f"{_META_PREFIX}first_lsn".encode(): str(first).encode(),
            f"{_META_PREFIX}last_lsn".encode(): str(last).encode(),
            f"{_META_PREFIX}seq_ranges".encode(): json.dumps(ranges, sort_keys=True).encode(),
        }
    )
    table = table.replace_schema_metadata(metadata)
    final = layout.datasets / dataset_name(writer, first, last)
    tmp = layout.datasets / f".{final.name}.tmp"
    pq.write_table(table, tmp, row_group_size=row_group_rows, compression="snappy")
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    os.replace(tmp, final)
    fsync_dir(layout.datasets)
    # (a purge may remove it at once when all of it is below the retention point)
    return DatasetMeta(final, writer, first, last, len(records), ranges, size)


def read_dataset_meta(path: Path) -> DatasetMeta:
    """The footer metadata of a data set (reads only the footer)."""
    meta = pq.read_metadata(path)
    kv = meta.metadata or {}

    def get(name: str) -> str:
        value: bytes = kv[f"{_META_PREFIX}{name}".encode()]
        return value.decode()

    version = int(kv.get(b"sharedq.log.schema_version", b"0"))
    if version != SCHEMA_VERSION:
        raise ValueError(f"schema version {version}, expected {SCHEMA_VERSION}")
    ranges = {k: (int(v[0]), int(v[1])) for k, v in json.loads(get("seq_ranges")).items()}
    return DatasetMeta(
        path,
        get("writer"),
        int(get("first_lsn")),
        int(get("last_lsn")),
        meta.num_rows,
        ranges,
        path.stat().st_size,
    )


def read_dataset(path: Path, *, from_seq: int | None = None) -> list[LogRecord]:
    """A data set's records in position order, skipping row groups wholly before ``from_seq``."""
    parquet = pq.ParquetFile(path)
    try:
        groups = list(range(parquet.num_row_groups))
        if from_seq is not None:
            groups = [g for g in groups if _group_max_seq(parquet, g) >= from_seq]
        if not groups:
            return []
        table = parquet.read_row_groups(groups, columns=list(FIELD_NAMES))
    finally:
        parquet.close()
    return table_to_records(table)


def _group_max_seq(parquet: pq.ParquetFile, group: int) -> int:
    stats = parquet.metadata.row_group(group).column(0).statistics
    if stats is None or not stats.has_min_max:
        return 2**63 - 1  # no statistics: read the group
    return int(stats.max)
