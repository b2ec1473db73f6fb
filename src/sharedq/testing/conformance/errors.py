"""Bad input: a specific error with a reason name and code, and nothing changed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sharedq.cf import (
    BulkMove,
    ById,
    ByKey,
    BySecondaryKey,
    CFError,
    CFReason,
    Head,
    InvalidRequest,
    ListStructure,
    MonitorSpec,
    Position,
)
from sharedq.errors import InvalidArgument, SharedqError
from sharedq.testing.conformance._registry import check, raises
from sharedq.testing.conformance.helpers import key

Request = Callable[[ListStructure], object]


def _loose(struct: ListStructure) -> Any:
    """The structure, untyped: to send it what its signature refuses."""
    return struct


BAD_REQUESTS: list[tuple[str, Request, CFReason]] = [
    ("short key", lambda s: s.write(0, b"short"), CFReason.BAD_KEY),
    ("long key", lambda s: s.write(0, b"x" * 17), CFReason.BAD_KEY),
    ("str key", lambda s: _loose(s).write(0, "x" * 16), CFReason.BAD_KEY),
    ("unknown list", lambda s: s.write(8, key(1)), CFReason.BAD_LIST_NUMBER),
    ("negative list", lambda s: s.write(-1, key(1)), CFReason.BAD_LIST_NUMBER),
    ("data too large", lambda s: s.write(0, key(1), b"x" * 65281), CFReason.DATA_TOO_LARGE),
    ("data not bytes", lambda s: _loose(s).write(0, key(1), "text"), CFReason.BAD_ARGUMENT),
    ("adjunct too large", lambda s: s.write(0, key(1), adjunct=b"a" * 65), CFReason.BAD_ADJUNCT),
    (
        "empty secondary key",
        lambda s: s.write(0, key(1), secondary_key=b""),
        CFReason.BAD_SECONDARY_KEY,
    ),
    (
        "secondary key too long",
        lambda s: s.write(0, key(1), secondary_key=b"s" * 33),
        CFReason.BAD_SECONDARY_KEY,
    ),
    ("entry id length", lambda s: s.write(0, key(1), entry_id=b"abc"), CFReason.BAD_ENTRY_ID),
    ("negative version", lambda s: s.write(0, key(1), version=-1), CFReason.BAD_ARGUMENT),
    ("version too big", lambda s: s.write(0, key(1), version=2**64), CFReason.BAD_ARGUMENT),
    ("position", lambda s: _loose(s).write(0, key(1), position="head"), CFReason.BAD_ARGUMENT),
    ("read bad list", lambda s: s.read(Head(9)), CFReason.BAD_LIST_NUMBER),
    ("read bad key", lambda s: s.read(ByKey(0, b"k")), CFReason.BAD_KEY),
    ("read bad id", lambda s: s.read(ById(b"k")), CFReason.BAD_ENTRY_ID),
    ("read bad skey", lambda s: s.read(BySecondaryKey(0, b"")), CFReason.BAD_SECONDARY_KEY),
    ("not a locator", lambda s: _loose(s).read("head"), CFReason.BAD_ARGUMENT),
    ("move to bad list", lambda s: s.move(Head(0), 8), CFReason.BAD_LIST_NUMBER),
    ("move bad new key", lambda s: s.move(Head(0), 1, new_key=b"k"), CFReason.BAD_KEY),
    ("move missing id", lambda s: s.move(ById(b"\x07" * 12), 1), CFReason.NO_SUCH_ENTRY),
    ("delete missing id", lambda s: s.delete(ById(b"\x07" * 12)), CFReason.NO_SUCH_ENTRY),
    ("update missing id", lambda s: s.update(ById(b"\x07" * 12), data=b""), CFReason.NO_SUCH_ENTRY),
    (
        "bulk bad list",
        lambda s: s.move_entries([BulkMove(b"\x07" * 12, 99)]),
        CFReason.BAD_LIST_NUMBER,
    ),
    ("bulk bad id", lambda s: s.delete_entries([b"x"]), CFReason.BAD_ENTRY_ID),
    ("list info bad list", lambda s: s.list_info(8), CFReason.BAD_LIST_NUMBER),
    ("monitor bad list", lambda s: s.register_monitor(MonitorSpec(8)), CFReason.BAD_LIST_NUMBER),
    (
        "monitor bad key",
        lambda s: s.register_monitor(MonitorSpec(0, low_key=b"k")),
        CFReason.BAD_KEY,
    ),
    ("cleanup unknown user", lambda s: s.cleanup_user(31), CFReason.NO_SUCH_USER),
    ("fail unknown user", lambda s: s.mark_failed(31), CFReason.NO_SUCH_USER),
]


@check(cases={name: {"request_fn": fn, "reason": reason} for name, fn, reason in BAD_REQUESTS})
def bad_input_raises_its_reason_and_changes_nothing(
    struct: ListStructure, request_fn: Request, reason: CFReason
) -> None:
    struct.write(0, key(1), b"existing", entry_id=b"\x01" * 12)
    before_stats = struct.statistics()
    before_entries = [list(struct.scan(n)) for n in range(8)]
    with raises(CFError) as info:
        request_fn(struct)
    error = info.value
    assert error.reason is reason
    assert error.reason_name == reason.name and error.reason_code == reason.value
    assert reason.name in str(error)
    assert isinstance(error, SharedqError)
    if reason.value < 1020:
        assert isinstance(error, InvalidRequest) and isinstance(error, ValueError)
        assert isinstance(error, InvalidArgument)  # the bad-argument class of every layer
    assert struct.statistics() == before_stats
    assert [list(struct.scan(n)) for n in range(8)] == before_entries


@check
def positions_are_an_enum(struct: ListStructure) -> None:
    assert struct.write(0, key(1), position=Position.HEAD).entry.list_number == 0
