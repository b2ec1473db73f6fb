"""Key codecs: how a put list, a descriptor list and a control list are keyed.

A put list (PLH) has three key spaces (patent §3.1).  Keys compare as unsigned byte
strings, so the committed portion always precedes the uncommitted one::

    committed     X'00'..X'09'  inverted priority, stamp, putting manager   every get
    uncommitted   X'F6'         then the committed key's first 10 bytes    its own UOW
    LHQC          X'FF' x 16    the queue's control entry                  nobody

Layouts (the patent's were stripped, gaps K1 and K2; these meet every constraint the
text states: byte 0, the zero low-order four bytes, the order by priority then put
time, and the committed key derivable from the uncommitted one)::

    uncommitted  F6 | 9-priority | stamp(8) | qm id | 00 00 00 00 00
    committed         9-priority | stamp(8) | qm id | 00 00 | 00 00 00 00

A get moves the head of the put list only if its key is <= X'0A00..00' (the committed
key comparator): key range checking on read.

Descriptor lists hold eUOWDs keyed ``structure number | UOW id | 000000 | part`` and
MUSEs keyed ``00 | UOW id | 00 x 7`` (p[272]-p[303]).

List 0 of every structure is its control list; its entries have program-assigned ids
beginning X'FF' (``FF | kind | payload``) and keys equal to the id padded with zeros,
so that one kind of control entry can be scanned as a key range.
"""

from __future__ import annotations

import hashlib
import struct

#: ``Head(plh, key=COMMITTED_COMPARATOR, compare=LE)`` takes only committed messages.
COMMITTED_COMPARATOR = b"\x0a" + b"\x00" * 15
#: The committed key range, for get-wait monitoring (gap L3).
COMMITTED_LOW = b"\x00" * 16
COMMITTED_HIGH = b"\x09" + b"\xff" * 15
#: First byte of every uncommitted put key.
UNCOMMITTED_MARK = 0xF6
UNCOMMITTED_LOW = b"\xf6" + b"\x00" * 15
UNCOMMITTED_HIGH = b"\xf6" + b"\xff" * 15
#: The key of a put list's control entry, the LHQC (gap K3): after every message.
LHQC_KEY = b"\xff" * 16
#: ``eUOWD_Key_Of_Corresponding_Muse`` of a unit of work that touched one structure.
NO_MUSE = b"\xff" * 16
#: Browse-next searches from the token with its low four bytes set to this (p[178]).
BROWSE_NEXT_SUFFIX = b"\x00\x00\x00\x01"
#: The first byte of every control-list entry id and key.
CONTROL_MARK = 0xFF

_UNCOMMITTED = struct.Struct(">BBQB5x")
_COMMITTED = struct.Struct(">BQB6x")
_TAIL6 = b"\x00" * 6


def uncommitted_key(priority: int, stamp: int, qm_id: int) -> bytes:
    """The key a put is written with, in or out of syncpoint (patent §5.2 step 2)."""
    return _UNCOMMITTED.pack(UNCOMMITTED_MARK, 9 - priority, stamp, qm_id)


def uncommitted_key_around(priority: int, qm_id: int) -> tuple[bytes, bytes]:
    """``(head, tail)``: ``head + stamp (8 bytes, big-endian) + tail`` is
    :func:`uncommitted_key` for any stamp (a batch of puts makes them once)."""
    key = uncommitted_key(priority, 0, qm_id)
    return key[:2], key[10:]


def committed_key(priority: int, stamp: int, qm_id: int) -> bytes:
    """The key a message has once committed: inverted priority, put stamp, manager."""
    return _COMMITTED.pack(9 - priority, stamp, qm_id)


def committed_form(key: bytes) -> bytes:
    """The committed key of a message, from either of its keys.

    The best-key rules compare the head of the put list with the committed form of a
    unit of work's own uncommitted puts (patent §5.5).
    """
    if key[0] == UNCOMMITTED_MARK:
        return key[1:11] + _TAIL6
    return key


def is_committed(key: bytes) -> bool:
    return key[0] <= 0x09


def is_uncommitted(key: bytes) -> bool:
    return key[0] == UNCOMMITTED_MARK


def priority_of(key: bytes) -> int:
    """The MQ priority (0-9, 9 highest) a message key carries."""
    inverted = key[1] if key[0] == UNCOMMITTED_MARK else key[0]
    return 9 - inverted


def stamp_of(key: bytes) -> int:
    """The put stamp a message key carries."""
    start = 2 if key[0] == UNCOMMITTED_MARK else 1
    return int.from_bytes(key[start : start + 8], "big")


def browse_next_key(token: bytes) -> bytes:
    """The search key of browse-next: the token with its low four bytes X'00000001'."""
    return token[:12] + BROWSE_NEXT_SUFFIX


# -- descriptors ------------------------------------------------------------------------


def euowd_key(structure_number: int, uow_id: bytes, part: int) -> bytes:
    """The key of part ``part`` of a UOW's descriptor for one structure (p[274])."""
    return bytes((structure_number,)) + uow_id + b"\x00\x00\x00" + part.to_bytes(4, "big")


def muse_key(uow_id: bytes) -> bytes:
    """The key of a multi-structure UOW's summary entry: structure number 0 (p[303])."""
    return b"\x00" + uow_id + b"\x00" * 7


def parse_descriptor_key(key: bytes) -> tuple[int, bytes, int]:
    """``(structure number, UOW id, part)``; structure number 0 is a MUSE (part 0)."""
    return key[0], key[1:9], int.from_bytes(key[12:16], "big")


# -- the control list ---------------------------------------------------------------------


def name_hash(name: str) -> bytes:
    """Ten bytes that stand for a name in a control entry id."""
    return hashlib.sha256(name.encode()).digest()[:10]


def control_id(kind: bytes, payload: bytes = b"") -> bytes:
    """The 12-byte entry id of a control entry: X'FF', a kind letter, the payload."""
    body = kind + payload
    if len(kind) != 1 or len(body) > 11:
        raise ValueError(f"bad control entry id: kind {kind!r}, payload {payload!r}")
    return bytes((CONTROL_MARK,)) + body + b"\x00" * (11 - len(body))


def control_key(entry_id: bytes) -> bytes:
    """The key of a control entry: its id followed by four zero bytes."""
    return entry_id + b"\x00\x00\x00\x00"


def control_range(kind: bytes) -> tuple[bytes, bytes]:
    """The key range holding every control entry of one kind."""
    prefix = bytes((CONTROL_MARK,)) + kind
    return prefix + b"\x00" * 14, prefix + b"\xff" * 14


def lhqc_id(list_number: int) -> bytes:
    """The entry id of the LHQC on put list ``list_number``."""
    return control_id(b"H", list_number.to_bytes(2, "big"))
