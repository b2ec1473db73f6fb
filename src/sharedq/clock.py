"""Time for every layer: one :class:`Clock`, and one way to wait for something to happen.

Whatever reads the time or pauses is given a :class:`Clock` (``QueueManager(clock=...)``,
``RecoverySettings(clock=...)``, ``LogStream(clock=...)``) instead of calling
:mod:`time`, so that a test can run it on a :class:`ManualClock`.  The unit is in every
name: ``_s`` is seconds (a float), ``_us`` whole microseconds (an int).

* :meth:`Clock.now_s` and :meth:`Clock.now_us`: the time of day, since the Unix epoch
  (UTC): put times and expiry, log record times, checkpoint times.
* :meth:`Clock.monotonic_s`: a clock that never goes back, for deadlines and
  durations; only the difference between two readings means anything.
* :meth:`Clock.sleep_s`: pause the calling thread.

Waiting for something another thread, process or server does (a lock to be free, a
claim to be given up, a checkpoint to finish) is one loop, :func:`retry_until`: try,
and until the deadline pause and try again, each pause twice the one before up to a
longest.  A loop whose steps are not one attempt (the Redis client's resends) drives a
:class:`Backoff`, the same pauses and deadline, by hand.  Waiting for a change to a
list structure is not a loop at all: it is a monitor (``ListStructure.wait_events``).

This module is at the bottom of the layers, beside ``sharedq.errors``: it imports
nothing of sharedq, and a wait that times out returns, for its caller to raise the
error of its own layer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

__all__ = [
    "SYSTEM_CLOCK",
    "Backoff",
    "Clock",
    "ManualClock",
    "SystemClock",
    "is_clock",
    "retry_until",
]

_T = TypeVar("_T")


class Clock(Protocol):
    """Where a component reads the time and pauses (see the module)."""

    def now_s(self) -> float:
        """The time of day: seconds since the Unix epoch (UTC)."""
        ...

    def now_us(self) -> int:
        """The time of day: whole microseconds since the Unix epoch (UTC)."""
        ...

    def monotonic_s(self) -> float:
        """Seconds on a clock that never goes back (deadlines, durations); only the
        difference between two readings means anything."""
        ...

    def sleep_s(self, seconds: float) -> None:
        """Pause the calling thread for ``seconds``: afterwards :meth:`monotonic_s` is
        at least ``seconds`` later."""
        ...


def is_clock(value: object) -> bool:
    """Whether ``value`` has a :class:`Clock`'s methods (a protocol: no ``isinstance``)."""
    return all(
        callable(getattr(value, method, None))
        for method in ("now_s", "now_us", "monotonic_s", "sleep_s")
    )


class SystemClock:
    """The host's clocks: :func:`time.time_ns`, :func:`time.monotonic`, :func:`time.sleep`."""

    def __repr__(self) -> str:
        return "SystemClock()"

    def now_s(self) -> float:
        return time.time()

    def now_us(self) -> int:
        return time.time_ns() // 1000

    def monotonic_s(self) -> float:
        return time.monotonic()

    def sleep_s(self, seconds: float) -> None:
        time.sleep(seconds)


#: The host's clock: the default wherever a clock is injected.
SYSTEM_CLOCK: Clock = SystemClock()


class ManualClock:
    """A clock that moves only when told to, for tests (thread-safe).

    One reading serves as time of day and as monotonic time: it starts at ``start_s``
    (seconds since the epoch), moves by ``tick_s`` after each reading (so that two
    readings differ, if asked) and by :meth:`advance_s`.  It counts whole microseconds.

    :meth:`sleep_s` moves the clock on by ``seconds`` and returns at once, never
    blocking: a thread waiting on this clock reaches its deadline after the pauses it
    made, in no real time (a 300-second timeout is over at once, after the same
    attempts).  Give it to what waits only where nothing another thread must do
    meanwhile is waited for; a wait for another thread, process or server needs a clock
    whose sleep lets real time pass.
    """

    def __init__(self, start_s: float = 1_700_000_000.0, *, tick_s: float = 0.0) -> None:
        self._now_us = round(start_s * 1_000_000)
        self._tick_us = round(tick_s * 1_000_000)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<ManualClock {self._now_us / 1_000_000:.6f} s>"

    def now_us(self) -> int:
        with self._lock:
            now = self._now_us
            self._now_us += self._tick_us
            return now

    def now_s(self) -> float:
        return self.now_us() / 1_000_000

    def monotonic_s(self) -> float:
        return self.now_us() / 1_000_000

    def sleep_s(self, seconds: float) -> None:
        self.advance_s(seconds)

    def advance_s(self, seconds: float) -> None:
        """Move the clock on by ``seconds`` (put times after it are that much later,
        and messages expire)."""
        if seconds < 0:
            raise ValueError(f"a clock does not go back ({seconds!r} s)")
        with self._lock:
            self._now_us += round(seconds * 1_000_000)


class Backoff:
    """The pauses and the deadline of one retry loop.

    The deadline is ``timeout_s`` after the Backoff is made.  The first :meth:`pause` is
    ``first_pause_s``; each next one twice the one before, up to ``longest_pause_s``
    (``None``: every pause is ``first_pause_s``).  A pause is never cut short by the
    deadline: a loop looks at :meth:`expired` after each attempt, so the attempt after
    the last pause is made too.
    """

    def __init__(
        self,
        *,
        timeout_s: float,
        first_pause_s: float,
        longest_pause_s: float | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.clock = clock
        #: When the wait began, and when it is over (``clock.monotonic_s()`` readings).
        self.started_s = clock.monotonic_s()
        self.deadline_s = self.started_s + timeout_s
        self._pause_s = first_pause_s
        self._longest_s = first_pause_s if longest_pause_s is None else longest_pause_s

    def __repr__(self) -> str:
        return f"<Backoff next pause {self._pause_s:g} s, until {self.deadline_s:.3f}>"

    def expired(self) -> bool:
        """Whether the deadline has come."""
        return self.clock.monotonic_s() >= self.deadline_s

    def elapsed_s(self) -> float:
        """Seconds since the wait began."""
        return self.clock.monotonic_s() - self.started_s

    def pause(self) -> None:
        """Sleep the next pause, and double the one after (up to the longest)."""
        self.clock.sleep_s(self._pause_s)
        self._pause_s = min(self._pause_s * 2, self._longest_s)

    def retry(self, attempt: Callable[[], _T]) -> _T:
        """Call ``attempt`` until it returns a true value, pausing between calls; that
        value, or once the deadline has come the last (false) value.

        One round is: attempt, look at the deadline, pause.  So ``attempt`` is made at
        least once (even with a deadline passed already) and once more after the last
        pause; it may raise to end the wait with an error of its own.
        """
        while True:
            result = attempt()
            if result or self.expired():
                return result
            self.pause()


def retry_until(
    attempt: Callable[[], _T],
    *,
    timeout_s: float,
    first_pause_s: float,
    longest_pause_s: float | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> _T:
    """Call ``attempt`` until it returns a true value, for at most ``timeout_s``.

    Returns that value, or, once ``timeout_s`` have passed, the last (false) value:
    the caller raises its own layer's timeout.  Pauses between attempts start at
    ``first_pause_s`` and double up to ``longest_pause_s`` (``None``: they stay at
    ``first_pause_s``); see :class:`Backoff` for the order of a round.  A
    :class:`ManualClock` makes every pause at once (see there).

    Example: take a lock held by another process for up to 5 s::

        if not retry_until(try_lock, timeout_s=5, first_pause_s=0.005, longest_pause_s=0.1,
                           clock=clock):
            raise TimeoutError("the lock is still held")
    """
    backoff = Backoff(
        timeout_s=timeout_s,
        first_pause_s=first_pause_s,
        longest_pause_s=longest_pause_s,
        clock=clock,
    )
    return backoff.retry(attempt)
