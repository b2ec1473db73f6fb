"""Argument checks shared by every backend.

Backends call these before they touch the structure, so that bad input is refused
with the same reason everywhere and never half-applied.
"""

from __future__ import annotations

from collections.abc import Iterable

from sharedq.cf.errors import CFReason, cf_error
from sharedq.cf.types import (
    ENTRY_ID_LENGTH,
    KEY_LENGTH,
    MAX_ADJUNCT,
    MAX_ELEMENTS_PER_ENTRY,
    MAX_ENTRY_BYTES,
    MAX_SECONDARY_KEY,
    MAX_TOKEN,
    MAX_VERSION,
    UNCHANGED,
    BulkMove,
    BulkWrite,
    ById,
    ByKey,
    BySecondaryKey,
    Compare,
    Head,
    Locator,
    MonitorSpec,
    Position,
    Tail,
    Unchanged,
)


def check_key(key: object, what: str = "key") -> bytes:
    if not isinstance(key, bytes) or len(key) != KEY_LENGTH:
        shown = f"{len(key)} bytes" if isinstance(key, bytes) else type(key).__name__
        raise cf_error(CFReason.BAD_KEY, f"{what} must be {KEY_LENGTH} bytes, got {shown}")
    return key


def check_list(list_number: object, list_count: int, what: str = "list") -> int:
    if (
        not isinstance(list_number, int)
        or isinstance(list_number, bool)
        or not 0 <= list_number < list_count
    ):
        raise cf_error(
            CFReason.BAD_LIST_NUMBER,
            f"{what} {list_number!r} is not a list of this structure (0..{list_count - 1})",
        )
    return list_number


def elements_for(data: object, element_size: int) -> int:
    """The data elements ``data`` takes, or ``DATA_TOO_LARGE``."""
    if not isinstance(data, bytes):
        raise cf_error(CFReason.BAD_ARGUMENT, f"data must be bytes, got {type(data).__name__}")
    elements = -(-len(data) // element_size)
    if elements > MAX_ELEMENTS_PER_ENTRY or elements * element_size > MAX_ENTRY_BYTES:
        limit = min(MAX_ELEMENTS_PER_ENTRY * element_size, MAX_ENTRY_BYTES)
        raise cf_error(
            CFReason.DATA_TOO_LARGE,
            f"{len(data)} bytes of data need {elements} elements of {element_size} bytes; "
            f"an entry holds at most {limit} bytes with this element size",
        )
    return elements


def check_entry_id(entry_id: object) -> bytes:
    if not isinstance(entry_id, bytes) or len(entry_id) != ENTRY_ID_LENGTH:
        raise cf_error(
            CFReason.BAD_ENTRY_ID, f"entry id must be {ENTRY_ID_LENGTH} bytes, got {entry_id!r}"
        )
    return entry_id


def check_adjunct(adjunct: object) -> bytes:
    if not isinstance(adjunct, bytes) or len(adjunct) > MAX_ADJUNCT:
        raise cf_error(CFReason.BAD_ADJUNCT, f"adjunct must be at most {MAX_ADJUNCT} bytes")
    return adjunct


def check_secondary_key(secondary_key: object) -> bytes | None:
    if secondary_key is None:
        return None
    if not isinstance(secondary_key, bytes) or not 1 <= len(secondary_key) <= MAX_SECONDARY_KEY:
        raise cf_error(
            CFReason.BAD_SECONDARY_KEY,
            f"secondary key must be 1..{MAX_SECONDARY_KEY} bytes, got {secondary_key!r}",
        )
    return secondary_key


def check_token(token: object) -> bytes:
    if not isinstance(token, bytes) or len(token) > MAX_TOKEN:
        raise cf_error(CFReason.BAD_ARGUMENT, f"token must be at most {MAX_TOKEN} bytes")
    return token


def check_version(version: object, what: str = "version") -> int:
    if not isinstance(version, int) or isinstance(version, bool) or not 0 <= version <= MAX_VERSION:
        raise cf_error(CFReason.BAD_ARGUMENT, f"{what} {version!r} must be 0..2**64-1")
    return version


def check_version_update(set_version: int | None, increment_version: bool) -> None:
    if set_version is not None:
        check_version(set_version, "set_version")
        if increment_version:
            raise cf_error(CFReason.BAD_ARGUMENT, "set_version and increment_version are exclusive")


def check_locks(not_locked: Iterable[int], lock_count: int) -> tuple[int, ...]:
    locks = tuple(not_locked)
    for number in locks:
        check_lock_number(number, lock_count)
    return locks


def check_lock_number(lock_number: object, lock_count: int) -> int:
    if (
        not isinstance(lock_number, int)
        or isinstance(lock_number, bool)
        or not 0 <= lock_number < lock_count
    ):
        raise cf_error(
            CFReason.BAD_LOCK_NUMBER,
            f"lock {lock_number!r} is not a lock-table entry (0..{lock_count - 1})",
        )
    return lock_number


def check_position(position: object) -> Position:
    if not isinstance(position, Position):
        raise cf_error(CFReason.BAD_ARGUMENT, f"position must be a Position, got {position!r}")
    return position


def check_budget(budget: int | None) -> None:
    if budget is not None and (not isinstance(budget, int) or budget < 1):
        raise cf_error(CFReason.BAD_ARGUMENT, f"budget {budget!r} must be a positive int")


def check_limit(limit: object) -> int | None:
    if limit is None:
        return None
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        raise cf_error(CFReason.BAD_ARGUMENT, f"list limit {limit!r} must be None or >= 0")
    return limit


def check_locator(locator: object, list_count: int) -> Locator:
    """Check a locator's fields; returns it unchanged."""
    if isinstance(locator, ById):
        check_entry_id(locator.entry_id)
        if locator.list_number is not None:
            check_list(locator.list_number, list_count)
    elif isinstance(locator, Head):
        check_list(locator.list_number, list_count)
        if locator.key is not None:
            check_key(locator.key)
        _check_compare(locator.compare)
    elif isinstance(locator, Tail):
        check_list(locator.list_number, list_count)
    elif isinstance(locator, ByKey):
        check_list(locator.list_number, list_count)
        check_key(locator.key)
        _check_compare(locator.compare)
    elif isinstance(locator, BySecondaryKey):
        check_list(locator.list_number, list_count)
        if check_secondary_key(locator.secondary_key) is None:
            raise cf_error(CFReason.BAD_SECONDARY_KEY, "BySecondaryKey needs a secondary key")
    else:
        raise cf_error(CFReason.BAD_ARGUMENT, f"not a locator: {locator!r}")
    return locator


def check_bulk_write(write: object, list_count: int, element_size: int) -> int:
    """Check one entry of a bulk write; returns the data elements it takes."""
    if type(write) is BulkWrite:
        # The common case, every field of its exact type and in range, in one test
        # (bulk writes check each of hundreds of entries); anything else is looked at
        # field by field below, which says what is wrong.
        list_number, key, data, adjunct, skey, entry_id, version, position = write
        if (
            type(list_number) is int
            and 0 <= list_number < list_count
            and type(key) is bytes
            and len(key) == KEY_LENGTH
            and type(data) is bytes
            and type(adjunct) is bytes
            and len(adjunct) <= MAX_ADJUNCT
            and (skey is None or (type(skey) is bytes and 0 < len(skey) <= MAX_SECONDARY_KEY))
            and (entry_id is None or (type(entry_id) is bytes and len(entry_id) == ENTRY_ID_LENGTH))
            and type(version) is int
            and 0 <= version <= MAX_VERSION
            and type(position) is Position
        ):
            elements = -(-len(data) // element_size)
            if elements <= MAX_ELEMENTS_PER_ENTRY and elements * element_size <= MAX_ENTRY_BYTES:
                return elements
    if not isinstance(write, BulkWrite):
        raise cf_error(CFReason.BAD_ARGUMENT, f"not a BulkWrite: {write!r}")
    check_list(write.list_number, list_count)
    check_key(write.key)
    elements = elements_for(write.data, element_size)
    check_adjunct(write.adjunct)
    check_secondary_key(write.secondary_key)
    if write.entry_id is not None:
        check_entry_id(write.entry_id)
    check_version(write.version)
    check_position(write.position)
    return elements


def check_bulk_move(move: object, list_count: int) -> BulkMove:
    """Check one entry of a bulk move; returns it unchanged."""
    if type(move) is BulkMove:
        # The common case in one test, as check_bulk_write.
        entry_id, to_list, new_key = move.entry_id, move.to_list, move.new_key
        from_list, skey, set_version = move.from_list, move.new_secondary_key, move.set_version
        if (
            type(entry_id) is bytes
            and len(entry_id) == ENTRY_ID_LENGTH
            and type(to_list) is int
            and 0 <= to_list < list_count
            and (from_list is None or (type(from_list) is int and 0 <= from_list < list_count))
            and (new_key is None or (type(new_key) is bytes and len(new_key) == KEY_LENGTH))
            and (
                skey is UNCHANGED
                or skey is None
                or (type(skey) is bytes and 0 < len(skey) <= MAX_SECONDARY_KEY)
            )
            and (
                set_version is None
                or (
                    type(set_version) is int
                    and 0 <= set_version <= MAX_VERSION
                    and not move.increment_version
                )
            )
        ):
            return move
    if not isinstance(move, BulkMove):
        raise cf_error(CFReason.BAD_ARGUMENT, f"not a BulkMove: {move!r}")
    check_entry_id(move.entry_id)
    check_list(move.to_list, list_count, "target list")
    if move.from_list is not None:
        check_list(move.from_list, list_count)
    if move.new_key is not None:
        check_key(move.new_key, "new key")
    if not isinstance(move.new_secondary_key, Unchanged):
        check_secondary_key(move.new_secondary_key)
    check_version_update(move.set_version, move.increment_version)
    return move


def check_monitor_spec(spec: object, list_count: int) -> MonitorSpec:
    """Check what a registration watches; returns it unchanged."""
    if not isinstance(spec, MonitorSpec):
        raise cf_error(CFReason.BAD_ARGUMENT, f"not a MonitorSpec: {spec!r}")
    check_list(spec.list_number, list_count)
    check_key(spec.low_key, "low key")
    check_key(spec.high_key, "high key")
    check_secondary_key(spec.secondary_key)
    check_token(spec.token)
    if spec.low_key > spec.high_key:
        raise cf_error(CFReason.BAD_ARGUMENT, "low key is above high key")
    return spec


def _check_compare(compare: object) -> None:
    if not isinstance(compare, Compare):
        raise cf_error(CFReason.BAD_ARGUMENT, f"compare must be a Compare, got {compare!r}")
