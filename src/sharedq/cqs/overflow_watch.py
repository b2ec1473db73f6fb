"""Notification for queues in the overflow structure.

A queue that moved to the overflow structure gets its puts there, where the monitors
a CQS registered on the primary do not see them.  So each registration is made on
the pair's overflow structure too (one more EMC there per CQS and queue), with a
listener of its own on it: a client is told of work on a registered queue whichever
structure of the pair holds it.  Created only for a pair with an overflow structure.
"""

from __future__ import annotations

from sharedq.cf import MonitorSpec
from sharedq.cqs.layout import Kind
from sharedq.cqs.notify import Listener, Work, WorkCallback
from sharedq.cqs.stagger import StaggeredListener
from sharedq.seam.access import StructureAccess


class OverflowWatch:
    """One CQS's monitors on one overflow structure, and their listener."""

    def __init__(
        self,
        acc: StructureAccess,
        kind: Kind,
        on_work: WorkCallback | None,
        work: Work,
        stagger_s: float | None,
    ) -> None:
        self.acc = acc
        self.kind = kind
        self.on_work = on_work
        self.work = work
        self.stagger_s = stagger_s
        self.monitors: dict[bytes, int] = {}
        self.listener: Listener | None = None

    def register(self, spec: MonitorSpec) -> bool:
        """The same monitor as on the primary; returns whether the queue has messages
        here now."""
        registration = self.acc.register_monitor(spec)
        self.monitors[spec.low_key] = registration.monitor_id
        if self.listener is None:
            self.listener = (
                Listener(self.acc, self.kind, self.on_work, self.work)
                if self.stagger_s is None
                else StaggeredListener(self.acc, self.kind, self.on_work, self.work, self.stagger_s)
            )
        return registration.nonempty

    def deregister(self, queue: bytes) -> None:
        monitor = self.monitors.pop(queue, None)
        if monitor is not None:
            self.acc.stop_monitor(monitor)

    def stop(self) -> None:
        if self.listener is not None:
            self.listener.stop()
            self.listener = None
        self.monitors.clear()

    def counts(self) -> tuple[int, int]:
        """Notifications told and spared through this structure."""
        if self.listener is None:
            return 0, 0
        return self.listener.told, self.listener.spared
