"""``track``: every message's life, latencies, stuck messages and the balance sheet,
checked against the log as the in-process reader yields it and against the structure
the group left behind."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from sharedq.log import LogRecord, LogStream, unpack_payload
from sharedq.mq import keys
from sharedq.mq.classify import list_roles
from sharedq.mq.directory import CONTROL_LIST, USE_GET, USE_QUEUE
from sharedq.pipeline.job import JobContext, JobResult
from sharedq.pipeline.jobs import track
from tests.pipeline import handmade
from tests.pipeline.conftest import APP, GroupLog

MESSAGE_COLUMNS = {
    "structure": "string",
    "queue": "string",
    "message_id": "string",
    "put_by": "string",
    "put_time": "timestamp",
    "got_by": "string",
    "got_time": "timestamp",
    "committed_time": "timestamp",
    "outcome": "string",
    "backouts": "int",
    "put_to_get_ms": "double",
    "put_to_commit_ms": "double",
}
LATENCY_COLUMNS = ["scope", "name", "count"] + [
    f"{p}_{q}_ms" for p in ("get", "commit") for q in ("p50", "p90", "p99")
]
BALANCE_COLUMNS = [
    "queue",
    "put_committed",
    "got_committed",
    "still_queued",
    "expired",
    "cold_queued",
    "balanced",
]


def _kind(record: LogRecord) -> str | None:
    if record.payload is None:
        return None
    value = unpack_payload(record.payload)
    return value.get("mq") if isinstance(value, dict) else None


def python_lives(records: list[LogRecord]) -> dict[bytes, dict[str, Any]]:
    """Each message's changes in order, and what the tests need of them, in plain Python."""
    changes: dict[bytes, list[tuple[LogRecord, str]]] = defaultdict(list)
    for record in sorted(records, key=lambda r: (r.seq, r.lsn)):
        kind = _kind(record)
        if record.message_id is not None and record.entry_id is not None and kind:
            changes[record.entry_id].append((record, kind))
    lives = {}
    for entry, seen in changes.items():
        kinds = [k for _, k in seen]
        last = kinds[-1]
        puts = [r for r, k in seen if k == "put"]
        gets = [r for r, k in seen if k == "get"]
        removed = [r for r, k in seen if k in ("commit-gets", "sync-get")]
        outcome = {
            "put": "uncommitted",
            "get": "locked",
            "commit-gets": "consumed",
            "sync-get": "consumed",
            "backout-puts": "backed-out-put",
            "expire": "expired",
            "purge": "expired",
            "cold-queue": "cold",
        }.get(last, "queued")
        life: dict[str, Any] = {
            "queue": seen[0][0].queue.decode() if seen[0][0].queue else None,
            "outcome": outcome,
            "backouts": kinds.count("backout-gets"),
            "put_by": puts[0].writer if puts else None,
            "got_by": gets[-1].writer if gets else None,
            "first_kind": kinds[0],
            "put_to_get_ms": None,
            "put_to_commit_ms": None,
        }
        if puts and gets and removed:
            life["put_to_get_ms"] = (gets[-1].time_us - puts[0].time_us) / 1000
            life["put_to_commit_ms"] = (removed[-1].time_us - puts[0].time_us) / 1000
        lives[entry] = life
    return lives


def nearest_rank(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


@pytest.fixture(scope="module")
def tracked(
    spark: SparkSession, group_log: GroupLog, tmp_path_factory: pytest.TempPathFactory
) -> tuple[JobResult, Path]:
    out = tmp_path_factory.mktemp("track")
    ctx = JobContext.open(spark, group_log.root, out)
    return track.run(ctx), out


def _app_records(group_log: GroupLog) -> list[LogRecord]:
    pair = next(p for p in group_log.pairs if p.name == APP)
    return [r for r in LogStream.open_existing(pair.log).records() if r.structure == APP]


def test_every_message_is_followed_as_the_log_tells_it(
    spark: SparkSession, group_log: GroupLog, tracked: tuple[JobResult, Path]
) -> None:
    result, out = tracked
    frame = spark.read.parquet(str(out / "track" / "messages"))
    types = dict(frame.dtypes)
    for name, kind in MESSAGE_COLUMNS.items():
        assert types[name] == kind, name
    want = python_lives(_app_records(group_log))
    rows = {bytes(r.entry_id): r for r in frame.where(f"structure = '{APP}'").collect()}
    for entry, life in want.items():
        row = rows[entry]
        assert row.outcome == life["outcome"], (entry.hex(), life)
        assert row.backouts == life["backouts"]
        assert row.put_by == life["put_by"]
        assert row.got_by == life["got_by"]
        assert row.queue == life["queue"]
        if life["put_to_get_ms"] is not None:
            assert row.put_to_get_ms == pytest.approx(life["put_to_get_ms"])
            assert row.put_to_commit_ms == pytest.approx(life["put_to_commit_ms"])
    # the rest are the messages of the SRDS image the log starts from, never touched
    untouched = [r for e, r in rows.items() if e not in want]
    assert all(r.outcome == "queued" and r.put_by is None for r in untouched)
    assert result.figures["outcomes"] == dict(Counter(r.outcome for r in rows.values()))


def test_the_balance_sheet_balances_and_matches_the_structure_left_behind(
    spark: SparkSession, group_log: GroupLog, tracked: tuple[JobResult, Path]
) -> None:
    result, out = tracked
    sheet = spark.read.parquet(str(out / "track" / "balance"))
    assert set(BALANCE_COLUMNS) <= set(sheet.columns)
    rows = {r.queue: r for r in sheet.collect()}
    final = group_log.final[APP]
    roles = list_roles(final.lists.get(CONTROL_LIST, ()))
    live: Counter[str] = Counter()
    uncommitted = 0
    for number, entries in final.lists.items():
        role = roles.get(number)
        if role is None or role.use not in (USE_QUEUE, USE_GET):
            continue
        for entry in entries:
            if entry.key == keys.LHQC_KEY:
                continue
            if role.use == USE_QUEUE and keys.is_uncommitted(entry.key):
                uncommitted += 1
            else:
                live[role.name] += 1  # on a get list: would need the adjunct; none here
    assert {q: r.still_queued for q, r in rows.items() if r.still_queued} == dict(live)
    assert all(r.balanced for r in rows.values())
    figures = result.figures
    assert figures["balance_ok"] is True
    assert figures["still_queued"] == sum(live.values())
    assert figures["uncommitted_puts"] == uncommitted
    for name in ("put_committed", "got_committed", "expired", "cold_queued"):
        assert figures[name] == sum(r[name] for r in rows.values())
    records = _app_records(group_log)
    kinds = Counter(_kind(r) for r in records)
    assert figures["got_committed"] == kinds["commit-gets"] + kinds["sync-get"]
    assert (
        figures["opening"] + figures["put_committed"]
        == figures["got_committed"]
        + figures["still_queued"]
        + figures["expired"]
        + figures["cold_queued"]
    )
    assert "balance: OK" in result.summary


def test_latency_percentiles_per_queue_server_and_all(
    spark: SparkSession, group_log: GroupLog, tracked: tuple[JobResult, Path]
) -> None:
    _, out = tracked
    frame = spark.read.parquet(str(out / "track" / "latency"))
    assert frame.columns[: len(LATENCY_COLUMNS)] == LATENCY_COLUMNS
    lives = [v for v in python_lives(_app_records(group_log)).values() if v["put_to_get_ms"]]
    rows = {(r.scope, r.name): r for r in frame.collect()}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for life in lives:
        groups[("queue", life["queue"])].append(life)
        groups[("server", life["got_by"])].append(life)
        groups[("all", "all")].append(life)
    assert set(rows) == set(groups)
    for key, members in groups.items():
        row = rows[key]
        assert row["count"] == len(members)
        for prefix, field in (("get", "put_to_get_ms"), ("commit", "put_to_commit_ms")):
            values = [m[field] for m in members]
            for name, fraction in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
                assert row[f"{prefix}_{name}_ms"] == pytest.approx(
                    nearest_rank(values, fraction), abs=0.01
                ), (key, prefix, name)


def test_a_handmade_log_with_every_kind_of_ending(spark: SparkSession, tmp_path: Path) -> None:
    log_dir = handmade.write_handmade_log(tmp_path / "in")
    ctx = JobContext.open(spark, log_dir, tmp_path / "out")
    result = track.run(ctx, waiting_seconds=1.0, held_ms=30.0, backout_limit=2)
    messages = {
        r.message_id: r
        for r in spark.read.parquet(str(tmp_path / "out" / "track" / "messages")).collect()
    }
    for n, outcome in handmade.OUTCOMES.items():
        row = messages[handmade.message_id(n).hex()]
        assert row.outcome == outcome, n
    m1 = messages[handmade.message_id(1).hex()]
    assert (m1.put_by, m1.got_by, m1.put_to_get_ms, m1.put_to_commit_ms) == ("QM1", "QM2", 100, 150)
    m3 = messages[handmade.message_id(3).hex()]
    assert (m3.backouts, m3.got_by, m3.put_to_get_ms, m3.put_to_commit_ms) == (2, "QM2", 400, 405)
    m10 = messages[handmade.message_id(10).hex()]
    assert (m10.put_by, m10.got_by, m10.put_to_get_ms) == ("QM3", "QM3", 50)

    sheet = {
        r.queue: r.asDict()
        for r in spark.read.parquet(str(tmp_path / "out" / "track" / "balance")).collect()
    }
    assert {k: sheet["Q1"][k] for k in BALANCE_COLUMNS[1:]} == {
        "put_committed": 4,
        "got_committed": 3,
        "still_queued": 1,
        "expired": 0,
        "cold_queued": 0,
        "balanced": True,
    }
    assert {k: sheet["Q2"][k] for k in BALANCE_COLUMNS[1:]} == {
        "put_committed": 4,
        "got_committed": 0,
        "still_queued": 2,
        "expired": 1,
        "cold_queued": 1,
        "balanced": True,
    }
    assert sheet["Q1"]["locked"] == 1 and sheet["Q1"]["uncommitted_puts"] == 1
    # m2 and m11, whose put is not in the log: neither is in the opening balance
    assert sheet["Q1"]["backed_out_puts"] == 2 and sheet["Q1"]["opening"] == 0
    assert result.figures["balance_ok"] is True
    assert result.figures["put_committed"] == 8 and result.figures["opening"] == 0

    stuck = spark.read.parquet(str(tmp_path / "out" / "track" / "stuck")).collect()
    reasons = {(r.reason, r.message_id) for r in stuck}
    mid = {n: handmade.message_id(n).hex() for n in handmade.OUTCOMES}
    assert reasons == {
        ("locked", mid[9]),
        ("in-doubt", mid[8]),
        ("never-gotten", mid[7]),
        ("held-long", mid[1]),  # 50 ms between get and commit
        ("held-long", mid[10]),  # 50 ms too
        ("backed-out", mid[3]),
    }
    ages = {(r.reason, r.message_id): r.age_ms for r in stuck}
    assert ages[("locked", mid[9])] == 400  # gotten at 2100, the log ends at 2500
    assert ages[("in-doubt", mid[8])] == 500


def test_without_the_srds_the_opening_balance_is_inferred_from_the_log(
    spark: SparkSession, group_log: GroupLog, tmp_path: Path
) -> None:
    ctx = JobContext.open(spark, group_log.root, tmp_path)
    result = track.run(ctx, no_srds=True)
    assert result.figures["opening_from_srds"] is False
    records = _app_records(group_log)
    first_not_put = sum(
        1
        for life in python_lives(records).values()
        if life["first_kind"] not in ("put", "commit-puts", "sync-put", "backout-puts")
    )
    assert result.figures["opening"] == first_not_put
    assert result.figures["balance_ok"] is True
