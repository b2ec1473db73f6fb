"""One writer's staging segment files: reading them whole, appending to the open one.

A writer appends to exactly one segment at a time and closes it (synced) when it
reaches the configured size; closed segments never change again until offload or
retention removes them.  Readers may read any segment at any time, including the one
being appended to: they see a prefix of it, possibly ending in a frame being written,
which decodes as a truncated tail and is not yielded (it is reported only if the
segment is not the writer's open one; see ``reader.py``).

Damaged bytes are never destroyed: before a writer cuts a damaged tail off the
segment it reopens, it copies the tail to the stream's ``damaged/`` directory.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from sharedq.log.codec import SEGMENT_HEADER, Damage, check_header, decode_frames, gc_paused
from sharedq.log.layout import fsync_dir, parse_segment_name
from sharedq.log.records import LogRecord

_sync = getattr(os, "fdatasync", os.fsync)

SeqRanges = dict[str, tuple[int, int]]
"""Per structure name, the lowest and highest seq of a file's records."""


@dataclass
class SegmentContents:
    """What reading a segment found: its sound records and the damage after them."""

    path: Path
    first_lsn: int
    records: list[LogRecord]
    #: Offset just past the last sound frame: where a writer may append again.
    good_end: int
    size: int
    damage: Damage | None


def read_segment(path: Path) -> SegmentContents:
    """Read and decode a whole segment; damage stops the decoding but is not raised."""
    first_lsn = parse_segment_name(path.name)
    buf = path.read_bytes()
    damage = check_header(buf, str(path))
    if damage is not None:
        return SegmentContents(path, first_lsn or 0, [], 0, len(buf), damage)
    with gc_paused():
        records, good_end, damage = decode_frames(buf, str(path))
    return SegmentContents(path, first_lsn or 0, records, good_end, len(buf), damage)


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
    """The segment a writer appends to.  Not thread-safe: the writer serializes calls."""

    def __init__(self, path: Path, first_lsn: int, fd: int, size: int) -> None:
        self.path = path
        self.first_lsn = first_lsn
        self._fd = fd
        #: Bytes in the file, header included.
        self.size = size
        #: The last lsn written to it (``first_lsn - 1`` while empty).
        self.last_lsn = first_lsn - 1
        #: A failed write could not be undone: nothing more may be appended.
        self.broken = False

    @classmethod
    def create(cls, path: Path, first_lsn: int) -> SegmentFile:
        """A new, empty segment (just the header); its directory entry is synced.

        The header is written under a hidden name that is then renamed, so that no
        segment is ever seen without its header, even after a crash.
        """
        tmp = path.with_name(f".{path.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        try:
            _write_all(fd, SEGMENT_HEADER)
            _sync(fd)
            os.rename(tmp, path)
        except BaseException:
            os.close(fd)
            raise
        fsync_dir(path.parent)
        return cls(path, first_lsn, fd, len(SEGMENT_HEADER))

    @classmethod
    def reopen(cls, contents: SegmentContents) -> SegmentFile:
        """Append again to a segment read by :func:`read_segment`, after its last sound frame.

        The caller has set any damaged tail aside (:func:`set_aside_tail`); here the
        file is cut to ``good_end`` (rewriting the header if even that was damaged)
        so that no record is ever appended after garbage.
        """
        path = contents.path
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            size = contents.good_end
            if size < len(SEGMENT_HEADER):
                os.ftruncate(fd, 0)
                _write_all(fd, SEGMENT_HEADER)
                size = len(SEGMENT_HEADER)
            elif size < contents.size:
                os.ftruncate(fd, size)
            _sync(fd)
        except BaseException:
            os.close(fd)
            raise
        segment = cls(path, contents.first_lsn, fd, size)
        if contents.records:
            segment.last_lsn = contents.records[-1].lsn
        return segment

    def write(self, frame: bytes) -> None:
        """Append one frame.  On failure the file is cut back so no torn frame stays."""
        try:
            _write_all(self._fd, frame)
        except OSError:
            try:
                os.ftruncate(self._fd, self.size)
            except OSError:
                self.broken = True
            raise
        self.size += len(frame)

    def sync(self) -> None:
        _sync(self._fd)

    def close(self, *, sync: bool = True) -> None:
        if self._fd < 0:
            return
        try:
            if sync:
                _sync(self._fd)
        finally:
            os.close(self._fd)
            self._fd = -1

    @property
    def closed(self) -> bool:
        return self._fd < 0


def _write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)
    if written != len(data):  # rare for regular files: a signal or a full disk
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view) :]


def set_aside_tail(contents: SegmentContents, damaged_dir: Path, writer: str) -> Path:
    """Copy the bytes after a segment's last sound frame to ``damaged_dir``; return the copy."""
    target = damaged_dir / f"{writer}.{contents.path.name}.tail-at-{contents.good_end}"
    with open(contents.path, "rb") as src, open(target, "wb") as dst:
        src.seek(contents.good_end)
        shutil.copyfileobj(src, dst)
        dst.flush()
        os.fsync(dst.fileno())
    fsync_dir(damaged_dir)
    return target


def set_aside_file(path: Path, damaged_dir: Path, writer: str) -> Path:
    """Move a whole damaged file to ``damaged_dir`` (after its sound part was kept)."""
    target = damaged_dir / f"{writer}.{path.name}"
    os.replace(path, target)
    fsync_dir(damaged_dir)
    return target
