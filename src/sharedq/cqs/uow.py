"""The unit-of-work id of CQS log records: 32 bytes (redbook Appendix B, figure 71).

``originating system (8) | arrival token (8) | processing system (8) | token (8)``.
The first 16 bytes are set when a message enters the system and stay the same for it
and every message spawned from it; the last 16 name the system and time of the step
that made this message, blank for the original (figure 72).  So a message and all its
descendants can be followed across systems by the first 16 bytes.

Decisions: figure 71's 34-byte IMS form ends in a 2-byte get/put flag; the 32-byte CQS
form drops it (the log record's type says put or read).  The tokens stand for the
seed's STCK values: microseconds since 1970 (UTC), unsigned big-endian, made strictly
increasing per :class:`TokenSource` so that two units of one system never share one.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from sharedq.clock import Clock
from sharedq.cqs.errors import CQSReason, cqs_error

UOW_LENGTH = 32
_SYSTEM = 8
_BLANK = b" " * _SYSTEM


def _system(name: str) -> bytes:
    raw = name.encode("ascii", "replace") if isinstance(name, str) else b""
    if not 1 <= len(raw) <= _SYSTEM:
        raise cqs_error(CQSReason.BAD_UOW, f"system id {name!r} must be 1 to 8 ASCII characters")
    return raw.ljust(_SYSTEM, b" ")


class TokenSource:
    """STCK-like tokens for one system: the clock's microseconds, strictly increasing."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._last = 0
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            token = max(self._clock.now_us(), self._last + 1)
            self._last = token
            return token


@dataclass(frozen=True, slots=True)
class Uow:
    """A 32-byte unit-of-work id; ``bytes(uow)`` gives it."""

    origin: bytes
    arrival: int
    processor: bytes = _BLANK
    processed: int = 0

    @classmethod
    def new(cls, system: str, tokens: TokenSource) -> Uow:
        """The id of a message entering the system at ``system`` now."""
        return cls(_system(system), tokens.next())

    def spawn(self, system: str, tokens: TokenSource) -> Uow:
        """The id of a message this one's processing makes at ``system`` now: the same
        first 16 bytes, this step's system and token after them."""
        return Uow(self.origin, self.arrival, _system(system), tokens.next())

    def __bytes__(self) -> bytes:
        return (
            self.origin
            + self.arrival.to_bytes(8, "big")
            + self.processor
            + self.processed.to_bytes(8, "big")
        )

    @property
    def origin_id(self) -> bytes:
        """The first 16 bytes: the same for a message and all it spawned."""
        return bytes(self)[:16]

    @classmethod
    def from_bytes(cls, raw: object) -> Uow:
        if not isinstance(raw, bytes) or len(raw) != UOW_LENGTH:
            raise cqs_error(CQSReason.BAD_UOW, f"a unit of work id is 32 bytes, not {raw!r}")
        return cls(
            raw[:8],
            int.from_bytes(raw[8:16], "big"),
            raw[16:24],
            int.from_bytes(raw[24:32], "big"),
        )

    def __str__(self) -> str:
        origin = self.origin.decode("ascii", "replace").rstrip()
        proc = self.processor.decode("ascii", "replace").rstrip()
        return f"{origin}/{self.arrival}:{proc or '-'}/{self.processed}"


def check_uow(uow: object) -> bytes:
    """A unit of work as its 32 bytes (given as :class:`Uow` or bytes)."""
    if isinstance(uow, Uow):
        return bytes(uow)
    return bytes(Uow.from_bytes(uow))
