"""Reading the stream: every writer's staging and the log data sets, merged into one.

The merged stream is in :class:`~sharedq.log.records.LogPosition` order
``(seq, op, writer, lsn)``: each structure's changes in the structure's own order,
each record that is not a change right after the change whose seq it carries.  (The
two structures of a pair number their changes independently; their records interleave
by number, which keeps each structure's order, and replay reads one structure.)

How: data sets are skipped by their footer (writer, per-structure seq ranges) and
read row groups by row group; staging segments are read whole (staging is bounded by
offload); records are merged by sorting runs that are already sorted (a data set) or
nearly so (a segment), which ``list.sort`` does in linear time.  A data set is loaded
only when the merge reaches its lowest seq, so memory holds the staging plus the data
sets that overlap in seq, not the whole log.

A read is planned first (:meth:`LogReader.plan`): the files are listed, staging is
read and every data set's footer verified.  The plan knows every lsn each writer has
in the files, so before a record is yielded it can say whether the records a
recovery needs are whole (:meth:`ReadPlan.check`, ``continuity.py``).

Damage.  A damaged frame is skipped and reading goes on after it (``codec.py``); with
dual logging the other copy of the file is read and makes good what it holds
(``segment.read_copies``).  Damage nothing made good goes to :attr:`LogReader.damage`
and to the ``sharedq.log`` logger (warning), and shows as a gap in the writer's lsns.
Two cases are not damage: the newest segment of a writer that is running may end in
the frame it is writing at this moment, and a writer that stopped without closing
cleanly may have left a torn last frame, which it never acknowledged; both are passed
over silently.  A reader that finds real damage in the segment a running writer
appends to asks it to start a new one (``ROLL``).  ``strict=True`` raises
:class:`~sharedq.log.errors.LogDamaged` at the first damage instead.

Deleted records (below the stream's retention point for their structure) are never
yielded, whether or not their file is gone yet.
"""

from __future__ import annotations

import contextlib
import logging
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

from sharedq.log.codec import Damage, DamageReason
from sharedq.log.continuity import Coverage, SourceSpan, WriterEnd, find_gaps, merge_runs
from sharedq.log.datasets import (
    DatasetMeta,
    arrow_exception,
    lsn_runs,
    read_dataset,
    verify_dataset,
)
from sharedq.log.errors import LogError, LogReason, log_error
from sharedq.log.files import touch
from sharedq.log.layout import Layout, owner_alive, segment_copies, segment_name
from sharedq.log.records import LogPosition, LogRecord
from sharedq.log.retention import LogSpace, Retention, RetentionState
from sharedq.log.segment import SegmentContents, read_copies
from sharedq.log.statefile import read_state

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

    def __post_init__(self) -> None:
        for what, given in (("structures", self.structures), ("writers", self.writers)):
            if given is not None and (
                isinstance(given, str | bytes)
                or not isinstance(given, Collection)
                or not all(isinstance(name, str) for name in given)
            ):
                raise log_error(
                    LogReason.BAD_ARGUMENT, f"{what} {given!r}: None or a collection of names"
                )
        for what, bound in (
            ("from_seq", self.from_seq),
            ("to_seq", self.to_seq),
            ("until_time_us", self.until_time_us),
        ):
            if bound is not None and (isinstance(bound, bool) or not hasattr(bound, "__index__")):
                raise log_error(LogReason.BAD_ARGUMENT, f"{what} {bound!r}: None or an int")
        if self.start is not None and not isinstance(self.start, LogPosition):
            raise log_error(LogReason.BAD_ARGUMENT, f"start {self.start!r}: None or a LogPosition")

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
    ``copy``: its path under the second root of a dual log.  ``last_lsn``: the lsn
    before the next segment's first (``None`` for a writer's newest segment).
    """

    writer: str
    first_lsn: int
    path: Path
    may_be_writing: bool
    copy: Path | None = None
    last_lsn: int | None = None

    @property
    def paths(self) -> list[Path]:
        """Every copy's path, the first root's first."""
        return [self.path] if self.copy is None else [self.path, self.copy]


@dataclass(frozen=True)
class SegmentDecoded(Generic[T]):
    """What decoding one segment found (see :meth:`LogReader.decoded_sources`).

    ``found``: False when no copy of the file was there (offloaded or purged since
    listed); ``value``: what the decoder made of its records; ``damages``: what
    decoding skipped and no copy made good; ``repaired``: what the other copy made
    good; ``lsns``: the runs of lsns decoded.
    """

    found: bool
    value: T
    damages: tuple[Damage, ...] = ()
    repaired: tuple[Damage, ...] = ()
    lsns: tuple[tuple[int, int], ...] = ()


def decode_segment(segment: StagingSegment) -> SegmentContents | None:
    """Read a listed segment from its copies (``None``: gone since listed)."""
    return read_copies(segment.paths)


@dataclass(frozen=True)
class DecodedSources(Generic[T]):
    """:class:`LogSources` with the staging segments decoded by the caller.

    ``segments``: each segment no data set holds, with what its decoding produced; its
    records are not filtered by retention (drop those below ``retention``, as for the
    data sets).  ``plan`` can check that the records are whole (:meth:`ReadPlan.check`).
    """

    segments: list[tuple[StagingSegment, T]]
    datasets: list[Path]
    retention: dict[str, int]
    damage: list[Damage]
    plan: ReadPlan


@dataclass
class _DatasetFile:
    """A data set as listed: its name, the copies that exist, its verified footer."""

    writer: str
    first_lsn: int
    last_lsn: int
    paths: list[Path]
    meta: DatasetMeta | None = None
    problem: str | None = None


@dataclass
class _Read:
    """A segment as read: what decoding found in it."""

    segment: StagingSegment
    records: list[LogRecord]
    lsns: tuple[tuple[int, int], ...]
    damages: list[Damage]


@dataclass
class ReadPlan:
    """A read prepared: staging read, data sets' footers verified, the files known.

    :meth:`check` says whether the records a recovery needs are whole, before
    :meth:`batches` yields any.
    """

    reader: LogReader
    selection: ReadFilter
    retention: RetentionState
    staging: list[_Read]
    datasets: list[_DatasetFile]
    ends: dict[str, WriterEnd]
    #: What listing and reading found that loses nothing (torn tails, repairs).
    notes: Coverage = field(default_factory=Coverage)
    strict: bool = False

    @property
    def records_in_staging(self) -> int:
        return sum(len(r.records) for r in self.staging)

    def check(
        self,
        *,
        starts: Mapping[str, int] | None,
        needed_seq: Mapping[str, int] | None,
        verify: bool = True,
    ) -> Coverage:
        """Whether every writer's records a recovery needs are here.

        ``starts``: per writer, the last lsn the recovery's SRDS already covers (its
        ``positions``; ``None``: every writer from lsn 1).  ``needed_seq``: per
        structure recovered, the lowest seq needed (records retention deleted below it
        are not needed); ``None``: the log as it stands, what retention deleted is not
        missing.
        ``verify`` reads every data set the recovery will read, every page checked, so
        that a damaged one is known now and not half way through a replay.
        """
        if verify:
            for dataset in self.datasets:
                if dataset.meta is not None and self._needed(dataset.meta, needed_seq):
                    self.reader._verify(dataset)
        spans: list[SourceSpan] = []
        for read in self.staging:
            notes = tuple(str(d) for d in read.damages)
            spans.append(
                SourceSpan(
                    read.segment.writer,
                    str(read.segment.path),
                    read.segment.first_lsn,
                    read.segment.last_lsn,
                    read.lsns,
                    notes,
                )
            )
        for dataset in self.datasets:
            meta = dataset.meta
            present = meta.lsn_ranges if meta is not None else ()
            notes = tuple(meta.damage) if meta is not None else (f"unreadable: {dataset.problem}",)
            spans.append(
                SourceSpan(
                    dataset.writer,
                    str(dataset.paths[0]),
                    dataset.first_lsn,
                    dataset.last_lsn,
                    tuple(present),
                    notes,
                    exact=True,
                )
            )
        gaps, fine = find_gaps(
            spans=spans,
            ends=self.ends,
            purged=self.retention.purged,
            starts=starts,
            needed_seq=needed_seq,
            where={w: str(self.reader.writer_dir(w)) for w in self.reader.writers()},
        )
        return Coverage(
            gaps=gaps,
            skipped=[*self.notes.skipped, *fine],
            repaired=list(self.notes.repaired),
            files=len(self.staging) + len(self.datasets),
        )

    @staticmethod
    def _needed(meta: DatasetMeta, needed_seq: Mapping[str, int] | None) -> bool:
        if needed_seq is None:
            return True
        return any(
            high >= needed_seq[name]
            for name, (_, high) in meta.ranges.items()
            if name in needed_seq
        )

    def batches(self) -> Iterator[list[LogRecord]]:
        """The selected records in merged order, as lists (cheaper to consume in bulk)."""
        selection = self.selection
        points = self.retention.points
        buffer = self.reader._prepare([r.records for r in self.staging], selection, points)
        buffer.sort()
        wanted = [d for d in self.datasets if d.meta is not None and _wanted(d.meta, selection)]
        pending = sorted(wanted, key=lambda d: _min_seq(d.meta, selection))  # type: ignore[arg-type]
        index = 0
        stop = _Stop(selection)
        while True:
            watermark = (
                _min_seq(pending[index].meta, selection)  # type: ignore[arg-type]
                if index < len(pending)
                else _INFINITY
            )
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
            while (
                index < len(pending) and _min_seq(pending[index].meta, selection) <= watermark  # type: ignore[arg-type]
            ):
                records = self.reader._load_dataset(pending[index], selection, self.strict)
                buffer.extend(self.reader._prepare([records], selection, points))
                index += 1
            buffer.sort()

    def records(self) -> Iterator[LogRecord]:
        for batch in self.batches():
            yield from batch

    def last_seq(self, structure: str) -> int:
        """The highest seq of ``structure`` in the files planned (footers and staging)."""
        highest = max(
            (
                d.meta.ranges[structure][1]
                for d in self.datasets
                if d.meta is not None and structure in d.meta.ranges
            ),
            default=0,
        )
        for read in self.staging:
            for record in read.records:
                if record.structure == structure and record.seq > highest:
                    highest = record.seq
        return highest


class LogReader:
    """Reads a stream's records in merged order; create it with ``LogStream.reader``.

    One reader may run several reads one after another; :attr:`damage` is the damage
    the latest read found (and nothing made good).
    """

    def __init__(self, layouts: list[Layout], space: LogSpace, retention: Retention) -> None:
        self._layouts = layouts
        self._layout = layouts[0]
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
        yield from self.plan(selection, strict=strict).batches()

    def plan(self, selection: ReadFilter | None = None, *, strict: bool = False) -> ReadPlan:
        """List the files, read staging and verify the data sets' footers: a read ready
        to be checked (:meth:`ReadPlan.check`) and then yielded (:meth:`ReadPlan.batches`)."""
        if strict is not True and strict is not False:  # "no" would stop at any damage
            raise log_error(LogReason.BAD_ARGUMENT, f"strict must be True or False, not {strict!r}")
        selection = selection if selection is not None else ReadFilter()
        self.damage = []
        notes = Coverage()
        retention = self._retention.state()
        segments, datasets = self._list(strict)
        ends = self._ends(segments, datasets)
        read: list[_Read] = []
        for segment in segments:
            if selection.writers is not None and segment.writer not in selection.writers:
                continue
            contents = decode_segment(segment)
            if contents is None:
                continue  # offloaded or purged since listed
            damages = self._judge(
                segment, list(contents.damages), list(contents.repaired), ends, notes, strict
            )
            read.append(_Read(segment, contents.records, _runs(contents.records), damages))
        read, datasets = self._settle(read, datasets, strict)
        return ReadPlan(self, selection, retention, read, datasets, ends, notes, strict)

    def sources(self) -> LogSources:
        """The stream's staging records and data set files, without reading the data sets.

        The Spark pipeline reads the data sets itself, in parallel, and the staging
        records (which only this reader can decode) from here; the split is the same one
        :meth:`batches` makes, so the two see the same records.
        """
        plan = self.plan()
        points = plan.retention.points
        records = self._prepare([r.records for r in plan.staging], ReadFilter(), points)
        records.sort()
        paths = [d.meta.path for d in plan.datasets if d.meta is not None]
        return LogSources(records, paths, points, list(self.damage))

    def decoded_sources(
        self, decode: Callable[[list[StagingSegment]], list[SegmentDecoded[T]]]
    ) -> DecodedSources[T]:
        """The stream's sources, with the staging segments decoded by ``decode``.

        For a reader that decodes segments its own way, elsewhere or in parallel (the
        Spark pipeline decodes them in its Python workers, each into a Parquet file).
        ``decode`` gets every segment no data set held when listed, and returns, for
        each in order, whether the file was still there, what its decoding produced,
        the damage it found and the lsns it read.  This reader keeps to its own rules
        as :meth:`plan` does: damage is judged the same way, and a segment that a data
        set written meanwhile holds is dropped in favour of the data set.  The result's
        ``plan`` checks continuity as for an in-process read.
        """
        self.damage = []
        notes = Coverage()
        retention = self._retention.state()
        segments, datasets = self._list(strict=False)
        ends = self._ends(segments, datasets)
        results = decode(segments)
        read: list[_Read] = []
        values: dict[int, T] = {}
        for segment, result in zip(segments, results, strict=True):
            if not result.found:
                continue  # offloaded or purged since listed
            damages = self._judge(
                segment, list(result.damages), list(result.repaired), ends, notes, False
            )
            values[id(segment)] = result.value
            read.append(_Read(segment, [], tuple(result.lsns), damages))
        read, datasets = self._settle(read, datasets, strict=False)
        plan = ReadPlan(self, ReadFilter(), retention, read, datasets, ends, notes)
        return DecodedSources(
            [(r.segment, values[id(r.segment)]) for r in read],
            [d.meta.path for d in datasets if d.meta is not None],
            retention.points,
            list(self.damage),
            plan,
        )

    def last_seq(self, structure: str) -> int:
        """The highest seq any record of ``structure`` carries (0 if none).

        Reads data set footers and staging only: no data set is opened.
        """
        return self.plan(ReadFilter(structures={structure})).last_seq(structure)

    def positions(self) -> dict[str, int]:
        """Every writer's last lsn in the files now (reads each writer's newest segment).

        A structure checkpoint records these before it quiesces the structure: every
        change after its copy is logged at a higher lsn by its writer.
        """
        found: dict[str, int] = {}
        datasets = self._dataset_names()
        for writer in self.writers():
            last = max((d.last_lsn for d in datasets if d.writer == writer), default=0)
            segments = self._segments_of(writer)
            if segments:
                first, paths = segments[-1]
                contents = read_copies(paths)
                last = max(last, first - 1)
                if contents is not None:
                    last = max(last, contents.last_lsn)
            found[writer] = last
        return found

    def high_water(self, structure: str) -> int:
        """The highest seq of ``structure`` the log holds, read cheaply.

        From each writer's state file (the highest seq it had logged when it last
        switched segments) and its current segment; a writer without a state file is
        read whole.  Used to tell whether a structure that exists is behind its log.
        """
        highest = 0
        datasets = self._dataset_names()
        for writer in self.writers():
            state = self._state(writer)
            segments = self._segments_of(writer)
            if state is not None:
                highest = max(highest, int(dict(state.get("observed", {})).get(structure, 0)))
                since = int(state.get("segment", 0))
                segments = [item for item in segments if item[0] >= since] or segments[-1:]
            else:
                for dataset in datasets:
                    if dataset.writer == writer:
                        meta = self._dataset_meta(dataset)
                        if meta is not None and structure in meta.ranges:
                            highest = max(highest, meta.ranges[structure][1])
            for _, paths in segments:
                contents = read_copies(paths)
                if contents is None:
                    continue
                for record in contents.records:
                    if record.structure == structure and record.seq > highest:
                        highest = record.seq
        return highest

    # -- listing -------------------------------------------------------------------------

    def writers(self) -> list[str]:
        """Every writer with a staging directory under any root."""
        return sorted({w for layout in self._layouts for w in layout.writers()})

    def writer_dir(self, writer: str) -> Path:
        return self._layout.writer_dir(writer)

    def _segments_of(self, writer: str) -> list[tuple[int, list[Path]]]:
        return segment_copies(self._layouts, writer)

    def _dataset_names(self) -> list[_DatasetFile]:
        """Every data set under any root, by name, with the paths of its copies."""
        found: dict[str, _DatasetFile] = {}
        for layout in self._layouts:
            for name, path in layout.dataset_files():
                item = found.get(path.name)
                if item is None:
                    found[path.name] = _DatasetFile(
                        name.writer, name.first_lsn, name.last_lsn, [path]
                    )
                else:
                    item.paths.append(path)
        return [found[name] for name in sorted(found)]

    def _list(self, strict: bool) -> tuple[list[StagingSegment], list[_DatasetFile]]:
        """The staging segments to read (those no data set holds), and the data sets.

        Segments are listed before data sets: an offload writes its data set before it
        deletes the segments, so a segment that vanishes before it is read is found in
        a data set listed after it.
        """
        listed = {w: self._segments_of(w) for w in self.writers()}
        datasets = self._dataset_names()
        for dataset in datasets:
            self._footer(dataset, strict)
        covered = _covered(datasets)
        segments: list[StagingSegment] = []
        for writer, found in listed.items():
            alive = owner_alive(self._layout.writer_dir(writer)) if found else False
            for number, (first_lsn, paths) in enumerate(found):
                if _lsn_in(first_lsn, covered.get(writer, ())):
                    continue
                newest = number == len(found) - 1
                last = None if newest else found[number + 1][0] - 1
                copy = paths[1] if len(paths) > 1 else None
                segments.append(
                    StagingSegment(writer, first_lsn, paths[0], alive and newest, copy, last)
                )
        return segments, datasets

    def _settle(
        self, read: list[_Read], datasets: list[_DatasetFile], strict: bool
    ) -> tuple[list[_Read], list[_DatasetFile]]:
        """The segments read that no data set holds now, and every data set.

        A data set written meanwhile holds segments that vanished before they were
        read, or were read just before they went: take the data set, drop those
        segments.
        """
        known = {d.paths[0].name for d in datasets}
        for dataset in self._dataset_names():
            if dataset.paths[0].name not in known:
                self._footer(dataset, strict)
                datasets.append(dataset)
        covered = _covered(datasets)
        kept = [
            r for r in read if not _lsn_in(r.segment.first_lsn, covered.get(r.segment.writer, ()))
        ]
        return kept, datasets

    def _ends(
        self, segments: list[StagingSegment], datasets: list[_DatasetFile]
    ) -> dict[str, WriterEnd]:
        """Where each writer with a state file says its records end."""
        ends: dict[str, WriterEnd] = {}
        for writer in self.writers():
            try:
                state = self._state(writer, raising=True)
            except LogError as exc:
                ends[writer] = WriterEnd(writer, unknown=f"its state file is damaged ({exc})")
                continue
            if state is None:
                continue
            segment = int(state["segment"])
            found = any(s.writer == writer and s.first_lsn >= segment for s in segments) or any(
                d.writer == writer and d.last_lsn >= segment for d in datasets
            )
            ends[writer] = WriterEnd(
                writer,
                closed=bool(state.get("closed")),
                last_lsn=int(state.get("last_lsn", 0)),
                segment=segment,
                segment_found=found,
                segment_path=str(self._layout.writer_dir(writer) / segment_name(segment)),
                lost=tuple((int(a), int(b), str(why)) for a, b, why in state.get("lost", [])),
            )
        return ends

    def _state(self, writer: str, *, raising: bool = False) -> dict[str, Any] | None:
        """A writer's state file from the first root where it verifies."""
        problem: LogError | None = None
        for layout in self._layouts:
            try:
                state = read_state(layout.writer_state(writer))
            except LogError as exc:
                problem = problem or exc
                continue
            if state is not None:
                return state
        if problem is not None and raising:
            raise problem
        return None

    # -- judging damage ------------------------------------------------------------------

    def _judge(
        self,
        segment: StagingSegment,
        damages: list[Damage],
        repaired: list[Damage],
        ends: Mapping[str, WriterEnd],
        notes: Coverage,
        strict: bool,
    ) -> list[Damage]:
        """Sort a segment's damage: a frame being written, a torn tail, or damage.

        Returns the damage that loses records (reported); the rest goes to ``notes``.
        """
        for damage in repaired:
            notes.repaired.append(f"{damage} (made good from the other copy)")
            logger.info("log damage made good from the other copy: %s", damage)
        end = ends.get(segment.writer)
        newest = segment.last_lsn is None
        kept: list[Damage] = []
        for damage in damages:
            if damage.at_tail and newest and segment.may_be_writing:
                continue  # the frame a live writer is appending right now
            if damage.at_tail and newest and not (end is not None and end.closed):
                notes.skipped.append(
                    f"{damage}: the torn last frame of writer {segment.writer}, which did "
                    "not close cleanly (never acknowledged)"
                )
                continue
            kept.append(damage)
            self._report(damage, strict)
        if kept and segment.may_be_writing and any(not d.at_tail for d in kept):
            with contextlib.suppress(OSError):  # ask the live writer to leave this segment
                touch(self._layout.roll_request(segment.writer))
        return kept

    # -- data sets -----------------------------------------------------------------------

    def _dataset_meta(self, dataset: _DatasetFile) -> DatasetMeta | None:
        for path in dataset.paths:
            meta, _ = self._space.dataset_meta_or_problem(path)
            if meta is not None:
                return meta
        return None

    def _footer(self, dataset: _DatasetFile, strict: bool) -> None:
        """Verify a data set's footer, from the first copy where it verifies."""
        problems = []
        for path in dataset.paths:
            meta, problem = self._space.dataset_meta_or_problem(path)
            if meta is not None:
                dataset.meta = meta
                return
            problems.append(f"{path}: {problem}")
        dataset.problem = "; ".join(problems)
        if any(path.exists() for path in dataset.paths):
            self._report(
                Damage(str(dataset.paths[0]), 0, DamageReason.BAD_DATASET, dataset.problem, 0),
                strict,
            )

    def _verify(self, dataset: _DatasetFile) -> None:
        """Read a data set whole (every page checked), from a copy that reads."""
        problems = []
        for path in dataset.paths:
            try:
                verify_dataset(path)
            except FileNotFoundError:
                problems.append(f"{path}: gone")
                continue
            except (OSError, ValueError, KeyError, arrow_exception()) as exc:
                problems.append(f"{path}: {exc}")
                continue
            if dataset.meta is not None and dataset.meta.path != path:
                dataset.meta = replace(dataset.meta, path=path)
            return
        dataset.problem = "; ".join(problems)
        dataset.meta = None
        self._report(
            Damage(str(dataset.paths[0]), 0, DamageReason.BAD_DATASET, dataset.problem, 0),
            strict=False,
        )

    def _load_dataset(
        self, dataset: _DatasetFile, selection: ReadFilter, strict: bool
    ) -> list[LogRecord]:
        problems = []
        assert dataset.meta is not None
        for path in [dataset.meta.path, *(p for p in dataset.paths if p != dataset.meta.path)]:
            try:
                return read_dataset(
                    path,
                    from_seq=selection.lowest_seq or None,
                    meta=replace(dataset.meta, path=path),
                )
            except FileNotFoundError:
                problems.append(f"{path}: gone")
            except (OSError, ValueError, KeyError, arrow_exception()) as exc:
                problems.append(f"{path}: {exc}")
        if all(p.endswith(": gone") for p in problems):
            return []  # purged since listed: below the retention point
        self._report(
            Damage(str(dataset.paths[0]), 0, DamageReason.BAD_DATASET, "; ".join(problems), 0),
            strict,
        )
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


def _runs(records: list[LogRecord]) -> tuple[tuple[int, int], ...]:
    return tuple(lsn_runs([r.lsn for r in records]))


def _covered(datasets: list[_DatasetFile]) -> dict[str, list[tuple[int, int]]]:
    """Per writer, the lsn spans its data sets hold (by name: a damaged one still does)."""
    covered: dict[str, list[tuple[int, int]]] = {}
    for dataset in datasets:
        covered.setdefault(dataset.writer, []).append((dataset.first_lsn, dataset.last_lsn))
    return {w: merge_runs(spans) for w, spans in covered.items()}


def _lsn_in(lsn: int, spans: Collection[tuple[int, int]]) -> bool:
    """Whether a segment starting at ``lsn`` lies in a data set's span.

    Offload moves whole segments, so a segment is in a data set entirely or not at all.
    """
    return any(low <= lsn <= high for low, high in spans)


def _wanted(meta: DatasetMeta, selection: ReadFilter) -> bool:
    if selection.writers is not None and meta.writer not in selection.writers:
        return False
    ranges = _selected_ranges(meta, selection)
    if not ranges:
        return False
    return max(high for _, high in ranges) >= selection.lowest_seq


def _selected_ranges(meta: DatasetMeta, selection: ReadFilter) -> list[tuple[int, int]]:
    if selection.structures is None:
        return list(meta.ranges.values())
    return [r for name, r in meta.ranges.items() if name in selection.structures]


def _min_seq(meta: DatasetMeta, selection: ReadFilter) -> int:
    return min((low for low, _ in _selected_ranges(meta, selection)), default=0)
