"""What a user can fix ends a command with one line and a failure exit, not a traceback.

A sharedq error (every layer's bad-argument errors included: a malformed URL, a bad
structure name, a missing log) and a file the system refuses (no such directory, no
permission, a file where a directory belongs) are the user's to fix: the command
prints ``sharedq: <what is wrong>`` on standard error and exits with
:data:`~sharedq.cli.exits.RET_FAILED`.  Wrong options and arguments are click's usage
errors, exit :data:`~sharedq.cli.exits.RET_USAGE`.  Anything else is a bug, and its
traceback is what a bug report needs.

:class:`FailingGroup` does this for every subcommand of the group that uses it, so
the output is the same whether the command runs as ``sharedq`` or from a test's
``click.testing.CliRunner``.
"""

from __future__ import annotations

from typing import IO, Any

import click

from sharedq.cli.exits import RET_FAILED
from sharedq.errors import SharedqError


class Failed(click.ClickException):
    """A failure the user can fix: shown as ``sharedq: <message>``, exit ``RET_FAILED``."""

    exit_code = RET_FAILED

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"sharedq: {self.format_message()}", err=file is None, file=file)


def as_failure(error: BaseException) -> Failed | None:
    """The one-line failure for ``error`` if the user can fix it, else ``None``."""
    if isinstance(error, SharedqError):
        return Failed(str(error))
    if isinstance(error, OSError):
        what = error.strerror or str(error)
        where = error.filename
        return Failed(f"{what}: {where}" if where is not None else what)
    return None


class FailingGroup(click.Group):
    """A click group whose subcommands' user errors become :class:`Failed`."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (SharedqError, OSError) as error:
            failure = as_failure(error)
            assert failure is not None
            raise failure from None
