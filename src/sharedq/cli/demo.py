"""``sharedq demo``: the README's main job."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sharedq.cli.exits import RET_FAILED


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
@click.option(
    "--output",
    default="demo-output",
    show_default=True,
    type=click.Path(file_okay=False),
    help="where the log, the SRDS, the pipeline's tables, charts and report go (replaced)",
)
@click.option(
    "--rounds",
    default=300,
    show_default=True,
    type=click.IntRange(min=6),
    help="units of work each manager runs (each round: a put unit and a get unit)",
)
@click.option("--short", is_flag=True, help="a quick run (30 rounds per manager)")
@click.option("--seed", default=7, show_default=True, type=int)
@click.option("--master", default="local[2]", show_default=True, help="Spark master")
def demo(backend: str, output: str, rounds: int, short: bool, seed: int, master: str) -> None:
    """Run a queue-sharing group through a crash and a structure loss, then the pipeline."""
    from sharedq.demo.run import DemoOptions, run_demo

    options = DemoOptions(Path(output).resolve(), backend, 30 if short else rounds, seed, master)
    outcome = run_demo(options)
    if not outcome.nothing_lost:
        sys.exit(RET_FAILED)
