"""Get-wait: sleep until a queue's committed range goes from empty to non-empty (§5.10).

A get that finds nothing registers a monitor on the put list's committed key range
(or, for a get by id on an indexed queue, on the sublist of entries with that
secondary key) and sleeps until the structure queues an event for it.  Registration
reports whether the watched set is non-empty already, which closes the race with a
commit between the failed get and the registration (§5.10 [I]).  Nothing polls: the
thread sleeps in the structure's ``wait_events``, woken by the change that queued the
event.

A structure delivers events per user, that is per manager, while several threads of
the manager may be waiting on different queues.  :class:`EventDispatcher` lets one
of them (the *pump*) sleep in ``wait_events`` and hand out what arrives; the others
sleep on a condition.  When the pump's own wait ends, another waiter takes over.
"""

from __future__ import annotations

import threading
import time

from sharedq.seam.access import StructureAccess


class EventDispatcher:
    """Hands the monitor events of one connection to the threads waiting for them."""

    def __init__(self, acc: StructureAccess) -> None:
        self._acc = acc
        self._cond = threading.Condition()
        self._fired: set[int] = set()
        self._pumping = False

    def wait(self, monitor_id: int, timeout: float) -> bool:
        """Sleep until an event for ``monitor_id`` arrives (``True``) or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        generation = self._acc.generation
        with self._cond:
            while True:
                if monitor_id in self._fired:
                    self._fired.discard(monitor_id)
                    return True
                if self._acc.generation != generation:
                    return True  # moved to a copy of the structure: register again
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                if self._pumping:
                    self._cond.wait(remaining)
                    continue
                self._pumping = True
                self._cond.release()
                try:
                    events = self._acc.wait_events(remaining)
                finally:
                    self._cond.acquire()
                    self._pumping = False
                    self._cond.notify_all()
                for event in events:
                    self._fired.add(event.monitor_id)

    def forget(self, monitor_id: int) -> None:
        """Drop an event that arrived for a monitor nobody waits on any more."""
        with self._cond:
            self._fired.discard(monitor_id)
