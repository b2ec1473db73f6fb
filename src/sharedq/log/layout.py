"""Where a log stream keeps its files, and how they are named.

::

    <root>/STREAM                        the stream's name and format (JSON)
    <root>/RETENTION                     per structure, the seq below which records
                                         are deleted (JSON); absent: nothing deleted
    <root>/staging/<writer>/.lock        held (flock) by the writer's owner
    <root>/staging/<writer>/WRITER       the writer's state: the segment it appends to,
                                         whether it closed cleanly and at which lsn,
                                         lsns it knows are lost (a state file)
    <root>/staging/<writer>/ROLL         left by a reader that found damage in the
                                         writer's open segment: roll to a new one
    <root>/staging/<writer>/<lsn>.seg    staging segments, named by their first lsn
    <root>/datasets/<writer>.L<first>-<last>.parquet
                                         log data sets: one writer's records with
                                         lsns first..last, sorted by position
    <root>/damaged/...                   damaged bytes set aside, never deleted

With dual logging a second root (on another disk) holds the same files, written
alike; the ``STREAM`` file of the first names it.

Names never collide: each writer owns its staging directory and the data sets
carrying its name, and numbers them by its own lsns.  Numbers are zero-padded to 20
digits so that names sort as numbers.  Files being written are hidden (a leading dot)
until renamed into place, which also keeps Spark from reading them.
"""

from __future__ import annotations

import fcntl
import os
import re
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple, TextIO

from sharedq import names
from sharedq.clock import SYSTEM_CLOCK, Clock, retry_until
from sharedq.log.errors import LogReason, log_error
from sharedq.log.files import make_dirs, open_fd, open_lock

STREAM_FILE = "STREAM"
RETENTION_FILE = "RETENTION"
STAGING_DIR = "staging"
DATASETS_DIR = "datasets"
DAMAGED_DIR = "damaged"
LOCK_FILE = ".lock"
WRITER_STATE_FILE = "WRITER"
ROLL_FILE = "ROLL"
SEGMENT_SUFFIX = ".seg"
DATASET_SUFFIX = ".parquet"

#: Writer names: they appear in file names, so they are kept to safe characters, and
#: start with a letter or digit because Spark skips files starting with ``_`` or ``.``.
#: A writer is named after its server: the rule is :data:`sharedq.names.SERVER`.
WRITER_NAME = names.SERVER.pattern
_SEGMENT_NAME = re.compile(r"(\d{20})\.seg")
_DATASET_NAME = re.compile(r"(.+)\.L(\d{20})-(\d{20})\.parquet")


def check_writer_name(name: object) -> str:
    """``name`` if it keeps the server-name rule, else ``BAD_NAME`` saying how it breaks it."""
    problem = names.SERVER.problem(name, kind="writer name")
    if problem is not None:
        raise log_error(LogReason.BAD_NAME, problem)
    assert isinstance(name, str)
    return name


def segment_name(first_lsn: int) -> str:
    return f"{first_lsn:020d}{SEGMENT_SUFFIX}"


def parse_segment_name(name: str) -> int | None:
    """The first lsn a segment file name carries, or ``None`` if it is not a segment."""
    match = _SEGMENT_NAME.fullmatch(name)
    return int(match.group(1)) if match else None


class DatasetName(NamedTuple):
    writer: str
    first_lsn: int
    last_lsn: int


def dataset_name(writer: str, first_lsn: int, last_lsn: int) -> str:
    return f"{writer}.L{first_lsn:020d}-{last_lsn:020d}{DATASET_SUFFIX}"


def parse_dataset_name(name: str) -> DatasetName | None:
    match = _DATASET_NAME.fullmatch(name)
    if not match or not WRITER_NAME.fullmatch(match.group(1)):
        return None
    return DatasetName(match.group(1), int(match.group(2)), int(match.group(3)))


class Layout:
    """The paths of one stream's directory."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.stream_file = self.root / STREAM_FILE
        self.retention_file = self.root / RETENTION_FILE
        self.staging = self.root / STAGING_DIR
        self.datasets = self.root / DATASETS_DIR
        self.damaged = self.root / DAMAGED_DIR

    def writer_dir(self, writer: str) -> Path:
        return self.staging / writer

    def writer_state(self, writer: str) -> Path:
        return self.staging / writer / WRITER_STATE_FILE

    def roll_request(self, writer: str) -> Path:
        return self.staging / writer / ROLL_FILE

    def make_dirs(self) -> None:
        for path in (self.staging, self.datasets, self.damaged):
            make_dirs(path)

    def writers(self) -> list[str]:
        """Writers with a staging directory, sorted."""
        try:
            names = os.listdir(self.staging)
        except FileNotFoundError:
            return []
        return sorted(n for n in names if WRITER_NAME.fullmatch(n))

    def segments(self, writer: str) -> list[tuple[int, Path]]:
        """A writer's staging segments as ``(first_lsn, path)``, oldest first."""
        directory = self.writer_dir(writer)
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            first = parse_segment_name(name)
            if first is not None:
                found.append((first, directory / name))
        found.sort()
        return found

    def dataset_files(self) -> list[tuple[DatasetName, Path]]:
        """Every log data set, by writer and first lsn."""
        try:
            names = os.listdir(self.datasets)
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            parsed = parse_dataset_name(name)
            if parsed is not None:
                found.append((parsed, self.datasets / name))
        found.sort()
        return found


def segment_copies(layouts: list[Layout], writer: str) -> list[tuple[int, list[Path]]]:
    """A writer's segments under any of the stream's roots, oldest first, each with its
    path under every root (a copy missing under one root is still named: readers skip it)."""
    firsts = {first for layout in layouts for first, _ in layout.segments(writer)}
    return [
        (first, [layout.writer_dir(writer) / segment_name(first) for layout in layouts])
        for first in sorted(firsts)
    ]


def lsn_covered(first_lsn: int, ranges: Iterable[tuple[int, int]]) -> bool:
    """Whether a segment starting at ``first_lsn`` lies in one of a writer's data sets.

    Offload moves whole segments, so a segment is in a data set entirely or not at all.
    """
    return any(low <= first_lsn <= high for low, high in ranges)


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in ``path`` durable (POSIX needs the directory synced)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers see the old or the new file, whole."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = open_fd(tmp, os.O_WRONLY | os.O_TRUNC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


#: How long a writer retries taking its lock: a reader probing liveness holds it for
#: microseconds, and must not make a starting writer fail.
OWNERSHIP_RETRY_SECONDS = 0.5


#: Seconds between a writer's attempts to take its lock.
OWNERSHIP_RETRY_PAUSE = 0.01


def owned(directory: Path) -> bool:
    """Whether a writer object, in this or another process, holds the directory now
    (asked once, without the wait :func:`take_ownership` allows)."""
    with open_lock(directory / LOCK_FILE) as lock_file:
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(lock_file, fcntl.LOCK_UN)
        return False


def take_ownership(directory: Path, writer: str, clock: Clock = SYSTEM_CLOCK) -> TextIO:
    """Lock a writer's staging directory for this writer object; ``WRITER_IN_USE`` if taken.

    ``flock`` locks belong to the open file, so a second writer object of the same name
    is refused in this process as in any other; the lock goes when the process does.
    Retries for :data:`OWNERSHIP_RETRY_SECONDS` on ``clock``.
    """
    lock_file = open_lock(directory / LOCK_FILE)  # held for the writer's life

    def locked() -> bool:
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    if not retry_until(
        locked,
        timeout_s=OWNERSHIP_RETRY_SECONDS,
        first_pause_s=OWNERSHIP_RETRY_PAUSE,
        clock=clock,
    ):
        lock_file.close()
        raise log_error(
            LogReason.WRITER_IN_USE,
            f"writer {writer} is already open (in this or another process)",
            writer=writer,
        )
    return lock_file


def owner_alive(directory: Path) -> bool:
    """Whether some writer object holds the writer's lock now (probes without waiting)."""
    try:
        probe = open_lock(directory / LOCK_FILE)  # closed below
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        probe.close()  # closing drops our shared lock, if we took it
    return False
