"""The bytes that cross between the client and the functions, both ways.

Entry records are stored and returned in one packed form (see ``keys.py`` and the Lua
prelude), so a reply is decoded with one ``struct`` call and slices: the hot path
builds one named tuple per entry, as the memory backend does.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from itertools import repeat
from types import MethodType
from typing import Any

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
    Unchanged,
)

# id(12) list(2) key(16) ordinal(8) version(8) elements(1) adjunct length(1) skey length(1)
_RECORD = struct.Struct(">12sH16s8xQBBB")
_HEADER = _RECORD.size
_U64 = struct.Struct(">Q")
_MOVE = struct.Struct(">12sHHB")
#: A get's move: target list, options' flags, expected authority.
_GET_SPEC = struct.Struct(">HHQ")
#: A locator's fixed part: kind, list, comparison.
_LOCATOR = struct.Struct(">cHc")
_WRITE = struct.Struct(">H16sQBBQBBB")
_ZERO8 = b"\0" * 8
_READER = struct.Struct(">B16sc")
_CHANGER = struct.Struct(">B16scQQ")
#: A changer header as its fixed part (all but the request number) and the number.
_NUMBERED_CHANGER = struct.Struct(f">{_CHANGER.size - 8}sQ")
_COUNTERS = struct.Struct(">7Q")
_NO_LIST = 0xFFFF
_HOW = {Compare.LE: b"<", Compare.EQ: b"=", Compare.GE: b">"}
_LE, _EQ = Compare.LE, Compare.EQ
#: An expected authority no list reaches (stands for any int a Lua number cannot hold).
_UNREACHABLE_AUTHORITY = 2**53

#: ``ListEntry`` made from a tuple: ``tuple.__new__`` bound to the class (a bound method
#: calls it with less ado than ``functools.partial``, and without the named tuple's
#: Python-level ``__new__``).
_entry: Callable[[tuple[Any, ...]], ListEntry] = MethodType(tuple.__new__, ListEntry)

#: The flags of options() in the Lua prelude.
NEW_KEY, SET_VERSION, INCREMENT_VERSION, EXPECT_VERSION = 1, 2, 4, 8
EXPECT_AUTHORITY, SET_SKEY, REMOVE_SKEY, HEAD = 16, 32, 64, 128
IGNORE_LIMIT, INCREMENT_AUTHORITY, WITHOUT_DATA = 256, 512, 1024
#: options() when none is given: what a get (move of the head) sends.
NO_OPTIONS = b"\0\0"


def counters(*, seq: int, max_entries: int, max_elements: int, max_emcs: int) -> bytes:
    """The packed counters ('c' in the meta hash) of a new structure."""
    return _COUNTERS.pack(seq, 0, 0, max_entries, max_elements, 0, max_emcs)


def reader_header(user_id: int, token: bytes) -> bytes:
    """ARGV[1] of a request that changes nothing."""
    return _READER.pack(user_id, token, b"0")


def changer_header(user_id: int, token: bytes, channel: int, number: int) -> bytes:
    """ARGV[1] of a request that changes something: with its request id."""
    return _CHANGER.pack(user_id, token, b"0", channel, number)


def changer_headers(
    user_id: int, token: bytes, channel: int, numbers: Iterator[int]
) -> Iterator[bytes]:
    """``changer_header(user_id, token, channel, n)`` for each ``n`` drawn from
    ``numbers``, made as it is drawn: the part before the number packed once, each
    header by C alone (no Python frame, no ``to_bytes`` or concatenation a request)."""
    prefix = changer_header(user_id, token, channel, 0)[: -_U64.size]
    return map(_NUMBERED_CHANGER.pack, repeat(prefix), numbers)


def as_retry(header: bytes) -> bytes:
    """The header with the retry flag set: return the first attempt's result, if any."""
    return header[:17] + b"1" + header[18:]


def entry_of(record: bytes, data: bytes | None) -> ListEntry:
    """The entry a packed record and its data make.

    ``data`` ``None`` says that the data is the rest of the record (the server keeps
    small data there, after the secondary key, and sends it once); otherwise it is the
    data, or ``b""`` for none or not asked for.
    """
    entry_id, list_number, key, version, elements, adjunct_len, skey_len = _RECORD.unpack_from(
        record
    )
    skey_at = _HEADER + adjunct_len
    if data is None:
        data = record[skey_at + skey_len :]
    return _entry(
        (
            entry_id,
            list_number,
            key,
            data,
            record[_HEADER:skey_at],
            record[skey_at : skey_at + skey_len] if skey_len else None,
            version,
            elements,
        )
    )


def member_of(record: bytes) -> bytes:
    """The entry's member in its list's sorted set (where a scan page ends)."""
    return record[14:38] + record[:12]


def authority_number(expect_authority: object) -> int:
    """An expected authority a Lua number holds exactly (one no list reaches if need be)."""
    if type(expect_authority) is not int:
        raise cf_error(
            CFReason.BAD_ARGUMENT, f"expect_authority {expect_authority!r} must be an int"
        )
    if not 0 <= expect_authority < _UNREACHABLE_AUTHORITY:
        return _UNREACHABLE_AUTHORITY
    return expect_authority


def authority_bytes(expect_authority: object) -> bytes:
    if type(expect_authority) is int and 0 <= expect_authority < _UNREACHABLE_AUTHORITY:
        return _U64.pack(expect_authority)  # authority_number's own, without the call
    return _U64.pack(authority_number(expect_authority))


def get_spec(to_list: int, expect_authority: object) -> bytes:
    """A move's target list and options when it only expects a list authority (a get):
    ``to_list`` (2 bytes) + ``options(expect_authority=...)``, packed at once."""
    if type(expect_authority) is int and 0 <= expect_authority < _UNREACHABLE_AUTHORITY:
        return _GET_SPEC.pack(to_list, EXPECT_AUTHORITY, expect_authority)
    return _GET_SPEC.pack(to_list, EXPECT_AUTHORITY, authority_number(expect_authority))


def write_spec(
    list_number: int,
    key: bytes,
    version: int,
    head: bool,
    ignore_limit: bool,
    elements: int,
    expect_authority: int | None,
    adjunct: bytes,
    secondary_key: bytes | None,
    entry_id: bytes | None,
) -> bytes:
    """ARGV[2] of ``write.lua``: the fixed fields, then adjunct, secondary key and id."""
    flags = head | ignore_limit << 1
    if expect_authority is None:
        authority = 0
    elif type(expect_authority) is int and 0 <= expect_authority < _UNREACHABLE_AUTHORITY:
        flags |= 4
        authority = expect_authority  # authority_number's own, without the call
    else:
        flags |= 4
        authority = authority_number(expect_authority)
    skey = secondary_key or b""
    eid = entry_id or b""
    fixed = _WRITE.pack(
        list_number, key, version, flags, elements, authority, len(adjunct), len(skey), len(eid)
    )
    return b"".join((fixed, adjunct, skey, eid))


def options(
    *,
    new_key: bytes | None = None,
    set_version: int | None = None,
    increment_version: bool = False,
    expect_version: int | None = None,
    expect_authority: int | None = None,
    new_secondary_key: bytes | Unchanged | None = UNCHANGED,
    head: bool = False,
    ignore_limit: bool = False,
    increment_authority: bool = False,
    without_data: bool = False,
) -> bytes:
    """Options of move, delete and update (``options()`` in the Lua prelude)."""
    flags = (
        head * HEAD
        | ignore_limit * IGNORE_LIMIT
        | increment_authority * INCREMENT_AUTHORITY
        | without_data * WITHOUT_DATA
    )
    parts = [b""]
    if new_key is not None:
        flags |= NEW_KEY
        parts.append(new_key)
    if set_version is not None:
        flags |= SET_VERSION
        parts.append(_U64.pack(set_version))
    elif increment_version:
        flags |= INCREMENT_VERSION
    if expect_version is not None:
        flags |= EXPECT_VERSION
        parts.append(_U64.pack(v.check_version(expect_version, "expect_version")))
    if expect_authority is not None:
        flags |= EXPECT_AUTHORITY
        parts.append(authority_bytes(expect_authority))
    if new_secondary_key is None:
        flags |= REMOVE_SKEY
    elif not isinstance(new_secondary_key, Unchanged):
        flags |= SET_SKEY
        parts.append(new_secondary_key)
    parts[0] = flags.to_bytes(2, "big")
    return b"".join(parts)


def pack_locator(locator: Locator, list_count: int) -> bytes:
    """Check a locator and pack it: kind(1) list(2, 65535 none) comparison(1) argument."""
    # type() is, not isinstance: a get's and a commit's path (mypy narrows on both).
    # The fields unpacked, not read by name; the fixed part packed at once.
    if type(locator) is Head:
        number, key, compare = locator
        if (
            type(number) is not int
            or not 0 <= number < list_count
            or (key is not None and (type(key) is not bytes or len(key) != 16))
            or type(compare) is not Compare
        ):
            v.check_locator(locator, list_count)
        # _HOW[compare], without the enum's hash (a Python call)
        how = b"<" if compare is _LE else b"=" if compare is _EQ else b">"
        if key is None:
            return _LOCATOR.pack(b"h", number, how)
        return _LOCATOR.pack(b"h", number, how) + key
    if type(locator) is ById:
        entry_id, on_list = locator
        if on_list is None:
            if type(entry_id) is not bytes or len(entry_id) != 12:
                v.check_locator(locator, list_count)
            return b"i\xff\xff=" + entry_id
        if (
            type(entry_id) is not bytes
            or len(entry_id) != 12
            or type(on_list) is not int
            or not 0 <= on_list < list_count
        ):
            v.check_locator(locator, list_count)
        return _LOCATOR.pack(b"i", on_list, b"=") + entry_id
    v.check_locator(locator, list_count)
    kind = type(locator)
    if kind is Tail:
        assert isinstance(locator, Tail)
        return b"t" + locator.list_number.to_bytes(2, "big") + b"="
    if kind is ByKey:
        assert isinstance(locator, ByKey)
        how = _HOW[locator.compare]
        return b"k" + locator.list_number.to_bytes(2, "big") + how + locator.key
    assert isinstance(locator, BySecondaryKey)
    return b"s" + locator.list_number.to_bytes(2, "big") + b"=" + locator.secondary_key


def pack_move(move: BulkMove) -> bytes:
    """One bulk move for ``bulk_move.lua``: id, to, from, flags, then what changes."""
    new_key, set_version, skey = move.new_key, move.set_version, move.new_secondary_key
    from_list = _NO_LIST if move.from_list is None else move.from_list
    if set_version == 0 and skey is UNCHANGED and new_key is not None:
        # A put's commit (new key, version 0), the bulk move made most.
        return b"".join((_MOVE.pack(move.entry_id, move.to_list, from_list, 3), new_key, _ZERO8))
    flags = 0
    tail = b""
    if new_key is not None:
        flags |= 1
        tail += new_key
    if set_version is not None:
        flags |= 2
        tail += _U64.pack(set_version)
    elif move.increment_version:
        flags |= 4
    if skey is None:
        flags |= 16
    elif skey is not UNCHANGED:
        assert isinstance(skey, bytes)
        flags |= 8
        tail += skey
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
