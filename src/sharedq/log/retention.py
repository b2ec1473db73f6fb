"""Deleting records no longer needed, and what happens when the log is full.

Retention is by structure sequence number: ``delete_before(structure, seq)`` records,
durably, that the structure's records with a lower seq are deleted.  From then on no
reader yields them, whatever files still hold them; files whose records are *all*
below the point are removed (log data sets, and closed staging segments of any
writer; a writer's newest segment stays, it may be open).  The point only ever rises:
a structure checkpoint sets it to the seq the older valid SRDS covers (redbook §5.3),
and a server whose restart checkpoint lies below it must cold start.

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
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from sharedq.log.config import LogConfig
from sharedq.log.datasets import DatasetMeta, read_dataset_meta
from sharedq.log.errors import LogError, LogReason, log_error
from sharedq.log.layout import Layout, write_atomically
from sharedq.log.segment import SeqRanges, read_segment, seq_ranges

logger = logging.getLogger("sharedq.log")

_RETENTION_LOCK = ".retention.lock"


class Retention:
    """The persistent retention points of a stream: structure -> lowest seq kept."""

    def __init__(self, layout: Layout) -> None:
        self._layout = layout

    def load(self) -> dict[str, int]:
        try:
            text = self._layout.retention_file.read_text()
        except FileNotFoundError:
            return {}
        return {str(k): int(v) for k, v in json.loads(text).items()}

    def raise_to(self, structure: str, seq: int) -> int:
        """Set the point of ``structure`` to ``seq`` unless it is higher already; return it.

        Serialized across processes by a lock file, written atomically and synced.
        """
        if not isinstance(seq, int) or seq < 0:
            raise log_error(LogReason.BAD_ARGUMENT, f"retention seq must be an int >= 0: {seq!r}")
        lock_path = self._layout.root / _RETENTION_LOCK
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                points = self.load()
                if points.get(structure, 0) >= seq:
                    return points[structure]
                points[structure] = seq
                payload = json.dumps(points, sort_keys=True).encode()
                write_atomically(self._layout.retention_file, payload)
                return seq
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


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

    def __init__(self, layout: Layout, config: LogConfig, retention: Retention) -> None:
        self._layout = layout
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
        with self._lock:
            self._size = total
        return total

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
        removed: list[Path] = []
        freed = 0
        for _, path in self._layout.dataset_files():
            meta = self.dataset_meta(path)
            if meta is not None and wholly_below(meta.ranges, points):
                freed += _unlink(path)
                removed.append(path)
        for writer in self._layout.writers():
            segments = self._layout.segments(writer)
            for _, path in segments[:-1]:  # the newest segment may be open: keep it
                ranges = self._segment_ranges(path)
                if ranges is not None and wholly_below(ranges, points):
                    freed += _unlink(path)
                    removed.append(path)
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
        try:
            key = (path, path.stat().st_size)
            cached = self._meta_cache.get(key)
            if cached is None:
                cached = self._meta_cache[key] = read_dataset_meta(path)
            return cached
        except (OSError, ValueError, KeyError, pa.ArrowException):
            return None

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
        if contents.damage is not None:
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
