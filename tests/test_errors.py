"""Every layer's reasons and exceptions, held to the table in :mod:`sharedq.errors`.

Each layer's reason codes lie in its range of the table, and nowhere else; a bad
argument is ``BAD_ARGUMENT`` in every layer, with the code the table gives, and its
exception is the layer's class, a :class:`sharedq.InvalidArgument` (so a
``ValueError``); every exception a layer exports is a ``SharedqError``, and every
error survives pickling.  A layer that adds a reason enum must add its row.
"""

from __future__ import annotations

import ast
import pickle
import re
from collections.abc import Callable
from enum import IntEnum
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

import sharedq
import sharedq.cf
import sharedq.cqs
import sharedq.errors
import sharedq.ims
import sharedq.log
import sharedq.mq
import sharedq.pipeline
import sharedq.recovery
import sharedq.security
from sharedq.cf import CFError, CFReason, InvalidRequest
from sharedq.cf.errors import cf_error
from sharedq.cqs import CQSError, CQSReason, InvalidCQSRequest, cqs_error
from sharedq.ims import IMSError, IMSReason, InvalidIMSRequest, ims_error
from sharedq.log import InvalidLogRequest, LogError, LogReason, log_error
from sharedq.mq import MQError, MQReason
from sharedq.mq.errors import mq_error
from sharedq.pipeline import (
    InvalidPipelineRequest,
    PipelineError,
    PipelineReason,
    pipeline_error,
)
from sharedq.recovery import InvalidRecoveryRequest, RecoveryError, RecoveryReason
from sharedq.recovery.errors import recovery_error
from sharedq.security import (
    InvalidSecurityRequest,
    SecurityError,
    SecurityReason,
    security_error,
)

SRC = Path(sharedq.__file__).resolve().parent


class Layer:
    def __init__(
        self,
        reasons: type[IntEnum],
        base: type[sharedq.SharedqError],
        invalid: type[sharedq.InvalidArgument],
        make: Callable[..., sharedq.SharedqError],
        package: Any,
    ) -> None:
        self.reasons, self.base, self.invalid, self.make = reasons, base, invalid, make
        self.package = package


LAYERS = {
    "cf": Layer(CFReason, CFError, InvalidRequest, cf_error, sharedq.cf),
    "mq": Layer(MQReason, MQError, sharedq.mq.InvalidArgument, mq_error, sharedq.mq),
    "log": Layer(LogReason, LogError, InvalidLogRequest, log_error, sharedq.log),
    "recovery": Layer(
        RecoveryReason, RecoveryError, InvalidRecoveryRequest, recovery_error, sharedq.recovery
    ),
    "pipeline": Layer(
        PipelineReason, PipelineError, InvalidPipelineRequest, pipeline_error, sharedq.pipeline
    ),
    "security": Layer(
        SecurityReason, SecurityError, InvalidSecurityRequest, security_error, sharedq.security
    ),
    "cqs": Layer(CQSReason, CQSError, InvalidCQSRequest, cqs_error, sharedq.cqs),
    "ims": Layer(IMSReason, IMSError, InvalidIMSRequest, ims_error, sharedq.ims),
}

_ROW = re.compile(r"^(\d{4})-(\d{4})\s+.*?``sharedq\.(\w+)``.*?\s(\d{4})\s*$")


def documented() -> dict[str, tuple[range, int]]:
    """The table of ``sharedq.errors``: package -> (its codes, its BAD_ARGUMENT)."""
    rows: dict[str, tuple[range, int]] = {}
    for line in (sharedq.errors.__doc__ or "").splitlines():
        found = _ROW.match(line)
        if found:
            low, high, package, bad = found.groups()
            assert package not in rows, f"two rows for {package}"
            rows[package] = (range(int(low), int(high) + 1), int(bad))
    return rows


def reason_enums() -> dict[str, list[str]]:
    """Every ``IntEnum`` named ``*Reason`` under ``src/sharedq``, by package."""
    found: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.ClassDef)
                and node.name.endswith("Reason")
                and any(isinstance(b, ast.Name) and b.id == "IntEnum" for b in node.bases)
            ):
                package = path.relative_to(SRC).parts[0]
                found.setdefault(package, []).append(node.name)
    return found


def test_the_table_has_a_row_for_each_layer_with_reasons_and_no_other() -> None:
    table = documented()
    assert sorted(table) == sorted(LAYERS)
    assert reason_enums() == {name: [layer.reasons.__name__] for name, layer in LAYERS.items()}
    ranges = sorted((codes for codes, _ in table.values()), key=lambda codes: codes.start)
    for lower, upper in pairwise(ranges):
        assert lower.stop <= upper.start, "ranges overlap"


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_every_reason_is_in_its_layers_range(name: str) -> None:
    codes, _ = documented()[name]
    outside = [r.name for r in LAYERS[name].reasons if int(r) not in codes]
    assert not outside, f"{name}: {outside} outside {codes.start}-{codes.stop - 1}"


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_a_bad_argument_is_BAD_ARGUMENT_and_an_InvalidArgument_in_every_layer(name: str) -> None:
    layer = LAYERS[name]
    _, code = documented()[name]
    reason = layer.reasons["BAD_ARGUMENT"]
    assert int(reason) == code
    error = layer.make(reason, "bad")
    assert type(error) is layer.invalid
    assert isinstance(error, sharedq.InvalidArgument) and isinstance(error, ValueError)
    assert isinstance(error, layer.base)
    assert issubclass(layer.invalid, layer.base)
    assert layer.invalid.__name__ in layer.package.__all__
    assert getattr(layer.package, layer.invalid.__name__) is layer.invalid
    # Nothing else in the layer is a bad argument: its other bad-input reasons raise
    # the same class.
    for reason in layer.reasons:
        if isinstance(layer.make(reason), sharedq.InvalidArgument):
            assert type(layer.make(reason)) is layer.invalid, reason


def test_the_shared_class_is_the_root_packages() -> None:
    assert sharedq.InvalidArgument is sharedq.errors.InvalidArgument
    assert issubclass(sharedq.InvalidArgument, sharedq.SharedqError)
    assert issubclass(sharedq.InvalidArgument, ValueError)
    # The layers' more specific bad-input reasons are bad arguments too.
    assert isinstance(cf_error(CFReason.BAD_KEY), InvalidRequest)
    assert isinstance(cf_error(CFReason.BAD_URL), InvalidRequest)
    assert isinstance(mq_error(MQReason.PRIORITY_ERROR), sharedq.mq.InvalidArgument)
    assert isinstance(log_error(LogReason.BAD_CONFIG), InvalidLogRequest)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_every_error_is_a_sharedq_error_that_survives_pickling(name: str) -> None:
    layer = LAYERS[name]
    for reason in layer.reasons:
        error = layer.make(reason, "detail", writer="QM1")
        assert isinstance(error, layer.base) and isinstance(error, sharedq.SharedqError)
        assert error.reason is reason and str(reason.value) in str(error)
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and copy.context == {"writer": "QM1"}
        assert (copy.reason, copy.detail) == (reason, "detail")


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_every_exported_exception_is_a_sharedq_error(name: str) -> None:
    package = LAYERS[name].package
    for export in package.__all__:
        obj = getattr(package, export)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, sharedq.SharedqError), export
