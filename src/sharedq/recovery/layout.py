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
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sharedq.clock import SYSTEM_CLOCK, Clock, retry_until
from sharedq.log.errors import LogError
from sharedq.log.statefile import read_state, write_state
from sharedq.recovery.errors import RecoveryReason, recovery_error

_NAME = re.compile(r"^[A-Za-z0-9@$#._-]{1,64}$")
#: First and longest pause between attempts to take a pair's recovery lock, in seconds.
_LOCK_FIRST_PAUSE, _LOCK_LONGEST_PAUSE = 0.005, 0.1


@dataclass(frozen=True)
class PairLayout:
    """The directories and files of one structure pair under a recovery root."""

    root: Path
    pair: str

    def __post_init__(self) -> None:
        if not _NAME.match(self.pair):
            raise recovery_error(RecoveryReason.BAD_ARGUMENT, f"bad pair name {self.pair!r}")
        object.__setattr__(self, "root", Path(self.root))

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
        if not _NAME.match(server):
            raise recovery_error(RecoveryReason.BAD_ARGUMENT, f"bad server name {server!r}")
        return self.checkpoints / f"{server}.json"

    def make_dirs(self) -> None:
        for path in (self.log, self.srds, self.checkpoints):
            path.mkdir(parents=True, exist_ok=True)

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
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.lock_file, "a") as handle:

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
