"""The public names of ``sharedq.log`` (its errors, with every layer's, are
``tests/test_errors.py``'s)."""

from __future__ import annotations

import sharedq
import sharedq.log


def test_log_exports_what_it_lists() -> None:
    for name in sharedq.log.__all__:
        assert hasattr(sharedq.log, name), name
    for required in ("LogStream", "LogWriter", "LogReader", "LogRecord", "LogConfig"):
        assert required in sharedq.log.__all__
    # The log knows record schemas, not structures: replay is sharedq.recovery's.
    for moved in ("replay", "apply_record", "ReplayResult"):
        assert moved not in sharedq.log.__all__ and not hasattr(sharedq.log, moved), moved
