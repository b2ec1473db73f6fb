"""A depth event's coordinator and its peers: the event messages, the broadcast.

The manager whose toggle of a shared queue succeeded is the event's coordinator
(:mod:`sharedq.mq.depth_events`).  It (spec QD-4, §10.3 DESIGN):

1. issues its own event message, with the event's CorrelId and its own statistics
   since its last event message on the queue, if its PERFMEV is enabled;
2. broadcasts the event, whatever its PERFMEV, to every other *active* manager of
   the group that would issue a message: a request entry on the group's
   event-request list (in the administrative structure) under a key that starts with
   the peer's manager id;
3. clears the pending event it wrote into the LHQC with the toggle.

A manager whose PERFMEV is enabled *subscribes*: it keeps an entry of its own in the
list's subscription range (keys starting X'00'), and watches its own key range with a
monitor (the structure wakes it: nothing polls) from a thread of its own, the
*responder*.  For each request it issues its own event message with the
coordinator's CorrelId and its own statistics (QD-5; a null message when it was idle:
QD-6), and deletes the request.  A manager answers one CorrelId once.  A manager with
PERFMEV disabled would issue nothing (QD-7), so it is not asked: it neither
subscribes nor runs a responder, and costs the group nothing.

Active: subscribed, and connected to the administrative structure (its user there is
active).  A manager that is down gets no request; one that starts drops the requests
left for its previous incarnation unanswered (§10.3: a manager inactive at broadcast
time issues nothing).

A coordinator killed between the toggle and the end of its broadcast leaves the
pending event in the LHQC.  The manager that recovers it (:meth:`QueueManager.recover`,
peer recovery) finishes it: issues its own message if its PERFMEV is enabled,
broadcasts to the other active managers with the same CorrelId, and clears it.  The
dead coordinator issues nothing; a peer that had answered already does not again.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
from dataclasses import replace
from typing import Any

import msgpack

from sharedq.cf import (
    AuthorityMismatch,
    ById,
    CFError,
    CFReason,
    EntryExists,
    ListStructure,
    MonitorSpec,
    UserState,
)
from sharedq.clock import retry_until
from sharedq.log import RecordType
from sharedq.log.changes import MessageInfo
from sharedq.mq import directory, operations
from sharedq.mq.core import ManagerCore
from sharedq.mq.definitions import Disposition, PendingEvent, QueueDefinition, QueueState, define
from sharedq.mq.errors import MQError, MQReason, mq_error
from sharedq.mq.event_messages import (
    EVENT_QUEUE,
    EVENT_QUEUE_MAX_DEPTH,
    DepthEvent,
    encode,
)
from sharedq.mq.event_stats import EventStats, Window
from sharedq.mq.journal import ChangeKind
from sharedq.seam.access import StructureAccess, tolerating
from sharedq.seam.logjournal import LogJournal

logger = logging.getLogger("sharedq.mq")

#: The claim of the group's event-request list in the administrative structure.
USE_EVENTS = "events"
#: Where subscriptions are on it: keys X'00' + manager id + zeros.
SUBSCRIPTIONS = (b"\x00" * 16, b"\x00" + b"\xff" * 15)
_SUBSCRIPTION_ID = b"\x00EVSUB" + b"\x00" * 5
REQUESTS_NAME = "SYSTEM.DEPTH.EVENT.REQUESTS"
#: How long the responder sleeps in the structure at a time before it looks whether
#: its manager closed (it looks at nothing else: requests wake it).
RESPONDER_WAIT = 5.0
#: The responder's user name on the administrative structure: the manager's, and this.
RESPONDER_SUFFIX = "@EVENTS"
#: How many answered CorrelIds a manager remembers.
ANSWERED_KEPT = 4096


def _claimed(admin: StructureAccess) -> list[int]:
    return sorted(n for n, c in directory.claims(admin).items() if c.get("use") == USE_EVENTS)


def request_list(core: ManagerCore, *, claim: bool = True) -> int | None:
    """The group's event-request list: the lowest list claimed for it (claimed now if
    none is and ``claim``; two managers claiming at once both keep the lowest)."""
    admin = core.admin
    found = _claimed(admin)
    if found or not claim:
        return found[0] if found else None
    mine = directory.claim_list(admin, USE_EVENTS, REQUESTS_NAME, core.list_counts[admin.name])
    lowest = _claimed(admin)[0]
    if lowest != mine:
        with contextlib.suppress(CFError):
            directory.release_list(admin, mine)
    return lowest


def _range(qm_id: int) -> tuple[bytes, bytes]:
    """The key range of one manager's requests."""
    return bytes((qm_id,)) + b"\x00" * 15, bytes((qm_id,)) + b"\xff" * 15


def _subscription(qm_id: int) -> tuple[bytes, bytes]:
    """A manager's subscription entry: its key and its entry id (one per manager)."""
    return b"\x00" + bytes((qm_id,)) + b"\x00" * 14, _SUBSCRIPTION_ID + bytes((qm_id,))


class EventService:
    """One manager's part in depth events: coordinating its own, answering others'.

    Built and started by the manager at connect; :meth:`stop` when it closes.
    """

    def __init__(self, core: ManagerCore) -> None:
        self._core = core
        self._list: int | None = None
        self._answered: collections.OrderedDict[bytes, None] = collections.OrderedDict()
        self._answer_lock = threading.Lock()
        #: Windows of queues this manager has not opened (it did nothing on them).
        self._idle: dict[str, EventStats] = {}
        self._started_s = core.clock.now_s()
        self._thread: threading.Thread | None = None
        self._conn: ListStructure | None = None
        self._stopping = threading.Event()
        core.event_sink = self.coordinate
        core.on_pending = self._adopt

    # -- the coordinator ---------------------------------------------------------------

    def coordinate(self, queue: QueueState, event: PendingEvent) -> None:
        """A depth event this manager detected and toggled: its message, the broadcast."""
        core = self._core
        definition = queue.definition
        issued = self._issue(queue.name, queue.acc.name, definition.max_depth, event, "coordinator")
        if issued is None:
            self._log(queue.acc.name, queue.name, event, definition.max_depth, "coordinator", None)
        if definition.disposition is not Disposition.SHARED:
            return
        try:
            self._broadcast(queue.name, queue.acc.name, definition.max_depth, event, {core.name})
            self._clear(queue, event)
        except (CFError, MQError) as error:
            logger.warning("%s: %s not broadcast: %s", core.name, event.correl_id.hex(), error)

    def _adopt(self, queue: QueueState) -> None:
        """A queue opened with an event pending that this manager's previous
        incarnation coordinated (its CorrelId has another incarnation's nonce): that
        incarnation died before its broadcast, and no peer recovered it.  Coordinate
        it now, with its CorrelId."""
        core = self._core
        event = queue.definition.pending_event
        if event is None or event.coordinator != core.name:
            return
        if event.correl_id[13:16] == core.stamps.nonce:
            return  # our own, in progress
        self.coordinate(queue, event)

    def finish_for(self, failed: str) -> int:
        """Finish the broadcasts a failed coordinator left pending (peer recovery), and
        clean up its responder's failed connection.

        Returns how many events were finished.
        """
        core = self._core
        for user in core.admin.users():  # its responder's connection, if it failed too
            if user.name == failed + RESPONDER_SUFFIX and user.state is UserState.FAILED:
                with contextlib.suppress(CFError):
                    core.admin.cleanup_user(user.user_id)
        finished = 0
        for entry in directory.queue_entries(core.admin):
            if entry.structure not in core.structures:
                continue
            queue = core.state(entry.name)
            definition = queue.refresh()
            event = definition.pending_event
            if event is None or event.coordinator != failed:
                continue
            if self._first_answer(event.correl_id):
                self._issue(entry.name, entry.structure, definition.max_depth, event, "peer")
            skip = {core.name, failed}
            self._broadcast(entry.name, entry.structure, definition.max_depth, event, skip)
            self._clear(queue, event)
            finished += 1
        return finished

    def _broadcast(
        self, queue: str, structure: str, max_depth: int, event: PendingEvent, skip: set[str]
    ) -> None:
        """A request to every other active manager of the group."""
        core = self._core
        admin = core.admin
        if self._list is None:
            self._list = request_list(core, claim=False)
            if self._list is None:
                return  # nobody ever subscribed
        subscribers = {
            entry.key[1]: entry.data.decode() for entry in admin.scan(self._list, *SUBSCRIPTIONS)
        }
        if not set(subscribers.values()) - skip:
            return
        active = {u.name for u in admin.users() if u.state is UserState.ACTIVE}
        data: bytes = msgpack.packb(
            {
                "queue": queue,
                "structure": structure,
                "max_depth": max_depth,
                "correl_id": event.correl_id,
                "event": event.event,
                "coordinator": event.coordinator,
                "at_s": event.at_s,
                "depth": event.depth,
            },
            use_bin_type=True,
        )
        for qm_id, name in sorted(subscribers.items()):
            if name in skip or name not in active:
                continue
            stamp = core.stamps.stamp()
            with tolerating():  # a request is not recoverable: a lost one is a lost message
                admin.write(
                    self._list,
                    bytes((qm_id,)) + stamp.to_bytes(8, "big") + b"\x00" * 7,
                    data,
                    entry_id=core.stamps.entry_id(stamp),
                    kind=ChangeKind.CONTROL,
                    queue=queue,
                )

    def _clear(self, queue: QueueState, event: PendingEvent) -> None:
        """Take the pending event out of the LHQC (if it is still this one)."""
        for _ in range(100):
            definition = queue.definition
            if definition.pending_event != event:
                return
            try:
                with tolerating():
                    queue.rewrite(replace(definition, pending_event=None))
            except AuthorityMismatch:
                queue.refresh()
                continue
            queue.refresh()
            return

    # -- every manager: its own message ---------------------------------------------------

    def _first_answer(self, correl_id: bytes) -> bool:
        with self._answer_lock:
            if correl_id in self._answered:
                return False
            self._answered[correl_id] = None
            while len(self._answered) > ANSWERED_KEPT:
                self._answered.popitem(last=False)
            return True

    def _window(self, queue: str, now_s: float) -> Window:
        state = self._core.queues.get(queue)
        stats = state.stats if state is not None else None
        if stats is None:
            stats = self._idle.setdefault(queue, EventStats(self._started_s))
        return stats.close(now_s)

    def _issue(
        self, queue: str, structure: str, max_depth: int, event: PendingEvent, role: str
    ) -> Window | None:
        """This manager's event message, if its PERFMEV is enabled (``None`` if not)."""
        core = self._core
        if not core.performance_events:
            return None
        self._first_answer(event.correl_id)
        now = core.clock.now_s()
        window = self._window(queue, now)
        body = encode(
            DepthEvent(
                event.event,
                core.name,
                queue,
                event.coordinator,
                event.correl_id,
                window.since_reset_s,
                window.high_depth,
                window.enqueues,
                window.dequeues,
                event.depth,
                max_depth,
                now,
            )
        )
        try:
            operations.put(
                core,
                self._event_queue(),
                body,
                priority=None,
                persistent=None,
                msg_id=None,
                correl_id=event.correl_id,
                expiry=None,
                uow=None,
            )
        except (CFError, MQError) as error:
            logger.warning("%s: event message for %s not issued: %s", core.name, queue, error)
            return None
        self._log(structure, queue, event, max_depth, role, window)
        return window

    def _event_queue(self) -> QueueState:
        """``SYSTEM.ADMIN.PERFM.EVENT``, defined by the first manager that needs it."""
        core = self._core
        try:
            return core.state(EVENT_QUEUE)
        except MQError as error:
            if error.reason != MQReason.UNKNOWN_OBJECT_NAME:
                raise
        admin = core.admin
        definition = QueueDefinition(
            EVENT_QUEUE,
            admin.name,
            max_depth=EVENT_QUEUE_MAX_DEPTH,
            description="queue depth event messages",
        )
        # False: another manager defined it meanwhile.  No list left: ConfigurationError.
        define(admin, admin, definition, core.list_counts[admin.name])
        return core.state(EVENT_QUEUE)

    def _log(
        self,
        structure: str,
        queue: str,
        event: PendingEvent,
        max_depth: int,
        role: str,
        window: Window | None,
    ) -> None:
        """A ``DEPTH_EVENT`` record, when the manager has a recovery log."""
        journal = self._core.journal
        if not isinstance(journal, LogJournal):
            return
        payload: dict[str, Any] = {
            "event": event.event,
            "role": role,
            "issued": window is not None,
            "depth": event.depth,
            "max_depth": max_depth,
            "high_depth": None if window is None else window.high_depth,
            "enqueues": None if window is None else window.enqueues,
            "dequeues": None if window is None else window.dequeues,
            "since_reset_s": None if window is None else window.since_reset_s,
        }
        try:
            journal.writer_for(structure).log_event(
                RecordType.DEPTH_EVENT,
                payload=payload,
                message=MessageInfo(queue=queue.encode(), correl_id=event.correl_id),
                structure=structure,
            )
        except Exception as error:  # a record the log cannot take: the event stands
            logger.warning("%s: depth event record not logged: %s", self._core.name, error)

    # -- the responder ------------------------------------------------------------------------

    def start(self) -> None:
        """At connect: drop requests left for an earlier incarnation; subscribe and
        answer if PERFMEV is enabled."""
        core = self._core
        self._list = request_list(core, claim=core.performance_events)
        if self._list is not None:
            low, high = _range(core.qm_id)
            for entry in list(core.admin.scan(self._list, low, high, with_data=False)):
                self._delete(entry.entry_id)
        self.set_enabled(core.performance_events)

    def set_enabled(self, on: bool) -> None:
        """PERFMEV changed (or the manager started): subscribe and answer, or stop."""
        core = self._core
        core.performance_events = on
        if not on:
            self.stop()
            return
        if self._list is None:
            self._list = request_list(core)
        assert self._list is not None
        self._event_queue()  # defined now, so that a reader can open it at once
        key, entry_id = _subscription(core.qm_id)
        with contextlib.suppress(EntryExists), tolerating():
            core.admin.write(
                self._list, key, core.name.encode(), entry_id=entry_id, kind=ChangeKind.CONTROL
            )
        if self._thread is None or not self._thread.is_alive():
            # Its own connection, so that its events are its own: a get-wait of the
            # manager takes the manager's events, and would take them from under it.
            conn = self._connect()
            low, high = _range(core.qm_id)
            conn.register_monitor(MonitorSpec(self._list, low, high))
            self._stopping = threading.Event()
            self._conn = conn
            self._thread = threading.Thread(
                target=self._respond,
                args=(conn, self._stopping),
                name=f"sharedq-events-{core.name}",
                daemon=True,
            )
            self._thread.start()

    def _delete(self, entry_id: bytes) -> None:
        assert self._list is not None
        with contextlib.suppress(CFError), tolerating():
            self._core.admin.delete(ById(entry_id, self._list), kind=ChangeKind.CONTROL)

    def _connect(self) -> ListStructure:
        """The responder's connection; a responder of this manager's previous
        incarnation in this process may still be letting its own go."""
        core = self._core
        user = core.name + RESPONDER_SUFFIX
        found: list[ListStructure] = []

        def attach() -> bool:
            try:
                found.append(core.facility.connect(core.admin.name, user))
            except CFError as error:
                if error.reason is not CFReason.USER_ACTIVE:
                    raise
                return False
            return True

        if not retry_until(attach, timeout_s=2 * RESPONDER_WAIT, first_pause_s=0.01):
            raise mq_error(MQReason.UNEXPECTED_ERROR, f"{user} is connected to {core.admin.name}")
        return found[0]

    def stop(self) -> None:
        """PERFMEV disabled, or the manager closes: no more requests come (the
        subscription is deleted), and the responder ends."""
        self._stopping.set()
        if self._list is not None:
            self._delete(_subscription(self._core.qm_id)[1])
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.disconnect()  # wakes the responder, which sees it is stopping

    def reconnected(self) -> None:
        """The manager reconnected after its structures were lost: the responder ended
        with its connection (or ends now); subscribe and answer again on the rebuilt
        administration structure, if PERFMEV is enabled."""
        old = self._thread
        self._stopping.set()
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.disconnect()
        if old is not None:
            old.join(2 * RESPONDER_WAIT)
        self._list = None
        if self._core.performance_events:
            self.set_enabled(True)

    def _respond(self, conn: ListStructure, stopping: threading.Event) -> None:
        """The responder: answer what is there, sleep until a request comes, again."""
        core = self._core
        try:
            while not (stopping.is_set() or core.closed):
                while self._answer_requests():
                    pass
                # Nothing there now: the next request is an event (its range goes
                # from empty to non-empty).  A timeout only looks at ``stopping``.
                while not (conn.wait_events(RESPONDER_WAIT) or stopping.is_set() or core.closed):
                    pass
        except Exception as error:
            if not (stopping.is_set() or core.closed):
                # A lost structure ends it until the manager reconnects (reconnected).
                lost = isinstance(error, CFError) and error.reason is CFReason.STRUCTURE_LOST
                level = logging.INFO if lost else logging.WARNING
                logger.log(level, "%s: depth event responder stopped: %s", core.name, error)
        with contextlib.suppress(Exception):
            conn.disconnect()

    def _answer_requests(self) -> bool:
        """Answer and delete the requests on our key range; ``False`` if there were none."""
        core = self._core
        admin = core.admin
        low, high = _range(core.qm_id)
        assert self._list is not None
        entries = list(admin.scan(self._list, low, high))
        for entry in entries:
            request = msgpack.unpackb(entry.data, raw=False)
            event = PendingEvent(
                request["correl_id"],
                request["event"],
                request["coordinator"],
                request["at_s"],
                request["depth"],
            )
            if self._first_answer(event.correl_id):
                self._issue(
                    request["queue"], request["structure"], request["max_depth"], event, "peer"
                )
            self._delete(entry.entry_id)
        return bool(entries)


def unanswered(admin: StructureAccess) -> int:
    """How many broadcast requests wait for their managers (for operators and tests:
    once it is 0, every manager asked has issued its message, or decided not to)."""
    claimed = [n for n, c in directory.claims(admin).items() if c.get("use") == USE_EVENTS]
    return sum(
        1
        for number in claimed
        for _ in admin.scan(number, b"\x01" + b"\x00" * 15, b"\xff" * 16, with_data=False)
    )
