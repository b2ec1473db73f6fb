"""A server's recovery settings: where the files are, and when checkpoints are taken.

The names follow the seeds' PROCLIB members: ``SYSCHKPT`` and ``STRCHKPT`` (CQSSLxxx,
counts of log records), ``CHKNEARFULL`` (CQSSGxxx: a structure checkpoint when the log
approaches full); the log's own settings are ``sharedq.log.LogConfig``'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from sharedq.clock import SYSTEM_CLOCK, Clock
from sharedq.log import Durability, InvalidLogRequest, LogConfig
from sharedq.log.config import DURABILITY_NAMES, DurabilityMode
from sharedq.log.files import file_in_the_way
from sharedq.log.logging_structure import check_url
from sharedq.recovery.errors import RecoveryReason, recovery_error
from sharedq.recovery.layout import recovery_root

#: Log records a server writes between two of its system checkpoints (SYSCHKPT).
DEFAULT_SYSCHKPT = 10_000
#: Log records a server writes between two structure checkpoints it starts (STRCHKPT).
DEFAULT_STRCHKPT = 500_000
#: Per cent of ``max_log_bytes`` at which a structure checkpoint is started in the
#: background (CHKNEARFULL: "approaches full").
DEFAULT_NEAR_FULL_PERCENT = 70
#: Seconds between a server's looks at its structures' checkpoint entries.
DEFAULT_POLL_SECONDS = 0.5
#: Seconds a request waits for a quiesced structure, or a server for another's
#: recovery, before giving up with a timeout.
DEFAULT_MAX_WAIT_SECONDS = 300.0
#: The longest ``poll_seconds`` or ``max_wait_seconds`` (a day): a longer one is a
#: mistake, and ``nan`` or ``inf`` would make a wait never end.
MAX_SECONDS = 86_400.0


@dataclass(frozen=True)
class RecoverySettings:
    """How a server logs, checkpoints and recovers the structures it uses.

    Attributes:
        root: the recovery root; each structure pair has ``<root>/<pair>/`` (see
            :mod:`sharedq.recovery.layout`), on storage every server reaches.
        durability: when log records reach stable storage (``every_commit`` default).
        syschkpt: the server's log records between its system checkpoints (SYSCHKPT).
        strchkpt: the server's log records after which it starts a structure
            checkpoint (STRCHKPT); ``None``: never for that reason.
        max_log_bytes: the most a pair's log may hold (``LogConfig.max_bytes``);
            ``None``: unbounded.
        chknearfull: take a structure checkpoint when the log is full or approaches
            ``near_full_percent`` of its maximum (CHKNEARFULL=YES).
        near_full_percent: see ``chknearfull``.
        cold_start: start this server cold (its restart ignores its log; messages it
            had locked go to the cold queue).
        poll_seconds: how often the server looks for work another server asked of it
            (a system checkpoint after a structure checkpoint, a master that died).
        max_wait_seconds: the longest a request waits for a quiesced structure, or a
            server for another's recovery or copy.
        log_config: further log settings (staging size, segment size...); its
            ``durability`` and ``max_bytes`` are replaced by the two above.
        dual_log_root: dual logging: a second root, on another disk, where every
            pair's log is written a second time (``<dual_log_root>/<pair>/log``);
            readers make damaged or missing files good from it.  ``None``: one copy.
            Chosen when a pair's log is created; servers that omit it later still use
            the copy the log records.
        logging_structure: the Redis URL of the logging structure (the seed's
            coupling-facility copy of each log record, ``docs/log.md``), on another
            machine than the servers; needed by ``Durability.duplex``.  Chosen when a
            pair's log is created, as ``dual_log_root``.
        clock: where the server's recovery reads the time (log record times,
            checkpoint times) and paces its waits (for a lock, a quiesced structure,
            another server's checkpoint); also the server's own clock when it is given
            none (``sharedq.clock.Clock``).  On a ``ManualClock`` a wait's pauses take
            no real time, so its timeout passes at once: give one only where nothing
            another thread or process does is waited for.  Not compared: settings that
            differ only in their clock are equal.
    """

    root: Path
    durability: Durability = field(default_factory=Durability.every_commit)
    syschkpt: int = DEFAULT_SYSCHKPT
    strchkpt: int | None = DEFAULT_STRCHKPT
    max_log_bytes: int | None = None
    chknearfull: bool = True
    near_full_percent: int = DEFAULT_NEAR_FULL_PERCENT
    cold_start: bool = False
    poll_seconds: float = DEFAULT_POLL_SECONDS
    max_wait_seconds: float = DEFAULT_MAX_WAIT_SECONDS
    log_config: LogConfig = field(default_factory=LogConfig)
    dual_log_root: Path | None = None
    logging_structure: str | None = None
    clock: Clock = field(default=SYSTEM_CLOCK, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", recovery_root(self.root))
        _check_directory(self.root, "the recovery root")
        if self.dual_log_root is not None:
            dual = recovery_root(self.dual_log_root, "dual_log_root")
            _check_directory(dual, "dual_log_root")
            object.__setattr__(self, "dual_log_root", dual)
            if dual.resolve() == self.root.resolve():
                raise _bad("dual_log_root must be another directory than root (another disk)")
        if not _is_int(self.syschkpt) or self.syschkpt < 1:
            raise _bad(f"syschkpt {self.syschkpt!r} must be a positive number of records")
        if self.strchkpt is not None and (not _is_int(self.strchkpt) or self.strchkpt < 1):
            raise _bad(f"strchkpt {self.strchkpt!r} must be a positive number of records")
        if not _is_int(self.near_full_percent) or not 1 <= self.near_full_percent <= 100:
            raise _bad(f"near_full_percent {self.near_full_percent!r} must be 1..100")
        for what in ("poll_seconds", "max_wait_seconds"):
            value = getattr(self, what)
            if not _is_seconds(value):
                raise _bad(f"{what} {value!r} must be seconds, above 0 and at most {MAX_SECONDS:g}")
        if not isinstance(self.durability, Durability):
            raise _bad(
                f"durability {self.durability!r} is not a Durability: one of "
                f"{DURABILITY_NAMES}, as Durability.parse(name) reads them"
            )
        for what in ("chknearfull", "cold_start"):  # cold_start="no" would start cold
            if not isinstance(getattr(self, what), bool):
                raise _bad(f"{what} {getattr(self, what)!r} must be True or False")
        if self.logging_structure is not None:
            try:
                check_url(self.logging_structure)
            except InvalidLogRequest as exc:
                raise _bad(exc.detail) from None
        elif self.durability.mode is DurabilityMode.DUPLEX:
            raise _bad(
                f"durability {self.durability} copies records to the logging structure: "
                "give logging_structure (a Redis URL)"
            )
        if not isinstance(self.log_config, LogConfig):
            raise _bad(f"log_config must be a LogConfig, not {type(self.log_config).__name__}")
        try:  # the log's own checks (max_log_bytes, log_config), now rather than at start
            self.log()
        except InvalidLogRequest as exc:
            raise _bad(exc.detail) from None

    def log(self) -> LogConfig:
        """The log settings of every pair's stream."""
        return replace(self.log_config, durability=self.durability, max_bytes=self.max_log_bytes)


def _check_directory(path: Path, what: str) -> None:
    """``BAD_ARGUMENT`` if a file stands where ``path`` or a parent should be a directory."""
    found = file_in_the_way(path)
    if found is not None:
        raise _bad(f"{what} {path}: {found} is not a directory")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_seconds(value: object) -> bool:
    """A finite number of seconds above 0 and at most :data:`MAX_SECONDS` (no ``bool``)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 < value <= MAX_SECONDS
    )


def _bad(detail: str) -> Exception:
    return recovery_error(RecoveryReason.BAD_ARGUMENT, detail)
