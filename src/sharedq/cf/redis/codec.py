"""The bytes that cross between the client and the scripts, both ways.

Entry records are stored and returned in one packed form (see ``keys.py`` and the Lua
prelude), so a reply is decoded with one ``struct`` call and slices: the hot path
builds one named tuple per entry, as the memory backend does.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from functools import partial

from sharedq.cf import validation as v
from sharedq.cf.errors import CFReason, cf_error
from sharedq.cf.redis.errors import script_error
from sharedq.cf.types import (
    UNCHANGED,
    BulkMove,
    BulkResult,
    ById,
    ByKey,
    BySecondaryKey,
    Compare,
    Head,
    ListEntry,
    Locator,
    MonitorEvent,
    MonitorState,
    StructureStats,
    Tail,
)

# id(12) list(2) key(16) ordinal(8) version(8) elements(1) adjunct length(1) skey length(1)
_RECORD = struct.Struct(">12sH16s8xQBBB")
_HEADER = _RECORD.size
_VERSION = struct.Struct(">Q")
_MOVE = struct.Struct(">12sHHB")
_NO_LIST = 0xFFFF
_HOW = {Compare.LE: b"<", Compare.EQ: b"=", Compare.GE: b">"}

_entry = partial(tuple.__new__, ListEntry)

#: Locator arguments of the scripts: kind, list ('' none), argument, comparison.
LocatorArgs = tuple[bytes, int | bytes, bytes, bytes]


def entry_of(record: bytes) -> ListEntry:
    """The entry a packed record holds."""
    entry_id, list_number, key, version, elements, adjunct_len, skey_len = _RECORD.unpack_from(
        record
    )
    skey_at = _HEADER + adjunct_len
    data_at = skey_at + skey_len
    return _entry(
        (
            entry_id,
            list_number,
            key,
            record[data_at:],
            record[_HEADER:skey_at],
            record[skey_at:data_at] if skey_len else None,
            version,
            elements,
        )
    )


def member_of(record: bytes) -> bytes:
    """The entry's member in its list's sorted set (where a scan page ends)."""
    return record[14:38] + record[:12]


def version_bytes(version: int) -> bytes:
    return _VERSION.pack(version)


def version_op(set_version: int | None, increment_version: bool) -> bytes:
    """A script's version operation: keep, ``i`` increment or ``s`` and the new version."""
    if set_version is not None:
        return b"s" + _VERSION.pack(set_version)
    return b"i" if increment_version else b""


def authority_arg(expect_authority: int | None) -> bytes | int:
    if expect_authority is None:
        return b""
    if type(expect_authority) is not int:
        raise cf_error(
            CFReason.BAD_ARGUMENT, f"expect_authority {expect_authority!r} must be an int"
        )
    return expect_authority


def locator_args(locator: Locator, list_count: int) -> LocatorArgs:
    """Check a locator and encode it for ``locate()`` in the Lua prelude."""
    kind = type(locator)
    if kind is Head:
        assert isinstance(locator, Head)
        number, key = locator.list_number, locator.key
        if (
            type(number) is not int
            or not 0 <= number < list_count
            or (key is not None and (type(key) is not bytes or len(key) != 16))
            or type(locator.compare) is not Compare
        ):
            v.check_locator(locator, list_count)
        return b"h", number, key or b"", _HOW[locator.compare]
    if kind is ById:
        assert isinstance(locator, ById)
        entry_id, on_list = locator.entry_id, locator.list_number
        if type(entry_id) is not bytes or len(entry_id) != 12 or on_list is not None:
            v.check_locator(locator, list_count)
        return b"i", b"" if on_list is None else on_list, entry_id, b""
    v.check_locator(locator, list_count)
    if kind is Tail:
        assert isinstance(locator, Tail)
        return b"t", locator.list_number, b"", b""
    if kind is ByKey:
        assert isinstance(locator, ByKey)
        return b"k", locator.list_number, locator.key, _HOW[locator.compare]
    assert isinstance(locator, BySecondaryKey)
    return b"s", locator.list_number, locator.secondary_key, b""


def pack_move(move: BulkMove) -> bytes:
    """One bulk move for ``bulk_move.lua``: id, to, from, flags, then what changes."""
    flags = 0
    tail = b""
    if move.new_key is not None:
        flags |= 1
        tail += move.new_key
    if move.set_version is not None:
        flags |= 2
        tail += _VERSION.pack(move.set_version)
    elif move.increment_version:
        flags |= 4
    skey = move.new_secondary_key
    if skey is None:
        flags |= 16
    elif skey is not UNCHANGED:
        assert isinstance(skey, bytes)
        flags |= 8
        tail += skey
    from_list = _NO_LIST if move.from_list is None else move.from_list
    return _MOVE.pack(move.entry_id, move.to_list, from_list, flags) + tail


def bulk_result(requested: int, reply: Sequence[object]) -> BulkResult:
    """A bulk script's ``{processed, seqs, missing, error or nil}``."""
    processed, seqs, missing, error = reply
    assert isinstance(processed, int) and isinstance(seqs, list) and isinstance(missing, list)
    return BulkResult(
        requested,
        processed,
        tuple(seqs),
        tuple(missing),
        None if error is None else script_error(_text(error)),
    )


def event_of(raw: bytes) -> MonitorEvent:
    """An event as the change queued it: ``monitor,list,state,seq,token``."""
    monitor_id, list_number, state, seq, token = raw.split(b",", 4)
    return MonitorEvent(
        int(monitor_id),
        int(list_number),
        MonitorState.NONEMPTY if state == b"n" else MonitorState.EMPTY,
        int(seq),
        token,
    )


def stats_of(
    name: str, list_count: int, element_size: int, reply: Sequence[object]
) -> StructureStats:
    """StructureStats from the static figures and ``counts()`` of the Lua prelude."""
    size, max_size, emcp, me, ne, mel, nel, mm, nm, nu, seq = (int(_text(x)) for x in reply)
    return StructureStats(
        name=name,
        list_count=list_count,
        element_size=element_size,
        size=size,
        max_size=max_size,
        emc_percent=emcp,
        max_entries=me,
        entries=ne,
        max_elements=mel,
        elements=nel,
        max_emcs=mm,
        emcs=nm,
        users=nu,
        seq=seq,
    )


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
