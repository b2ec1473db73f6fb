"""Telling a client that a registered queue has work (redbook §2.6).

Each registration is a sublist monitor on the queue's header with the queue's name as
its token, one EMC per CQS and queue.  When the sublist goes from empty to non-empty
the structure queues an event for every CQS registered on it; a :class:`Listener`
thread per structure waits for this CQS's events (woken by the change itself: no
polling) and hands each queue name to the client's callback and to
:meth:`~sharedq.cqs.CQS.wait_for_work` (through a :class:`Work` list: one entry per
queue with work not yet taken, so it never grows beyond the queues registered).
"""

from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable

from sharedq.cf import CFError, MonitorState
from sharedq.cqs.errors import CQSReason, cqs_error
from sharedq.cqs.layout import Kind
from sharedq.seam.access import StructureAccess

logger = logging.getLogger("sharedq.cqs")

#: Called with the structure kind and the name of a queue that has work.
WorkCallback = Callable[[Kind, bytes], None]


class Work:
    """The registered queues that got work, oldest first, each once until taken."""

    def __init__(self) -> None:
        self._pending: OrderedDict[tuple[Kind, bytes], None] = OrderedDict()
        self._ready = threading.Condition()

    def put(self, item: tuple[Kind, bytes]) -> None:
        with self._ready:
            self._pending[item] = None
            self._ready.notify()

    def get(self, timeout: float | None) -> tuple[Kind, bytes] | None:
        """The oldest queue with work, waiting up to ``timeout`` seconds; ``None`` if none."""
        if timeout is not None and not (
            isinstance(timeout, int | float)
            and not isinstance(timeout, bool)
            and math.isfinite(timeout)
            and timeout <= threading.TIMEOUT_MAX
        ):  # nan would wait for ever, text or a huge number break the timer
            raise cqs_error(
                CQSReason.BAD_ARGUMENT,
                f"timeout {timeout!r}: None (no limit) or a finite number of seconds",
            )
        with self._ready:
            if not self._ready.wait_for(lambda: bool(self._pending), timeout):
                return None
            item, _ = self._pending.popitem(last=False)
            return item


#: How long a listener's wait lasts before it looks whether it is to stop, seconds.
STOP_CHECK_S = 0.25


class Listener:
    """Waits for one structure's events for one CQS (a daemon thread)."""

    def __init__(
        self,
        acc: StructureAccess,
        kind: Kind,
        callback: WorkCallback | None,
        work: Work,
    ) -> None:
        self._acc = acc
        self._kind = kind
        self._callback = callback
        self._work = work
        self._stop = threading.Event()
        #: Notifications handed to the client, and spared it (a staggered listener's).
        self.told = 0
        self.spared = 0
        self._thread = threading.Thread(
            target=self._run, name=f"cqs-listener-{acc.name}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                events = self._acc.wait_events(self._timeout())
            except CFError as error:
                if not self._stop.is_set():
                    logger.warning("%s: event wait failed: %s", self._acc.name, error)
                return
            for event in events:
                if event.state is MonitorState.NONEMPTY:
                    self._nonempty(event.token)
                else:
                    self._empty(event.token)
            self._due()

    # The seed's notification: every registered CQS tells its client at once.  A
    # subclass (:class:`~sharedq.cqs.stagger.StaggeredListener`) defers some.

    def _timeout(self) -> float:
        return STOP_CHECK_S

    def _nonempty(self, queue: bytes) -> None:
        self.tell(queue)

    def _empty(self, queue: bytes) -> None:
        """The queue went empty (watched only when a subclass asks for it)."""

    def _due(self) -> None:
        """Deferred notifications whose time came (none here)."""

    def tell(self, queue: bytes) -> None:
        """Tell the client that ``queue`` has work."""
        self.told += 1
        self._work.put((self._kind, queue))
        if self._callback is not None:
            try:
                self._callback(self._kind, queue)
            except Exception:  # a client's callback must not stop the listener
                logger.exception("work callback failed for %r", queue)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
