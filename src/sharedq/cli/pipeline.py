"""``sharedq pipeline JOB``: the Spark jobs over the log and the SRDS files."""

from __future__ import annotations

import importlib

import click

#: Job modules under ``sharedq.pipeline.jobs``; each defines ``command``.
JOB_MODULES = ("recover", "print_log", "track", "stats", "capacity", "report")


@click.group(
    "pipeline",
    epilog="Example:\n\n  sharedq pipeline stats --input /shared/recovery --output /tmp/stats",
)
def pipeline() -> None:
    """Spark jobs over the recovery log and the structure checkpoints (SRDS)."""


def register_jobs() -> None:
    """Add every job module's command that exists (imports PySpark lazily, per job)."""
    for module_name in JOB_MODULES:
        try:
            module = importlib.import_module(f"sharedq.pipeline.jobs.{module_name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"sharedq.pipeline.jobs.{module_name}":
                continue
            raise
        pipeline.add_command(module.command)
