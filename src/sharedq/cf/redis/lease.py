"""Leases: how a user whose process vanished comes to count as failed.

A connection's token is kept in a key that expires when the connection's lease lapses
(``t:<u>``, see ``keys.py``).  A facility renews the leases of its live connections
from one daemon thread; when the process dies, or stops renewing for longer than the
lease, the token expires and the user has failed: ``users()`` reports it ``FAILED``,
its own requests are refused, a peer may ``cleanup_user`` it, and a reconnect under
its name reattaches it.  A lapsed lease is never renewed, so a paused process that
wakes up finds itself failed rather than racing the peer that took over its work.
"""

from __future__ import annotations

import threading
import weakref
from typing import Protocol


class Leaseholder(Protocol):
    def renew_lease(self) -> None:
        """Renew this connection's lease once; never raises."""


class LeaseKeeper:
    """Renews the leases of a facility's live connections every ``interval`` seconds."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._holders: weakref.WeakSet[Leaseholder] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, holder: Leaseholder) -> None:
        with self._lock:
            self._holders.add(holder)
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="sharedq-redis-leases", daemon=True
                )
                self._thread.start()

    def discard(self, holder: Leaseholder) -> None:
        with self._lock:
            self._holders.discard(holder)

    def close(self) -> None:
        """Stop renewing (the leases then lapse unless their users disconnect)."""
        self._stop.set()
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                holders = list(self._holders)
            for holder in holders:
                if self._stop.is_set():
                    return
                holder.renew_lease()
