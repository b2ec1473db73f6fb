"""``sharedq cqs serve``: a Common Queue Server in a process of its own (issue 17).

The CQS listens on a Unix socket for its one client (an IMS, or any subsystem, in
another process holding a :class:`sharedq.cqs.RemoteCQS`); the client proves it holds
the key in ``--authkey-file`` before any request is read.  The structures are on a
Redis facility (a memory facility would be this process's alone).  SIGTERM or Ctrl-C
ends it cleanly (CQSDISC); SIGKILL leaves its connections failed-persistent and its
locks on the lock queue, for its next incarnation (``docs/cqs.md``).
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from types import FrameType

import click

from sharedq.cf import open_facility
from sharedq.cf.urls import REDIS_SCHEMES, scheme_of
from sharedq.cli import credentials
from sharedq.cqs import CQS, authkey_file, serve
from sharedq.errors import SharedqError
from sharedq.log import Durability
from sharedq.recovery.settings import RecoverySettings


@click.group(
    "cqs",
    epilog=(
        "Example:\n\n  sharedq cqs serve --facility redis://localhost:6379/0 "
        "--name CQSIMSA --system IMSA --socket /run/sharedq/cqsa/cqs.sock "
        "--authkey-file /run/sharedq/cqsa/key"
    ),
)
def cqs() -> None:
    """Run a Common Queue Server in a process of its own."""


@cqs.command("serve")
@click.option("--facility", "facility_url", required=True, help="a redis:// URL")
@credentials.password_file_option
@click.option("--name", required=True, help="the CQS's name (its structure user name)")
@click.option("--system", required=True, help="its client's system id (IMSID)")
@click.option("--msgq", default="MSGQ01", show_default=True, help="the MSGQ primary structure")
@click.option("--emhq", default=None, help="the EMHQ primary structure (a client with Fast Path)")
@click.option("--socket", "address", required=True, help="the Unix socket to listen on")
@click.option(
    "--authkey-file",
    "key_file",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="the client's key (made, 0600, if missing)",
)
@click.option("--recovery-root", default=None, help="log and checkpoints under this root")
@click.option(
    "--durability",
    default="every_commit",
    show_default=True,
    help="when log records are safe: every_record, every_commit, interval_ms=N, duplex_ms=N "
    "or duplex_ms=N,replicas=R",
)
@click.option(
    "--logging-structure",
    default=None,
    metavar="URL",
    help="the Redis of the log's logging structure (needed by duplex_ms=N); its "
    "password as the facility's",
)
def serve_command(
    facility_url: str,
    password_file: Path | None,
    name: str,
    system: str,
    msgq: str,
    emhq: str | None,
    address: str,
    key_file: Path,
    recovery_root: str | None,
    durability: str,
    logging_structure: str | None,
) -> None:
    """Serve one CQS on a Unix socket until SIGTERM.

    Prints one line when it listens (a launcher waits for it).
    """
    if scheme_of(facility_url) not in REDIS_SCHEMES:
        raise click.UsageError("--facility: a redis:// URL (another process must reach it)")
    if logging_structure is not None:  # its credentials as the facility's, not typed
        logging_structure = credentials.facility_url(
            logging_structure, password_file, "--logging-structure"
        )
    recovery = _recovery(recovery_root, durability, logging_structure)
    key = authkey_file(key_file, create=True)
    facility = open_facility(credentials.facility_url(facility_url, password_file))
    server = CQS(facility, name, system=system, msgq=msgq, emhq=emhq, recovery=recovery)
    stop = threading.Event()

    def ended(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, ended)
    signal.signal(signal.SIGINT, ended)

    def ready() -> None:
        click.echo(f"CQS {name} for {system} serving on {address}")
        sys.stdout.flush()

    try:
        serve(server, address, key, ready=ready, stop=stop)
    finally:
        facility.close()


def _recovery(
    root: str | None, durability: str, logging_structure: str | None
) -> RecoverySettings | None:
    """The server's recovery settings; a usage error naming what is wrong."""
    if root is None:
        if logging_structure is not None or durability != "every_commit":
            raise click.UsageError("--durability and --logging-structure need --recovery-root")
        return None
    try:
        return RecoverySettings(
            root=Path(root),
            durability=Durability.parse(durability),
            logging_structure=logging_structure,
        )
    except SharedqError as exc:
        raise click.UsageError(str(exc)) from None
