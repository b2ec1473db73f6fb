"""Where a structure pair's recovery files live: one directory per pair.

::

    <root>/<pair>/log/                    the pair's log stream (sharedq.log)
    <root>/<pair>/srds/SRDS1.parquet      the two structure recovery data sets
    <root>/<pair>/srds/SRDS2.parquet
    <root>/<pair>/checkpoints/<server>.json   each server's last system checkpoint
    <root>/<pair>/RECOVERY.lock           held (flock) by the server recovering or
                                          copying the pair's structures
    <root>/<pair>/REBUILDING              present while a recovery or copy runs
    <root>/<pair>/ACCEPTED_LOSS           gaps in the log an operator accepted
                                          (``sharedq recovery accept-loss``)

Every server of the group reaches the same directory (local, or shared storage with
``flock`` across hosts, as the log needs).  The pair is named after its primary
structure.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sharedq import names
from sharedq.clock import SYSTEM_CLOCK, Clock, retry_until
from sharedq.log.errors import LogError
from sharedq.log.files import make_dirs, open_lock
from sharedq.log.statefile import read_state, write_state
from sharedq.recovery.errors import RecoveryReason, recovery_error

#: First and longest pause between attempts to take a pair's recovery lock, in seconds.
_LOCK_FIRST_PAUSE, _LOCK_LONGEST_PAUSE = 0.005, 0.1


def recovery_root(root: object, what: str = "the recovery root") -> Path:
    """``root`` as a ``Path``; ``BAD_ARGUMENT`` if it is no path or an empty one.

    ``Path("")`` is the working directory, wherever the process happens to run: a
    recovery root (or a dual log root) is always named.
    """
    if not isinstance(root, str | os.PathLike):
        raise recovery_error(
            RecoveryReason.BAD_ARGUMENT, f"{what} must be a path, not {type(root).__name__}"
        )
    text = os.fsdecode(root)
    if text == "":
        raise recovery_error(RecoveryReason.BAD_ARGUMENT, f"{what} is empty ('')")
    return Path(text)


@dataclass(frozen=True)
class PairLayout:
    """The directories and files of one structure pair under a recovery root."""

    root: Path
    pair: str

    def __post_init__(self) -> None:
        # The pair's name becomes a directory under the root, so it must be a structure
        # name (never "." or ".."), and the root must be named: Path("") is the
        # working directory, wherever that happens to be.
        problem = names.STRUCTURE.problem(self.pair, kind="pair name")
        if problem is not None:
            raise recovery_error(RecoveryReason.BAD_ARGUMENT, problem)
        object.__setattr__(self, "root", recovery_root(self.root))

    @property
    def directory(self) -> Path:
        return self.root / self.pair

    @property
    def log(self) -> Path:
        return self.directory / "log"

    @property
    def srds(self) -> Path:
        return self.directory / "srds"

    @property
    def checkpoints(self) -> Path:
        return self.directory / "checkpoints"

    @property
    def lock_file(self) -> Path:
        return self.directory / "RECOVERY.lock"

    @property
    def rebuilding_file(self) -> Path:
        return self.directory / "REBUILDING"

    @property
    def accepted_loss_file(self) -> Path:
        return self.directory / "ACCEPTED_LOSS"

    def checkpoint_file(self, server: str) -> Path:
        """The server's system checkpoint file; the server's name is its file name."""
        problem = names.SERVER.problem(server)
        if problem is not None:
            raise recovery_error(RecoveryReason.BAD_ARGUMENT, problem)
        return self.checkpoints / f"{server}.json"

    def make_dirs(self) -> None:
        for path in (self.log, self.srds, self.checkpoints):
            make_dirs(path)

    # -- small JSON files, written atomically -------------------------------------------

    def write_json(self, path: Path, value: dict[str, Any]) -> None:
        """Replace a small state file (digest-checked, see ``sharedq.log.statefile``)."""
        write_state(path, value)

    @staticmethod
    def read_json(path: Path) -> dict[str, Any] | None:
        """A small state file's value; ``None`` when absent; ``STATE_DAMAGED`` naming the
        file when it does not verify."""
        try:
            return read_state(path)
        except LogError as exc:
            raise recovery_error(RecoveryReason.STATE_DAMAGED, str(exc), path=str(path)) from None

    # -- the pair's recovery lock --------------------------------------------------------

    @contextmanager
    def recovery_lock(self, timeout: float, *, clock: Clock = SYSTEM_CLOCK) -> Iterator[None]:
        """Hold the pair's recovery lock (one recovering or copying server at a time).

        Waits up to ``timeout`` seconds on ``clock`` for the server holding it
        (``RECOVERY_TIMEOUT`` after that).  The lock goes with its process: a server that
        dies holding it leaves the REBUILDING file behind, which tells the next holder to
        start over.
        """
        make_dirs(self.directory)
        with open_lock(self.lock_file) as handle:

            def locked() -> bool:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return False
                return True

            if not retry_until(
                locked,
                timeout_s=timeout,
                first_pause_s=_LOCK_FIRST_PAUSE,
                longest_pause_s=_LOCK_LONGEST_PAUSE,
                clock=clock,
            ):
                raise recovery_error(
                    RecoveryReason.RECOVERY_TIMEOUT,
                    f"another server has been recovering or copying pair {self.pair} "
                    f"for more than {timeout:g} s ({self.lock_file} is held)",
                )
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
