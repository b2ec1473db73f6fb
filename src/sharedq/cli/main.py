"""The ``sharedq`` command: the entry point for every subcommand.

Each subcommand lives in a module of its own (``demo``, ``walk``, ``recovery``,
``pipeline``, ``cqs``); this module gathers them under one group.  Exit codes are
named in :mod:`sharedq.cli.exits` so that scripts can branch on them.

A subcommand's module is imported only when that subcommand runs (or its help is
asked for): ``pipeline`` brings pyspark, pyarrow and matplotlib (about 0.9 s and
170 MB), ``cqs`` and ``recovery`` the server layers, and ``sharedq --help``, ``sharedq
walk`` or ``sharedq recovery check`` need none of the others.  The group lists each
subcommand from :data:`SUBCOMMANDS`, which names the function that imports it and the
first paragraph of its help (``tests/test_import_cost.py`` holds the two to the
command's own), the way click's documentation makes a lazily loading group.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any, NamedTuple

import click

from sharedq import __version__
from sharedq.cli.exits import RET_FAILED, RET_OK
from sharedq.cli.failures import FailingGroup
from sharedq.errors import SharedqError


def _cqs() -> click.Command:
    from sharedq.cli.cqs import cqs

    return cqs


def _demo() -> click.Command:
    from sharedq.cli.demo import demo

    return demo


def _pipeline() -> click.Command:
    from sharedq.cli.pipeline import pipeline

    return pipeline


def _recovery() -> click.Command:
    from sharedq.cli.recovery import recovery

    return recovery


def _walk() -> click.Command:
    from sharedq.cli.walk import walk

    return walk


class Subcommand(NamedTuple):
    """A subcommand not imported yet: what imports it, and its help's first paragraph."""

    load: Callable[[], click.Command]
    summary: str


#: The subcommands of ``sharedq``.  ``summary`` is what ``sharedq --help`` shortens into
#: the command's line without importing its module: the first paragraph of its help.
SUBCOMMANDS: dict[str, Subcommand] = {
    "cqs": Subcommand(_cqs, "Run a Common Queue Server in a process of its own."),
    "demo": Subcommand(
        _demo,
        "Run a queue-sharing group through a crash and a structure loss, then the pipeline.",
    ),
    "pipeline": Subcommand(
        _pipeline, "Spark jobs over the recovery log and the structure checkpoints (SRDS)."
    ),
    "recovery": Subcommand(
        _recovery, "Check a pair's log before recovery; accept records that are gone as lost."
    ),
    "walk": Subcommand(
        _walk, "Walk through a list structure the way a shared queue manager uses it."
    ),
}


class LazyCommands(MutableMapping[str, click.Command]):
    """A group's commands, each imported at its first look-up (``commands[name]``).

    Iterating gives the names without importing anything; a command added with
    ``add_command`` is held as it is.
    """

    def __init__(self, subcommands: dict[str, Subcommand]) -> None:
        self._pending = dict(subcommands)
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        command = self._loaded.get(name)
        if command is None:
            command = self._loaded[name] = self._pending[name].load()
        return command

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        found = self._loaded.pop(name, None) is not None
        if self._pending.pop(name, None) is None and not found:
            raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._pending.keys() | self._loaded.keys()))

    def __len__(self) -> int:
        return len(self._pending.keys() | self._loaded.keys())

    def listed(self, name: str) -> click.Command:
        """The command if imported, else a stand-in with its help's first paragraph:
        what a help listing needs, without importing the command's module."""
        command = self._loaded.get(name)
        if command is None:
            command = click.Command(name, help=self._pending[name].summary)
        return command


class LazyGroup(FailingGroup):
    """A :class:`FailingGroup` whose subcommands are imported when they are used."""

    def __init__(self, *args: Any, subcommands: dict[str, Subcommand], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = LazyCommands(subcommands)
        self.commands = self.lazy

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List the subcommands as click does, from their help, importing none."""
        listed = [(name, self.lazy.listed(name)) for name in self.list_commands(ctx)]
        listed = [(name, command) for name, command in listed if not command.hidden]
        if not listed:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in listed)
        with formatter.section("Commands"):
            formatter.write_dl([(name, c.get_short_help_str(limit)) for name, c in listed])


@click.group(
    cls=LazyGroup,
    subcommands=SUBCOMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Examples:\n\n  sharedq demo\n\n  sharedq walk\n\n  sharedq walk --facility redis://localhost:6379/0",
)
@click.version_option(__version__, prog_name="sharedq")
def cli() -> None:
    """Shared, recoverable, transactional message queues kept in list structures."""


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
