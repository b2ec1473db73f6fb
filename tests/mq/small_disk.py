"""A small tmpfs for a recovery log, and a way to fill it so that the next log write fails.

The tests that need a log whose writes fail put the log on a tmpfs of a few MiB of
their own (``mount -t tmpfs``: run as root, or inside ``unshare -rm``, which gives a
user namespace where the mount is allowed) and fill it with a file until the file
system refuses another byte: the log writer then fails with ``IO_FAILED``, its
``OSError`` saying ``ENOSPC``, exactly as on a disk that filled up.

One subtlety: a file system allocates whole pages, so an append that fits in the
unused tail of the last page of a segment still succeeds on a full disk.  Before
filling, :meth:`SmallDisk.fill` therefore appends one ``STATISTICS`` record to each
writer's open segment, sized so that the segment ends exactly at a page boundary:
from then on every record, however small, needs a page the disk no longer has.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from sharedq.log import LogStream, LogWriter, RecordType
from sharedq.log.segment import read_segment

PAGE = os.sysconf("SC_PAGE_SIZE")
#: The tmpfs's size: room for the logs of a test, and quick to fill.
SIZE = 8 << 20

NOT_ROOT = (
    "the log-failure tests mount a tmpfs of their own and must run as root; as another "
    "user run them in a user and mount namespace: unshare -rm .venv/bin/python -m pytest ..."
)


class SmallDisk:
    """A mounted tmpfs; ``fill()`` makes it full, ``free()`` makes room again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.filler = path / "filler"

    def __repr__(self) -> str:
        return f"<SmallDisk {self.path} free={self.free_bytes()}>"

    def free_bytes(self) -> int:
        stats = os.statvfs(self.path)
        return stats.f_bavail * stats.f_frsize

    def fill(self, writers: Iterable[tuple[LogStream, LogWriter]] = ()) -> None:
        """Align each writer's open segment to a page, then fill the disk to the brim."""
        for stream, writer in writers:
            align(stream, writer)
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            for chunk in (1 << 20, 64 << 10, PAGE, 512, 1):
                block = bytes(chunk)
                while True:
                    try:
                        os.write(fd, block)
                    except OSError as error:
                        assert error.errno == errno.ENOSPC, error
                        break
        finally:
            os.close(fd)
        assert self.free_bytes() == 0

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)
        assert self.free_bytes() > 1 << 20


def open_segment(stream: LogStream, writer: LogWriter) -> Path:
    segments = stream.layout.segments(writer.name)
    assert segments, f"writer {writer.name} has no segment"
    return segments[-1][1]


def _end(path: Path) -> int:
    """Where the writer's next frame goes: the end of the file, or of the frames of a
    segment with room allocated ahead (``sharedq.log.segment``)."""
    contents = read_segment(path)
    return contents.good_end if contents.preallocated else path.stat().st_size


def align(stream: LogStream, writer: LogWriter) -> None:
    """Append a record that makes the writer's open segment end at a page boundary.

    A segment with room allocated ahead is then cut there, as if the writer had used
    up its room: the disk filled next, its next frame needs a page it does not have."""
    path = open_segment(stream, writer)
    for _ in range(8):
        size = _end(path)
        if size % PAGE == 0:
            if read_segment(path).preallocated:
                os.truncate(path, size)
            return
        probe = 300
        writer.log_event(RecordType.STATISTICS, payload=bytes(probe))
        overhead = _end(path) - size - probe
        size = _end(path)
        gap = -size % PAGE
        while gap - overhead < 256:  # a payload of 256 bytes up keeps its overhead
            gap += PAGE
        writer.log_event(RecordType.STATISTICS, payload=bytes(gap - overhead))
        path = open_segment(stream, writer)
    raise AssertionError(f"could not align {path} to a page")


def _run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True, text=True)


@contextlib.contextmanager
def small_disk(size: int = SIZE) -> Iterator[SmallDisk]:
    """Mount a private tmpfs of ``size`` bytes; unmounted (and removed) at the end."""
    if os.geteuid() != 0:
        pytest.fail(NOT_ROOT)
    path = Path(tempfile.mkdtemp(prefix="sharedq-small-disk-"))
    try:
        _run("mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path))
    except (OSError, subprocess.CalledProcessError) as error:
        path.rmdir()
        detail = getattr(error, "stderr", "") or error
        pytest.fail(f"cannot mount a tmpfs at {path}: {detail}; {NOT_ROOT}")
    try:
        yield SmallDisk(path)
    finally:
        try:
            _run("umount", str(path))
        except subprocess.CalledProcessError:
            _run("umount", "-l", str(path))  # a log file still open: detach it
        path.rmdir()
