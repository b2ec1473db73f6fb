"""Settings of a log stream: staging size, offload thresholds, maximum size, durability.

The names follow the LOGR policy of the redbook (§2.11): ``STG_SIZE`` becomes
``staging_bytes``, ``HIGHOFFLOAD``/``LOWOFFLOAD`` keep their names and meaning (per
cent of the staging size), and the log stream's room (the number of log data sets
and the DASD behind them) becomes one ``max_bytes``.  Sizes are in bytes and times in
milliseconds throughout this layer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum

from sharedq.log.errors import LogReason, log_error

#: Staging a writer may fill before offload starts at HIGHOFFLOAD per cent of it.
DEFAULT_STAGING_BYTES = 64 * 1024 * 1024
#: Size at which a writer closes its staging segment and starts the next one.
DEFAULT_SEGMENT_BYTES = 8 * 1024 * 1024
#: Per cent of the staging size at which offload starts (the redbook's example, §2.11).
DEFAULT_HIGH_OFFLOAD = 50
#: Per cent of the staging size offload goes down to (the redbook recommends 0).
DEFAULT_LOW_OFFLOAD = 0
#: Rows per Parquet row group in a log data set: the unit a reader skips by seq.
DEFAULT_ROW_GROUP_ROWS = 65_536
#: How long a group commit's leader waits for more commits when others are coming in.
DEFAULT_GROUP_COMMIT_WINDOW_US = 1000
#: The longest group commit window accepted (a tenth of a second).
MAX_GROUP_COMMIT_WINDOW_US = 100_000
#: The smallest segment size accepted: a segment must hold a header and some records.
MIN_SEGMENT_BYTES = 1024


class DurabilityMode(Enum):
    """When appended records reach stable storage (see :class:`Durability`)."""

    EVERY_RECORD = "every_record"
    EVERY_COMMIT = "every_commit"
    INTERVAL = "interval"
    DUPLEX = "duplex"


#: The durability settings by name, as ``Durability.parse`` reads them and messages list them.
DURABILITY_NAMES = (
    "every_record, every_commit, interval_ms=N, duplex_ms=N or duplex_ms=N,replicas=R "
    "(N >= 1, R >= 0)"
)


#: The modes whose writer syncs on a clock of its own (``interval_ms``).
_TIMED = frozenset({DurabilityMode.INTERVAL, DurabilityMode.DUPLEX})


@dataclass(frozen=True)
class Durability:
    """When a writer forces its records to stable storage.

    Every mode hands each record to the operating system before ``append`` returns,
    so a record survives the writer's *process* crashing once ``append`` returned.
    The modes differ in when records also survive the *machine* crashing (``fsync``):

    * ``every_record``: before ``append`` returns.  Appends that come together share
      a sync (group commit, :class:`GroupCommit`).
    * ``every_commit``: when ``commit()`` (or ``append(..., commit=True)``) returns,
      for every record the writer appended before it.
    * ``interval_ms=N``: a background thread of the writer syncs every ``N`` ms, so at
      most the last ``N`` ms (plus one sync) of records can be lost; ``commit()``
      still syncs at once.
    * ``duplex_ms=N``: the seed's logger (``sharedq.log.logging_structure``):
      ``commit()`` returns once the records are written to the operating system
      *and* copied to the stream's logging structure (a Redis, ideally on another
      machine); a background thread syncs the segment every ``N`` ms and then drops
      what it made durable from the logging structure.  A record survives the loss
      of either the writer's machine or the logging structure, not of both at once.
      Where the logging structure does not answer, a commit syncs to disk instead.
      ``duplex_ms=N,replicas=R``: a push also waits (Redis ``WAIT``) until ``R`` of
      the logging structure's replicas hold it, so that a failover to one of them
      loses no committed record; where fewer acknowledge within
      ``logging_structure.REPLICA_WAIT_MS``, the commit syncs to disk instead.
    """

    mode: DurabilityMode = DurabilityMode.EVERY_COMMIT
    interval_ms: int | None = None
    #: Replicas of the logging structure a duplex push waits for (``WAIT``).
    replicas: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.mode, DurabilityMode):
            raise log_error(
                LogReason.BAD_CONFIG,
                f"durability mode {self.mode!r} is not one of {DURABILITY_NAMES} "
                "(a DurabilityMode; Durability.parse reads the names)",
            )
        if self.mode in _TIMED:
            interval = self.interval_ms
            if not isinstance(interval, int) or isinstance(interval, bool) or interval < 1:
                raise log_error(
                    LogReason.BAD_CONFIG,
                    f"{self.mode.value} durability needs interval_ms >= 1, not {interval!r}",
                )
        elif self.interval_ms is not None:
            raise log_error(
                LogReason.BAD_CONFIG,
                f"interval_ms applies only to interval and duplex durability ({self})",
            )
        replicas = self.replicas
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise log_error(
                LogReason.BAD_CONFIG,
                f"replicas is a count of the logging structure's replicas (>= 0), not {replicas!r}",
            )
        if replicas and self.mode is not DurabilityMode.DUPLEX:
            raise log_error(
                LogReason.BAD_CONFIG,
                f"replicas applies only to duplex durability, not {self.mode.value}",
            )

    @classmethod
    def every_record(cls) -> Durability:
        return cls(DurabilityMode.EVERY_RECORD)

    @classmethod
    def every_commit(cls) -> Durability:
        return cls(DurabilityMode.EVERY_COMMIT)

    @classmethod
    def interval(cls, interval_ms: int) -> Durability:
        return cls(DurabilityMode.INTERVAL, interval_ms)

    @classmethod
    def duplex(cls, interval_ms: int, *, replicas: int = 0) -> Durability:
        return cls(DurabilityMode.DUPLEX, interval_ms, replicas)

    @classmethod
    def parse(cls, text: str) -> Durability:
        """``every_record``, ``every_commit``, ``interval_ms=N``, ``duplex_ms=N`` or
        ``duplex_ms=N,replicas=R`` (as in a config member)."""
        if not isinstance(text, str):
            raise log_error(
                LogReason.BAD_CONFIG,
                f"durability is a name, one of {DURABILITY_NAMES}, not {type(text).__name__}",
            )
        spec = text.strip().lower()
        if spec == DurabilityMode.EVERY_RECORD.value:
            return cls.every_record()
        if spec == DurabilityMode.EVERY_COMMIT.value:
            return cls.every_commit()
        match = re.fullmatch(r"(interval|duplex)_ms\s*=\s*(\d+)", spec)
        if match:
            return cls(DurabilityMode(match.group(1)), int(match.group(2)))
        match = re.fullmatch(r"duplex_ms\s*=\s*(\d+)\s*,\s*replicas\s*=\s*(\d+)", spec)
        if match:
            return cls.duplex(int(match.group(1)), replicas=int(match.group(2)))
        raise log_error(
            LogReason.BAD_CONFIG,
            f"durability {text!r} is not one of {DURABILITY_NAMES}",
        )

    def __str__(self) -> str:
        if self.replicas:
            return f"{self.mode.value}_ms={self.interval_ms},replicas={self.replicas}"
        if self.mode in _TIMED:
            return f"{self.mode.value}_ms={self.interval_ms}"
        return str(self.mode.value)


class GroupCommit(Enum):
    """Which commits share a sync (see ``sharedq.log.groupsync`` and docs/log.md).

    * ``host``: every writer of every process on this host whose log is on one file
      system: a commit waits for one ``syncfs`` of that file system that started
      after its records were written, and commits that come together share it.
      Where ``syncfs`` is missing (not Linux), as ``writer``.
    * ``writer``: each writer syncs its own segment (``fdatasync``); only concurrent
      committers of one writer share a sync.  For a log on storage where a whole file
      system sync is costly (one shared with heavy unrelated writes).
    """

    HOST = "host"
    WRITER = "writer"


@dataclass(frozen=True)
class LogConfig:
    """How a log stream stages, offloads, bounds and syncs its records.

    Attributes:
        staging_bytes: each writer's staging size (the LOGR ``STG_SIZE``).  Not a hard
            limit: appends go on while offload catches up; ``max_bytes`` is the limit.
        segment_bytes: a writer starts a new staging segment when its current one
            reaches this size; only closed segments are offloaded.
        high_offload: per cent of ``staging_bytes`` at which offload starts.
        low_offload: per cent of ``staging_bytes`` offload goes down to.
        max_bytes: the most bytes the whole stream (every writer's staging plus the
            log data sets) may hold; ``None`` for no maximum.  An append that would go
            beyond it calls the log-full handler (see ``LogStream``).
        durability: when records reach stable storage.
        background_offload: offload in a thread of the writer (``False``: in the
            appending thread, which then waits for it; simpler to reason about in tests).
        row_group_rows: rows per Parquet row group in log data sets.
        group_commit: which commits share a sync: ``GroupCommit.HOST`` (every writer
            of the host on the log's file system) or ``GroupCommit.WRITER``.
        group_commit_window_us: under ``GroupCommit.HOST``, when more than one commit
            came in since the last sync began, the one that starts the next sync
            waits this long first, so that the commits arriving meanwhile share it
            (0: never waits; a commit alone never waits).
        preallocate: allocate room ahead in the open segment and write frames in
            place, so that a sync makes only data durable, not a new file size (see
            ``sharedq.log.segment``); ``False`` appends as a plain file does (for a
            file system where allocating ahead costs more than it saves).

    A value, compared and copied with ``replace``: it holds no clock (a dependency,
    not a setting); ``LogStream(clock=...)`` is given one.
    """

    staging_bytes: int = DEFAULT_STAGING_BYTES
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    high_offload: int = DEFAULT_HIGH_OFFLOAD
    low_offload: int = DEFAULT_LOW_OFFLOAD
    max_bytes: int | None = None
    durability: Durability = field(default_factory=Durability.every_commit)
    background_offload: bool = True
    row_group_rows: int = DEFAULT_ROW_GROUP_ROWS
    group_commit: GroupCommit = GroupCommit.HOST
    group_commit_window_us: int = DEFAULT_GROUP_COMMIT_WINDOW_US
    preallocate: bool = True

    def __post_init__(self) -> None:
        def bad(detail: str) -> None:
            raise log_error(LogReason.BAD_CONFIG, detail)

        def whole(value: object) -> bool:  # True is no size nor percentage
            return isinstance(value, int) and not isinstance(value, bool)

        if not whole(self.segment_bytes) or self.segment_bytes < MIN_SEGMENT_BYTES:
            bad(f"segment_bytes must be an int >= {MIN_SEGMENT_BYTES}, not {self.segment_bytes!r}")
        if not whole(self.staging_bytes) or self.staging_bytes < self.segment_bytes:
            bad(f"staging_bytes ({self.staging_bytes!r}) must be at least segment_bytes")
        for name in ("high_offload", "low_offload"):
            value = getattr(self, name)
            if not whole(value) or not 0 <= value <= 100:
                bad(f"{name} is a percentage, 0 to 100, not {value!r}")
        if self.low_offload >= self.high_offload:
            bad(
                f"low_offload ({self.low_offload}) must be below high_offload ({self.high_offload})"
            )
        if self.max_bytes is not None and (
            not whole(self.max_bytes) or self.max_bytes < self.segment_bytes
        ):
            bad(f"max_bytes ({self.max_bytes!r}) must be None or at least segment_bytes")
        if not isinstance(self.durability, Durability):
            bad(f"durability must be a Durability, not {self.durability!r}")
        if not whole(self.row_group_rows) or self.row_group_rows < 1:
            bad(f"row_group_rows must be a positive int, not {self.row_group_rows!r}")
        window = self.group_commit_window_us
        if not whole(window) or not 0 <= window <= MAX_GROUP_COMMIT_WINDOW_US:
            bad(
                f"group_commit_window_us is 0 to {MAX_GROUP_COMMIT_WINDOW_US} microseconds, "
                f"not {window!r}"
            )
        if not isinstance(self.group_commit, GroupCommit):
            bad(f"group_commit must be a GroupCommit (host or writer), not {self.group_commit!r}")
        for name in ("preallocate", "background_offload"):
            if not isinstance(getattr(self, name), bool):
                bad(f"{name} must be True or False, not {getattr(self, name)!r}")

    @property
    def high_offload_bytes(self) -> int:
        return self.staging_bytes * self.high_offload // 100

    @property
    def low_offload_bytes(self) -> int:
        return self.staging_bytes * self.low_offload // 100
