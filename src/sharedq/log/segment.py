"""One writer's staging segment files: reading them whole, appending to the open one.

A writer appends to exactly one segment at a time and closes it (synced) when it
reaches the configured size; closed segments never change again until offload or
retention removes them.  Readers may read any segment at any time, including the one
being appended to: they see a prefix of it, possibly ending in a frame being written,
which decodes as a damaged tail and is not yielded (whether it counts as damage is
the reader's call; see ``reader.py``).

With dual logging a segment has two copies, one under each of the stream's two
roots, written frame by frame alike (:class:`SegmentFile` holds both);
:func:`read_copies` reads the first and, only when it is damaged or missing, the
second, and merges the sound records of both by lsn, so that damage in one copy
costs nothing the other still holds.

Damaged bytes are never destroyed: before a writer cuts a torn tail off the segment
it reopens, it copies the tail to the stream's ``damaged/`` directory.

Preallocation.  The open segment has room allocated ahead of its last frame
(``posix_fallocate``, :data:`PREALLOCATE_BYTES` at a time, never past the segment's
size), and frames are written in place (``pwrite``) rather than appended: the file's
size does not change with each frame, so a sync makes only the data durable, not a
new size (on ext4 an append's ``fdatasync`` commits the journal as well; measured on
the development disk, 200 bytes synced take about a quarter less in allocated room).
The header carries :data:`~sharedq.log.codec.PREALLOCATED_MARK` while the room is
there, so that readers take the zeros after the last frame for room
(:func:`~sharedq.log.codec.decode_frames`).  Closing the segment cuts the room off
and, once that is durable, clears the mark: a closed segment is as it always was.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from sharedq.log.codec import (
    PREALLOCATED_HEADER,
    SEGMENT_HEADER,
    SEGMENT_HEADER_BYTES,
    Damage,
    check_header,
    decode_frames,
    gc_paused,
    preallocated,
    resync,
)
from sharedq.log.files import make_dirs, open_fd, open_new
from sharedq.log.groupsync import count_syncs
from sharedq.log.layout import fsync_dir, parse_segment_name
from sharedq.log.records import LogRecord

_sync = getattr(os, "fdatasync", os.fsync)
_pwrite = os.pwrite
_allocate = getattr(os, "posix_fallocate", None)

#: How much room a writer allocates ahead of its open segment's last frame at a time.
PREALLOCATE_BYTES = 64 * 1024
#: What ``posix_fallocate`` fails with where a file system cannot allocate ahead: the
#: segment is then appended to as before.
_CANNOT_ALLOCATE = frozenset({errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS})

SeqRanges = dict[str, tuple[int, int]]
"""Per structure name, the lowest and highest seq of a file's records."""


@dataclass
class SegmentContents:
    """What reading a segment found: its sound records and the damage among them.

    ``damages`` lists every place reading had to skip, in file order; the last one may
    be a *tail* (nothing sound after it).  When the records were merged from two
    copies, ``repaired`` lists the damage of either copy that the other made good and
    ``damages`` only what neither copy holds.
    """

    path: Path
    first_lsn: int
    records: list[LogRecord]
    #: Offset just past the last sound frame: where a writer may append again.
    good_end: int
    size: int
    damages: list[Damage]
    repaired: list[Damage] = field(default_factory=list)
    #: The segment was open with room allocated ahead (the zeros after ``good_end``).
    preallocated: bool = False

    @property
    def tail(self) -> Damage | None:
        """The damage that runs to the end of the file, if there is one."""
        if self.damages and self.damages[-1].at_tail:
            return self.damages[-1]
        return None

    @property
    def damaged_within(self) -> bool:
        """Whether some damage has sound records after it (not only a tail)."""
        return any(not d.at_tail for d in self.damages)

    @property
    def last_lsn(self) -> int:
        """The highest lsn among the sound records (``first_lsn - 1`` without any)."""
        return max((r.lsn for r in self.records), default=self.first_lsn - 1)


def read_segment(path: Path) -> SegmentContents:
    """Read and decode a whole segment, skipping damage (reported, never raised)."""
    first_lsn = parse_segment_name(path.name) or 0
    buf = path.read_bytes()
    damage = check_header(buf, str(path))
    start = SEGMENT_HEADER_BYTES
    damages: list[Damage] = []
    if damage is not None:
        # A damaged header says nothing of the frames after it: look for them.
        resume = resync(buf, 0) if len(buf) >= SEGMENT_HEADER_BYTES else None
        damages.append(replace(damage, resumed_at=resume))
        if resume is None:
            return SegmentContents(path, first_lsn, [], 0, len(buf), damages)
        start = resume
    room = damage is None and preallocated(buf)
    with gc_paused():
        records, good_end, more = decode_frames(buf, str(path), start, zero_tail=room)
    return SegmentContents(
        path, first_lsn, records, good_end, len(buf), damages + more, preallocated=room
    )


def read_copies(paths: list[Path]) -> SegmentContents | None:
    """A segment read from the first of its copies, repaired from the others if need be.

    The first copy is read; the others only when it is damaged or missing.  Their
    sound records are merged by lsn (the same lsn is the same record in every copy).
    Damage is *repaired* when the merged records leave no lsn of the segment's span
    unaccounted for around it: no hole between the first lsn and the last, and for a
    tail, some copy holding records beyond it.  ``None`` when no copy exists.
    """
    found: list[SegmentContents] = []
    for index, path in enumerate(paths):
        try:
            contents = read_segment(path)
        except FileNotFoundError:
            continue
        if index == 0 and not contents.damages:
            return contents
        found.append(contents)
    if not found:
        return None
    if len(paths) == 1:
        return found[0]
    return _merge(found)


def _merge(copies: list[SegmentContents]) -> SegmentContents:
    first = copies[0]
    by_lsn: dict[int, LogRecord] = {}
    for contents in copies:
        for record in contents.records:
            by_lsn.setdefault(record.lsn, record)
    lsns = sorted(by_lsn)
    records = [by_lsn[lsn] for lsn in lsns]
    whole = not lsns or (lsns[0] == first.first_lsn and lsns[-1] - lsns[0] == len(lsns) - 1)
    highest = lsns[-1] if lsns else first.first_lsn - 1
    damages: list[Damage] = []
    repaired: list[Damage] = []
    for contents in copies:
        for damage in contents.damages:
            beyond = damage.at_tail and highest > contents.last_lsn
            fixed = whole and (not damage.at_tail or beyond)
            (repaired if fixed else damages).append(damage)
    # Keep one account of a tail both copies share: the first copy's.
    tails = [d for d in damages if d.at_tail]
    if len(tails) > 1:
        damages = [d for d in damages if not d.at_tail] + tails[:1]
    return SegmentContents(
        first.path,
        first.first_lsn,
        records,
        first.good_end,
        first.size,
        damages,
        repaired,
        first.preallocated,
    )


def seq_ranges(records: list[LogRecord]) -> SeqRanges:
    """Per structure, the lowest and highest seq among ``records``."""
    ranges: SeqRanges = {}
    for record in records:
        name, seq = record.structure, record.seq
        low_high = ranges.get(name)
        if low_high is None:
            ranges[name] = (seq, seq)
        elif seq < low_high[0]:
            ranges[name] = (seq, low_high[1])
        elif seq > low_high[1]:
            ranges[name] = (low_high[0], seq)
    return ranges


def merge_ranges(into: SeqRanges, more: SeqRanges) -> None:
    for name, (low, high) in more.items():
        have = into.get(name)
        into[name] = (low, high) if have is None else (min(have[0], low), max(have[1], high))


class SegmentFile:
    """The segment a writer appends to, in one or (dual logging) two copies.

    Not thread-safe: the writer serializes calls.  Every copy gets every frame, and a
    frame counts as written only when every copy took it, so the copies hold the same
    records.
    """

    def __init__(
        self,
        paths: list[Path],
        first_lsn: int,
        fds: list[int],
        size: int,
        *,
        preallocate: int = 0,
        limit: int = 0,
    ) -> None:
        self.paths = paths
        self.first_lsn = first_lsn
        self._fds = fds
        #: Bytes written to the file, header included (where the next frame goes).
        self.size = size
        #: Bytes the file holds: ``size`` plus the room allocated ahead.
        self.allocated = size
        #: Room allocated at a time (0: frames are appended, nothing allocated ahead).
        self._chunk = preallocate if _allocate is not None else 0
        #: Room is never allocated past this size (the writer's ``segment_bytes``; 0: no limit).
        self._limit = limit
        #: The header carries the preallocation mark (cleared at close).
        self._marked = self._chunk > 0
        #: The last lsn written to it (``first_lsn - 1`` while empty).
        self.last_lsn = first_lsn - 1
        #: A failed write could not be undone: nothing more may be appended.
        self.broken = False

    @property
    def path(self) -> Path:
        """The first copy's path (the one named in messages)."""
        return self.paths[0]

    @classmethod
    def create(
        cls, paths: list[Path], first_lsn: int, *, preallocate: int = 0, limit: int = 0
    ) -> SegmentFile:
        """A new, empty segment (just the header) in every copy; directories synced.

        The header is written under a hidden name that is then renamed, so that no
        segment is ever seen without its header, even after a crash.  ``preallocate``:
        room allocated ahead at a time (0: none), up to ``limit`` bytes of file.
        """
        fds: list[int] = []
        chunk = preallocate if _allocate is not None else 0
        header = PREALLOCATED_HEADER if chunk else SEGMENT_HEADER
        try:
            for path in paths:
                make_dirs(path.parent)
                tmp = path.with_name(f".{path.name}.tmp")
                fd = open_fd(tmp, os.O_WRONLY | os.O_TRUNC)
                fds.append(fd)
                _write_all(fd, header)
                _sync(fd)
                os.rename(tmp, path)
                fsync_dir(path.parent)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return cls(paths, first_lsn, fds, len(header), preallocate=chunk, limit=limit)

    @classmethod
    def reopen(
        cls, contents: SegmentContents, *, preallocate: int = 0, limit: int = 0
    ) -> SegmentFile:
        """Append again to a single-copy segment read by :func:`read_segment`.

        Appending resumes after its last sound frame: the caller has set a torn tail
        aside (:func:`set_aside_tail`); here the file is cut to ``good_end`` (rewriting
        the header if even that was torn), so that no record is ever appended after
        garbage, nor after room a previous owner had allocated.  With ``preallocate``
        the header gets the mark (the cut made durable first), and room is allocated
        ahead again as frames come.
        """
        path = contents.path
        chunk = preallocate if _allocate is not None else 0
        fd = os.open(path, os.O_WRONLY)
        try:
            size = contents.good_end
            if size < len(SEGMENT_HEADER):
                os.ftruncate(fd, 0)
                _write_all(fd, SEGMENT_HEADER)
                size = len(SEGMENT_HEADER)
            elif size < contents.size:
                os.ftruncate(fd, size)
            _sync(fd)
            if chunk and not contents.preallocated:
                _pwrite_all(fd, PREALLOCATED_HEADER, 0)
                _sync(fd)
            elif not chunk and contents.preallocated:
                _pwrite_all(fd, SEGMENT_HEADER, 0)
                _sync(fd)
        except BaseException:
            os.close(fd)
            raise
        segment = cls([path], contents.first_lsn, [fd], size, preallocate=chunk, limit=limit)
        segment.last_lsn = contents.last_lsn
        return segment

    def write(self, frame: bytes) -> None:
        """Write one frame after the last in every copy.  On failure each is cut back
        (room allocated ahead included), no torn frame stays."""
        at = self.size
        end = at + len(frame)
        if end > self.allocated and self._chunk:
            self._allocate(end)
        try:
            for fd in self._fds:
                if _pwrite(fd, frame, at) != len(frame):
                    _pwrite_all(fd, frame, at)  # rare: the rest (the same bytes again)
        except OSError:
            for fd in self._fds:
                try:
                    os.ftruncate(fd, at)
                except OSError:
                    self.broken = True
            self.allocated = at
            raise
        self.size = end
        if end > self.allocated:
            self.allocated = end

    def _allocate(self, end: int) -> None:
        """Room up to at least ``end``: the next :data:`PREALLOCATE_BYTES`, within the
        segment's size.  Where the file system cannot, frames are appended from now on."""
        assert _allocate is not None
        ahead = self.allocated + self._chunk
        target = max(end, min(ahead, self._limit) if self._limit else ahead)
        try:
            for fd in self._fds:
                _allocate(fd, self.allocated, target - self.allocated)
        except OSError as exc:
            if exc.errno in _CANNOT_ALLOCATE:
                self._chunk = 0
            # No room ahead (a full disk, say): the frame is written all the same, and
            # fails, if it must, as an append would.
            return
        self.allocated = target

    def sync(self) -> None:
        started = time.perf_counter()
        for fd in self._fds:
            _sync(fd)
        count_syncs(len(self._fds), time.perf_counter() - started)

    def close(self, *, sync: bool = True) -> None:
        """Close every copy (synced unless ``sync`` is false: a broken segment).

        A preallocated segment is cut to its frames and, once that is durable, its
        header's mark cleared, so that zeros at the end of a closed segment are
        damage again; a crash between the two leaves a mark and no room, which reads
        the same.
        """
        if not self._fds:
            return
        fds, self._fds = self._fds, []
        try:
            if sync:
                started = time.perf_counter()
                for fd in fds:
                    if self._marked or self.allocated > self.size:
                        os.ftruncate(fd, self.size)  # room in any copy
                    _sync(fd)
                    if self._marked:
                        _pwrite_all(fd, SEGMENT_HEADER, 0)
                        _sync(fd)
                self.allocated = self.size
                self._marked = False
                count_syncs(len(fds), time.perf_counter() - started)
        finally:
            for fd in fds:
                os.close(fd)

    @property
    def closed(self) -> bool:
        return not self._fds


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    written = os.pwrite(fd, data, offset)
    if written != len(data):  # rare for regular files: a signal or a full disk
        view = memoryview(data)[written:]
        while view:
            offset += written
            written = os.pwrite(fd, view, offset)
            view = view[written:]


def _write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)
    if written != len(data):  # rare for regular files: a signal or a full disk
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view) :]


def set_aside_tail(contents: SegmentContents, damaged_dir: Path, writer: str) -> Path:
    """Copy the bytes after a segment's last sound frame to ``damaged_dir``; return the copy.

    In a preallocated segment the copy starts where the tail does (after the room
    before it, if any) and ends with its last byte that is not zero: room is not kept.
    """
    tail = contents.tail
    start = contents.good_end if tail is None else max(contents.good_end, tail.offset)
    target = damaged_dir / f"{writer}.{contents.path.name}.tail-at-{start}"
    with open(contents.path, "rb") as src, open_new(target) as dst:
        src.seek(start)
        if contents.preallocated:
            dst.write(_ZEROS_AT_END.sub(b"", src.read()))
        else:
            shutil.copyfileobj(src, dst)
        dst.flush()
        os.fsync(dst.fileno())
    fsync_dir(damaged_dir)
    return target


_ZEROS_AT_END = re.compile(rb"\x00+\Z")


def set_aside_file(path: Path, damaged_dir: Path, writer: str) -> Path:
    """Move a whole damaged file to ``damaged_dir`` (after its sound part was kept)."""
    target = damaged_dir / f"{writer}.{path.name}"
    os.replace(path, target)
    fsync_dir(damaged_dir)
    return target
