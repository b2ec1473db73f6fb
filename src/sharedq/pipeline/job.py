"""What every pipeline job shares: its inputs, its output directory, progress, and its result.

A job is a function ``run(ctx, **options) -> JobResult``: it reads through the
context (the log as one DataFrame, the pairs' SRDS files), calls pure transformations
(``sharedq.pipeline.transforms``), writes Parquet under ``ctx.output / <job>`` and
returns a human-readable summary with the figures a report or a test needs.  The
command line and ``spark-submit`` run jobs through :func:`sharedq.cli.pipeline.run_job`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sharedq.pipeline.errors import PipelineReason, pipeline_error
from sharedq.pipeline.sources import PairInput, StagedLog, find_pairs, log_frame, stage_log

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: ``step(description)``: a job names each stage as it starts it (a progress line).
Step = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@dataclass
class JobContext:
    """One job's session, inputs and output directory."""

    spark: SparkSession
    pairs: list[PairInput]
    output: Path
    step: Step = _quiet
    _log: DataFrame | None = field(default=None, repr=False)
    #: The log as staged for Spark (its files, and the reader's account of them).
    staged: StagedLog | None = field(default=None, repr=False)
    _shared: dict[str, DataFrame] = field(default_factory=dict, repr=False)

    @classmethod
    def open(
        cls, spark: SparkSession, input_path: str | Path, output: str | Path, step: Step = _quiet
    ) -> JobContext:
        out = Path(output)
        out.mkdir(parents=True, exist_ok=True)
        return cls(spark, find_pairs(input_path), out, step)

    @property
    def work(self) -> Path:
        """Scratch space for files Spark reads (staging records); under the output."""
        path = self.output / "_work"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def log(self) -> DataFrame:
        """Every log record of every pair (one DataFrame, cached for the jobs that follow)."""
        if self._log is None:
            self.step("reading the log")
            self._log = log_frame(self.spark, self.stage()).cache()
        return self._log

    def release(self) -> None:
        """Let Spark drop the cached log: a session that runs many contexts (a benchmark,
        a notebook) would otherwise keep every context's log in memory."""
        if self._log is not None:
            self._log.unpersist()
            self._log = None
        for frame in self._shared.values():
            frame.unpersist()
        self._shared.clear()

    def shared(self, key: str, build: Callable[[], DataFrame]) -> DataFrame:
        """A DataFrame that several jobs of this context use (every message's life),
        built and cached by the first that asks, kept until :meth:`release`: a report
        then computes it once, not once per job."""
        if key not in self._shared:
            self._shared[key] = build().cache()
        return self._shared[key]

    def stage(self) -> StagedLog:
        """The log staged for Spark (decoded once per context)."""
        if self.staged is None:
            self.staged = stage_log(self.pairs, self.work, self.spark)
        return self.staged

    def job_dir(self, name: str) -> Path:
        path = self.output / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def pair(self, name: str | None) -> PairInput:
        """The pair called ``name`` (its primary structure), or the only one."""
        if name is None:
            if len(self.pairs) == 1:
                return self.pairs[0]
            names = ", ".join(p.name for p in self.pairs)
            raise pipeline_error(
                PipelineReason.BAD_ARGUMENT, f"several pairs ({names}): name one with --structure"
            )
        for pair in self.pairs:
            if pair.name == name:
                return pair
        raise pipeline_error(PipelineReason.BAD_ARGUMENT, f"no pair {name!r} under the input")


@dataclass
class JobResult:
    """A job's outcome: its summary for people, its files, and its key figures."""

    job: str
    summary: str
    tables: dict[str, Path] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def write_summary(self, directory: Path) -> Path:
        path = directory / "summary.txt"
        path.write_text(self.summary.rstrip() + "\n")
        return path


def write_table(frame: DataFrame, path: Path, options: dict[str, str] | None = None) -> Path:
    """Write a DataFrame as Parquet (replacing what was there), with Parquet writer
    ``options`` if given; returns the path."""
    frame.write.mode("overwrite").options(**(options or {})).parquet(str(path))
    return path


@contextmanager
def timed(result_holder: list[float]) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        result_holder.append(time.perf_counter() - started)
