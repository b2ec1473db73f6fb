"""The recovery machinery's own entries in a structure, and its two locks.

Each structure's *control list* (the server layer says which: list 0 for the queue
manager) holds, besides the server layer's entries, these, with program-assigned ids
``X'FF' | kind | payload`` and keys equal to the id padded with zeros:

==========  ============================================================================
``K``       the structure checkpoint's function entry: its master while one runs, how
            many have completed (the *generation* servers watch to take their system
            checkpoints), and what the last one wrote
``B``       the structure copy's function entry (its master while one runs)
``V``       the structure's identity: an id made when it was initialised, recovered or
            copied, and how; a structure without one is *empty* to recovery
``P`` hash  a server's last system checkpoint position (the redbook's entry on the
            control queue), the name hashed in the id and in full in the data
==========  ============================================================================

They are written straight to the structure, not logged: they describe the structure
rather than hold anything recoverable, and recovery and checkpoints rewrite them.  A
checkpoint records them as nonrecoverable objects.

Two lock-table entries are the machinery's: the *control lock* serialises master
elections (obtain it, look at the function's entry, write your name, release it: the
redbook's control-queue protocol, §2.2.3) and the *quiesce lock* is held by a
structure checkpoint's master while it copies the structure (every server's changes
are conditioned on it, see :mod:`sharedq.recovery.quiesce`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import msgpack

from sharedq.cf import (
    ById,
    ByKey,
    Compare,
    EntryExists,
    ListEntry,
    ListStructure,
    NoSuchEntry,
    VersionMismatch,
)

KIND_CHECKPOINT = b"K"
KIND_COPY = b"B"
KIND_MARKER = b"V"
KIND_POSITION = b"P"
#: The kinds of control entry the machinery owns (none of them recoverable).
MACHINERY_KINDS = frozenset({KIND_CHECKPOINT, KIND_COPY, KIND_MARKER, KIND_POSITION})
_MARK = 0xFF

_T = TypeVar("_T")

#: A change to make: given the connection and the locks it must be conditioned on
#: (``not_locked``), it makes the request.
GatedChange = Callable[[ListStructure, tuple[int, ...]], _T]


class Runner(Protocol):
    """How a change is made: straight (:func:`direct`), or held while the structure is
    quiesced (``QuiesceGate.run``, which conditions it on the quiesce lock)."""

    def __call__(self, conn: ListStructure, change: GatedChange[_T]) -> _T: ...


def direct(conn: ListStructure, change: GatedChange[_T]) -> _T:
    """Make the change at once, on no lock."""
    return change(conn, ())


@dataclass(frozen=True)
class ControlArea:
    """Where the machinery keeps its entries in a structure, and which locks are its own.

    The defaults are the queue manager's layout: list 0, locks 0 and 1.
    """

    list_number: int = 0
    control_lock: int = 0
    quiesce_lock: int = 1

    def entry_id(self, kind: bytes, payload: bytes = b"") -> bytes:
        body = kind + payload
        if len(kind) != 1 or len(body) > 11:
            raise ValueError(f"bad control entry id: kind {kind!r}, payload {payload!r}")
        return bytes((_MARK,)) + body + b"\x00" * (11 - len(body))

    @staticmethod
    def key(entry_id: bytes) -> bytes:
        return entry_id + b"\x00\x00\x00\x00"

    def key_range(self, kind: bytes) -> tuple[bytes, bytes]:
        prefix = bytes((_MARK,)) + kind
        return prefix + b"\x00" * 14, prefix + b"\xff" * 14

    def is_machinery(self, entry: ListEntry) -> bool:
        """Whether an entry is one of the machinery's own (never recoverable)."""
        eid = entry.entry_id
        return (
            entry.list_number == self.list_number
            and eid[0] == _MARK
            and eid[1:2] in MACHINERY_KINDS
        )


def name_hash(name: str) -> bytes:
    """Ten bytes that stand for a server's name in a ``P`` entry's id."""
    return hashlib.sha256(name.encode()).digest()[:10]


def pack(value: dict[str, Any]) -> bytes:
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


def unpack(data: bytes) -> dict[str, Any]:
    value: dict[str, Any] = msgpack.unpackb(data, raw=False)
    return value


def read(
    conn: ListStructure, area: ControlArea, kind: bytes, payload: bytes = b""
) -> tuple[ListEntry, dict[str, Any]] | None:
    """A control entry and its value, or ``None``."""
    entry_id = area.entry_id(kind, payload)
    entry = conn.read(ByKey(area.list_number, area.key(entry_id), Compare.EQ))
    return None if entry is None else (entry, unpack(entry.data))


def scan(conn: ListStructure, area: ControlArea, kind: bytes) -> list[dict[str, Any]]:
    """The values of every control entry of one kind."""
    low, high = area.key_range(kind)
    return [unpack(e.data) for e in conn.scan(area.list_number, low, high)]


def write_new(
    conn: ListStructure,
    area: ControlArea,
    kind: bytes,
    payload: bytes,
    value: dict[str, Any],
    *,
    run: Runner = direct,
) -> bool:
    """Write a control entry; ``False`` if it exists already (someone was first)."""
    entry_id = area.entry_id(kind, payload)
    data = pack(value)
    try:
        run(
            conn,
            lambda c, locks: c.write(
                area.list_number, area.key(entry_id), data, entry_id=entry_id, not_locked=locks
            ),
        )
    except EntryExists:
        return False
    return True


def replace(
    conn: ListStructure,
    area: ControlArea,
    entry: ListEntry,
    value: dict[str, Any],
    *,
    run: Runner = direct,
) -> bool:
    """Rewrite a control entry as read; ``False`` if it changed (or went) since."""
    data = pack(value)
    try:
        run(
            conn,
            lambda c, locks: c.update(
                ById(entry.entry_id, area.list_number),
                data=data,
                expect_version=entry.version,
                set_version=entry.version + 1,
                not_locked=locks,
            ),
        )
    except (VersionMismatch, NoSuchEntry):
        return False
    return True


def put(
    conn: ListStructure,
    area: ControlArea,
    kind: bytes,
    payload: bytes,
    value: dict[str, Any],
    *,
    run: Runner = direct,
) -> None:
    """Write or rewrite a control entry, whatever it held."""
    for _ in range(100):
        found = read(conn, area, kind, payload)
        if found is None:
            if write_new(conn, area, kind, payload, value, run=run):
                return
        elif replace(conn, area, found[0], value, run=run):
            return
    raise RuntimeError(f"control entry {kind!r} kept changing")  # pragma: no cover


def delete(
    conn: ListStructure,
    area: ControlArea,
    kind: bytes,
    payload: bytes = b"",
    *,
    run: Runner = direct,
) -> None:
    """Delete a control entry if it is there."""
    entry_id = area.entry_id(kind, payload)
    locator = ByKey(area.list_number, area.key(entry_id), Compare.EQ)
    run(conn, lambda c, locks: c.delete(locator, not_locked=locks))
