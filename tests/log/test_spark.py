"""The Spark pipeline's contract: ``spark.read.parquet`` reads log data sets as written."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from sharedq.log import ChangeOp, LogRecord, RecordType

from .helpers import MakeStream, eid, key


@pytest.mark.slow
def test_spark_reads_data_sets_with_the_record_schema(
    spark: SparkSession, make_stream: MakeStream
) -> None:
    stream = make_stream(staging_bytes=1 << 22)
    with stream.writer("QM1") as w:
        for seq in range(1, 101):
            w.append(
                RecordType.PUT,
                op=ChangeOp.WRITE,
                seq=seq,
                entry_id=eid(seq),
                list_number=seq % 3,
                key=key(seq),
                data=b"d",
                version=2**64 - seq,
                uow=b"U" * 32,
                priority=seq % 10,
            )
        w.log_event(RecordType.STATISTICS, payload={"entries": 100})
        w.offload()
    expected: list[LogRecord] = list(stream.records())
    df = spark.read.parquet(str(stream.layout.datasets))
    types = dict(df.dtypes)
    assert list(types) == list(LogRecord._fields)
    assert (types["seq"], types["op"], types["type"], types["time_us"]) == (
        "bigint",
        "tinyint",
        "smallint",
        "timestamp",
    )
    rows = df.orderBy("seq", "op", "writer", "lsn").collect()
    assert [(r.seq, r.op, r.writer, r.lsn) for r in rows] == [tuple(e[:4]) for e in expected]
    # Versions arrive as two's complement, times as UTC timestamps
    assert rows[0].version == (2**64 - 1) - 2**64
    assert round(rows[0].time_us.timestamp() * 1_000_000) == expected[0].time_us
    puts = df.where(f"type = {int(RecordType.PUT)}").groupBy("list_number").count().collect()
    assert sorted((r.list_number, r["count"]) for r in puts) == [(0, 33), (1, 34), (2, 33)]
