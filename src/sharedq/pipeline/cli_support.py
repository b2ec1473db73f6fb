"""How a job becomes a command: ``sharedq pipeline JOB`` and the ``spark-submit`` entry.

:func:`job_command` turns ``fn(ctx, **options) -> JobResult`` into a click command
with the options every job takes (``--input``, ``--output``, ``--master``,
``--conf``); it starts the session, shows progress, writes and prints the summary.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import click
from rich.console import Console

from sharedq.pipeline.job import JobContext, JobResult
from sharedq.pipeline.session import parse_conf, start_session

JobFunction = Callable[..., JobResult]


def job_command(name: str) -> Callable[[JobFunction], click.Command]:
    """Decorate a job function (``fn(ctx, **options)``) into the command ``name``.

    Put the job's own ``click.option`` decorators between this one and the function.
    """

    def decorate(fn: JobFunction) -> click.Command:
        @click.option(
            "--input",
            "input_path",
            required=True,
            type=click.Path(exists=True, file_okay=False),
            help="a recovery root, one pair's directory (log/ and srds/), or a log stream",
        )
        @click.option(
            "--output",
            required=True,
            type=click.Path(file_okay=False),
            help="directory for the job's Parquet tables and summary",
        )
        @click.option(
            "--master",
            default=None,
            help="Spark master (default: what spark-submit set, else local[*])",
        )
        @click.option("--conf", multiple=True, metavar="KEY=VALUE", help="a Spark setting")
        @functools.wraps(fn)
        def command(
            input_path: str, output: str, master: str | None, conf: tuple[str, ...], **options: Any
        ) -> None:
            result = run_job(
                fn, input_path, output, master=master, conf=parse_conf(conf), **options
            )
            console = Console()
            console.print(result.summary.rstrip(), markup=False, highlight=False)
            console.print(
                f"[dim]{name}: {result.seconds:.1f} s of work, "
                f"JVM start {result.figures.get('jvm_startup_seconds', 0.0):.1f} s; "
                f"output in {output}[/dim]"
            )

        return click.command(name, help=fn.__doc__)(command)

    return decorate


def run_job(
    fn: JobFunction,
    input_path: str,
    output: str,
    *,
    master: str | None = None,
    conf: dict[str, str] | None = None,
    **options: Any,
) -> JobResult:
    """Start the session, run one job with a progress line per stage, write its summary."""
    started = start_session(_master(master), conf)
    console = Console(stderr=True)
    with console.status(f"{fn.__name__}: starting") as status:
        ctx = JobContext.open(
            started.spark, input_path, output, step=lambda text: status.update(text)
        )
        began = time.perf_counter()
        result = fn(ctx, **options)
        result.seconds = time.perf_counter() - began
    result.figures["jvm_startup_seconds"] = round(started.startup_seconds, 3)
    result.write_summary(ctx.job_dir(result.job))
    return result


def _master(master: str | None) -> str:
    if master:
        return master
    try:
        from pyspark import SparkConf

        return SparkConf().get("spark.master", "local[*]") or "local[*]"
    except ImportError:
        return "local[*]"
