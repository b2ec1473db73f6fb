"""The ``sharedq`` command: the entry point for every subcommand.

Each subcommand lives in a module of its own (``demo``, ``walk``, ``recovery``,
``pipeline``); this module gathers them under one group.  Exit codes are named in
:mod:`sharedq.cli.exits` so that scripts can branch on them.
"""

from __future__ import annotations

import sys

import click

from sharedq import __version__
from sharedq.cli.cqs import cqs
from sharedq.cli.demo import demo
from sharedq.cli.exits import RET_FAILED, RET_OK
from sharedq.cli.failures import FailingGroup
from sharedq.cli.pipeline import pipeline
from sharedq.cli.recovery import recovery
from sharedq.cli.walk import walk
from sharedq.errors import SharedqError


@click.group(
    cls=FailingGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Examples:\n\n  sharedq demo\n\n  sharedq walk\n\n  sharedq walk --facility redis://localhost:6379/0",
)
@click.version_option(__version__, prog_name="sharedq")
def cli() -> None:
    """Shared, recoverable, transactional message queues kept in list structures."""


cli.add_command(demo)
cli.add_command(walk)
cli.add_command(recovery)
cli.add_command(pipeline)
cli.add_command(cqs)


def main() -> None:
    """Run the CLI; a sharedq error becomes a one-line message and a non-zero exit."""
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(RET_FAILED)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except SharedqError as exc:
        click.echo(f"sharedq: {exc}", err=True)
        sys.exit(RET_FAILED)
    sys.exit(RET_OK)


if __name__ == "__main__":
    main()
