"""``sharedq recovery``: the operator's view of a pair's log before a recovery.

``check`` says what a structure recovery of a pair would read now (which SRDS, which
log files, what damage was made good or does not matter) and every record it would
find missing, changing nothing.  ``accept-loss`` records exactly those gaps as
accepted, so that the next recovery goes on and reports them as lost
(``docs/recovery.md``, "A log with a gap").
"""

from __future__ import annotations

import click

from sharedq.cli.exits import RET_FAILED
from sharedq.cli.names import structure_name
from sharedq.recovery import accept_loss, check_pair

_ROOT = click.option(
    "--root",
    required=True,
    # A str, not a Path: Path("") would be the working directory; "" is refused.
    type=click.Path(file_okay=False),
    help="the recovery root (RecoverySettings.root)",
)
_PAIR = click.option(
    "--pair",
    required=True,
    callback=structure_name,
    help="the structure pair (its primary structure)",
)


@click.group(
    "recovery",
    epilog=(
        "Examples:\n\n  sharedq recovery check --root /shared/recovery --pair QSG1APP\n\n"
        "  sharedq recovery accept-loss --root /shared/recovery --pair QSG1APP"
    ),
)
def recovery() -> None:
    """Check a pair's log before recovery; accept records that are gone as lost."""


@recovery.command("check")
@_ROOT
@_PAIR
def check(root: str, pair: str) -> None:
    """Say what a recovery of PAIR would read, and what it would find missing.

    Exits 1 when records are missing and not accepted as lost.
    """
    found = check_pair(root, pair)
    for line in found.lines():
        click.echo(line)
    if found.unaccepted:
        raise SystemExit(RET_FAILED)


@recovery.command("accept-loss")
@_ROOT
@_PAIR
@click.option("--by", default="operator", show_default=True, help="who accepts (recorded)")
def accept(root: str, pair: str, by: str) -> None:
    """Accept as lost every record a recovery of PAIR would find missing now."""
    gaps = accept_loss(root, pair, by=by)
    if not gaps:
        click.echo(f"pair {pair}: nothing is missing; nothing to accept")
        return
    for gap in gaps:
        click.echo(f"accepted as lost: {gap}")
    click.echo(
        "The next structure recovery of the pair goes on without these records and lists "
        "them in its report; take a structure checkpoint after it."
    )
