"""Log data sets: offloaded records as Parquet files, written whole and then renamed.

A data set holds one writer's records with lsns ``first..last`` (whole staging
segments), sorted by :class:`~sharedq.log.records.LogPosition`, in the columns of
:data:`~sharedq.log.records.ARROW_SCHEMA`.  pyarrow and Spark read them directly
(``spark.read.parquet("<root>/datasets")``).  The footer's key-value metadata carries
what a reader needs to skip a data set without reading it: the writer, the lsn span
(the segments it holds) and the lsns it really has within it (fewer only when a
segment's damage could not be made good: ``damage`` says what), per structure the
lowest and highest seq, and every row group's highest seq, so that a reader skips
row groups before a starting seq.

A data set checks itself: every page carries a CRC (written and verified on read),
and the metadata above carries a SHA-256 digest of itself, verified before any of it
is believed (a flipped digit in a seq range could otherwise make a reader skip
records it needs).

pyarrow is imported by the functions here that read or write a data set, when first
called, not with the module: a writer that stages records and never offloads does
without it (``sharedq.log``'s docstring); :func:`arrow_exception` lets a caller catch
pyarrow's errors without importing it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass
from functools import cache
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sharedq.log.codec import gc_paused
from sharedq.log.files import make_dirs, open_new
from sharedq.log.layout import Layout, dataset_name, fsync_dir
from sharedq.log.records import (
    FIELD_NAMES,
    FIELDS,
    SCHEMA_VERSION,
    LogRecord,
)
from sharedq.log.segment import SeqRanges, seq_ranges

if TYPE_CHECKING:
    import pyarrow as pa

_META_PREFIX = "sharedq.log."
_META_KEYS = (
    "writer",
    "first_lsn",
    "last_lsn",
    "seq_ranges",
    "lsn_ranges",
    "damage",
    "group_max_seq",
    "rows",
)
_DIGEST_KEY = b"sharedq.log.digest"
_VERSION_COLUMN = FIELD_NAMES.index("version")
_TIME_COLUMN = FIELD_NAMES.index("time_us")
_WRAP = 2**64


class _NoArrowError(Exception):
    """Stands for pyarrow's errors while pyarrow is not imported (none can be raised)."""


def arrow_exception() -> type[Exception]:
    """``pyarrow.ArrowException`` for an ``except`` clause, without importing pyarrow.

    Until pyarrow is imported no Arrow call has run, so no Arrow error can be caught:
    a class that nothing raises stands for it.  An ``except`` clause's expression is
    evaluated only when an exception reaches it.
    """
    pa = sys.modules.get("pyarrow")
    error: type[Exception] = _NoArrowError if pa is None else pa.ArrowException
    return error


@cache
def _row_type() -> pa.DataType:
    """A record as one Arrow struct, its version unsigned: pyarrow converts the record
    tuples row by row in C++, several times faster than building each column from
    Python lists, and the version's int64 form is then a reinterpreting cast."""
    import pyarrow as pa

    return pa.struct(
        [
            pa.field(f.name, pa.uint64() if index == _VERSION_COLUMN else f.arrow_type)
            for index, f in enumerate(FIELDS)
        ]
    )


@dataclass(frozen=True)
class DatasetMeta:
    """What a data set's footer says about it.

    ``first_lsn..last_lsn`` is the span of the segments it holds; ``lsn_ranges`` the
    lsns it has (the whole span unless damage lost some: ``damage`` says what).
    """

    path: Path
    writer: str
    first_lsn: int
    last_lsn: int
    rows: int
    ranges: SeqRanges
    bytes: int
    lsn_ranges: tuple[tuple[int, int], ...] = ()
    damage: tuple[str, ...] = ()
    group_max_seq: tuple[int, ...] = ()

    @property
    def min_seq(self) -> int:
        return min((low for low, _ in self.ranges.values()), default=0)


def records_to_table(records: list[LogRecord]) -> pa.Table:
    """An Arrow table of ``records`` in :data:`ARROW_SCHEMA` (versions as int64)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from sharedq.log.records import ARROW_SCHEMA

    columns = pa.array(records, type=_row_type()).flatten()
    columns[_VERSION_COLUMN] = pc.cast(columns[_VERSION_COLUMN], pa.int64(), safe=False)
    return pa.Table.from_arrays(columns, schema=ARROW_SCHEMA)


def table_to_records(table: pa.Table) -> list[LogRecord]:
    """Records from a table of :data:`ARROW_SCHEMA` columns, in row order."""
    import pyarrow as pa

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


def lsn_runs(lsns: list[int]) -> list[tuple[int, int]]:
    """Sorted lsns as runs of consecutive numbers ``(first, last)``."""
    runs: list[tuple[int, int]] = []
    for lsn in sorted(lsns):
        if runs and lsn == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], lsn)
        elif not runs or lsn > runs[-1][1]:
            runs.append((lsn, lsn))
    return runs


def write_dataset(
    layout: Layout,
    writer: str,
    records: list[LogRecord],
    *,
    row_group_rows: int,
    span: tuple[int, int] | None = None,
    damage: list[str] | tuple[str, ...] = (),
) -> DatasetMeta:
    """Write one writer's records (sorted by position) as a data set; durable on return.

    ``span`` is the lsn span of the segments the records come from (the records' own
    lowest and highest lsn when not given); ``damage`` says why lsns of the span are
    missing, if some are.  The file is written under a hidden temporary name, synced,
    renamed into place and the directory synced, so a reader (or Spark) sees either no
    data set or a whole one.
    """
    lsns = [r.lsn for r in records]
    first, last = span if span is not None else (min(lsns), max(lsns))
    runs = lsn_runs(lsns)
    ranges = seq_ranges(records)
    table = records_to_table(records)
    seqs = table.column(0).to_pylist()
    group_max = [max(seqs[i : i + row_group_rows]) for i in range(0, len(seqs), row_group_rows)]
    values = {
        "writer": writer,
        "first_lsn": str(first),
        "last_lsn": str(last),
        "seq_ranges": json.dumps(ranges, sort_keys=True),
        "lsn_ranges": json.dumps(runs),
        "damage": json.dumps(list(damage)),
        "group_max_seq": json.dumps(group_max),
        "rows": str(len(records)),
    }
    metadata = dict(table.schema.metadata or {})
    metadata.update({f"{_META_PREFIX}{k}".encode(): v.encode() for k, v in values.items()})
    metadata[_DIGEST_KEY] = _digest(values).encode()
    table = table.replace_schema_metadata(metadata)
    final = layout.datasets / dataset_name(writer, first, last)
    tmp = layout.datasets / f".{final.name}.tmp"
    make_dirs(layout.datasets)
    import pyarrow.parquet as pq

    with open_new(tmp) as out:  # 0600: pyarrow, given the path, makes it 0644
        pq.write_table(
            table,
            out,
            row_group_size=row_group_rows,
            compression="snappy",
            write_page_checksum=True,
        )
        out.flush()
        os.fsync(out.fileno())
        size = os.fstat(out.fileno()).st_size
    os.replace(tmp, final)
    fsync_dir(layout.datasets)
    # (a purge may remove it at once when all of it is below the retention point)
    return DatasetMeta(
        final,
        writer,
        first,
        last,
        len(records),
        ranges,
        size,
        tuple(runs),
        tuple(damage),
        tuple(group_max),
    )


def read_dataset_meta(path: Path) -> DatasetMeta:
    """The footer metadata of a data set, verified against its digest (reads the footer).

    ``ValueError`` says what is wrong with a footer that does not verify.
    """
    import pyarrow.parquet as pq

    meta = pq.read_metadata(path)
    kv = meta.metadata or {}
    version = int(kv.get(b"sharedq.log.schema_version", b"0"))
    if version != SCHEMA_VERSION:
        raise ValueError(f"schema version {version}, expected {SCHEMA_VERSION}")
    try:
        values = {k: kv[f"{_META_PREFIX}{k}".encode()].decode() for k in _META_KEYS}
        digest = kv[_DIGEST_KEY].decode()
    except KeyError as exc:
        raise ValueError(f"its footer lacks {exc.args[0]!r}") from None
    if _digest(values) != digest:
        raise ValueError("its footer's digest does not match what the footer says")
    rows = int(values["rows"])
    if rows != meta.num_rows:
        raise ValueError(f"it holds {meta.num_rows} rows, its footer says {rows}")
    ranges = {k: (int(v[0]), int(v[1])) for k, v in json.loads(values["seq_ranges"]).items()}
    return DatasetMeta(
        path,
        values["writer"],
        int(values["first_lsn"]),
        int(values["last_lsn"]),
        rows,
        ranges,
        path.stat().st_size,
        tuple((int(a), int(b)) for a, b in json.loads(values["lsn_ranges"])),
        tuple(str(d) for d in json.loads(values["damage"])),
        tuple(int(v) for v in json.loads(values["group_max_seq"])),
    )


def read_dataset(
    path: Path, *, from_seq: int | None = None, meta: DatasetMeta | None = None
) -> list[LogRecord]:
    """A data set's records in position order, skipping row groups wholly before ``from_seq``.

    Every page's checksum is verified, and the rows read must be as many as the footer
    says (``ValueError`` otherwise); groups are skipped by the digest-checked highest
    seqs of the footer, never by Parquet's unchecked statistics.
    """
    import pyarrow.parquet as pq

    meta = meta if meta is not None else read_dataset_meta(path)
    parquet = pq.ParquetFile(path, page_checksum_verification=True)
    try:
        groups = list(range(parquet.num_row_groups))
        if len(meta.group_max_seq) != len(groups):
            raise ValueError(
                f"it has {len(groups)} row groups, its footer describes {len(meta.group_max_seq)}"
            )
        if from_seq is not None:
            groups = [g for g in groups if meta.group_max_seq[g] >= from_seq]
        if not groups:
            return []
        table = parquet.read_row_groups(groups, columns=list(FIELD_NAMES))
        expected = sum(parquet.metadata.row_group(g).num_rows for g in groups)
    finally:
        parquet.close()
    if table.num_rows != expected:
        raise ValueError(f"read {table.num_rows} rows where its row groups hold {expected}")
    return table_to_records(table)


def verify_dataset(path: Path) -> None:
    """Read a whole data set, checking every page; ``ValueError``/``ArrowException`` if not."""
    import pyarrow.parquet as pq

    meta = read_dataset_meta(path)
    table = pq.read_table(path, page_checksum_verification=True)
    if table.num_rows != meta.rows:
        raise ValueError(f"read {table.num_rows} rows, its footer says {meta.rows}")


def _digest(values: dict[str, str]) -> str:
    canonical = json.dumps(values, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(canonical).hexdigest()
