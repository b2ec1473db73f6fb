"""A CQS message as list entries: a 60-byte prefix, then the client's bytes.

Prefix (big-endian): format (1), flags (1: recoverable, has staging parts), part (2:
0 for part 1, else the part's index), parts (2: how many in all), put time in
microseconds (8), the 32-byte unit of work, the 16-byte staging queue name (zeros when
the message is one part).  The entry's key is its queue's name.  Parts 2..n carry the
same prefix with their own index, keyed by the staging name (redbook §2.5).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from sharedq.cf.types import MAX_ENTRY_BYTES

_PREFIX = struct.Struct(">BBHHQ32s16s")
PREFIX_LENGTH = _PREFIX.size
#: Where the unit of work lies in the prefix (after format, flags, part, parts, time).
UOW_OFFSET = struct.calcsize(">BBHHQ")
FORMAT = 1
RECOVERABLE = 0x01
STAGED = 0x02
NO_STAGING = b"\x00" * 16
#: The most client bytes one entry holds.
PART_BYTES = MAX_ENTRY_BYTES - PREFIX_LENGTH


@dataclass(frozen=True, slots=True)
class Prefix:
    """What a message entry says of itself."""

    recoverable: bool
    part: int
    parts: int
    put_us: int
    uow: bytes
    staging: bytes | None

    def pack(self, body: bytes) -> bytes:
        flags = (RECOVERABLE if self.recoverable else 0) | (STAGED if self.staging else 0)
        return (
            _PREFIX.pack(
                FORMAT,
                flags,
                self.part,
                self.parts,
                self.put_us,
                self.uow,
                self.staging or NO_STAGING,
            )
            + body
        )


def unpack(data: bytes) -> tuple[Prefix, bytes]:
    """An entry's prefix and the client's bytes after it."""
    _, flags, part, parts, put_us, uow, staging = _PREFIX.unpack_from(data)
    prefix = Prefix(
        bool(flags & RECOVERABLE),
        part,
        parts,
        put_us,
        uow,
        staging if flags & STAGED else None,
    )
    return prefix, data[PREFIX_LENGTH:]


def facts(data: bytes) -> tuple[bool, int | None, bytes | None, bytes | None]:
    """What a log record says of the message an entry holds: whether it is recoverable
    (the seam's "persistent"); CQS messages have no priority or ids of their own."""
    if len(data) < PREFIX_LENGTH:
        return True, None, None, None
    return bool(data[1] & RECOVERABLE), None, None, None


def uow_in(data: bytes) -> bytes | None:
    """The unit of work in an entry's prefix (``None``: not a message entry)."""
    return data[UOW_OFFSET : UOW_OFFSET + 32] if len(data) >= PREFIX_LENGTH else None


def split(body: bytes | list[bytes] | tuple[bytes, ...]) -> list[bytes]:
    """The parts of a message: as the client gave them, or ``body`` cut to fit entries."""
    if isinstance(body, bytes):
        if len(body) <= PART_BYTES:
            return [body]
        return [body[i : i + PART_BYTES] for i in range(0, len(body), PART_BYTES)]
    return list(body)
