"""check_values checks a tuple or range of indexes by a function written for it: it must
accept and refuse exactly what the field-by-field loop (a list of indexes) does."""

from __future__ import annotations

import random
from typing import Any

import pytest

from sharedq.log import FIELDS, ChangeOp, InvalidLogRequest, RecordType, pack_payload
from sharedq.log.changes import CALLER_FIELDS
from sharedq.log.records import ALL_FIELDS, check_values

_SAMPLES: list[Any] = [
    None,
    True,
    False,
    0,
    1,
    -1,
    2,
    7,
    255,
    2**31,
    2**63,
    -(2**63) - 1,
    "",
    "S1",
    "x" * 65,
    b"",
    b"e" * 12,
    b"k" * 16,
    b"m" * 64,
    b"m" * 65,
    b"d" * 70000,
    1.5,
    bytearray(b"ab"),
]


def _outcome(values: list[Any], indexes: Any) -> str | None:
    try:
        check_values(values, indexes)
    except InvalidLogRequest as exc:
        return str(exc)
    return None


def _sound() -> list[Any]:
    values: list[Any] = [None] * len(FIELDS)
    values[:7] = [5, int(ChangeOp.WRITE), "QM1", 1, int(RecordType.PUT), "S1", 0]
    values[7:11] = [b"e" * 12, 3, None, b"k" * 16]
    values[15], values[21], values[22], values[26] = b"d" * 100, b"u" * 16, b"Q", True
    values[27] = pack_payload({"mq": "put"})
    check_values(values)
    return values


@pytest.mark.parametrize("indexes", [tuple(CALLER_FIELDS), ALL_FIELDS, (0, 4, 15, 26)])
def test_unrolled_checks_agree_with_the_loop(indexes: Any) -> None:
    rng = random.Random(16)
    refused = 0
    for _ in range(5000):
        values = _sound()
        for _ in range(rng.choice((0, 1, 1, 2))):
            values[rng.randrange(len(values))] = rng.choice(_SAMPLES)
        outcome = _outcome(values, indexes)
        refused += outcome is not None
        assert outcome == _outcome(values, list(indexes))
    assert 0 < refused < 5000
