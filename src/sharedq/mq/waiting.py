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

Two round trips per message a waiting get delivers (§5.10 with the list structure's
``take``): the try that finds nothing registers the monitor in the same request; the
pump's sleep and its try after waking are one request (``take`` with ``wait``: on
Redis an ``XREAD BLOCK`` and the call sent together, the server running the call as
soon as the wait ends), which takes the manager's events and moves the head, and
hands the events to the threads they are for (:meth:`EventDispatcher.deliver`).  A
waiter that is not the pump sleeps on the dispatcher and makes its own try when an
event for it is handed out.  The monitor
on a queue's committed range stays registered when the wait ends, kept by the
dispatcher for the manager's next wait on that queue (:meth:`EventDispatcher.borrow`):
a consumer that waits again and again registers once.  A kept monitor queues at most
one event while nobody waits (a non-empty event is queued once until taken); the next
try takes it, and at worst it wakes its next waiter once for nothing.
"""

from __future__ import annotations

import dataclasses
import operator
import threading
import time
from collections.abc import Callable

from sharedq.cf import MonitorEvent, MonitorSpec
from sharedq.seam.access import StructureAccess


class EventDispatcher:
    """Hands the monitor events of one connection to the threads waiting for them."""

    def __init__(self, acc: StructureAccess) -> None:
        self._acc = acc
        self._cond = threading.Condition()
        self._fired: set[int] = set()
        self._pumping = False
        #: Monitors kept registered between waits, by what they watch (``_watched``);
        #: and the structure generation they were registered on.
        self._idle: dict[tuple[object, ...], list[int]] = {}
        self._generation = acc.generation
        #: Counts the times every waiter was told to look again (events lost in flight).
        self._rounds = 0
        #: Threads asleep on the condition now: with none, nobody is notified (a lone
        #: waiter's pump hands out and ends without the condition's Python-level
        #: notify, on the path of every message it delivers).
        self._sleepers = 0

    def wait(
        self, monitor_id: int, timeout: float, pump: Callable[[float], None] | None = None
    ) -> bool:
        """Sleep until an event for ``monitor_id`` arrives, or one may be queued for the
        manager (``True``: the caller's next request takes the events, ``take`` with
        ``take_events``, and hands them here), or ``timeout`` passes (``False``).

        ``pump(seconds)``, if given, is how this thread sleeps when it is the pump: a
        request that sleeps and then makes the caller's next try (``take`` with
        ``wait``), handing out the events it takes; ``True`` once it is made.
        """
        deadline = time.monotonic() + timeout
        generation = self._acc.generation
        with self._cond:
            rounds = self._rounds
            while True:
                if self._rounds != rounds:
                    return True  # events were taken and lost: look again
                if monitor_id in self._fired:
                    self._fired.discard(monitor_id)
                    return True
                if self._acc.generation != generation:
                    return True  # moved to a copy of the structure: register again
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                if self._pumping:
                    self._sleepers += 1
                    try:
                        self._cond.wait(remaining)
                    finally:
                        self._sleepers -= 1
                    continue
                self._pumping = True
                self._cond.release()
                try:
                    if pump is None:
                        self._acc.wait_events(remaining, take=False)
                    else:
                        pump(remaining)
                finally:
                    self._cond.acquire()
                    self._pumping = False
                    if self._sleepers:
                        self._cond.notify_all()
                return pump is not None or time.monotonic() < deadline

    def deliver(self, events: list[MonitorEvent]) -> None:
        """Events a request took: wake the threads waiting for them."""
        if events:
            with self._cond:
                fired = self._fired
                for event in events:
                    fired.add(event.monitor_id)
                if self._sleepers:
                    self._cond.notify_all()

    def wake_all(self) -> None:
        """A request that took events failed before handing them out: every waiter
        looks again (a wake-up for nothing, rather than one missed)."""
        with self._cond:
            self._rounds += 1
            self._cond.notify_all()

    def clear(self, monitor_id: int) -> None:
        """Forget what fired for ``monitor_id`` so far: its waiter is about to look again."""
        if self._fired:
            with self._cond:
                self._fired.discard(monitor_id)

    def borrow(self, spec: MonitorSpec) -> int | None:
        """A monitor of ``spec`` kept from an earlier wait, for this waiter alone."""
        with self._cond:
            if self._generation != self._acc.generation:
                # The structure was copied: the kept monitors were on the old one.
                self._generation = self._acc.generation
                self._idle.clear()
                self._fired.clear()
            kept = self._idle.get(_watched(spec))
            return kept.pop() if kept else None

    def give_back(self, spec: MonitorSpec, monitor_id: int, generation: int) -> bool:
        """Keep ``monitor_id`` registered for the next wait on ``spec``; ``False`` when it
        was registered on a structure since replaced by its copy (stop it instead)."""
        with self._cond:
            if generation == self._generation == self._acc.generation:
                self._idle.setdefault(_watched(spec), []).append(monitor_id)
                return True
            return False

    def forget(self, monitor_id: int) -> None:
        """Drop an event that arrived for a monitor nobody waits on any more."""
        with self._cond:
            self._fired.discard(monitor_id)


#: A spec's fields as a key of the kept monitors, every field in one C call: hashed and
#: compared in C, where a spec's dataclass ``__hash__`` and ``__eq__`` are Python calls
#: (two a lookup; one lookup on the way out of every wait that delivered).
_watched: Callable[[MonitorSpec], tuple[object, ...]] = operator.attrgetter(
    *(field.name for field in dataclasses.fields(MonitorSpec))
)
