"""Binary framing of staging segments, and the damage a reader can find in them.

A segment file is an 8-byte header followed by frames::

    header:  b"SQLG"  u8 schema version  3 zero bytes
    frame:   u32 length (little-endian)  u32 CRC-32C of the body  body

and the body is a msgpack array of the record's fields in
:data:`sharedq.log.records.FIELDS` order.  A frame is written with one ``write``
call, so a crash leaves at most the last frame incomplete.

Why this shape: the length lets a reader step from frame to frame without parsing
bodies; the CRC-32C (hardware-accelerated through ``google-crc32c``) catches torn,
zero-filled and bit-flipped frames, and a corrupt length as well, since a wrong length
frames the wrong bytes and their checksum fails.  A msgpack array (not a map) keeps
bodies small and decodes straight into the record tuple.

Preallocated segments.  A writer creates its open segment with room allocated ahead
(``posix_fallocate``, :mod:`sharedq.log.segment`) and writes frames in place, so that a
sync has only data to make durable, not the file's new size.  Such a segment says so
in its header (the three reserved bytes are :data:`PREALLOCATED_MARK`), and the zeros
after its last frame are unwritten room, not damage: reading ends at a run of zeros
that goes to the end of the file.  Nothing else changes: zeros followed by anything
that is not zero, a torn frame before the zeros, and every damage in the middle are
reported exactly as in a segment without the mark.  The writer cuts the room off and
clears the mark when it closes the segment, so a closed segment reads as before, and
zeros at its end are damage.

Damage does not end the reading.  A frame that is not whole and sound is reported
(where and why) and skipped: the reader looks for the next sound frame after it
(:func:`resync`: the next offset where a frame's length, CRC-32C and record all
check, found through the msgpack array header every body starts with) and goes on
from there, so one flipped byte costs one record, not every record after it.  Which
records are then missing is told by their lsns (``continuity.py``), not here.
"""

from __future__ import annotations

import gc
import re
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum

import google_crc32c
import msgpack

from sharedq.log.records import FIELD_COUNT, SCHEMA_VERSION, LogRecord

#: The first bytes of every staging segment.
SEGMENT_MAGIC = b"SQLG"
#: Header of a segment: magic, schema version, reserved.
SEGMENT_HEADER = SEGMENT_MAGIC + bytes([SCHEMA_VERSION]) + bytes(3)
#: Bytes of the segment header.
SEGMENT_HEADER_BYTES = len(SEGMENT_HEADER)
#: The reserved bytes of the header of a segment written into preallocated room.
PREALLOCATED_MARK = b"PRE"
#: Header of a segment a writer has open with room allocated ahead (see above).
PREALLOCATED_HEADER = SEGMENT_MAGIC + bytes([SCHEMA_VERSION]) + PREALLOCATED_MARK
#: Bytes of a frame header: length and checksum.
FRAME_HEADER_BYTES = 8
#: The largest body accepted; a length above it is damage, not a record.
MAX_BODY_BYTES = 16 * 1024 * 1024

#: A frame header: the body's length and its CRC-32C.
FRAME = struct.Struct("<II")
_FRAME = FRAME
_NONZERO = re.compile(rb"[^\x00]")
_crc = google_crc32c.value
#: The first bytes of every frame body: the msgpack header of an array of
#: ``FIELD_COUNT`` elements (what :func:`resync` looks for).
_BODY_START: bytes = msgpack.packb([None] * FIELD_COUNT)[:-FIELD_COUNT]


class DamageReason(Enum):
    """What was wrong at the damaged offset."""

    #: The file ends inside a frame header or body: a torn or truncated tail.
    TRUNCATED = "truncated"
    #: A frame length of zero or above :data:`MAX_BODY_BYTES`.
    BAD_LENGTH = "bad length"
    #: The body's CRC-32C does not match: bit flips, zero fill, a torn write.
    BAD_CHECKSUM = "bad checksum"
    #: The checksum holds but the body is not a record of this schema.
    BAD_RECORD = "bad record"
    #: The segment header is missing, short or not a sharedq segment of this schema.
    BAD_HEADER = "bad header"
    #: A Parquet log data set could not be read.
    BAD_DATASET = "bad data set"


@dataclass(frozen=True)
class Damage:
    """Damage found in a segment or data set: where, why, and what was read around it.

    ``offset`` is the byte offset of the first frame not read (for a data set, 0);
    ``records_before`` the number of sound records before it in the file;
    ``resumed_at`` the offset of the next sound frame, where reading went on, or
    ``None`` when nothing sound follows (the damage runs to the end of the file: a
    *tail*, which is what a writer killed mid-write leaves).
    """

    path: str
    offset: int
    reason: DamageReason
    detail: str
    records_before: int
    resumed_at: int | None = None

    @property
    def at_tail(self) -> bool:
        """Whether nothing sound follows the damage in its file."""
        return self.resumed_at is None

    def __str__(self) -> str:
        after = (
            "nothing sound after it"
            if self.resumed_at is None
            else f"reading went on at byte {self.resumed_at}"
        )
        return (
            f"{self.path} at byte {self.offset}: {self.reason.value} ({self.detail}); "
            f"{self.records_before} records before it were read, {after}"
        )


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while decoding a batch of records.

    Decoding allocates a tuple per record (and msgpack another); with the collector on,
    its generation-0 passes over those new tuples cost three times the decoding itself.
    Records hold no reference cycles, so nothing is lost by collecting later.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def encode_frame(
    values: tuple[object, ...] | list[object], packer: msgpack.Packer | None = None
) -> bytes:
    """The frame of one record given as its field values in ``FIELDS`` order.

    A writer passes its own ``Packer`` (reused under its lock: cheaper than ``packb``,
    which builds one per call).
    """
    body: bytes = (packer or msgpack.Packer(use_bin_type=True)).pack(values)
    return _FRAME.pack(len(body), _crc(body)) + body


def check_header(buf: bytes, path: str) -> Damage | None:
    """Damage if ``buf`` does not start with a segment header of this schema."""
    if len(buf) < SEGMENT_HEADER_BYTES:
        return Damage(path, 0, DamageReason.TRUNCATED, f"header is {len(buf)} of 8 bytes", 0)
    if buf[:4] != SEGMENT_MAGIC:
        return Damage(path, 0, DamageReason.BAD_HEADER, f"magic is {buf[:4]!r}", 0)
    if buf[4] != SCHEMA_VERSION or buf[5:8] not in (bytes(3), PREALLOCATED_MARK):
        return Damage(
            path,
            0,
            DamageReason.BAD_HEADER,
            f"schema version {buf[4]}, expected {SCHEMA_VERSION}",
            0,
        )
    return None


def preallocated(buf: bytes) -> bool:
    """Whether ``buf`` starts with the header of a segment written into preallocated
    room (whose zeros at the end are not damage)."""
    return buf[5:8] == PREALLOCATED_MARK and buf[:5] == PREALLOCATED_HEADER[:5]


def decode_frames(
    buf: bytes, path: str, start: int = SEGMENT_HEADER_BYTES, *, zero_tail: bool = False
) -> tuple[list[LogRecord], int, list[Damage]]:
    """Decode every sound frame from ``start`` to the end of ``buf``, skipping damage.

    Returns the sound records in file order, the offset just after the last sound
    frame (where a writer may append again) and the damage found, each with where
    reading resumed.  ``zero_tail``: the segment was preallocated (:func:`preallocated`):
    zeros from a frame's start to the end of ``buf`` end the records, and zeros
    followed by bytes that are not a sound frame are a tail that starts at those bytes.
    """
    records: list[LogRecord] = []
    damages: list[Damage] = []
    good_end = start
    pos = start
    end = len(buf)
    while pos < end:
        before = len(records)
        pos, problem = _decode_run(buf, pos, records)
        if len(records) > before:
            good_end = pos
        if problem is None:
            break
        at = pos
        if zero_tail and not any(buf[pos : pos + 4]):  # no frame length: no frame here
            written = _NONZERO.search(buf, pos)
            if written is None:
                break  # unwritten room: the end of the records, not damage
            at = written.start()
        resume = resync(buf, pos + 1)
        if resume is None and at > pos:  # room, then bytes that are no frame: a tail
            problem = _decode_run(buf, at, [])[1] or problem
            pos = at
        damages.append(Damage(path, pos, problem[0], problem[1], len(records), resume))
        if resume is None:
            break
        pos = resume
    return records, good_end, damages


def resync(buf: bytes, start: int) -> int | None:
    """The offset of the first sound frame at or after ``start``, or ``None``.

    Every body is a msgpack array of :data:`FIELD_COUNT` fields, so a frame starts
    eight bytes before such an array header; a candidate counts only when its length
    fits, its CRC-32C matches and its body decodes as a record: a false match needs a
    checksum collision inside a record's own bytes.
    """
    end = len(buf)
    mark = buf.find(_BODY_START, start + FRAME_HEADER_BYTES)
    while mark != -1:
        at = mark - FRAME_HEADER_BYTES
        length, checksum = _FRAME.unpack_from(buf, at)
        body_end = mark + length
        if 0 < length <= MAX_BODY_BYTES and body_end <= end:
            body = buf[mark:body_end]
            if _crc(body) == checksum:
                try:
                    values = msgpack.unpackb(body, use_list=False, raw=False)
                except (ValueError, TypeError, msgpack.UnpackException):
                    values = None
                if type(values) is tuple and len(values) == FIELD_COUNT:
                    return at
        mark = buf.find(_BODY_START, mark + 1)
    return None


def _decode_run(
    buf: bytes, start: int, records: list[LogRecord]
) -> tuple[int, tuple[DamageReason, str] | None]:
    """Append sound frames from ``start`` to ``records`` until the end or a bad frame.

    Returns where it stopped and what was wrong there (``None`` at the end).  This is
    the hot loop of every read: keep it free of per-record function calls beyond the
    three C calls it needs.
    """
    append = records.append
    unpack_header = _FRAME.unpack_from
    unpackb = msgpack.unpackb
    crc = _crc
    new = tuple.__new__
    end = len(buf)
    pos = start
    problem: tuple[DamageReason, str] | None = None
    while pos < end:
        if end - pos < FRAME_HEADER_BYTES:
            problem = DamageReason.TRUNCATED, f"{end - pos} bytes of an 8-byte frame header"
            break
        length, checksum = unpack_header(buf, pos)
        if length == 0 or length > MAX_BODY_BYTES:
            problem = DamageReason.BAD_LENGTH, f"length {length}"
            break
        body_end = pos + FRAME_HEADER_BYTES + length
        if body_end > end:
            present = end - pos - FRAME_HEADER_BYTES
            problem = DamageReason.TRUNCATED, f"frame of {length} bytes, {present} present"
            break
        body = buf[pos + FRAME_HEADER_BYTES : body_end]
        if crc(body) != checksum:
            detail = f"CRC-32C {crc(body):#010x}, frame says {checksum:#010x}"
            problem = DamageReason.BAD_CHECKSUM, detail
            break
        try:
            values = unpackb(body, use_list=False, raw=False)
        except (ValueError, TypeError, msgpack.UnpackException) as exc:  # bad msgpack, utf-8
            problem = DamageReason.BAD_RECORD, str(exc)
            break
        if type(values) is not tuple or len(values) != FIELD_COUNT:
            problem = DamageReason.BAD_RECORD, f"body is not an array of {FIELD_COUNT} fields"
            break
        append(new(LogRecord, values))
        pos = body_end
    return pos, problem
