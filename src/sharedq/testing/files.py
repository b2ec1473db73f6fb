"""Checks that what sharedq writes is its owner's only (files 0600, directories 0700).

The log and recovery create every file with an explicit mode (``sharedq.log.files``);
these helpers let a test prove it under a umask that would otherwise let anyone read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def permissive_umask() -> Iterator[None]:
    """Run with umask 000, where a file made with the default mode is world-writable."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def not_private(root: Path, relative_to: Path | None = None) -> dict[str, str]:
    """Paths under ``root`` (itself included) that are not 0700 directories or 0600
    files: path (relative to ``relative_to``, default ``root``) -> its mode."""
    base = root if relative_to is None else relative_to
    wrong: dict[str, str] = {}
    for directory, dirs, files in os.walk(root):
        for name in ["", *dirs, *files]:
            path = Path(directory, name)
            mode = stat.S_IMODE(path.lstat().st_mode)
            want = 0o700 if path.is_dir() else 0o600
            if mode != want:
                wrong[str(path.relative_to(base))] = f"{mode:04o} (want {want:04o})"
    return wrong
