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
them.  A damaged closed segment is offloaded up to its damage and then moved to the
stream's ``damaged/`` directory, never deleted.
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
from sharedq.log.segment import read_segment, set_aside_file

logger = logging.getLogger("sharedq.log")


@dataclass(frozen=True)
class OffloadResult:
    """What one offload did."""

    datasets: tuple[DatasetMeta, ...] = ()
    segments: tuple[Path, ...] = ()
    records: int = 0
    staging_bytes_freed: int = 0
    damage: tuple[Damage, ...] = ()


def choose_segments(
    closed: list[tuple[int, Path, int]], staging_bytes: int, low_bytes: int
) -> list[tuple[int, Path, int]]:
    """The oldest closed segments ``(first_lsn, path, size)`` to offload to reach ``low_bytes``."""
    chosen = []
    remaining = staging_bytes
    for segment in closed:
        if remaining <= low_bytes:
            break
        chosen.append(segment)
        remaining -= segment[2]
    return chosen


def covered_lsns(layout: Layout, writer: str) -> list[tuple[int, int]]:
    """The lsn ranges a writer's data sets hold."""
    return [(d.first_lsn, d.last_lsn) for d, _ in layout.dataset_files() if d.writer == writer]


def offload_segments(
    layout: Layout,
    writer: str,
    segments: list[tuple[int, Path, int]],
    *,
    row_group_rows: int,
    dataset_bytes: int,
) -> OffloadResult:
    """Move ``segments`` (closed, oldest first) into data sets of at most ~``dataset_bytes``."""
    covered = covered_lsns(layout, writer)
    datasets: list[DatasetMeta] = []
    removed: list[Path] = []
    damages: list[Damage] = []
    count = 0
    freed = 0
    group: list[tuple[Path, int, Damage | None]] = []
    records: list[LogRecord] = []
    group_bytes = 0

    def flush() -> None:
        nonlocal records, group, group_bytes, count, freed
        if records:
            records.sort()
            datasets.append(write_dataset(layout, writer, records, row_group_rows=row_group_rows))
            count += len(records)
        for path, size, damage in group:
            if damage is not None:
                set_aside_file(path, layout.damaged, writer)
            else:
                path.unlink(missing_ok=True)
            removed.append(path)
            freed += size
        if group:
            fsync_dir(layout.writer_dir(writer))
        records, group, group_bytes = [], [], 0

    for first_lsn, path, size in segments:
        if lsn_covered(first_lsn, covered):
            # A crash after the data set was written and before this was deleted.
            path.unlink(missing_ok=True)
            removed.append(path)
            freed += size
            continue
        try:
            contents = read_segment(path)
        except FileNotFoundError:
            continue  # purged meanwhile (all its records were below the retention point)
        if contents.damage is not None:
            damages.append(contents.damage)
            logger.error("offload of a damaged segment: %s", contents.damage)
        records.extend(contents.records)
        group.append((path, size, contents.damage))
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
