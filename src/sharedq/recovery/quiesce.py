"""The quiesce rule: while a checkpoint copies a structure, every server's changes wait.

A structure checkpoint's master holds the pair's *quiesce lock* (a lock-table entry,
:class:`~sharedq.recovery.control.ControlArea`) while it copies the structure.  Every
change a server makes is conditioned on that lock not being held by another user
(``not_locked``), so the structure refuses it atomically with ``LockHeld``; the
server's :class:`QuiesceGate` then waits until the lock is free and makes the request
again.  The request is held, then proceeds: it never fails because of the checkpoint
(seed 001: "the request is held until after the structure checkpoint is complete").
Reads are not held: they change nothing, and see the structure as the copy does.

The master's own copy is made through a connection of its own (another user), so
its server's other threads are held like everyone else's and the master cannot wait
for itself.  A master that dies holding the lock (its lease lapses, or it is marked
failed) is cleaned up by whichever waiter notices first, which releases the lock; the
waiter then tells its server, which takes the checkpoint over.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from typing import TypeVar

from sharedq.cf import CFError, ListStructure, LockHeld
from sharedq.clock import SYSTEM_CLOCK, Backoff, Clock
from sharedq.recovery.control import ControlArea, GatedChange
from sharedq.recovery.errors import RecoveryReason, recovery_error
from sharedq.recovery.master import release_if_failed

_T = TypeVar("_T")
#: First and longest pause between looks at a held quiesce lock, in seconds.
_FIRST_PAUSE, _LONGEST_PAUSE = 0.0005, 0.02
#: Seconds between looks at whether the holder of the lock has failed.
_HOLDER_CHECK = 0.25


class QuiesceGate:
    """Makes a server's changes wait while the structure is quiesced.

    Args:
        area: where the quiesce lock is.
        max_wait: seconds a request may wait before it fails (``QUIESCE_TIMEOUT``); a
            safety net for a lock nobody releases, far longer than any checkpoint's copy.
        on_master_failed: called with the failed master's user name after its lock was
            released, so that the server can take the checkpoint over.
        clock: what the waits are timed and paced on.
    """

    def __init__(
        self,
        area: ControlArea,
        *,
        max_wait: float,
        on_master_failed: Callable[[str], None] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.locks: tuple[int, ...] = (area.quiesce_lock,)
        self._clock = clock
        self._lock = area.quiesce_lock
        self._max_wait = max_wait
        self._on_master_failed = on_master_failed
        #: Requests held, and seconds they waited in all (for operators and tests).
        self.held = 0
        self.held_seconds = 0.0

    def __repr__(self) -> str:
        return f"<QuiesceGate lock={self._lock} held={self.held}>"

    def run(self, conn: ListStructure, change: GatedChange[_T]) -> _T:
        """Make a change conditioned on the quiesce lock, waiting while it is held."""
        while True:
            try:
                return change(conn, self.locks)
            except LockHeld:
                self.wait(conn)

    def wait(self, conn: ListStructure) -> bool:
        """Wait until the quiesce lock is free (or its failed holder is cleaned up).

        Returns whether it was held when looked at (``False``: free already).
        """
        clock = self._clock
        backoff = Backoff(
            timeout_s=self._max_wait,
            first_pause_s=_FIRST_PAUSE,
            longest_pause_s=_LONGEST_PAUSE,
            clock=clock,
        )
        next_check = backoff.started_s + _HOLDER_CHECK
        waited = False
        holder: int | None = None

        def free() -> bool:
            nonlocal next_check, waited, holder
            holder = conn.lock_holder(self._lock)
            if holder is None or holder == conn.user_id:
                return True
            if not waited:
                waited = True
                self.held += 1
            now = clock.monotonic_s()
            if now >= next_check:
                next_check = now + _HOLDER_CHECK
                return release_if_failed(conn, holder, self._on_master_failed)
            return False

        try:
            if not backoff.retry(free):
                raise recovery_error(
                    RecoveryReason.QUIESCE_TIMEOUT,
                    f"structure {conn.structure_name} has been quiesced by user {holder} "
                    f"for more than {self._max_wait:g} s",
                )
            return waited
        finally:
            if waited:
                self.held_seconds += backoff.elapsed_s()


def hold_quiesce(conn: ListStructure, area: ControlArea, *, timeout: float, clock: Clock) -> None:
    """The checkpoint master's side: take the quiesce lock (a failed holder is cleaned up)."""
    from sharedq.recovery.master import acquire

    acquire(conn, area.quiesce_lock, timeout=timeout, clock=clock)


def release_quiesce(conn: ListStructure, area: ControlArea) -> None:
    with suppress(CFError):  # lost with the structure, or never taken
        conn.unlock(area.quiesce_lock)
