"""Offload: a writer's closed staging segments become Parquet log data sets.

When a writer's staging passes HIGHOFFLOAD per cent of ``staging_bytes``, the writer
closes its open segment (so everything written until then can go) and asks its
offloader to move closed segments, oldest first, into data sets until staging is at
or below LOWOFFLOAD per cent.  Records appended after that moment stay in staging,
as the redbook says of the MVS logger (§2.13.4).  Offload runs in a thread of the
writer, so appends wait only for the segment switch, not for the Parquet writing.

Crash safety: a data set is complete and synced under its final name before the
segments it holds are deleted.  A crash in between leaves segments whose lsns a data
set already holds; readers skip them (see ``reader.py``) and the next offload deletes
them.  With dual logging each segment is read from both copies where one is damaged
(``segment.read_copies``) and each data set is written under both roots.  A segment
with damage neither copy makes good is offloaded with every sound record it holds,
the data set's footer records which lsns it lacks and why, and the segment is moved
to the stream's ``damaged/`` directory, never deleted.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sharedq.log.codec import Damage
from sharedq.log.datasets import DatasetMeta, write_dataset
from sharedq.log.layout import Layout, fsync_dir, lsn_covered
from sharedq.log.records import LogRecord
from sharedq.log.segment import read_copies, set_aside_file

logger = logging.getLogger("sharedq.log")


@dataclass(frozen=True)
class OffloadResult:
    """What one offload did."""

    datasets: tuple[DatasetMeta, ...] = ()
    segments: tuple[Path, ...] = ()
    records: int = 0
    staging_bytes_freed: int = 0
    damage: tuple[Damage, ...] = ()


#: A closed segment to offload: its first lsn, its last (the next segment's first lsn
#: less one, whatever damage lost), the paths of its copies, its size.
ClosedSegment = tuple[int, int, list[Path], int]


def choose_segments(
    closed: list[ClosedSegment], staging_bytes: int, low_bytes: int
) -> list[ClosedSegment]:
    """The oldest closed segments to offload to reach ``low_bytes`` of staging."""
    chosen = []
    remaining = staging_bytes
    for segment in closed:
        if remaining <= low_bytes:
            break
        chosen.append(segment)
        remaining -= segment[3]
    return chosen


def covered_lsns(layout: Layout, writer: str) -> list[tuple[int, int]]:
    """The lsn ranges a writer's data sets hold."""
    return [(d.first_lsn, d.last_lsn) for d, _ in layout.dataset_files() if d.writer == writer]


def offload_segments(
    layouts: list[Layout],
    writer: str,
    segments: list[ClosedSegment],
    *,
    row_group_rows: int,
    dataset_bytes: int,
) -> OffloadResult:
    """Move ``segments`` (closed, oldest first) into data sets of at most ~``dataset_bytes``.

    ``layouts`` are the stream's roots, the first one first; every data set is written
    under each of them.
    """
    primary = layouts[0]
    covered = covered_lsns(primary, writer)
    datasets: list[DatasetMeta] = []
    removed: list[Path] = []
    damages: list[Damage] = []
    count = 0
    freed = 0
    group: list[tuple[list[Path], int, bool]] = []
    records: list[LogRecord] = []
    notes: list[str] = []
    span: list[int] = []
    group_bytes = 0

    def flush() -> None:
        nonlocal records, group, group_bytes, count, freed, notes, span
        if records or span:
            records.sort()
            metas = [
                write_dataset(
                    layout,
                    writer,
                    records,
                    row_group_rows=row_group_rows,
                    span=(span[0], span[1]),
                    damage=notes,
                )
                for layout in layouts
            ]
            datasets.append(metas[0])
            count += len(records)
        for paths, size, damaged in group:
            for path, layout in zip(paths, layouts, strict=True):
                if damaged:
                    if path.exists():
                        set_aside_file(path, layout.damaged, writer)
                else:
                    path.unlink(missing_ok=True)
                removed.append(path)
            freed += size
        if group:
            for layout in layouts:
                directory = layout.writer_dir(writer)
                if directory.exists():
                    fsync_dir(directory)
        records, group, group_bytes, notes, span = [], [], 0, [], []

    for first_lsn, last_lsn, paths, size in segments:
        if lsn_covered(first_lsn, covered):
            # A crash after the data set was written and before this was deleted.
            for path in paths:
                path.unlink(missing_ok=True)
                removed.append(path)
            freed += size
            continue
        contents = read_copies(paths)
        if contents is None:
            continue  # purged meanwhile (all its records were below the retention point)
        if contents.damages:
            damages.extend(contents.damages)
            notes.extend(str(d) for d in contents.damages)
            logger.error(
                "offload of a segment with damage no copy makes good: %s",
                "; ".join(map(str, contents.damages)),
            )
        span = [span[0] if span else first_lsn, last_lsn]
        records.extend(contents.records)
        group.append((paths, size, bool(contents.damages or contents.repaired)))
        group_bytes += size
        if group_bytes >= dataset_bytes:
            flush()
    flush()
    return OffloadResult(tuple(datasets), tuple(removed), count, freed, tuple(damages))


class Offloader:
    """A writer's offload thread: runs ``work`` whenever asked, one run at a time."""

    def __init__(self, work: Callable[[], object], name: str) -> None:
        self._work = work
        self._wanted = threading.Event()
        self._idle = threading.Condition()
        self._busy = False
        self._stopping = False
        self.last_error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"sharedq-offload-{name}", daemon=True
        )
        self._thread.start()

    def request(self) -> None:
        with self._idle:
            self._busy = True
        self._wanted.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until no offload is asked for or running; ``False`` on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._busy, timeout)

    def close(self) -> None:
        self._stopping = True
        self._wanted.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            if self._stopping:
                with self._idle:
                    self._busy = False
                    self._idle.notify_all()
                return
            try:
                self._work()
                self.last_error = None
            except Exception as exc:  # keep appending; the data stays in staging
                self.last_error = exc
                logger.exception("offload failed; the records stay in staging")
            with self._idle:
                if not self._wanted.is_set():
                    self._busy = False
                    self._idle.notify_all()
