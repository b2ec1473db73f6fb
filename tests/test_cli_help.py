"""Every command, option and argument of ``sharedq`` says what it is for.

A new user reads ``sharedq COMMAND --help`` before anything else: an option listed
without a word of help (``--seed INTEGER``) leaves them guessing.  The test walks the
whole command tree, so that a command or option added later is held to it too.
"""

from __future__ import annotations

from collections.abc import Iterator

import click
from click.testing import CliRunner

from sharedq.cli.main import cli


def commands(
    command: click.Command, path: tuple[str, ...] = ("sharedq",)
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command of the tree, with the words that call it."""
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from commands(sub, (*path, name))


def missing_help(command: click.Command, path: tuple[str, ...]) -> list[str]:
    """What in ``command`` has no help: the command itself, its options, its arguments.

    click has no help text for an argument: the command's help must name it (its
    metavar or name, as ``--help`` shows it in the usage line).
    """
    where = " ".join(path)
    found = []
    text = command.help or command.short_help or ""
    if not text.strip():
        found.append(f"{where}: the command has no help")
    for param in command.params:
        if isinstance(param, click.Option):
            if param.hidden:
                continue
            if not (param.help or "").strip():
                found.append(f"{where} {'/'.join(param.opts)}: no help")
        elif isinstance(param, click.Argument):
            names = {param.name or "", param.human_readable_name}
            if not any(n and n.lower() in text.lower() for n in names):
                found.append(f"{where} {param.human_readable_name}: not named in the help")
    return found


def test_every_command_option_and_argument_has_help() -> None:
    tree = list(commands(cli))
    assert len(tree) > 5  # demo, walk, pipeline and its jobs, recovery and its commands
    problems = [p for path, command in tree for p in missing_help(command, path)]
    assert problems == []


def test_help_shows_for_every_command() -> None:
    runner = CliRunner()
    for path, _ in commands(cli):
        result = runner.invoke(cli, [*path[1:], "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "Usage:" in result.output


def test_the_checker_finds_what_it_must() -> None:
    @click.command()
    @click.argument("source")
    @click.option("--seed", type=int)
    @click.option("--rounds", help="how many")
    def bare(source: str, seed: int, rounds: str) -> None:
        pass

    assert missing_help(bare, ("x",)) == [
        "x: the command has no help",
        "x SOURCE: not named in the help",
        "x --seed: no help",
    ]

    @click.command()
    @click.argument("source")
    def helped(source: str) -> None:
        """Copy SOURCE somewhere."""

    assert missing_help(helped, ("y",)) == []
