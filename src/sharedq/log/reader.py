"""Reading the stream: every writer's staging and the log data sets, merged into one.

The merged stream is in :class:`~sharedq.log.records.LogPosition` order
``(seq, op, writer, lsn)``: each structure's changes in the structure's own order,
each record that is not a change right after the change whose seq it carries.  (The
two structures of a pair number their changes independently; their records interleave
by number, which keeps each structure's order, and replay reads one structure.)

How: data sets are skipped by their footer (writer, per-structure seq ranges) and
read row groups by row group statistics; staging segments are read whole (staging is
bounded by offload); records are merged by sorting runs that are already sorted
(a data set) or nearly so (a segment), which ``list.sort`` does in linear time.  A
data set is loaded only when the merge reaches its lowest seq, so memory holds the
staging plus the data sets that overlap in seq, not the whole log.

Damage.  A segment is read up to its first damaged frame: the records before it are
yielded, the damaged frame and everything after it in that segment are not, and a
:class:`~sharedq.log.codec.Damage` naming the file and byte offset goes to
:attr:`LogReader.damage` and to the ``sharedq.log`` logger (warning).  Other segments
and writers are read on.  One case is not damage: the newest segment of a writer that
is running may end in the frame it is writing at this moment; the reader stops before
it silently.  A damaged data set is skipped whole and reported.  ``strict=True``
raises :class:`~sharedq.log.errors.LogDamaged` instead of reading past any damage.

Deleted records (below the stream's retention point for their structure) are never
yielded, whether or not their file is gone yet.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import pyarrow as pa

from sharedq.log.codec import Damage, DamageReason
from sharedq.log.datasets import DatasetMeta, read_dataset
from sharedq.log.errors import LogReason, log_error
from sharedq.log.layout import Layout, lsn_covered, owner_alive
from sharedq.log.records import LogPosition, LogRecord
from sharedq.log.retention import LogSpace, Retention
from sharedq.log.segment import read_segment

logger = logging.getLogger("sharedq.log")

_INFINITY = 2**63


@dataclass(frozen=True)
class ReadFilter:
    """Which records a read yields.  Every bound is optional.

    Attributes:
        structures: only records about these structures.
        writers: only records of these writers.
        from_seq: only records with ``seq >= from_seq`` (replay after an SRDS that
            covers seq ``S`` reads ``from_seq=S + 1``).
        to_seq: stop after the records with ``seq <= to_seq``.
        start: only records at or after this position (a warm restart from the
            position of the server's system checkpoint).
        until_time_us: stop before the first record written later than this time
            (point-in-time recovery; microseconds since 1970 UTC).
    """

    structures: Collection[str] | None = None
    writers: Collection[str] | None = None
    from_seq: int | None = None
    to_seq: int | None = None
    start: LogPosition | None = None
    until_time_us: int | None = None

    @property
    def lowest_seq(self) -> int:
        low = self.from_seq or 0
        return max(low, self.start.seq) if self.start is not None else low


@dataclass(frozen=True)
class LogSources:
    """Where a stream's records are now, for a reader that is not this one (Spark).

    ``staging`` holds the staging records no data set holds yet, already filtered by
    retention and sorted; ``datasets`` are the data set files to read whole, after
    which records below ``retention`` (per structure, the lowest seq kept) must be
    dropped.  Together they are exactly what :meth:`LogReader.records` yields.
    """

    staging: list[LogRecord]
    datasets: list[Path]
    retention: dict[str, int]
    damage: list[Damage]


T = TypeVar("T")
U = TypeVar("U")


@dataclass(frozen=True)
class StagingSegment:
    """A staging segment no data set held when the stream was listed.

    ``may_be_writing``: the newest segment of a writer that is running, which may end
    in the frame being appended at this moment (a torn last frame there is no damage).
    """

    writer: str
    first_lsn: int
    path: Path
    may_be_writing: bool


@dataclass(frozen=True)
class SegmentDecoded(Generic[T]):
    """What decoding one segment found (see :meth:`LogReader.decoded_sources`).

    ``found``: False when the file was gone (offloaded or purged since listed);
    ``damage``: where its sound frames end, if they end before the file does;
    ``value``: what the decoder made of its records.
    """

    found: bool
    damage: Damage | None
    value: T


@dataclass(frozen=True)
class DecodedSources(Generic[T]):
    """:class:`LogSources` with the staging segments decoded by the caller.

    ``segments``: each segment no data set holds, with what its decoding produced; its
    records are not filtered by retention (drop those below ``retention``, as for the
    data sets).
    """

    segments: list[tuple[StagingSegment, T]]
    datasets: list[Path]
    retention: dict[str, int]
    damage: list[Damage]


@dataclass
class _Listing:
    """A listing of the stream's sources: the segments to read, the data sets seen so
    far, the lsn ranges they hold per writer and the data set files already seen."""

    segments: list[StagingSegment]
    datasets: list[DatasetMeta]
    covered: dict[str, list[tuple[int, int]]]
    seen: set[Path]


class LogReader:
    """Reads a stream's records in merged order; create it with ``LogStream.reader``.

    One reader may run several reads one after another; :attr:`damage` is the damage
    the latest read found.
    """

    def __init__(self, layout: Layout, space: LogSpace, retention: Retention) -> None:
        self._layout = layout
        self._space = space
        self._retention = retention
        #: Damage found by the latest read, in the order found.
        self.damage: list[Damage] = []

    def records(
        self,
        *,
        structures: Collection[str] | None = None,
        writers: Collection[str] | None = None,
        from_seq: int | None = None,
        to_seq: int | None = None,
        start: LogPosition | None = None,
        until_time_us: int | None = None,
        strict: bool = False,
    ) -> Iterator[LogRecord]:
        """The records, one by one, in merged order (see :class:`ReadFilter`)."""
        selection = ReadFilter(structures, writers, from_seq, to_seq, start, until_time_us)
        for batch in self.batches(selection, strict=strict):
            yield from batch

    def batches(
        self, selection: ReadFilter | None = None, *, strict: bool = False
    ) -> Iterator[list[LogRecord]]:
        """The records in merged order, as lists (cheaper to consume in bulk)."""
        selection = selection if selection is not None else ReadFilter()
        self.damage = []
        points = self._retention.load()
        staging, datasets = self._sources(selection, strict)
        buffer = self._prepare(staging, selection, points)
        buffer.sort()
        pending = sorted(datasets, key=lambda meta: _min_seq(meta, selection))
        index = 0
        stop = _Stop(selection)
        while True:
            watermark = _min_seq(pending[index], selection) if index < len(pending) else _INFINITY
            cut = bisect_left(buffer, (watermark,)) if watermark < _INFINITY else len(buffer)
            if cut:
                ready, buffer = buffer[:cut], buffer[cut:]
                ready, done = stop.clip(ready)
                if ready:
                    yield ready
                if done:
                    return
            if index >= len(pending):
                return
            while index < len(pending) and _min_seq(pending[index], selection) <= watermark:
                records = self._load_dataset(pending[index], selection, strict)
                buffer.extend(self._prepare([records], selection, points))
                index += 1
            buffer.sort()

    def sources(self) -> LogSources:
        """The stream's staging records and data set files, without reading the data sets.

        The Spark pipeline reads the data sets itself, in parallel, and the staging
        records (which only this reader can decode) from here; the split is the same one
        :meth:`batches` makes, so the two see the same records.
        """
        self.damage = []
        points = self._retention.load()
        staging, datasets = self._sources(ReadFilter(), strict=False)
        records = self._prepare(staging, ReadFilter(), points)
        records.sort()
        return LogSources(records, [m.path for m in datasets], points, list(self.damage))

    def last_seq(self, structure: str) -> int:
        """The highest seq any record of ``structure`` carries (0 if none).

        Reads data set footers and staging only: no data set is opened.
        """
        selection = ReadFilter(structures={structure})
        staging, datasets = self._sources(selection, strict=False)
        highest = max((m.ranges[structure][1] for m in datasets), default=0)
        for records in staging:
            for record in records:
                if record.structure == structure and record.seq > highest:
                    highest = record.seq
        return highest

    # -- sources -------------------------------------------------------------------------

    def _sources(
        self, selection: ReadFilter, strict: bool
    ) -> tuple[list[list[LogRecord]], list[DatasetMeta]]:
        """Read every wanted staging segment; list the wanted data sets (not read yet)."""
        listing = self._list_sources(selection, strict)
        read: list[tuple[StagingSegment, list[LogRecord]]] = []
        for segment in listing.segments:
            records = self._read_segment(segment.path, segment.may_be_writing, strict)
            if records is not None:  # (None: offloaded or purged since listed)
                read.append((segment, records))
        kept, datasets = self._settle(listing, read, selection, strict)
        return [records for _, records in kept], datasets

    def decoded_sources(
        self, decode: Callable[[list[StagingSegment]], list[SegmentDecoded[T]]]
    ) -> DecodedSources[T]:
        """The stream's sources, with the staging segments decoded by ``decode``.

        For a reader that decodes segments its own way, elsewhere or in parallel (the
        Spark pipeline decodes them in its Python workers, each into a Parquet file).
        ``decode`` gets every segment no data set held when listed, and returns, for
        each in order, whether the file was still there, the damage it ends in and
        what the decoding produced.  This reader keeps to its own rules as
        :meth:`sources` does: damage is reported (except a torn last frame of the
        segment a live writer is appending to), and a segment that a data set written
        meanwhile holds is dropped in favour of the data set.
        """
        self.damage = []
        points = self._retention.load()
        selection = ReadFilter()
        listing = self._list_sources(selection, strict=False)
        read: list[tuple[StagingSegment, T]] = []
        results = decode(listing.segments)
        for segment, result in zip(listing.segments, results, strict=True):
            if not result.found:
                continue  # offloaded or purged since listed
            if result.damage is not None:
                self._segment_damage(result.damage, segment.may_be_writing, strict=False)
            read.append((segment, result.value))
        kept, datasets = self._settle(listing, read, selection, strict=False)
        return DecodedSources(kept, [m.path for m in datasets], points, list(self.damage))

    def _list_sources(self, selection: ReadFilter, strict: bool) -> _Listing:
        """The staging segments to read (those no data set holds), and the data sets.

        Segments are listed before data sets: an offload writes its data set before it
        deletes the segments, so a segment that vanishes before it is read is found in
        a data set listed after it.
        """
        writers = [
            w for w in self._layout.writers() if selection.writers is None or w in selection.writers
        ]
        listed = {w: self._layout.segments(w) for w in writers}
        seen: set[Path] = set()
        all_sets = self._datasets(strict, seen)
        covered: dict[str, list[tuple[int, int]]] = {}
        for meta in all_sets:
            covered.setdefault(meta.writer, []).append((meta.first_lsn, meta.last_lsn))
        segments: list[StagingSegment] = []
        for writer in writers:
            found = listed[writer]
            alive = owner_alive(self._layout.writer_dir(writer)) if found else False
            for number, (first_lsn, path) in enumerate(found):
                if lsn_covered(first_lsn, covered.get(writer, ())):
                    continue
                newest_of_live_writer = alive and number == len(found) - 1
                segments.append(StagingSegment(writer, first_lsn, path, newest_of_live_writer))
        return _Listing(segments, all_sets, covered, seen)

    def _settle(
        self,
        listing: _Listing,
        read: list[tuple[StagingSegment, U]],
        selection: ReadFilter,
        strict: bool,
    ) -> tuple[list[tuple[StagingSegment, U]], list[DatasetMeta]]:
        """The segments read that no data set holds now, and the wanted data sets.

        A data set written meanwhile holds segments that vanished before they were
        read, or were read just before they went: take the data set, drop those
        segments.
        """
        all_sets, covered = listing.datasets, listing.covered
        for meta in self._datasets(strict, listing.seen):
            all_sets.append(meta)
            covered.setdefault(meta.writer, []).append((meta.first_lsn, meta.last_lsn))
        kept = [
            (segment, value)
            for segment, value in read
            if not lsn_covered(segment.first_lsn, covered.get(segment.writer, ()))
        ]
        return kept, [m for m in all_sets if self._wanted(m, selection)]

    def _datasets(self, strict: bool, seen: set[Path]) -> list[DatasetMeta]:
        """The data sets not ``seen`` yet (and now seen); unreadable ones are reported."""
        found = []
        for _, path in self._layout.dataset_files():
            if path in seen:
                continue
            seen.add(path)
            meta = self._space.dataset_meta(path)
            if meta is None:
                if path.exists():
                    self._report(
                        Damage(str(path), 0, DamageReason.BAD_DATASET, "footer unreadable", 0),
                        strict,
                    )
                continue
            found.append(meta)
        return found

    def _wanted(self, meta: DatasetMeta, selection: ReadFilter) -> bool:
        if selection.writers is not None and meta.writer not in selection.writers:
            return False
        ranges = _selected_ranges(meta, selection)
        if not ranges:
            return False
        return max(high for _, high in ranges) >= selection.lowest_seq

    def _read_segment(
        self, path: Path, may_be_writing: bool, strict: bool
    ) -> list[LogRecord] | None:
        try:
            contents = read_segment(path)
        except FileNotFoundError:
            return None
        if contents.damage is not None:
            self._segment_damage(contents.damage, may_be_writing, strict)
        return contents.records

    def _segment_damage(self, damage: Damage, may_be_writing: bool, strict: bool) -> None:
        """Report a segment's damage, unless it is the frame a live writer is appending."""
        if may_be_writing and damage.reason is DamageReason.TRUNCATED:
            return
        self._report(damage, strict)

    def _load_dataset(
        self, meta: DatasetMeta, selection: ReadFilter, strict: bool
    ) -> list[LogRecord]:
        try:
            return read_dataset(meta.path, from_seq=selection.lowest_seq or None)
        except FileNotFoundError:
            return []  # purged since listed: below the retention point
        except (OSError, ValueError, pa.ArrowException) as exc:
            self._report(Damage(str(meta.path), 0, DamageReason.BAD_DATASET, str(exc), 0), strict)
            return []

    def _report(self, damage: Damage, strict: bool) -> None:
        self.damage.append(damage)
        logger.warning("log damage: %s", damage)
        if strict:
            raise log_error(
                LogReason.LOG_DAMAGED,
                str(damage),
                path=damage.path,
                offset=damage.offset,
                damage_reason=damage.reason.value,
            )

    # -- filtering -------------------------------------------------------------------------

    @staticmethod
    def _prepare(
        sources: list[list[LogRecord]], selection: ReadFilter, points: dict[str, int]
    ) -> list[LogRecord]:
        """Concatenate sources, dropping records the selection or retention excludes."""
        out: list[LogRecord] = []
        structures = selection.structures
        writers = selection.writers
        low = selection.lowest_seq
        start = selection.start
        for records in sources:
            if structures is not None:
                records = [r for r in records if r.structure in structures]
            if writers is not None:
                records = [r for r in records if r.writer in writers]
            if low:
                records = [r for r in records if r.seq >= low]
            if start is not None:
                records = [r for r in records if r >= start]
            if points:
                records = [r for r in records if r.seq >= points.get(r.structure, 0)]
            out.extend(records)
        return out


class _Stop:
    """Where a read ends: after ``to_seq``, or before a record later than ``until_time_us``."""

    def __init__(self, selection: ReadFilter) -> None:
        self.to_seq = selection.to_seq
        self.until = selection.until_time_us

    def clip(self, ready: list[LogRecord]) -> tuple[list[LogRecord], bool]:
        done = False
        if self.to_seq is not None and ready and ready[-1].seq > self.to_seq:
            ready = ready[: bisect_left(ready, (self.to_seq + 1,))]
            done = True
        if self.until is not None:
            until = self.until
            for index, record in enumerate(ready):
                if record.time_us > until:
                    return ready[:index], True
        return ready, done


def _selected_ranges(meta: DatasetMeta, selection: ReadFilter) -> list[tuple[int, int]]:
    if selection.structures is None:
        return list(meta.ranges.values())
    return [r for name, r in meta.ranges.items() if name in selection.structures]


def _min_seq(meta: DatasetMeta, selection: ReadFilter) -> int:
    return min((low for low, _ in _selected_ranges(meta, selection)), default=0)
