"""Whether a writer's records are whole: the lsn bookkeeping behind every recovery.

Each writer numbers its records 1, 2, 3, ... without gaps (its lsns), across its
segments, its data sets and its restarts.  So a recovery can know, and not hope, that
it read everything it needs: for every writer, every lsn from where the recovery's
starting point stands to the writer's last one must be in some file the reader read,
or have been deleted by retention below what the recovery needs.  What is not is a
:class:`Gap`, attributed to the file that should hold it (a damaged frame in a segment,
a damaged or unreadable data set, a segment or data set that is gone) and to why.

Where each writer's records must start is the structure checkpoint's business: an
SRDS records every writer's last lsn at the moment it was taken, before the structure
was quiesced, so that every change after the SRDS is at a higher lsn (``positions``).
Where they end is the writer's: its state file says, when it closed cleanly, its last
lsn, and otherwise which segment it was appending to (a writer that did not close
cleanly ends at its last sound record: a torn frame after it was never acknowledged).

This module only computes; the reader (``reader.py``) gathers what it works on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sharedq.log.records import LSN_JUMP
from sharedq.log.retention import PurgedRange

Runs = list[tuple[int, int]]


@dataclass(frozen=True)
class SourceSpan:
    """One file's part of a writer's lsns: the span it stands for, the lsns it has.

    ``span`` is what the file is meant to hold (a segment: from its first lsn to the
    next segment's first less one; a data set: the span in its name); ``present`` the
    runs of lsns actually read from it (or, for a data set not loaded, its footer's);
    ``notes`` what is wrong with it (damage, unreadable), to name in a gap.
    """

    writer: str
    path: str
    first_lsn: int
    last_lsn: int | None
    present: tuple[tuple[int, int], ...]
    notes: tuple[str, ...] = ()
    #: Whether ``first_lsn..last_lsn`` is exactly what the file held (a data set).
    exact: bool = False


@dataclass(frozen=True)
class WriterEnd:
    """Where a writer's records end, from its state file.

    ``closed``: it closed cleanly, and ``last_lsn`` is its last record.  Otherwise
    ``segment`` is the first lsn of the segment it was appending to, which must exist
    (``segment_found``).  ``lost`` are ranges the writer itself found missing.
    ``unknown`` says why nothing is known (its state file is damaged).
    """

    writer: str
    closed: bool = False
    last_lsn: int = 0
    segment: int | None = None
    segment_found: bool = True
    #: Where that segment is (to name in a gap).
    segment_path: str = ""
    lost: tuple[tuple[int, int, str], ...] = ()
    unknown: str | None = None


@dataclass(frozen=True)
class Gap:
    """Lsns of one writer that a recovery needs and no file it read holds."""

    writer: str
    first_lsn: int
    #: ``None``: from ``first_lsn`` on, how many is unknown.
    last_lsn: int | None
    why: str
    files: tuple[str, ...] = ()
    #: ``False``: the lsns are a jump the writer made past records it could not account
    #: for (:data:`~sharedq.log.records.LSN_JUMP`); how many records they held is unknown.
    counted: bool = True

    @property
    def count(self) -> int | None:
        """How many records are missing, when that is known."""
        return None if self.last_lsn is None else self.last_lsn - self.first_lsn + 1

    def key(self) -> tuple[str, int, int | None]:
        return (self.writer, self.first_lsn, self.last_lsn)

    def __str__(self) -> str:
        if self.last_lsn is None:
            which = f"lsns {self.first_lsn} and on (how many is unknown)"
        elif self.last_lsn == self.first_lsn:
            which = f"lsn {self.first_lsn}"
        elif not self.counted:
            which = (
                f"lsns {self.first_lsn}..{self.last_lsn} (skipped by the writer: how many "
                "records they held is unknown)"
            )
        else:
            which = f"lsns {self.first_lsn}..{self.last_lsn} ({self.count} records)"
        where = f" [{', '.join(self.files)}]" if self.files else ""
        return f"writer {self.writer}: {which} missing: {self.why}{where}"


@dataclass
class Coverage:
    """What a check of the log found: what is missing, and what did not matter.

    ``gaps`` are records the caller needs that are not there: a recovery refuses on
    them unless an operator accepted them.  ``skipped`` says what was not read and why
    that loses nothing (damage in records the SRDS already covers, a torn last frame
    never acknowledged, lsns retention deleted below the point).  ``repaired`` is
    damage the other copy of a dual log made good.
    """

    gaps: list[Gap] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    files: int = 0

    @property
    def whole(self) -> bool:
        return not self.gaps


def merge_runs(runs: Iterable[tuple[int, int]]) -> Runs:
    """Runs of lsns merged where they touch or overlap, sorted."""
    out: Runs = []
    for low, high in sorted(runs):
        if out and low <= out[-1][1] + 1:
            if high > out[-1][1]:
                out[-1] = (out[-1][0], high)
        else:
            out.append((low, high))
    return out


def missing(start: int, end: int, present: Runs) -> Runs:
    """The runs of ``start..end`` that ``present`` (merged, sorted) leaves out."""
    out: Runs = []
    at = start
    for low, high in present:
        if high < at:
            continue
        if low > end:
            break
        if low > at:
            out.append((at, min(low - 1, end)))
        at = max(at, high + 1)
        if at > end:
            break
    if at <= end:
        out.append((at, end))
    return out


def purged_needed(purged: PurgedRange, needed_seq: Mapping[str, int] | None) -> bool:
    """Whether records retention deleted are ones a recovery needs.

    ``needed_seq``: per structure being recovered, the lowest seq it needs (the seq its
    SRDS covers plus one).  ``None``: a check of the log as it stands, where what
    retention deleted is not missing.
    """
    if needed_seq is None:
        return False
    return any(seq >= needed_seq[name] for name, seq in purged.seqs.items() if name in needed_seq)


def find_gaps(
    *,
    spans: list[SourceSpan],
    ends: Mapping[str, WriterEnd],
    purged: Iterable[PurgedRange],
    starts: Mapping[str, int] | None,
    needed_seq: Mapping[str, int] | None,
    where: Mapping[str, str] | None = None,
) -> tuple[list[Gap], list[str]]:
    """The gaps in every writer's records, and what was found missing but not needed.

    ``where``: each writer's staging directory, to name the file a missing range
    should be in.

    ``starts``: per writer, the last lsn already covered (an SRDS's position); a
    writer not named there needs every lsn from 1 (it began after the SRDS).  ``None``:
    every writer from lsn 1.
    """
    by_writer: dict[str, list[SourceSpan]] = {}
    for span in spans:
        by_writer.setdefault(span.writer, []).append(span)
    purged_by: dict[str, list[PurgedRange]] = {}
    for item in purged:
        purged_by.setdefault(item.writer, []).append(item)
    writers = sorted(set(by_writer) | set(ends) | set(purged_by) | set(starts or ()))
    gaps: list[Gap] = []
    fine: list[str] = []
    for writer in writers:
        found, harmless = _writer_gaps(
            writer,
            by_writer.get(writer, []),
            ends.get(writer),
            purged_by.get(writer, []),
            starts,
            needed_seq,
            (where or {}).get(writer),
        )
        gaps.extend(found)
        fine.extend(harmless)
    return gaps, fine


def _writer_gaps(
    writer: str,
    spans: list[SourceSpan],
    end: WriterEnd | None,
    purged: list[PurgedRange],
    starts: Mapping[str, int] | None,
    needed_seq: Mapping[str, int] | None,
    directory: str | None,
) -> tuple[list[Gap], list[str]]:
    present = merge_runs(run for span in spans for run in span.present)
    deleted_ok = merge_runs(
        (p.first_lsn, p.last_lsn) for p in purged if not purged_needed(p, needed_seq)
    )
    held = merge_runs([*present, *deleted_ok])
    highest = max((high for _, high in held), default=0)
    start = 1 if starts is None else starts.get(writer, 0) + 1
    last = highest
    fine: list[str] = []
    open_ended: Gap | None = None
    if end is not None:
        if end.unknown is not None:
            open_ended = Gap(writer, max(start, highest + 1), None, end.unknown)
        elif end.closed:
            last = max(last, end.last_lsn)
        elif end.segment is not None:
            last = max(last, end.segment - 1)
            if not end.segment_found and end.segment >= start:
                open_ended = Gap(
                    writer,
                    max(end.segment, highest + 1),
                    None,
                    "the segment the writer was appending to is missing",
                    (f"{writer}/{end.segment:020d}.seg",),
                )
    gaps: list[Gap] = []
    for low, high in missing(start, last, held):
        gaps.append(_attribute(writer, low, high, spans, purged, end, directory))
    if open_ended is not None and (not gaps or gaps[-1].last_lsn != open_ended.first_lsn - 1):
        gaps.append(open_ended)
    elif open_ended is not None:
        gaps[-1] = Gap(writer, gaps[-1].first_lsn, None, open_ended.why, open_ended.files)
    for low, high in missing(1, start - 1, held) if start > 1 and present else []:
        if low >= present[0][0]:
            fine.append(
                f"writer {writer}: lsns {low}..{high} missing, but before lsn {start}, "
                "where the records recovery needs begin"
            )
    for item in purged:
        if not purged_needed(item, needed_seq) and item.last_lsn >= start:
            fine.append(
                f"writer {writer}: lsns {item.first_lsn}..{item.last_lsn} deleted by retention, "
                f"all below what is needed (highest seqs {item.seqs})"
            )
    return gaps, fine


def _attribute(
    writer: str,
    low: int,
    high: int,
    spans: list[SourceSpan],
    purged: list[PurgedRange],
    end: WriterEnd | None,
    directory: str | None,
) -> Gap:
    """Say which files should hold lsns ``low..high`` and why they do not."""
    for first, last, why in end.lost if end is not None else ():
        if (first <= low and high <= last) or (first <= high and low <= last):
            return Gap(writer, low, high, why, counted=last - first + 1 < LSN_JUMP)
    for item in purged:
        if item.first_lsn <= high and low <= item.last_lsn:
            return Gap(
                writer,
                low,
                high,
                "deleted by retention (their seqs, up to "
                f"{max(item.seqs.values(), default=0)}, were below the retention point) but "
                "needed from the SRDS recovery starts from: an SRDS older than the log",
            )
    # A file whose span is known (a data set's name says it) or that is damaged may be
    # where the records were; a sound segment's span only says where the next begins.
    holders = [
        s
        for s in spans
        if (s.notes or s.exact)
        and s.first_lsn <= high
        and (s.last_lsn is None or low <= s.last_lsn)
    ]
    if holders:
        notes = [note for s in holders for note in s.notes]
        why = "; ".join(notes) if notes else "not in the file that should hold them"
        return Gap(writer, low, high, f"damaged: {why}", tuple(s.path for s in holders))
    if end is not None and end.closed and end.segment is not None and low >= end.segment:
        return Gap(
            writer,
            low,
            high,
            f"the writer closed cleanly at lsn {end.last_lsn}, but its last segment ends "
            "before (cut short)",
            (end.segment_path,),
        )
    expected = (f"{directory}/{low:020d}.seg",) if directory else ()
    return Gap(
        writer,
        low,
        high,
        f"no segment or data set holds them (a file is missing: a segment starting at lsn "
        f"{low}, or a data set {writer}.L{low:020d}-...)",
        expected,
    )
