"""Pipeline: the Spark ``recover`` job against the servers' in-process recovery.

A structure's SRDS (10,000 messages) and its log after it (the queue workload of
``bench/recovery.py``: 90 % of the messages put are read and then deleted, written by
the log's own writer) are written; then, in turns, the same recovery runs

* in process (``sharedq.pipeline.inprocess.recover_inprocess``: the SRDS verified and
  loaded, the log after it read and folded by ``replay``, onto a fresh memory facility,
  then every list read back with ``contents``): the baseline;
* on Spark, ``local[2]`` (``sharedq.pipeline.jobs.recover.run``: the log and the SRDS
  read as DataFrames, folded, the entries and list controls written as Parquet).

Sizes: 1,000,000 records (5 rounds) and then 5,000,000 (2 rounds; figures suffixed
``_5m``) by default, some five minutes in all; 200,000 with ``--quick``; one size of
``--records N`` records.  The JVM's start-up is measured once and reported apart
(``jvm_startup_seconds``), and so is the first, cold run of each size
(``spark_cold_seconds``: the JVM loads and compiles the job's classes then, as it does
once in a long-running cluster); the timed rounds follow, in turns, and each side's
best counts.  The Spark time is the whole job: the staging records decoded and handed
over, the SRDS chosen, the log checked, both passes of the fold and the tables
written.  ``spark_recover_ratio_vs_inprocess`` is in-process time / Spark work time
(target >= 1.5 on two cores at 1M; ``spark_recover_ratio_vs_inprocess_5m`` at 5M).
The two results are checked equal (entry count, and the entries' ids, lists and
positions) before anything is reported.

Where the JVM's CPU goes is reported too (Linux, local mode; from ``/proc``, outside
the timed calls): ``spark_jvm_cpu_seconds`` is the JVM's CPU per timed round (mean) and
``spark_jit_cpu_seconds`` its JIT compiler threads' share.  At 1M the compiler
threads still take 1.5 to 3 CPU seconds a round in the five rounds after the cold
one (Spark's own code warming: the generated classes hit Spark's codegen cache after
the cold run), as much as the executors' 1.6 to 1.8: on two cores the job's best
round is that warm-up's as much as the fold's.  See docs/pipeline.md, Performance.

Per size, ``spark_jobs_per_round`` (the Spark jobs a round runs) and the median
seconds of a round's phases, from the job's progress steps: ``spark_staging_seconds``
(the staging records decoded and handed over), ``spark_first_pass_seconds`` (the SRDS
chosen, the first pass with the log check beside it, the second pass planned) and
``spark_second_pass_write_seconds`` (the second pass and the write).

To compare settings: ``--conf KEY=VALUE`` (repeatable) over the session's defaults
(a JVM option takes effect here, the benchmark starting its own JVM), ``--rounds N``
timed rounds per size.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import Report, parse_args
from bench.recovery import BENCH, IMAGE_MESSAGES, _write_log
from sharedq.log import LogStream
from sharedq.pipeline.inprocess import InprocessRecovery, recover_inprocess
from sharedq.pipeline.job import JobContext, JobResult
from sharedq.pipeline.jobs import recover as recover_job
from sharedq.pipeline.session import parse_conf, start_session
from sharedq.pipeline.sources import find_pairs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _timed(fn: Callable[[], object]) -> tuple[float, object]:
    """Seconds ``fn`` took (the cyclic collector off, as ``bench.harness.rate`` does)."""
    gc.collect()
    gc.disable()
    try:
        started = time.perf_counter()
        value = fn()
        return time.perf_counter() - started, value
    finally:
        gc.enable()


def _jvm_pid() -> int | None:
    """The session's JVM: the ``java`` process this one started (PySpark's gateway
    launches it as a child), found in ``/proc`` rather than through Spark's private
    gateway objects."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name = raw[raw.index("(") + 1 : raw.rindex(")")]
        parent = int(raw[raw.rindex(")") + 2 :].split()[1])
        if name == "java" and parent == me:
            return int(entry)
    return None


def _jvm_cpu(spark: SparkSession) -> tuple[float, float] | None:
    """The JVM's CPU seconds so far, and its JIT compiler threads' (``None`` off Linux
    or when the JVM is not on this machine)."""
    try:
        pid = _jvm_pid()
        if pid is None:
            return None
        tick = os.sysconf("SC_CLK_TCK")
        total = jit = 0.0
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                raw = Path(f"/proc/{pid}/task/{task}/stat").read_text()
            except OSError:
                continue  # the thread ended meanwhile
            name = raw[raw.index("(") + 1 : raw.rindex(")")]
            fields = raw[raw.rindex(")") + 2 :].split()
            seconds = (int(fields[11]) + int(fields[12])) / tick
            total += seconds
            jit += seconds if "CompilerThre" in name else 0.0
        return total, jit
    except (OSError, ValueError, AttributeError):
        return None


#: The phases of a round, each from the progress step (its start) that begins it.
_PHASES = (
    ("staging", "reading the log"),
    ("first_pass", "checking the log"),
    ("second_pass_write", "folding the live entries"),
)


def _phase_seconds(steps: list[tuple[str, float]]) -> dict[str, float]:
    """Seconds from each phase's first step to the step after it."""
    found: dict[str, float] = {}
    for index, (what, at) in enumerate(steps[:-1]):
        for name, start in _PHASES:
            if start in what and name not in found:
                found[name] = steps[index + 1][1] - at
    return found


def measure(
    report: Report, spark: SparkSession, base: Path, n: int, rounds: int, suffix: str
) -> None:
    """Write a log of ``n`` records after an SRDS, then time both recoveries of it in turns."""
    root = base / f"recovery{suffix}"
    began = time.perf_counter()
    image_seq = _write_log(root, n)
    report.add(f"log_write_seconds{suffix}", time.perf_counter() - began, "s", "setup")
    (pair,) = find_pairs(root / BENCH)
    stream = LogStream.open_existing(pair.log)
    sources = stream.sources()
    records = sum(
        1 for r in stream.records(structures={BENCH}, from_seq=image_seq + 1) if r.op != 127
    )
    report.add(f"records{suffix}", records, "records", f"after an SRDS of {IMAGE_MESSAGES:,}")
    report.add(f"staging_records{suffix}", len(sources.staging), "records", "not in data sets")

    def inprocess() -> InprocessRecovery:
        return recover_inprocess(pair, BENCH)

    outputs = iter(range(1_000))
    # Each round's phases, from the job's progress steps (the step that starts a phase
    # to the next one): the staging records handed over, the first pass (with the log
    # check beside it), the second pass and the write.
    steps: list[tuple[str, float]] = []

    def on_spark() -> JobResult:
        steps.clear()
        ctx = JobContext.open(
            spark,
            pair.log.parent,
            base / f"out{suffix}{next(outputs)}",
            lambda what: steps.append((what, time.perf_counter())),
        )
        try:
            return recover_job.run(ctx, structure=BENCH)
        finally:
            steps.append(("end", time.perf_counter()))
            ctx.release()

    best = {"inprocess": float("inf"), "spark": float("inf")}
    inprocess()
    cold, _ = _timed(on_spark)
    report.add(f"spark_cold_seconds{suffix}", cold, "s", "first run, not counted")
    reference: InprocessRecovery | None = None
    result: JobResult | None = None
    cpu = [0.0, 0.0]
    phases: dict[str, list[float]] = {name: [] for name, _ in _PHASES}
    tracker = spark.sparkContext.statusTracker()
    jobs_before = len(tracker.getJobIdsForGroup())
    for _ in range(rounds):
        seconds, value = _timed(inprocess)
        best["inprocess"] = min(best["inprocess"], seconds)
        assert isinstance(value, InprocessRecovery)
        reference = value
        before = _jvm_cpu(spark)
        seconds, value = _timed(on_spark)
        after = _jvm_cpu(spark)
        if before is not None and after is not None:
            cpu = [cpu[0] + after[0] - before[0], cpu[1] + after[1] - before[1]]
        best["spark"] = min(best["spark"], seconds)
        for name, seconds in _phase_seconds(steps).items():
            phases[name].append(seconds)
        assert isinstance(value, JobResult)
        result = value
    jobs = len(tracker.getJobIdsForGroup()) - jobs_before
    assert reference is not None and result is not None
    expected = sum(len(entries) for entries in reference.contents.lists.values())
    assert result.figures["entries"] == expected, (result.figures, expected)
    assert result.figures["records_applied"] == reference.records == records
    got = {
        (bytes(r.entry_id), r.list_number, r.position)
        for r in spark.read.parquet(str(result.tables["entries"]))
        .select("entry_id", "list_number", "position")
        .collect()
    }
    want = {
        (e.entry_id, number, position)
        for number, entries in reference.contents.lists.items()
        for position, e in enumerate(entries)
    }
    assert got == want, "the Spark job and in-process recovery disagree"
    report.add(f"entries_out{suffix}", expected, "entries")
    report.add(f"inprocess_seconds{suffix}", best["inprocess"], "s", f"best of {rounds}")
    report.add(f"spark_work_seconds{suffix}", best["spark"], "s", f"best of {rounds}; no JVM start")
    if cpu[0] > 0:
        report.add(f"spark_jvm_cpu_seconds{suffix}", cpu[0] / rounds, "s", "per round, mean")
        report.add(f"spark_jit_cpu_seconds{suffix}", cpu[1] / rounds, "s", "of which JIT")
    report.add(f"spark_jobs_per_round{suffix}", jobs / rounds, "jobs", "Spark jobs a round")
    for name, values in phases.items():
        if values:
            report.add(f"spark_{name}_seconds{suffix}", statistics.median(values), "s", "median")
    report.add(
        f"spark_recover_ratio_vs_inprocess{suffix}",
        best["inprocess"] / best["spark"],
        "",
        "in-process / Spark work; target >= 1.5 on two cores at 1M",
    )
    shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--records", type=int, help="one log of this many records (default: 1M and 5M)"
        )
        parser.add_argument("--rounds", type=int, help="timed rounds per size")
        parser.add_argument(
            "--conf",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="a Spark setting over the session's defaults (repeatable), to compare",
        )

    args = parse_args(__doc__.splitlines()[0], options)
    quick = args.quick
    if args.records:
        sizes = [(args.records, 2 if quick else 5, "")]
    elif quick:
        sizes = [(200_000, 2, "")]
    else:
        sizes = [(1_000_000, 5, ""), (5_000_000, 2, "_5m")]
    if args.rounds:
        sizes = [(n, args.rounds, suffix) for n, _, suffix in sizes]
    logging.getLogger("sharedq").setLevel(logging.ERROR)
    report = Report("sharedq pipeline: recover", quick)
    base = Path(tempfile.mkdtemp(prefix="sharedq-bench-pipeline-"))
    started = time.perf_counter()
    try:
        session = start_session(
            "local[2]",
            {
                "spark.sql.shuffle.partitions": "2",
                "spark.ui.showConsoleProgress": "false",
                **parse_conf(args.conf),
            },
        )
        report.add("jvm_startup_seconds", session.startup_seconds, "s", "local[2], once")
        for n, rounds, suffix in sizes:
            measure(report, session.spark, base, n, rounds, suffix)
        session.spark.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    report.add("seconds", time.perf_counter() - started, "s")
    report.emit(args.json)


if __name__ == "__main__":
    main()
