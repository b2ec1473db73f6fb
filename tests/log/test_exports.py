"""The public names of ``sharedq.log`` and its errors."""

from __future__ import annotations

import pickle

import sharedq
import sharedq.log
from sharedq.log import LogError, LogReason, log_error


def test_log_exports_what_it_lists() -> None:
    for name in sharedq.log.__all__:
        assert hasattr(sharedq.log, name), name
    for required in ("LogStream", "LogWriter", "LogReader", "LogRecord", "LogConfig"):
        assert required in sharedq.log.__all__
    # The log knows record schemas, not structures: replay is sharedq.recovery's.
    for moved in ("replay", "apply_record", "ReplayResult"):
        assert moved not in sharedq.log.__all__ and not hasattr(sharedq.log, moved), moved


def test_every_log_error_is_a_sharedq_error_with_a_code_in_its_range() -> None:
    for reason in LogReason:
        assert 3000 <= reason.value <= 3999
        error = log_error(reason, "detail", writer="QM1")
        assert isinstance(error, LogError) and isinstance(error, sharedq.SharedqError)
        assert error.reason is reason and str(reason.value) in str(error)
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and copy.context == {"writer": "QM1"}


def test_bad_requests_are_value_errors() -> None:
    assert isinstance(log_error(LogReason.BAD_CONFIG), ValueError)
