"""STCK-like stamps for the queue manager, read from its injected clock.

The patent orders messages by the time-of-day clock (STCK) value the putting queue
manager assigned, not by the order of the writes (p[38]); UOW ids are the manager's id
and the high seven bytes of an STCK (p[57]).  Two stamps of one manager must never be
equal, even when the clock has not moved, so :class:`Stamps` hands out strictly
increasing values; the putting manager's id, placed after the stamp in every key,
breaks ties between managers.

A stamp is microseconds since the Unix epoch (the clock's ``now_us()``) shifted left
12 bits, like an STCK's bit 51 ticking each microsecond (it lasts until the year
2112).  The clock is :class:`sharedq.clock.Clock`; tests inject a
:class:`~sharedq.clock.ManualClock` so that put times and expiry are exact.
"""

from __future__ import annotations

import os
import threading
from time import time_ns

from sharedq.clock import Clock, SystemClock

#: Bits below the microsecond in a stamp (an STCK's bit 51 is the microsecond).
STAMP_SHIFT = 12
_STAMP_MASK = (1 << 64) - 1


def stamp_seconds(stamp: int) -> float:
    """The time of day, in seconds since the epoch, that a stamp was taken at."""
    return (stamp >> STAMP_SHIFT) / 1_000_000


class Stamps:
    """A manager's source of STCK-like stamps, UOW ids and list entry ids.

    Thread-safe; every value is strictly greater than the one before, whatever the
    clock does.  Entry ids (the patent's PLEIDs, assigned by the manager, p[115]) are
    ``manager id || stamp || 3-byte incarnation nonce``: unique in the structure while
    the manager's id is, and still unique after a restart with a clock that went back.
    """

    def __init__(self, clock: Clock, qm_id: int) -> None:
        self.clock = clock
        #: The manager's id: the first byte of every UOW and entry id it makes.
        self.qm_id = qm_id
        self._qm_byte = bytes((qm_id,))
        self._nonce = os.urandom(3)
        self._last = 0
        self._last_uow = 0
        self._lock = threading.Lock()

    def stamp(self) -> int:
        """The next stamp: the clock's reading, or one more than the last if not later."""
        return self._issue(None, False)[0]

    def _issue(self, given: int | None, uow: bool) -> tuple[int, int]:
        """The one place stamps and UOW values are handed out, under one lock.

        With ``given`` None a new stamp is taken (the clock's reading, or one more
        than the last if not later), else ``given`` is the stamp; with ``uow`` a new
        UOW value (the stamp's high 7 bytes, or one more than the last if not later) is
        taken too, else it is 0.  Returns the stamp and the UOW value.
        """
        if given is None:
            clock = self.clock
            # The system clock's now_us() without its call (every put).
            value = (
                time_ns() // 1000 if type(clock) is SystemClock else clock.now_us()
            ) << STAMP_SHIFT
        with self._lock:
            if given is None:
                if value <= self._last:
                    value = self._last + 1
                stamp = self._last = value & _STAMP_MASK
            else:
                stamp = given
            if not uow:
                return stamp, 0
            unit = stamp >> 8
            if unit <= self._last_uow:
                unit = self._last_uow + 1
            self._last_uow = unit
            return stamp, unit

    def entry_id(self, stamp: int | None = None) -> bytes:
        """A new 12-byte entry id; pass the put's stamp to save a clock reading."""
        if stamp is None:
            stamp = self.stamp()
        return self._qm_byte + stamp.to_bytes(8, "big") + self._nonce

    @property
    def nonce(self) -> bytes:
        """Three random bytes that tell this incarnation's ids from any earlier one's."""
        return self._nonce

    def stamp_and_uow_id(self) -> tuple[int, bytes]:
        """:meth:`stamp`, then :meth:`uow_id` of it (a put out of syncpoint takes both),
        under one lock."""
        stamp, unit = self._issue(None, True)
        return stamp, self._qm_byte + unit.to_bytes(7, "big")

    def uow_id(self, stamp: int | None = None) -> bytes:
        """A new 8-byte UOW id: the manager id, then the high 7 bytes of a stamp.

        Pass a stamp just taken (a put's) to save a clock reading.
        """
        return self._qm_byte + self._issue(stamp, True)[1].to_bytes(7, "big")
