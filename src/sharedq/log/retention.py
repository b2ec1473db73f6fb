"""Deleting records no longer needed, and what happens when the log is full.

Retention is by structure sequence number: ``delete_before(structure, seq)`` records,
durably, that the structure's records with a lower seq are deleted.  From then on no
reader yields them, whatever files still hold them; files whose records are *all*
below the point are removed (log data sets, and closed staging segments of any
writer; a writer's newest segment stays, it may be open).  Before a file goes, the
``RETENTION`` state file records the writer's lsns it held and the highest seq of each
structure among them: a reader checking that a writer's records are whole tells lsns
retention deleted (all below the point) from lsns that went missing, and a recovery
from an SRDS older than the point sees that records it needs were deleted.  The
point only ever rises: a structure checkpoint sets it to the seq the older valid SRDS
covers (redbook §5.3), and a server whose restart checkpoint lies below it must cold
start.

Log full.  ``LogConfig.max_bytes`` bounds the stream (staging of every writer plus the
data sets).  An append that would pass it first purges under the current point, then
calls the registered log-full handler (the structure checkpoint: CHKNEARFULL), purges
again, and raises :class:`~sharedq.log.errors.LogFull` only if there is still no room.
Appends made by the handler's own thread are not held to the maximum: a checkpoint
must be able to log itself while it makes room.  Sizes are measured by listing the
stream's directories at each segment switch and whenever the maximum seems reached,
and in between counted by this process's writers; other processes' appends since the
last listing are not seen, so the stream can pass the maximum by up to one segment
per writer.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from sharedq.log.config import LogConfig
from sharedq.log.datasets import DatasetMeta, arrow_exception, read_dataset_meta
from sharedq.log.errors import LogError, LogReason, log_error
from sharedq.log.files import open_lock
from sharedq.log.layout import Layout
from sharedq.log.segment import SeqRanges, read_segment, seq_ranges
from sharedq.log.statefile import read_state, write_state

logger = logging.getLogger("sharedq.log")

_RETENTION_LOCK = ".retention.lock"


@dataclass(frozen=True)
class PurgedRange:
    """Lsns of one writer that retention deleted, and per structure the highest seq
    among their records (all of them below the structure's point when deleted)."""

    writer: str
    first_lsn: int
    last_lsn: int
    seqs: dict[str, int]


@dataclass(frozen=True)
class RetentionState:
    """The ``RETENTION`` file: the points, and what retention has deleted."""

    points: dict[str, int]
    purged: tuple[PurgedRange, ...] = ()


class Retention:
    """The persistent retention points of a stream: structure -> lowest seq kept.

    With dual logging the file is kept under both roots; a reader uses the first copy
    that verifies.  A damaged file (both copies) raises ``LOG_DAMAGED`` naming it:
    reading it as "nothing deleted" could let a reader pass deleted records as a loss,
    or worse, and reading it as anything else could delete what recovery needs.
    """

    def __init__(self, layouts: list[Layout]) -> None:
        self._layouts = layouts

    def load(self) -> dict[str, int]:
        return self.state().points

    def state(self) -> RetentionState:
        problem: LogError | None = None
        for layout in self._layouts:
            try:
                body = read_state(layout.retention_file)
                if body is not None:
                    return _decode(body)
            except LogError as exc:
                problem = problem or exc
            except (KeyError, TypeError, ValueError) as exc:
                problem = problem or log_error(
                    LogReason.LOG_DAMAGED,
                    f"state file {layout.retention_file} is not a retention state: {exc!r}",
                    path=str(layout.retention_file),
                )
        if problem is not None:
            raise problem
        return RetentionState({})

    def raise_to(self, structure: str, seq: int) -> int:
        """Set the point of ``structure`` to ``seq`` unless it is higher already; return it.

        Serialized across processes by a lock file, written atomically and synced.
        """
        if type(seq) is not int or not 0 <= seq < 2**63:  # a record's seq is an int64
            raise log_error(
                LogReason.BAD_ARGUMENT, f"retention seq must be an int, 0 to 2**63 - 1: {seq!r}"
            )
        with self._locked():
            state = self.state()
            current = state.points.get(structure, 0)  # (0: a structure without a point)
            if current >= seq:
                return current
            self._write(RetentionState({**state.points, structure: seq}, state.purged))
            return seq

    def record_purged(self, ranges: list[PurgedRange]) -> None:
        """Note (durably, before the files go) that retention deletes these lsns."""
        if not ranges:
            return
        with self._locked():
            state = self.state()
            self._write(RetentionState(state.points, _coalesce([*state.purged, *ranges])))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        lock_path = self._layouts[0].root / _RETENTION_LOCK
        with open_lock(lock_path) as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _write(self, state: RetentionState) -> None:
        body = {
            "points": dict(sorted(state.points.items())),
            "purged": [
                [p.writer, p.first_lsn, p.last_lsn, dict(sorted(p.seqs.items()))]
                for p in state.purged
            ],
        }
        for layout in self._layouts:
            write_state(layout.retention_file, body)


def _decode(body: dict[str, object]) -> RetentionState:
    points = {str(k): int(v) for k, v in dict(body["points"]).items()}  # type: ignore[call-overload]
    purged = tuple(
        PurgedRange(str(w), int(a), int(b), {str(k): int(v) for k, v in dict(seqs).items()})
        for w, a, b, seqs in body.get("purged", [])  # type: ignore[attr-defined]
    )
    return RetentionState(points, purged)


def _coalesce(ranges: list[PurgedRange]) -> tuple[PurgedRange, ...]:
    """Merge each writer's adjacent or overlapping ranges (keeping the highest seqs)."""
    out: list[PurgedRange] = []
    for item in sorted(ranges, key=lambda p: (p.writer, p.first_lsn)):
        last = out[-1] if out else None
        if last is not None and last.writer == item.writer and item.first_lsn <= last.last_lsn + 1:
            seqs = dict(last.seqs)
            for name, seq in item.seqs.items():
                seqs[name] = max(seq, seqs.get(name, seq))
            out[-1] = PurgedRange(
                last.writer, last.first_lsn, max(last.last_lsn, item.last_lsn), seqs
            )
        else:
            out.append(item)
    return tuple(out)


def wholly_below(ranges: SeqRanges, points: dict[str, int]) -> bool:
    """Whether every record a file holds (by its ranges) is below the retention points."""
    return all(name in points and high < points[name] for name, (_, high) in ranges.items())


@dataclass(frozen=True)
class PurgeResult:
    """Files a purge removed and the bytes it freed."""

    files: tuple[Path, ...] = ()
    bytes_freed: int = 0


@dataclass(frozen=True)
class LogFullEvent:
    """What the log-full handler is told: who needed room, how much, and the sizes."""

    writer: str
    needed: int
    size: int
    max_bytes: int


LogFullHandler = Callable[[LogFullEvent], None]
"""Makes room when the log is full: a structure checkpoint that then calls
``LogStream.delete_before``.  Raising makes the append fail with ``LogFull``."""


class LogSpace:
    """The stream's size against its maximum; purging; the log-full protocol."""

    def __init__(
        self,
        layout: Layout,
        config: LogConfig,
        retention: Retention,
        copies: tuple[Layout, ...] = (),
    ) -> None:
        self._layout = layout
        self._copies = copies
        self._config = config
        self.retention = retention
        self._lock = threading.Lock()
        self._full_lock = threading.Lock()
        self._local = threading.local()
        self._size = 0
        self._generation = 0
        self._handler_failed = False
        self._handler: LogFullHandler | None = None
        self._max_bytes = config.max_bytes
        # Footers of data sets and ranges of closed segments: both files are immutable,
        # so a (path, size) key stays valid until the file is removed.
        self._meta_cache: dict[tuple[Path, int], DatasetMeta] = {}
        self._range_cache: dict[tuple[Path, int], SeqRanges] = {}
        #: Per writer of this process, the room its open segment has allocated ahead.
        self._rooms: dict[str, Callable[[], int]] = {}
        self.refresh()

    # -- size ------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """The stream's size in bytes as last measured plus this process's changes since."""
        return self._size

    def add(self, delta: int) -> None:
        # No lock: appends call this under their writer's lock only, and a count lost to
        # a race between writers is corrected by the next measurement (each segment
        # switch); a lock here would cost every append.
        self._size += delta

    def count_room(self, writer: str, room: Callable[[], int] | None) -> None:
        """``room`` says how many bytes ``writer`` (of this process) has allocated ahead
        in its open segment: on disk, not records, so not counted (``None``: forget it).
        Other processes' room counts until their segment closes: at most one
        segment's size per writer, the same slack as their unseen appends."""
        if room is None:
            self._rooms.pop(writer, None)
        else:
            self._rooms[writer] = room

    def refresh(self) -> int:
        """Measure the stream's size from its directories (staging and data sets)."""
        total = 0
        for directory in [self._layout.datasets] + [
            self._layout.writer_dir(w) for w in self._layout.writers()
        ]:
            try:
                with os.scandir(directory) as entries:
                    for entry in entries:
                        if entry.is_file(follow_symlinks=False):
                            with contextlib.suppress(FileNotFoundError):
                                total += entry.stat().st_size
            except FileNotFoundError:
                continue
        total -= sum(room() for room in list(self._rooms.values()))
        with self._lock:
            self._size = total
        return total

    @property
    def max_bytes(self) -> int | None:
        """The stream's maximum size (``None``: none), as configured."""
        return self._max_bytes

    def fits(self, nbytes: int) -> bool:
        """Whether ``nbytes`` more may be appended now (always, in the handler's thread)."""
        limit = self._max_bytes
        return limit is None or self._size + nbytes <= limit or self.in_handler

    @property
    def in_handler(self) -> bool:
        return bool(getattr(self._local, "active", False))

    @contextlib.contextmanager
    def exempt(self) -> Iterator[None]:
        """Appends of this thread are not held to the maximum inside the block.

        For the work that makes room (a structure checkpoint, the system checkpoints
        it asks for) when it runs outside the handler: it must never wait for room
        that only it can make.
        """
        previous = self.in_handler
        self._local.active = True
        try:
            yield
        finally:
            self._local.active = previous

    # -- the log-full protocol ---------------------------------------------------------

    def set_handler(self, handler: LogFullHandler | None) -> None:
        self._handler = handler

    def make_room(self, writer: str, nbytes: int) -> None:
        """Purge, then call the handler and purge again, until ``nbytes`` fit; else LogFull.

        One thread at a time runs this.  A thread that waited while another ran the
        handler re-measures first; it runs the handler again only if that run made room
        (the log filled up again since), never after a run that could not.
        """
        seen = self._generation
        with self._full_lock:
            self.refresh()
            if self.fits(nbytes):
                return
            self.purge()
            if self.fits(nbytes):
                return
            handler = self._handler
            retry = self._generation == seen or not self._handler_failed
            if handler is not None and retry:
                self._generation += 1
                assert self._config.max_bytes is not None
                event = LogFullEvent(writer, nbytes, self._size, self._config.max_bytes)
                logger.warning(
                    "log full: %s needs %d bytes, stream holds %d of %d; calling %r",
                    writer,
                    nbytes,
                    event.size,
                    event.max_bytes,
                    handler,
                )
                self._local.active = True
                self._handler_failed = True
                try:
                    handler(event)
                except Exception as exc:
                    why = f"the log-full handler failed: {exc!r}"
                    raise self._full(writer, nbytes, why) from exc
                finally:
                    self._local.active = False
                self.purge()
                if self.fits(nbytes):
                    self._handler_failed = False
                    return
            raise self._full(writer, nbytes, "deleting records no longer needed did not make room")

    def _full(self, writer: str, nbytes: int, why: str) -> LogError:
        return log_error(
            LogReason.LOG_FULL,
            f"writer {writer} cannot append {nbytes} bytes: the stream holds {self._size} of "
            f"its maximum {self._config.max_bytes} bytes; {why}",
            writer=writer,
            size=self._size,
            max_bytes=self._config.max_bytes,
        )

    # -- purging ------------------------------------------------------------------------

    def purge(self) -> PurgeResult:
        """Remove every data set and closed segment whose records are all below the points."""
        points = self.retention.load()
        if not points:
            return PurgeResult()
        doomed: list[tuple[Path, PurgedRange]] = []
        for name, path in self._layout.dataset_files():
            meta = self.dataset_meta(path)
            if meta is not None and wholly_below(meta.ranges, points):
                highest = {k: high for k, (_, high) in meta.ranges.items()}
                doomed.append(
                    (path, PurgedRange(name.writer, name.first_lsn, name.last_lsn, highest))
                )
        for writer in self._layout.writers():
            segments = self._layout.segments(writer)
            for index, (first, path) in enumerate(segments[:-1]):  # the newest may be open
                ranges = self._segment_ranges(path)
                if ranges is not None and wholly_below(ranges, points):
                    last = segments[index + 1][0] - 1
                    highest = {k: high for k, (_, high) in ranges.items()}
                    doomed.append((path, PurgedRange(writer, first, last, highest)))
        self.retention.record_purged([purged for _, purged in doomed])
        removed: list[Path] = []
        freed = 0
        for path, _ in doomed:
            freed += _unlink(path)
            removed.append(path)
            for copy in self._copies:
                _unlink(copy.root / path.relative_to(self._layout.root))
        gone = set(removed)
        for cache in (self._meta_cache, self._range_cache):
            for key in [k for k in cache if k[0] in gone]:
                del cache[key]
        if removed:
            logger.info("purged %d log files (%d bytes) below %s", len(removed), freed, points)
        self.refresh()
        return PurgeResult(tuple(removed), freed)

    def dataset_meta(self, path: Path) -> DatasetMeta | None:
        """A data set's footer, or ``None`` when it cannot be read (reported by readers)."""
        return self.dataset_meta_or_problem(path)[0]

    def dataset_meta_or_problem(self, path: Path) -> tuple[DatasetMeta | None, str | None]:
        """A data set's verified footer, or what is wrong with it."""
        try:
            key = (path, path.stat().st_size)
            cached = self._meta_cache.get(key)
            if cached is None:
                cached = self._meta_cache[key] = read_dataset_meta(path)
            return cached, None
        except FileNotFoundError:
            return None, "gone"
        except (OSError, ValueError, KeyError, arrow_exception()) as exc:
            return None, f"footer unreadable: {exc}"

    def _segment_ranges(self, path: Path) -> SeqRanges | None:
        """A closed segment's ranges; ``None`` when it is damaged (kept for the operator)."""
        try:
            size = path.stat().st_size
            cached = self._range_cache.get((path, size))
            if cached is not None:
                return cached
            contents = read_segment(path)
        except FileNotFoundError:
            return None  # offloaded or purged by another writer meanwhile
        if contents.damages:
            return None
        ranges = seq_ranges(contents.records)
        self._range_cache[(path, size)] = ranges
        return ranges


def _unlink(path: Path) -> int:
    try:
        size = path.stat().st_size
        path.unlink()
    except FileNotFoundError:
        return 0
    return size
