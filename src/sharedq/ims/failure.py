"""Failures of an IMS or of its CQS (redbook §6.1-6.2), as a mixin of :class:`IMS`.

* :meth:`Failures.stop_dead` models an IMS whose process is killed: nothing more
  reaches the structures from it, its regions abandon their work with no sync point
  and no backout (the messages they held stay on the lock queue, locked by its CQS),
  nothing is deregistered, and its terminals lose their session.  On z/OS the system
  ends the address space's connections at that instant (failed-persistent, their locks
  kept); in one process :func:`declare_failed` does the same, as a peer would, so that
  the IMS's next incarnation (an ``IMS`` made again with the same definition) connects
  its CQS under the same name and ``start(restart="emergency")`` or ``"cold"``.
* :meth:`Failures.reconnect` is the IMS's side of a CQS restart under a live IMS (the
  "CQS restart event" of §6.1): the IMS connects again, resolves its in-doubt units of
  work (CQSRSYNC: the inputs it processed and the outputs acknowledged while the CQS
  was down are deleted, every other message its CQS held goes back to the head of its
  queue), then registers its interest again.
* :meth:`Failures.peer_failed`: told that another member failed, the IMS drops it from
  its Fast Path global tables (§1.17).

Both events can come by themselves (:mod:`sharedq.ims.events`, opt-in): a watcher of
the structure's users calls ``peer_failed``, a ``RemoteCQS`` that sees its server back
calls ``reconnect``.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING

from sharedq.cf import CFError, CouplingFacility
from sharedq.cf.types import UserState
from sharedq.cqs import CQSError, CQSReason, CQSService, Kind, Uow
from sharedq.ims.definitions import check_name
from sharedq.ims.errors import IMSReason, ims_error
from sharedq.ims.restart import Restarted

if TYPE_CHECKING:
    from sharedq.ims.dli import Input, Output
    from sharedq.ims.events import FailureEvents
    from sharedq.ims.fastpath import FastPath
    from sharedq.ims.output import Outputs
    from sharedq.ims.region import Region


def declare_failed(facility: CouplingFacility, user: str, structures: list[str]) -> int:
    """Mark the active connections named ``user`` to ``structures`` failed (as the system
    does when a process ends, or a peer when it learns the process died).  Structures
    missing are skipped.  Returns how many connections were marked."""
    marked = 0
    for structure in structures:
        if not facility.exists(structure):
            continue
        with facility.connect(structure, f"RM{user}"[:16]) as peer:
            for info in peer.users():
                if info.name == user and info.state is UserState.ACTIVE:
                    with contextlib.suppress(CFError):
                        peer.mark_failed(info.user_id)
                        marked += 1
    return marked


def structures_of(cqs: CQSService) -> list[str]:
    """Every structure ``cqs`` connects to: each pair's primary and overflow."""
    return [n for p in cqs.pairs.values() for n in (p.primary, p.overflow) if n]


class Failures:
    """``stop_dead``, ``reconnect`` and ``peer_failed`` of an IMS system."""

    cqs: CQSService
    imsid: str
    fastpath: FastPath | None
    restarted: Restarted
    _facility: CouplingFacility
    _lock: threading.Condition
    _reg_lock: threading.Lock
    _started: bool
    _stopping: bool
    _dead: bool
    _reconnecting: bool
    _completed: list[Uow]
    _regions: dict[str, Region]
    _pending: list[tuple[Input | None, Output, Uow]]
    _dispatcher: threading.Thread | None
    _outputs: Outputs
    _interest: set[str]
    events: FailureEvents

    def _check_started(self) -> None:
        raise NotImplementedError

    def _reconcile(self) -> None:
        raise NotImplementedError

    def stop_dead(self) -> None:
        """Fail as if the IMS's process were killed at this instant (§6.2): its CQS
        stops dead, its regions abandon their work (no sync point, no backout: the
        messages they hold stay locked by its CQS on the lock queue), nothing is
        deregistered, terminals lose their session, and its CQS's connections are
        marked failed as the system does when a process ends.  Its next incarnation,
        an ``IMS`` made with the same definition, then ``start(restart="emergency")``
        or ``"cold"``."""
        if not self._started:
            return
        self.events.stop()
        with self._lock:
            self._dead = self._stopping = True
            regions = list(self._regions.values())
            self._regions.clear()
            self._pending.clear()
            self._lock.notify_all()
        self.cqs.stop_dead()
        if self.fastpath is not None:
            self.fastpath.stop_dead()
        for region in regions:
            region.abandon()
        if self._dispatcher is not None:
            self._dispatcher.join()
        self._outputs.drop_sessions()
        declare_failed(self._facility, self.cqs.name, structures_of(self.cqs))
        self._started = False

    def reconnect(self) -> Restarted:
        """Connect to the CQS again after it failed under this IMS (§6.1 "Reconnect"):
        wait for the regions to finish what they hold (their ``GU``s get ``QC`` while
        the CQS is down), connect, resynchronize (the inputs processed and outputs
        acknowledged meanwhile are deleted; the other messages its CQS held, such as an
        output not yet acknowledged, go back to the head of their queues, on the MSGQ
        and the EMHQ), and register interest again.  Committed output kept while the
        CQS was down is put by the dispatcher.  Refused with ``BAD_ARGUMENT`` if the
        CQS is connected, ``CQS_UNAVAILABLE`` if it cannot connect yet."""
        self._check_started()
        try:
            self.cqs.statistics()
        except CQSError as error:
            if error.reason is not CQSReason.NOT_CONNECTED:
                raise ims_error(IMSReason.QUEUE_ERROR, str(error)) from error
        else:
            raise ims_error(IMSReason.BAD_ARGUMENT, f"{self.cqs.name} is connected")
        with self._lock:
            if self._reconnecting:  # the CQS restart event's reconnect, or the caller's
                raise ims_error(IMSReason.BAD_ARGUMENT, f"{self.imsid} is reconnecting")
            self._reconnecting = True
            self._lock.wait_for(lambda: not any(r.busy for r in self._regions.values()))
        try:
            return self._resume()
        finally:
            with self._lock:
                self._reconnecting = False
                self._lock.notify_all()

    def _resume(self) -> Restarted:
        declare_failed(self._facility, self.cqs.name, structures_of(self.cqs))
        try:
            self.cqs.connect()
        except CQSError as error:
            raise ims_error(IMSReason.CQS_UNAVAILABLE, f"{self.cqs.name}: {error}") from error
        with self._lock:
            done, self._completed = [*self._completed, *self._outputs.take_completed()], []
        report = Restarted("emergency")
        try:
            resynced = self.cqs.resync(done)
            report.requeued, report.deleted = len(resynced.requeued), len(resynced.deleted)
            if self.fastpath is not None:
                fp = self.cqs.resync(self.fastpath.take_completed(), kind=Kind.EMHQ)
                report.emhq_requeued = len(fp.requeued)
        except CQSError as error:
            raise ims_error(IMSReason.QUEUE_ERROR, f"{self.imsid} resync: {error}") from error
        with self._reg_lock:
            self._interest.clear()  # the new connection has no registrations
        self._reconcile()
        self._outputs.reconnected()
        if self.fastpath is not None:
            self.fastpath.reconnected()
        self.restarted = report
        return report

    def peer_failed(self, imsid: str) -> int:
        """Told that ``imsid``, a member of the group, failed (IMS learns it from
        XCF): its Fast Path PSB table entries are deleted, so this IMS's global tables
        stop naming it (§1.17).  Its locked messages stay for its restart.  Returns
        how many entries went."""
        self._check_started()
        check_name(imsid, "IMSID")
        return 0 if self.fastpath is None else self.fastpath.remove_entries(imsid)
