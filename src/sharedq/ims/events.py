"""The two failure events an IMS learns of by itself (redbook §1.17, §6.1), opt-in.

* **Peer failure.**  On z/OS, XCF tells every IMS of the group that a member failed,
  and each drops it from its Fast Path global PSB tables.  Here the structure is what
  every member shares: a failed member's CQS connection shows as ``FAILED`` among the
  structure's users (marked by the system or a peer in process, by the lapse of its
  lease on Redis when its process died).  The list structure has no notification of
  users' states, so a watcher thread looks at ``users()`` of one structure (the EMHQ
  with Fast Path, else the MSGQ) every ``peer_watch_s`` seconds, on a connection of its
  own (``WI<IMSID>``), and calls :meth:`IMS.peer_failed` once for each member whose
  CQS (named ``CQS<IMSID>``) it finds failed; once that CQS is active again (or gone)
  a later failure is noticed again.  Opt-in: a test that tells ``peer_failed`` itself
  would race the watcher.
* **CQS restart.**  A :class:`~sharedq.cqs.RemoteCQS` watches for its server's return
  after the link is lost; with ``reconnect_on_restart`` the IMS is told and calls
  :meth:`IMS.reconnect` (connect, CQSRSYNC, interest registered again), retried with a
  backoff while the CQS cannot connect yet.  For a CQS in the IMS's own process there
  is no process to come back: whoever restarts it calls ``reconnect()``, and that call
  is the event.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable

from sharedq.cf import CFError, CouplingFacility, ListStructure, UserState
from sharedq.cqs import CQSService, Kind, RemoteCQS
from sharedq.ims.definitions import check_name
from sharedq.ims.errors import IMSError, IMSReason, ims_error

logger = logging.getLogger("sharedq.ims")

#: The prefix of a member's CQS name, the IMSID after it (the default ``CQS<IMSID>``).
CQS_PREFIX = "CQS"
#: Pauses between reconnect attempts while the restarted CQS cannot connect, seconds.
RETRY_FIRST_S, RETRY_LONGEST_S = 0.05, 1.0


def failed_members(users: list[tuple[str, UserState]], own: str) -> tuple[set[str], set[str]]:
    """The IMSIDs whose CQS is failed, and those whose CQS is active, among a
    structure's users (names not of the form ``CQS<IMSID>``, and ``own``, skipped)."""
    failed: set[str] = set()
    active: set[str] = set()
    for name, state in users:
        if name == own or not name.startswith(CQS_PREFIX):
            continue
        imsid = name[len(CQS_PREFIX) :]
        try:
            check_name(imsid, "IMSID")
        except IMSError:
            continue
        (active if state is UserState.ACTIVE else failed).add(imsid)
    return failed - active, active


class FailureEvents:
    """An IMS's watcher of its peers and its CQS restart handler."""

    def __init__(
        self,
        imsid: str,
        facility: CouplingFacility,
        cqs: CQSService,
        *,
        peer_failed: Callable[[str], int],
        reconnect: Callable[[], object],
        running: Callable[[], bool],
        peer_watch_s: float | None,
        reconnect_on_restart: bool,
    ) -> None:
        """``peer_failed``, ``reconnect``: the IMS's; ``running``: whether the IMS is
        started, not stopping and not dead (a reconnect is tried only then)."""
        if peer_watch_s is not None and not (
            isinstance(peer_watch_s, (int, float)) and peer_watch_s > 0
        ):
            raise ims_error(IMSReason.BAD_ARGUMENT, f"peer_watch_s {peer_watch_s!r}: above 0")
        self.imsid = imsid
        self._facility = facility
        self._cqs = cqs
        self._peer_failed = peer_failed
        self._reconnect = reconnect
        self._running = running
        self.peer_watch_s = peer_watch_s
        self.reconnect_on_restart = bool(reconnect_on_restart)
        #: The members this IMS was told failed (``peer_failed`` called), in order.
        self.peers_failed: list[str] = []
        #: Looks the watcher made at the structure's users.
        self.looks = 0
        #: Reconnects the CQS restart event made.
        self.reconnects = 0
        self._told: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Condition()
        if self.reconnect_on_restart:
            if not isinstance(cqs, RemoteCQS):
                raise ims_error(
                    IMSReason.BAD_ARGUMENT,
                    "reconnect_on_restart: for a RemoteCQS (an in-process CQS restarted "
                    "is told by calling reconnect())",
                )
            cqs.on_restart = self.cqs_restarted

    # -- peer failure --------------------------------------------------------------------------

    def start(self) -> None:
        """Start watching the peers (the IMS started)."""
        if self.peer_watch_s is None or (self._thread is not None and self._thread.is_alive()):
            return
        pairs = self._cqs.pairs
        pair = pairs.get(Kind.EMHQ) or pairs[Kind.MSGQ]
        conn = self._facility.connect(pair.primary, f"WI{self.imsid}"[:16])
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._watch, args=(conn,), name=f"ims-peers-{self.imsid}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (the IMS shuts down or stops dead)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _watch(self, conn: ListStructure) -> None:
        assert self.peer_watch_s is not None
        try:
            while not self._stop.is_set():
                try:
                    self.look(conn)
                except CFError as error:  # the structure unreachable for now: look again
                    logger.debug("%s: looking at peers: %s", self.imsid, error)
                except Exception:  # a watcher that died would miss every later failure
                    logger.exception("%s: looking at peers failed", self.imsid)
                self._stop.wait(self.peer_watch_s)
        finally:
            with contextlib.suppress(CFError):
                conn.disconnect()

    def look(self, conn: ListStructure) -> list[str]:
        """One look at the structure's users: ``peer_failed`` for each member newly
        found failed.  Returns those members."""
        users = [(u.name, u.state) for u in conn.users()]
        failed, active = failed_members(users, self._cqs.name)
        told = []
        for imsid in sorted(failed - self._told):
            if imsid == self.imsid or self._stop.is_set():
                continue
            removed = self._peer_failed(imsid)
            logger.warning(
                "%s: %s failed (its CQS's connection): %d Fast Path table entries dropped",
                self.imsid,
                imsid,
                removed,
            )
            told.append(imsid)
        with self._lock:
            self._told |= set(told)
            self._told -= {i for i in self._told if i not in failed or i in active}
            self.peers_failed.extend(told)
            self.looks += 1
            self._lock.notify_all()
        return told

    # -- CQS restart ---------------------------------------------------------------------------

    def cqs_restarted(self) -> None:
        """The CQS is back (its client saw the server again): reconnect, retrying with a
        backoff while it cannot connect yet, until connected, stopped or dead."""
        pause = RETRY_FIRST_S
        while self._running():
            try:
                self._reconnect()
            except IMSError as error:
                if error.reason is IMSReason.CQS_UNAVAILABLE:
                    logger.info("%s: CQS back but not connectable yet: %s", self.imsid, error)
                    time.sleep(pause)
                    pause = min(pause * 2, RETRY_LONGEST_S)
                    continue
                if error.reason is not IMSReason.BAD_ARGUMENT:  # connected already: done
                    logger.error("%s: reconnect at the CQS restart failed: %s", self.imsid, error)
                return
            with self._lock:
                self.reconnects += 1
                self._lock.notify_all()
            logger.warning("%s: reconnected to %s after its restart", self.imsid, self._cqs.name)
            return
