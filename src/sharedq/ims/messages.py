"""An IMS message as the CQS carries it: a small prefix, then segments as LLZZ + data.

``format (1) | source LTERM (8)``, then each segment as IMS writes it: ``LL`` (2 bytes,
big-endian, the segment's length including the four bytes of ``LLZZ``), ``ZZ`` (2 zero
bytes), the data.  The source LTERM is where the I/O PCB's reply goes; it stays the
same through a program-to-program switch (figure 72: PGMB answers LTERMA).  The whole
is cut into queue buffers (:func:`buffers`): one buffer is a one-part CQS message; more
go through the CQS multi-part put, parts 2..n on a staging queue first (§1.9).
A conversational message has format 2: its first segment is the conversation's SPA
(§10.1, :mod:`sharedq.ims.spa`).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from sharedq.ims.errors import IMSReason, ims_error

FORMAT = 1
#: The format of a conversational message (its first segment is the SPA).
FORMAT_SPA = 2
_PREFIX = struct.Struct(">B8s")
_LLZZ = struct.Struct(">HH")
#: The longest segment's data (LL counts itself and ZZ).
MAX_SEGMENT = 0xFFFF - _LLZZ.size


@dataclass(frozen=True)
class ImsMessage:
    """A message's segments and the LTERM it came from (blank: none)."""

    segments: tuple[bytes, ...]
    source: str = ""
    #: The first segment is a conversation's SPA.
    spa: bool = False

    def encode(self) -> bytes:
        """The prefix and the segments, as the queue buffers hold them."""
        fmt = FORMAT_SPA if self.spa else FORMAT
        out = [_PREFIX.pack(fmt, self.source.encode("ascii").ljust(8))]
        for seg in self.segments:
            out.append(_LLZZ.pack(len(seg) + _LLZZ.size, 0) + seg)
        return b"".join(out)


def make(segments: Sequence[object], source: str = "") -> ImsMessage:
    """A message of ``segments`` (bytes, or str as ASCII); ``BAD_ARGUMENT`` if one is
    not, is empty or is too long."""
    if not segments:
        raise ims_error(IMSReason.BAD_ARGUMENT, "a message has at least one segment")
    out = []
    for seg in segments:
        raw = seg.encode("ascii") if isinstance(seg, str) else seg
        if not isinstance(raw, bytes) or not 1 <= len(raw) <= MAX_SEGMENT:
            raise ims_error(
                IMSReason.BAD_ARGUMENT, f"a segment is 1 to {MAX_SEGMENT} bytes, not {seg!r}"
            )
        out.append(raw)
    return ImsMessage(tuple(out), source)


def decode(body: bytes) -> ImsMessage:
    """The message a CQS message's body holds; ``QUEUE_ERROR`` if it is not one."""
    if len(body) < _PREFIX.size or body[0] not in (FORMAT, FORMAT_SPA):
        raise ims_error(IMSReason.QUEUE_ERROR, f"not an IMS message: {body[:16]!r}")
    _, source = _PREFIX.unpack_from(body)
    at, segments = _PREFIX.size, []
    while at < len(body):
        if at + _LLZZ.size > len(body):
            raise ims_error(IMSReason.QUEUE_ERROR, "a segment's LLZZ is cut short")
        length, _ = _LLZZ.unpack_from(body, at)
        if length < _LLZZ.size + 1 or at + length > len(body):
            raise ims_error(IMSReason.QUEUE_ERROR, f"a segment's LL {length} is wrong")
        segments.append(body[at + _LLZZ.size : at + length])
        at += length
    spa = body[0] == FORMAT_SPA
    if spa and not segments:
        raise ims_error(IMSReason.QUEUE_ERROR, "a conversational message without its SPA")
    return ImsMessage(tuple(segments), source.decode("ascii").rstrip(), spa)


def buffers(encoded: bytes, size: int) -> list[bytes]:
    """``encoded`` cut into queue buffers of ``size`` bytes (the last may be shorter)."""
    return [encoded[at : at + size] for at in range(0, len(encoded), size)] or [b""]
