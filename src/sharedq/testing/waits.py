"""Waiting, in a test, until another thread sleeps in ``wait_events``.

A test of "woken by the change, not by polling" must make its change while the waiter
sleeps: made before, the change queues an event the waiter takes at once, and the test
passes without testing a wake-up.  Sleeping a while first only makes that likely; this
seam looks at the waiting thread's stack (:func:`sys._current_frames`) until it is
blocked inside ``ListStructure.wait_events`` having found no event:

* memory backend: on its user's condition (``threading.Condition.wait``);
* Redis backend: in ``block``, awaiting the reply to its ``XREAD BLOCK``;
* any other backend: in a ``threading`` wait, or in a socket read, select or poll
  (the innermost Python frame's name says which) somewhere below ``wait_events``;
* or so in a ``wait_for_event`` below a ``take`` with ``wait``.

A backend that blocks some other way fails the conformance check that uses this
(:func:`wait_asleep_in_wait_events` raises after its timeout): never a silent pass.
"""

from __future__ import annotations

import sys
import threading

from sharedq.clock import retry_until

__all__ = ["asleep_in_wait_events", "wait_asleep_in_wait_events"]

#: Innermost frame names of a thread blocked on a socket (other backends).
_BLOCKING_READS = ("read", "recv", "select", "poll")


def asleep_in_wait_events(thread: threading.Thread) -> bool:
    """Whether ``thread`` is blocked in ``wait_events`` now, having found no event."""
    frame = sys._current_frames().get(thread.ident or 0)
    stack = []  # function names, innermost first
    while frame is not None:
        stack.append(frame.f_code.co_name)
        frame = frame.f_back
    if "wait_events" not in stack[1:]:
        # A take that sleeps first (``take`` with ``wait``) sleeps in its backend's
        # ``wait_for_event``, or in a function of that name that sends both.
        return "wait_for_event" in stack[1:] and (
            stack[0] == "wait" or any(word in stack[0] for word in _BLOCKING_READS)
        )
    inside = stack[stack.index("wait_events") - 1]
    if inside == "wait" or (inside == "block" and "read" in stack[0]):
        return True  # the memory and Redis backends
    return stack[0] == "wait" or any(word in stack[0] for word in _BLOCKING_READS)


def wait_asleep_in_wait_events(*threads: threading.Thread, timeout_s: float = 10.0) -> None:
    """Return once every thread of ``threads`` sleeps in ``wait_events`` at the same time;
    ``AssertionError`` if they do not within ``timeout_s`` seconds."""
    if not retry_until(
        lambda: all(asleep_in_wait_events(thread) for thread in threads),
        timeout_s=timeout_s,
        first_pause_s=0.001,
        longest_pause_s=0.02,
    ):
        names = [thread.name for thread in threads if not asleep_in_wait_events(thread)]
        raise AssertionError(f"not asleep in wait_events after {timeout_s:g} s: {names}")
