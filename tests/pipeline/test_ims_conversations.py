"""``sharedq pipeline ims`` on IMS conversations (redbook §9.14) logged by real IMSs.

Two IMSs whose CQSs log to one recovery root share an MSGQ.  TRANA is conversational
(``spa=32``): its program answers with the SPA code ``TRANA`` (the conversation goes
on) until the input says ``END`` (a blank code: it ends).  IMSA has no region for
TRANA's class, so IMSB processes every iteration and puts every response, while the
conversation's front end (its CCB, the input's CQS) stays IMSA:

- NODE1 (LTERMA) on IMSA: ``TRANA GO``, two more iterations (the second long enough to
  be a multi-part message: the SPA is in part 1, part 2 is staged) and ``END``: four
  conversational inputs, one conversation ended;
- NODE2 (LTERMB) on IMSB: ``TRANA HI`` and ``END``: two, ended, front end IMSB;
- NODE1 enters an ordinary TRANB, processed local on IMSA (its class has a region there).

So the log holds 6 conversational inputs (4 at IMSA, 2 at IMSB) and 1 ordinary one.
The job must count them per front end and LTERM, and a column that was always false
(or read at a wrong offset) fails every count.  The decoders are also held to what
``sharedq.ims.messages.decode`` reads from the same records.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from sharedq.cf.memory import MemoryFacility
from sharedq.cqs import structure_params
from sharedq.cqs.messages import unpack
from sharedq.ims import DLI, IMS, Lterm, Region, Transaction
from sharedq.ims.messages import decode
from sharedq.ims.spa import Spa
from sharedq.log import LogStream, RecordType
from sharedq.pipeline.job import JobContext
from sharedq.pipeline.jobs import ims as ims_job
from sharedq.pipeline.transforms.ims import requests
from sharedq.recovery import PairLayout, RecoverySettings
from sharedq.testing import ManualClock
from tests.ims.helpers import define, take, until

MSGQ = "MSGQ01"
TRANA = Transaction("TRANA", 1, "PGMA", spa=32)
TRANB = Transaction("TRANB", 2, "PGMB")
LTERMA = Lterm("LTERMA", "NODE1")
LTERMB = Lterm("LTERMB", "NODE2")
#: Longer than a queue buffer (4096): the input and its response go in two parts.
LONG = "MSG-3 " + "x" * 6000
#: What each terminal enters and what comes back.
NODE1_TALK = ("TRANA GO", "MSG-2", LONG, "END")
NODE2_TALK = ("TRANA HI", "END")


def pgma(dli: DLI) -> None:
    """The conversational program: goes on (its own code) until the input is ``END``."""
    while (spa := dli.io.gu()) is not None:
        text = dli.io.gn() or b""
        code = b" " * 8 if text == b"END" else b"TRANA   "
        dli.io.isrt(code + spa[8:])
        dli.io.isrt(b"A " + text)


def pgmb(dli: DLI) -> None:
    while (message := dli.io.gu()) is not None:
        dli.io.isrt(b"B " + message)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("imsconv") / "recovery"
    facility = MemoryFacility()
    facility.create(structure_params(MSGQ, messages=200))
    clock = ManualClock(tick_s=0.000_01)
    settings = RecoverySettings(root)
    programs = {"PGMA": pgma, "PGMB": pgmb}
    started: list[IMS] = []

    def make(imsid: str, lterm: Lterm, classes: tuple[int, ...]) -> IMS:
        definition = define(
            imsid,
            transactions=(TRANA, TRANB),
            lterms=(lterm,),
            regions=(Region("MPR1", classes),),
        )
        ims = IMS(facility, definition, programs, msgq=MSGQ, clock=clock, recovery=settings)
        started.append(ims)
        return ims.start()

    try:
        imsa, imsb = make("IMSA", LTERMA, (2,)), make("IMSB", LTERMB, (1,))
        node1, node2 = imsa.logon("NODE1"), imsb.logon("NODE2")
        for text in NODE1_TALK:
            node1.enter(text)
            assert take(node1, 1) == [f"A {text}"]
        assert not node1.in_conversation
        for text in NODE2_TALK:
            node2.enter(text)
            assert take(node2, 1) == [f"A {text}"]
        assert not node2.in_conversation
        assert node1.enter("TRANB HELLO").routing == "local"
        assert take(node1, 1) == ["B TRANB HELLO"]
        assert until(lambda: imsa.counts["processed"] == 1 and imsb.counts["processed"] == 6)
        for ims in started:
            ims.shutdown()
    finally:
        for ims in started:
            with contextlib.suppress(Exception):
                ims.shutdown()
        facility.close()
    yield root


def _puts(root: Path) -> dict[str, tuple[str, bool, str, str | None]]:
    """Every put record as IMS itself reads it, by entry id (hex): the queue's
    resource, conversational (format 2), the source LTERM and the SPA's code.  A
    multi-part message's body is part 1's followed by its staged parts' (same unit of
    work, keyed by the staging queue part 1 names, in part order), as the CQS
    reassembles it."""
    log = PairLayout(root, MSGQ).log
    firsts: dict[str, tuple[bytes, bytes]] = {}
    parts: dict[tuple[bytes, bytes | None], list[tuple[int, bytes]]] = {}
    for r in LogStream(log, name=f"{MSGQ}.LOG", structure=MSGQ).records():
        if RecordType(r.type) is not RecordType.PUT or r.data is None or r.entry_id is None:
            continue
        prefix, body = unpack(r.data)
        if prefix.part == 0:
            firsts[r.entry_id.hex()] = (r.queue or b"", r.data)
        else:
            parts.setdefault((prefix.uow, r.queue), []).append((prefix.part, body))
    out = {}
    for entry_id, (queue, data) in firsts.items():
        prefix, body = unpack(data)
        rest = sorted(parts.get((prefix.uow, prefix.staging), [])) if prefix.staging else []
        message = decode(body + b"".join(b for _, b in rest))
        code = Spa.decode(message.segments[0]).code if message.spa else None
        resource = queue[1:9].decode("ascii").rstrip()
        out[entry_id] = (resource, message.spa, message.source, code)
    return out


def test_the_columns_read_what_ims_wrote(spark: SparkSession, root: Path, tmp_path: Path) -> None:
    """``conversational``, ``source_lterm`` and ``spa_code`` on every put are what
    ``sharedq.ims.messages.decode`` and ``Spa.decode`` read from the same record (the
    long message's part 1 too); a staged part is no IMS message of its own."""
    reqs = requests(JobContext.open(spark, root, tmp_path).log())
    rows = reqs.where("action = 'put'").collect()
    spark_view = {
        r["entry_id"]: (r["resource"], r["conversational"], r["source_lterm"], r["spa_code"])
        for r in rows
    }
    expected = _puts(root)
    assert spark_view == expected
    # 6 inputs and 6 responses conversational, 2 ended; the ordinary pair is not.
    assert sorted(v for v in expected.values() if v[0] in ("LTERMA", "LTERMB")) == [
        ("LTERMA", False, "", None),  # TRANB's reply: a reply's source LTERM is blank
        ("LTERMA", True, "", ""),
        *[("LTERMA", True, "", "TRANA")] * 3,
        ("LTERMB", True, "", ""),
        ("LTERMB", True, "", "TRANA"),
    ]
    assert sorted(v for v in expected.values() if v[0] in ("TRANA", "TRANB")) == [
        *[("TRANA", True, "LTERMA", "TRANA")] * 4,
        *[("TRANA", True, "LTERMB", "TRANA")] * 2,
        ("TRANB", False, "LTERMA", None),
    ]
    staged = reqs.where("action = 'stage'").collect()
    assert len(staged) == 2  # the long input's and its response's part 2
    assert all(
        r["source_lterm"] is None and not r["conversational"] and r["spa_code"] is None
        for r in staged
    )


def _check(out: Path) -> None:
    """What ``ims`` wrote under ``out``: inputs per CQS, latency rows, conversations.
    IMSA has no region for TRANA: its iterations are global, TRANB local; IMSB's go
    local or global as its region is waiting or not, so their routing is not checked."""
    inputs = {r["cqs"]: r for r in pq.read_table(out / "ims" / "inputs").to_pylist()}
    assert {c: (r["inputs"], r["conversational"]) for c, r in inputs.items()} == {
        "CQSIMSA": (5, 4),
        "CQSIMSB": (2, 2),
    }
    assert (inputs["CQSIMSA"]["local"], inputs["CQSIMSA"]["global"]) == (1, 4)
    latency = pq.read_table(out / "ims" / "latency").to_pylist()
    assert sorted(
        (r["cqs"], r["routing"], r["conversational"]) for r in latency if r["cqs"] == "CQSIMSA"
    ) == [
        *[("CQSIMSA", "global", True)] * 4,
        ("CQSIMSA", "local", False),  # TRANB
    ]
    assert [r["conversational"] for r in latency if r["cqs"] == "CQSIMSB"] == [True, True]
    assert all(r["replies"] == 1 and r["latency_ms"] is not None for r in latency)
    for row in latency:  # a conversation's: to the reply sent, not to its (held) delete
        sent, deleted = row["reply_sent"], row["reply_deleted"]
        until = sent if row["conversational"] else deleted
        assert row["latency_ms"] == pytest.approx((until - row["put_time"]).total_seconds() * 1000)
    held = [r for r in latency if r["conversational"] and r["reply_deleted"] > r["reply_sent"]]
    assert len(held) >= 4  # the held ones were deleted at the next input, later
    talks = pq.read_table(out / "ims" / "conversations").to_pylist()
    assert sorted((r["cqs"], r["source_lterm"], r["iterations"], r["ended"]) for r in talks) == [
        ("CQSIMSA", "LTERMA", 4, 1),  # the responses were put by CQSIMSB
        ("CQSIMSB", "LTERMB", 2, 1),
    ]


def test_the_ims_job_counts_conversations(spark: SparkSession, root: Path, tmp_path: Path) -> None:
    result = ims_job.run(JobContext.open(spark, root, tmp_path))
    figures = result.figures
    assert figures["conversational_inputs"] == 6
    assert sum(figures["inputs"].values()) == 7 and figures["inputs"]["serial"] == 0
    assert figures["unanswered"] == 0
    assert figures["balance_ok"]
    assert figures["balance"]["left"] == 0
    _check(tmp_path)
    assert "conversations per front end and LTERM" in result.summary


def test_the_ims_command_counts_conversations(root: Path, tmp_path: Path) -> None:
    from sharedq.cli.main import cli

    args = ["pipeline", "ims", "--input", str(root), "--output", str(tmp_path)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    _check(tmp_path)
    summary = (tmp_path / "ims" / "summary.txt").read_text()
    lines = [line.split() for line in summary.splitlines()]
    assert ["CQSIMSA", "LTERMA", "4", "1"] in lines
    assert ["CQSIMSB", "LTERMB", "2", "1"] in lines
    assert "balance: OK" in summary
