"""``track`` and ``print`` on a log written by real Common Queue Servers: figure 72.

Three CQSs (systems IMSA, IMSB, IMSC) on one memory MSGQ structure, with recovery
settings, do the redbook's figure 72 flow: IMSA puts MSG1 and reads it; its program
switches to MSG2 (a unit of work spawned from MSG1's) and IMSB reads it (IMSC comes
second and finds nothing); IMSB's program puts MSG3 (two parts) for LTERMA and MSG4
for LTERMB; IMSA reads MSG3, IMSB reads MSG4; every input is deleted after its outputs
are put.  IMSC meanwhile works on a unit of its own (a put to a serial queue, a read,
an unlock, a read again, a move).  ``track --uow`` must list exactly figure 72's rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sharedq.cf.memory import MemoryFacility
from sharedq.cqs import CQS, Uow, make_name, structure_params
from sharedq.cqs.names import parse_name
from sharedq.log import LogRecord, LogStream, RecordType
from sharedq.pipeline import PipelineError, PipelineReason
from sharedq.pipeline.job import JobContext
from sharedq.pipeline.jobs import print_log, track
from sharedq.pipeline.sources import find_pairs
from sharedq.pipeline.transforms import cqs_records as C
from sharedq.pipeline.transforms.printing import PRINT_COLUMNS, parse_uow
from sharedq.recovery import RecoverySettings
from sharedq.testing import ManualClock
from tests.pipeline.conftest import GroupLog

MSGQ = "MSGQ72"
TRANA = make_name(1, "TRANA")
TRANB = make_name(1, "TRANB")
LTERMA = make_name(5, "LTERMA")
LTERMB = make_name(5, "LTERMB")
SERIAL = make_name(4, "TRANC", "IMSC")


@dataclass(frozen=True)
class Flow:
    """The recovery root the CQSs wrote, and the units of work they used."""

    root: Path
    uows: dict[str, Uow]
    records: list[LogRecord]


def figure_72(root: Path) -> Flow:
    facility = MemoryFacility()
    facility.create(structure_params(MSGQ, messages=200))
    settings = RecoverySettings(root)
    clock = ManualClock(tick_s=0.000_01)

    def start(system: str) -> CQS:
        return CQS(
            facility, f"CQS{system}", system=system, msgq=MSGQ, recovery=settings, clock=clock
        ).connect()

    a, b, c = start("IMSA"), start("IMSB"), start("IMSC")
    uows: dict[str, Uow] = {}
    # MSG1 arrives at IMSA from LTERMA: the originating identifier is set.
    uows["MSG1"] = a.new_uow()
    a.put(TRANA, b"MSG1", uow=uows["MSG1"])
    msg1 = a.read(TRANA)  # PGMA on IMSA
    assert msg1 is not None and msg1.token is not None and msg1.uow == uows["MSG1"]
    # PGMA's program-to-program switch: MSG2, spawned by IMSA.
    uows["MSG2"] = msg1.uow.spawn(a.system, a.tokens)
    a.put(TRANB, b"MSG2", uow=uows["MSG2"])
    a.delete(msg1.token)
    msg2 = b.read(TRANB)  # PGMB on IMSB: the first reader wins
    assert msg2 is not None and msg2.token is not None
    assert c.read(TRANB) is None  # IMSC's read finds nothing (not logged)
    # PGMB answers LTERMA (MSG3, two parts) and writes to LTERMB (MSG4).
    uows["MSG3"] = msg2.uow.spawn(b.system, b.tokens)
    uows["MSG4"] = msg2.uow.spawn(b.system, b.tokens)
    b.put(LTERMA, [b"MSG3 part 1", b"MSG3 part 2"], uow=uows["MSG3"])
    b.put(LTERMB, b"MSG4", uow=uows["MSG4"])
    b.delete(msg2.token)
    msg3 = a.read(LTERMA)
    msg4 = b.read(LTERMB)
    assert msg3 is not None and msg3.token is not None and msg3.parts[1] == b"MSG3 part 2"
    assert msg4 is not None and msg4.token is not None
    a.delete(msg3.token)
    b.delete(msg4.token)
    # IMSC's own unit of work: serial queue, unlock, read again, move.
    uows["OTHER"] = c.new_uow()
    c.put(SERIAL, b"other", uow=uows["OTHER"])
    other = c.read(SERIAL)
    assert other is not None and other.token is not None
    c.unlock(other.token)
    again = c.read(SERIAL)
    assert again is not None and again.token is not None
    c.move(again.token, TRANA)
    for cqs in (a, b, c):
        cqs.disconnect()
    facility.close()
    records = [r for p in find_pairs(root) for r in LogStream.open_existing(p.log).records()]
    return Flow(root, uows, records)


@pytest.fixture(scope="module")
def flow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flow]:
    yield figure_72(tmp_path_factory.mktemp("fig72") / "recovery")


def _origin(uow: Uow) -> str:
    return f"{uow.origin.decode().rstrip()}/{uow.arrival}"


def test_the_decoders_read_what_the_cqs_wrote(spark: SparkSession, flow: Flow) -> None:
    """Every record's payload tag, queue name and unit of work, decoded in Spark, are
    what ``unpack_payload``, ``parse_name`` and ``Uow.from_bytes`` say."""
    rows = [(r.writer, r.lsn, r.payload, r.queue, r.uow) for r in flow.records]
    frame = spark.createDataFrame(
        rows, "writer string, lsn long, payload binary, queue binary, uow binary"
    )
    p, q, u = F.col("payload"), F.col("queue"), F.col("uow")
    got = {
        (r.writer, r.lsn): r
        for r in frame.select(
            "writer",
            "lsn",
            C.lead_value(p).alias("lead"),
            C.message_tag(p).alias("tag"),
            C.queue_type(q).alias("qtype"),
            C.queue_resource(q).alias("resource"),
            C.queue_imsid(q).alias("imsid"),
            C.queue_text(q).alias("text"),
            C.origin_system(u).alias("osys"),
            C.origin_token(u).alias("otok"),
            C.processing_system(u).alias("psys"),
            C.processing_token(u).alias("ptok"),
            C.uow_text(u).alias("uow_text"),
        ).collect()
    }
    tagged = 0
    for record in flow.records:
        row = got[(record.writer, record.lsn)]
        value = record.payload_value()
        lead = next(iter(value.items())) if isinstance(value, dict) and value else None
        want_lead = lead[1] if lead and lead[0] == "cqs" and isinstance(lead[1], str) else None
        assert row.lead == want_lead, record
        exact = isinstance(value, dict) and set(value) == {"cqs"}
        assert row.tag == (value["cqs"] if exact else None), record
        tagged += row.tag is not None
        if record.queue is not None:
            name = parse_name(record.queue)
            assert (row.qtype, row.resource, row.imsid) == (
                name.queue_type,
                name.resource,
                name.system or None,
            )
            imsid = f".{name.system}" if name.system else ""
            assert row.text == f"{name.queue_type:02X}.{name.resource}{imsid}"
        if record.uow is not None:
            uow = Uow.from_bytes(record.uow)
            assert row.uow_text == str(uow)
            assert (row.osys, row.otok) == (uow.origin.decode().rstrip(), uow.arrival)
            proc = uow.processor.decode().rstrip()
            assert (row.psys, row.ptok) == (proc or None, uow.processed or None)
    assert tagged >= 20
    # The CQS's own events lead with their names; shutdown with the CQS's name.
    events = {got[(r.writer, r.lsn)].lead for r in flow.records if r.queue is None}
    assert {"connect", "disconnect", "statistics"} <= events


def test_track_follows_msg1_and_all_it_spawned_as_figure_72(
    spark: SparkSession, flow: Flow, tmp_path: Path
) -> None:
    """Given MSG1's origin, track lists every request on MSG1..MSG4 in order, with the
    originating system and token constant and each spawned message's processing system
    and token; its puts and reads are exactly figure 72's rows."""
    ctx = JobContext.open(spark, flow.root, tmp_path)
    u = flow.uows
    result = track.run(ctx, uow=_origin(u["MSG1"]))
    rows = result.figures["unit"]
    t1 = u["MSG1"].arrival
    figure = [
        (1, "IMSA", t1, None, None, "P"),
        (1, "IMSA", t1, None, None, "R"),
        (2, "IMSA", t1, "IMSA", u["MSG2"].processed, "P"),
        (2, "IMSA", t1, "IMSA", u["MSG2"].processed, "R"),
        (3, "IMSA", t1, "IMSB", u["MSG3"].processed, "P"),
        (4, "IMSA", t1, "IMSB", u["MSG4"].processed, "P"),
        (3, "IMSA", t1, "IMSB", u["MSG3"].processed, "R"),
        (4, "IMSA", t1, "IMSB", u["MSG4"].processed, "R"),
    ]
    keys = ("msg", "origin_system", "origin_token", "processing_system", "processing_token")
    assert [(*(r[k] for k in keys), r["flag"]) for r in rows if r["flag"] in "PR"] == figure
    # Every request, by which CQS, in the log's order (the deletes after the outputs).
    assert [(r["msg"], r["action"], r["cqs"], r["queue"]) for r in rows] == [
        (1, "put", "CQSIMSA", "01.TRANA"),
        (1, "read", "CQSIMSA", "01.TRANA"),
        (2, "put", "CQSIMSA", "01.TRANB"),
        (1, "delete", "CQSIMSA", "01.TRANA"),
        (2, "read", "CQSIMSB", "01.TRANB"),
        (3, "put", "CQSIMSB", "05.LTERMA"),
        (4, "put", "CQSIMSB", "05.LTERMB"),
        (2, "delete", "CQSIMSB", "01.TRANB"),
        (3, "read", "CQSIMSA", "05.LTERMA"),
        (4, "read", "CQSIMSB", "05.LTERMB"),
        (3, "delete-step", "CQSIMSA", "05.LTERMA"),
        (3, "delete", "CQSIMSA", "05.LTERMA"),
        (4, "delete", "CQSIMSB", "05.LTERMB"),
    ]
    assert {r["msg"]: r["parts"] for r in rows} == {1: 1, 2: 1, 3: 2, 4: 1}
    assert "unit of work" in result.summary and "CQSIMSB" in result.summary
    # The table holds every origin: IMSC's unit too, with its unlock and move.
    table = spark.read.parquet(str(tmp_path / "track" / "cqs_units"))
    assert table.columns == list(C.STEP_COLUMNS)
    other = table.where(F.col("origin_system") == "IMSC").orderBy("seq").collect()
    assert [(r.flag, r.action, r.queue) for r in other] == [
        ("P", "put", "04.TRANC.IMSC"),
        ("R", "read", "04.TRANC.IMSC"),
        ("U", "unlock", "04.TRANC.IMSC"),
        ("R", "read", "04.TRANC.IMSC"),
        ("M", "move-step", "04.TRANC.IMSC"),
        ("M", "move", "01.TRANA"),
    ]
    assert result.figures["cqs_origins"] == 2 and result.figures["cqs_messages"] == 5
    assert result.figures["cqs_requests"] == len(rows) + len(other)
    # The queue manager's tracking finds no MQ message in a CQS log, and balances.
    assert result.figures["messages"] == 0 and result.figures["balance_ok"]
    # One spawned message alone, by its 32 bytes.
    alone = track.run(ctx, uow=str(u["MSG3"]))
    assert {r["msg"] for r in alone.figures["unit"]} == {3}  # numbered in its origin
    assert [r["flag"] for r in alone.figures["unit"]] == ["P", "R", "D", "D"]


def test_print_shows_appendix_b_names_queue_names_and_units_of_work(
    spark: SparkSession, flow: Flow, tmp_path: Path
) -> None:
    """print names a CQS's records after Appendix B, decodes the 16-byte queue name and
    the 32-byte unit of work, and chooses by queue (its printed form or its resource)
    and by a unit of work's origin."""
    ctx = JobContext.open(spark, flow.root, tmp_path)
    result = print_log.run(ctx, uow=_origin(flow.uows["MSG1"]))
    want = [
        r for r in flow.records if r.uow is not None and r.uow[:16] == bytes(flow.uows["MSG1"])[:16]
    ]
    assert result.figures["records"] == len(want) > 13  # the staged part's too
    frame = spark.read.parquet(str(tmp_path / "print" / "records"))
    assert frame.columns == list(PRINT_COLUMNS)
    puts = frame.where((F.col("type") == int(RecordType.PUT)) & (F.col("cqs") == "put"))
    first = puts.orderBy("seq").first()
    assert first is not None
    assert first.record_name == "Put Message on Client Queue"
    assert (first.queue, first.queue_type, first.queue_type_name) == (
        "01.TRANA",
        1,
        "transaction ready",
    )
    assert (first.resource, first.imsid, first.writer) == ("TRANA", None, "CQSIMSA")
    assert (first.origin_system, first.origin_token) == ("IMSA", flow.uows["MSG1"].arrival)
    assert (first.processing_system, first.processing_token) == (None, None)
    assert first.payload is None  # {"cqs": "put"} is the cqs column
    lines = (tmp_path / "print" / "records.txt").read_text().splitlines()
    assert len(lines) == len(want)
    assert any(
        "Read Message and Move to Lock Queue" in line
        and "queue=05.LTERMA (LTERM ready)" in line
        and f"uow={flow.uows['MSG3']}" in line
        for line in lines
    )
    # By queue: the printed form, or the resource name (every queue of TRANC).
    serial = print_log.run(ctx, queues=("04.TRANC.IMSC",))
    assert serial.figures["records"] == sum(1 for r in flow.records if r.queue == SERIAL) == 5
    assert print_log.run(ctx, queues=("TRANC",)).figures["records"] == 5
    # The CQS's own records: connect, statistics, disconnect, with their names.
    events = print_log.run(ctx, types=("CONNECT", "DISCONNECT"), servers=("CQSIMSB",))
    text = (tmp_path / "print" / "records.txt").read_text()
    assert events.figures["records"] == 2
    assert "Connect to Structure" in text and "Disconnect from Structure" in text
    assert "'system': 'IMSB'" in text
    # A CQS's records that do not say "cqs" themselves are named too (a CQS wrote them).
    checkpoints = print_log.run(ctx, types=("SYSTEM_CHECKPOINT",), servers=("CQSIMSA",))
    lines = (tmp_path / "print" / "records.txt").read_text().splitlines()
    assert checkpoints.figures["records"] == len(lines) > 0
    assert all(" 32 System Checkpoint " in line for line in lines)


def test_uow_forms_and_refusals() -> None:
    """--uow takes hex or SYSTEM/TOKEN[:SYSTEM/TOKEN], and refuses the rest by name."""
    uow = Uow(b"IMSA    ", 1234, b"IMSB    ", 5678)
    assert parse_uow("IMSA/1234") == bytes(uow)[:16].hex()
    assert parse_uow(str(uow)) == bytes(uow).hex()
    assert parse_uow("IMSA/1234:-/0") == bytes(Uow(b"IMSA    ", 1234)).hex()
    for bad in ("IMSA/x", "TOOLONGID/1", "IMSA/1:IMSB/2:IMSC/3", "IMSA/-1", "/1"):
        with pytest.raises(PipelineError) as caught:
            parse_uow(bad)
        assert caught.value.reason is PipelineReason.BAD_ARGUMENT, bad
        assert bad in str(caught.value)


def test_the_track_command_follows_a_unit_of_work(
    spark: SparkSession, flow: Flow, tmp_path: Path
) -> None:
    """``sharedq pipeline track --uow IMSA/T1`` end to end: figure 72 in the summary."""
    from sharedq.cli.main import cli

    origin = _origin(flow.uows["MSG1"])
    args: list[Any] = ["pipeline", "track", "--input", str(flow.root), "--output", str(tmp_path)]
    result = CliRunner().invoke(cli, [*args, "--uow", origin])
    assert result.exit_code == 0, result.output
    summary = (tmp_path / "track" / "summary.txt").read_text()
    assert f"origin {origin}" in summary
    lines = [line.split() for line in summary.splitlines()]
    flags = [parts[-5] for parts in lines if len(parts) > 5 and parts[-4] in {"put", "read"}]
    assert flags == ["P", "R", "P", "R", "P", "P", "R", "R"]
    refused = CliRunner().invoke(cli, [*args, "--uow", "IMSA/nope"])
    assert refused.exit_code == 2 and "IMSA/nope" in refused.output


def test_a_log_no_cqs_wrote_is_printed_and_tracked_as_before(
    spark: SparkSession, group_log: GroupLog, tmp_path: Path
) -> None:
    """On the queue managers' log: no record gets a CQS name or decoding, and track's
    summary has no CQS part (its ``cqs_units`` table is empty)."""
    ctx = JobContext.open(spark, group_log.root, tmp_path)
    result = track.run(ctx)
    assert result.figures["cqs_requests"] == 0 and "CQS units" not in result.summary
    assert result.figures["messages"] > 0 and result.figures["balance_ok"]
    assert spark.read.parquet(str(tmp_path / "track" / "cqs_units")).count() == 0
    print_log.run(ctx, limit=0)
    frame = spark.read.parquet(str(tmp_path / "print" / "records"))
    decoded = ("record_name", "cqs", "queue_type", "origin_system", "processing_token")
    assert frame.where(F.greatest(*[F.col(c).isNotNull() for c in decoded])).count() == 0
    assert frame.where(F.col("kind").isNotNull()).count() > 0
