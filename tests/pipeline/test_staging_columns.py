"""The staging file's seq ranges and lsn runs, computed on its columns, agree with the
log's own per-record functions (the reader judges continuity from them)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pyarrow as pa

from sharedq.log.datasets import lsn_runs
from sharedq.log.segment import seq_ranges
from sharedq.pipeline.staging import table_lsn_runs, table_seq_ranges


def _table(rows: list[tuple[str, int, int]]) -> pa.Table:
    names, seqs, lsns = (list(c) for c in zip(*rows, strict=True)) if rows else ([], [], [])
    return pa.table(
        {
            "structure": pa.array(names, pa.string()),
            "seq": pa.array(seqs, pa.int64()),
            "lsn": pa.array(lsns, pa.int64()),
        }
    )


def _expected(rows: list[tuple[str, int, int]]) -> tuple[object, object]:
    records = [SimpleNamespace(structure=n, seq=s, lsn=lsn) for n, s, lsn in rows]
    return seq_ranges(records), tuple(lsn_runs([r.lsn for r in records]))  # type: ignore[arg-type]


def test_empty_table_has_no_ranges_and_no_runs() -> None:
    assert table_seq_ranges(_table([])) == {}
    assert table_lsn_runs(_table([])) == ()


def test_gaps_repeats_and_several_structures_match_the_log_functions() -> None:
    rng = random.Random(16)
    lsns = [lsn for lsn in range(1, 5_000) if rng.random() > 0.01]  # some holes
    lsns += rng.sample(lsns, 50)  # a merged dual-log copy repeats some
    rng.shuffle(lsns)
    rows = [(rng.choice(["A", "B", "CQS.Q1"]), rng.randrange(1, 10**12), lsn) for lsn in lsns]
    got = (table_seq_ranges(_table(rows)), table_lsn_runs(_table(rows)))
    assert got == _expected(rows)
    assert len(got[1]) > 10  # the holes made runs


def test_one_record() -> None:
    rows = [("A", 7, 42)]
    assert (table_seq_ranges(_table(rows)), table_lsn_runs(_table(rows))) == _expected(rows)
    assert table_lsn_runs(_table(rows)) == ((42, 42),)
