"""A manager's statistics window on one queue, for its queue depth event messages.

Each event message a manager issues for a queue carries what *that* manager did on
the queue since its previous event message on it (or since it first used the queue):
how many messages it put (enqueues) and got (dequeues), the highest depth it saw, and
how long the window has been open (spec QD-4, QD-5, QD-10; MQ's QSTATS).  The window
resets after each message the manager issues, so an idle manager's next message has
zero counts and no high depth (a "null event message", QD-6).

The counts are kept at put and get time, in the manager's memory: a few integer
operations per call, no request.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Window:
    """What one window held when it was closed (the numbers an event message carries)."""

    enqueues: int
    dequeues: int
    #: The highest depth this manager's puts and gets saw; ``None``: it saw none.
    high_depth: int | None
    since_reset_s: float

    @property
    def idle(self) -> bool:
        """Nothing happened in the window: a null event message."""
        return self.enqueues == 0 and self.dequeues == 0


class EventStats:
    """Counts of one manager's puts and gets on one queue since its last event message.

    Updated without a lock (an increment lost to a race between two threads of one
    manager costs one count in a statistic, never a message); closed under a lock.
    """

    __slots__ = ("_lock", "dequeues", "enqueues", "high_depth", "started_s")

    def __init__(self, started_s: float) -> None:
        self._lock = threading.Lock()
        self.started_s = started_s
        self.enqueues = 0
        self.dequeues = 0
        self.high_depth = -1

    def put(self, depth: int | None) -> None:
        """A put by this manager; ``depth`` after it, when known."""
        self.enqueues += 1
        if depth is not None and depth > self.high_depth:
            self.high_depth = depth

    def got(self, depth: int | None) -> None:
        """A get by this manager; ``depth`` after it, when known."""
        self.dequeues += 1
        if depth is not None and depth > self.high_depth:
            self.high_depth = depth

    def close(self, now_s: float) -> Window:
        """The window's numbers; a new window opens at ``now_s``."""
        with self._lock:
            window = Window(
                self.enqueues,
                self.dequeues,
                None if self.high_depth < 0 else self.high_depth,
                max(0.0, now_s - self.started_s),
            )
            self.started_s = now_s
            self.enqueues = self.dequeues = 0
            self.high_depth = -1
            return window
