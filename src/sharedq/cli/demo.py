"""``sharedq demo``: the README's main job."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sharedq.cli import credentials
from sharedq.cli.credentials import password_file_option
from sharedq.cli.exits import RET_FAILED
from sharedq.cli.names import named_path


@click.command(
    "demo",
    epilog="Examples:\n\n  sharedq demo\n\n  sharedq demo --short\n\n"
    "  sharedq demo --backend redis://localhost:6379/0 --output /tmp/demo",
)
@click.option(
    "--backend",
    default="memory://",
    show_default=True,
    help="memory:// (threads in this process) or a redis:// URL (a process per manager)",
)
@password_file_option
@click.option(
    "--output",
    default="demo-output",
    show_default=True,
    type=click.Path(file_okay=False),
    callback=named_path,
    help="where the log, the SRDS, the pipeline's tables, charts and report go (replaced)",
)
@click.option(
    "--rounds",
    default=300,
    show_default=True,
    type=click.IntRange(min=6),
    help="units of work each manager runs (each round: a put unit and a get unit)",
)
@click.option(
    "--short",
    is_flag=True,
    help="a quicker run: 30 rounds per manager, and of the pipeline only the jobs whose "
    "tables the demo prints (track, stats, events)",
)
@click.option(
    "--seed",
    default=7,
    show_default=True,
    type=int,
    help="seed of the workload's random choices (the same seed, the same work)",
)
@click.option("--master", default="local[2]", show_default=True, help="Spark master")
@click.option(
    "--keep",
    is_flag=True,
    help="leave the demo's structures on the Redis server at the end (default: deleted)",
)
@click.option(
    "--verbose",
    "-v",
    is_flag=True,
    help="also print the group's INFO log lines (checkpoints, recoveries, log purges)",
)
def demo(
    backend: str,
    password_file: Path | None,
    output: str,
    rounds: int,
    short: bool,
    seed: int,
    master: str,
    keep: bool,
    verbose: bool,
) -> None:
    """Run a queue-sharing group through a crash and a structure loss, then the pipeline."""
    from sharedq.demo.run import SUMMARY_JOBS, DemoOptions, run_demo
    from sharedq.pipeline.session import check_master

    check_master(master)  # now, not after the group has run for minutes
    backend = credentials.facility_url(backend, password_file, "--backend")
    options = DemoOptions(
        Path(output).resolve(),
        backend,
        30 if short else rounds,
        seed,
        master,
        jobs=SUMMARY_JOBS if short else None,
        keep=keep,
        verbose=verbose,
    )
    outcome = run_demo(options)
    if not outcome.nothing_lost:
        sys.exit(RET_FAILED)
