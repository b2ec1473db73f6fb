"""Files and directories the log and the recovery machinery create: the owner's only.

A recovery root holds every persistent message a queue manager logged (staging
segments, log data sets), every structure's contents (SRDS) and the state that
decides what recovery trusts (state files, checkpoints).  So each file sharedq
creates there is made ``0600`` and each directory ``0700``, whatever the process's
umask: the mode is given when the file or directory is made (a umask only takes
bits away, so a permissive one, ``000``, leaves these modes as they are), and never
widened afterwards.  Parents that ``Path.mkdir(parents=True)`` would make with the
default mode are made here one by one.  What exists already (a root the operator
made, with the mode the operator chose) is left as it is.

Every server of a group therefore runs as the same OS user (they share the root);
other users read nothing of it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO, TextIO

#: The mode of every file sharedq creates under a log or recovery root.
FILE_MODE = 0o600
#: The mode of every directory it creates there.
DIR_MODE = 0o700


def file_in_the_way(path: Path) -> Path | None:
    """The file where ``path``, or the nearest of its parents that exists, should be a
    directory; ``None`` when nothing stands in the way of making ``path``.  Checked
    when settings are given, so that a bad root is refused then, not when the first
    directory is made there (``FileExistsError``, ``NotADirectoryError``)."""
    found = next((p for p in (path, *path.parents) if p.exists()), None)
    return found if found is not None and not found.is_dir() else None


def make_dirs(path: Path) -> None:
    """Create directory ``path`` and its missing parents, each ``0700``; what exists
    stays as it is (as ``path.mkdir(parents=True, exist_ok=True)`` otherwise)."""
    missing: list[Path] = []
    current = path
    while not current.is_dir():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            if not directory.is_dir():
                raise
            # (another process made it at the same moment, with the same mode)


def open_fd(path: Path, flags: int) -> int:
    """``os.open`` that creates ``path``, if it must, ``0600``."""
    return os.open(path, flags | os.O_CREAT, FILE_MODE)


def open_new(path: Path) -> BinaryIO:
    """A new (or truncated) file for writing bytes, created ``0600``.

    Also how Parquet files are written (``pq.write_table(table, handle)``): given a
    path, pyarrow would create the file with the default mode.
    """
    return os.fdopen(open_fd(path, os.O_WRONLY | os.O_TRUNC), "wb")


def open_lock(path: Path) -> TextIO:
    """A lock file opened for appending (``flock`` is taken on it), created ``0600``."""
    return os.fdopen(open_fd(path, os.O_WRONLY | os.O_APPEND), "a")


def touch(path: Path) -> None:
    """Create ``path`` empty if it does not exist (a marker file), ``0600``."""
    os.close(open_fd(path, os.O_WRONLY))
