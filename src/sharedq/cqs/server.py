"""The Common Queue Server: one per client system, up to 32 on one set of structures.

A :class:`CQS` serves one client (an IMS, or any subsystem) on the MSGQ structure pair
and, when the client has Fast Path, the EMHQ pair.  It runs in the client's process or
in one of its own; the structures are shared through the coupling facility (memory, or
Redis across processes and hosts).  Each request is a method named after the seed's
(redbook §2.7); ``docs/cqs.md`` describes each.  Requests are safe from several threads.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

from sharedq import names
from sharedq.cf import CFError, CouplingFacility, MonitorSpec, StructureStats
from sharedq.cf.errors import ListMismatch, NoSuchEntry
from sharedq.cf.types import ById, ByKey
from sharedq.clock import SYSTEM_CLOCK, Clock, is_clock
from sharedq.cqs import connecting, requests, resync
from sharedq.cqs import overflow_cross as cross
from sharedq.cqs.client import CQSClient
from sharedq.cqs.errors import CQSError, CQSJournalFailed, CQSReason, cqs_error, from_cf
from sharedq.cqs.journal import PAYLOAD_KEY, Request, Sync
from sharedq.cqs.layout import Kind, Layout, Private
from sharedq.cqs.message import Message, QueueCounts
from sharedq.cqs.messages import PART_BYTES, facts, split
from sharedq.cqs.names import check_collection, check_name, text
from sharedq.cqs.notify import Listener, Work, WorkCallback
from sharedq.cqs.overflow import Overflow, OverflowOptions
from sharedq.cqs.overflow_watch import OverflowWatch
from sharedq.cqs.pair import StructurePair
from sharedq.cqs.restart import Finished, finish_interrupted
from sharedq.cqs.site import LockToken, Site, lock_version
from sharedq.cqs.stagger import StaggeredListener, check_stagger
from sharedq.cqs.uow import TokenSource, Uow, check_uow
from sharedq.log import DurabilityMode, RecordType
from sharedq.recovery.control import ControlArea
from sharedq.recovery.quiesce import QuiesceGate
from sharedq.recovery.settings import RecoverySettings
from sharedq.seam.access import FaultHook, StructureAccess
from sharedq.seam.notes import NO_JOURNAL, Note
from sharedq.seam.recovery_log import RecoveryLog
from sharedq.security import SECURITY_OFF, SecuritySettings

logger = logging.getLogger("sharedq.cqs")
INTERVAL = DurabilityMode.INTERVAL


def _journal_failed(error: Exception, note: Note) -> CQSJournalFailed:
    failure = cqs_error(CQSReason.JOURNAL_FAILED, f"the log could not record a change: {error}")
    assert isinstance(failure, CQSJournalFailed)
    return failure


class CQS:
    """A Common Queue Server for one client system.

    Args:
        facility: where the structures are.
        name: the server's name (its structure user name and log writer name).
        system: the client's system id (its IMSID), 1 to 4 characters: it goes into
            the units of work it makes and into generated staging queue names.
        msgq: the MSGQ structure pair (or its primary's name).
        emhq: the EMHQ pair, for a client with Fast Path.
        recovery: recovery settings: log, checkpoints, structure recovery.
        security: whose profiles say who may connect (``CQSSTR.<primary>``).
        on_work: called with ``(kind, queue name)`` when a registered queue gets work.
        stagger_s: tell one client first and the others ``stagger_s`` seconds apart,
            only if the queue still has work (:mod:`sharedq.cqs.stagger`); ``None``:
            every registered client at once, as the seed does.
        clock: time for put stamps and unit-of-work tokens.
        faults: a fault hook around every structure request (crash tests).
        checkpoint_faults: called at each point of a structure checkpoint this CQS
            takes as master (crash tests of a master's takeover).
        sync: which requests wait for the log's sync: ``Sync.EVERY_REQUEST`` (the
            default) or ``Sync.PUTS`` (:class:`~sharedq.cqs.journal.Sync`).
        overflow: this CQS's part in structure overflow (exit, notification, how
            often it checks and scans: :mod:`sharedq.cqs.overflow`).
    """

    def __init__(
        self,
        facility: CouplingFacility,
        name: str,
        *,
        system: str,
        msgq: StructurePair | str,
        emhq: StructurePair | str | None = None,
        recovery: RecoverySettings | None = None,
        security: SecuritySettings | None = None,
        on_work: WorkCallback | None = None,
        stagger_s: float | None = None,
        clock: Clock | None = None,
        faults: FaultHook | None = None,
        checkpoint_faults: Callable[[str], None] | None = None,
        sync: Sync = Sync.EVERY_REQUEST,
        overflow: OverflowOptions | None = None,
    ) -> None:
        problem = names.SERVER.problem(name, kind="CQS name")
        if problem is not None or len(name) > 32:
            raise cqs_error(CQSReason.BAD_ARGUMENT, problem or f"CQS name {name!r}: 32 at most")
        if not isinstance(system, str) or not 1 <= len(system) <= 4 or not system.isalnum():
            raise cqs_error(CQSReason.BAD_ARGUMENT, f"system id {system!r}: 1 to 4 letters/digits")
        _check_parts(
            facility=facility, recovery=recovery, security=security, overflow=overflow,
            clock=clock, on_work=on_work, faults=faults, checkpoint_faults=checkpoint_faults,
        )  # fmt: skip
        self.name = name
        self.system = system
        self.pairs: dict[Kind, StructurePair] = {Kind.MSGQ: _pair(msgq, Kind.MSGQ)}
        if emhq is not None:
            self.pairs[Kind.EMHQ] = _pair(emhq, Kind.EMHQ)
        if len({p.primary for p in self.pairs.values()}) != len(self.pairs):
            raise cqs_error(CQSReason.BAD_ARGUMENT, "the MSGQ and EMHQ pairs share a structure")
        self._facility = facility
        self._recovery = recovery
        self._security = SECURITY_OFF if security is None else security.security()
        self._on_work = on_work
        self._stagger_s = check_stagger(stagger_s)
        self.clock = clock or (recovery.clock if recovery is not None else SYSTEM_CLOCK)
        self.tokens = TokenSource(self.clock)
        self._faults = faults
        self._checkpoint_faults = checkpoint_faults
        if not isinstance(sync, Sync):
            raise cqs_error(CQSReason.BAD_ARGUMENT, f"sync {sync!r}: Sync.EVERY_REQUEST or PUTS")
        self._sync = sync
        self._overflow_options = overflow or OverflowOptions()
        #: Overflow processing per pair (:mod:`sharedq.cqs.overflow`), once connected.
        self.overflow: dict[Kind, Overflow] = {}
        self._log: RecoveryLog | None = None
        self._sites: dict[Kind, Site] = {}
        self._overflow: dict[Kind, StructureAccess] = {}
        self._registered: dict[tuple[Kind, bytes], int] = {}
        self._listeners: dict[Kind, Listener] = {}
        self._watches: dict[Kind, OverflowWatch] = {}
        self._work = Work()
        self._lock = threading.Lock()
        #: One CQSDISC at a time: a served CQS's session and its server may both end it.
        self._ending = threading.Lock()
        #: What :meth:`connect` found interrupted and finished, per structure.
        self.finished: dict[Kind, Finished] = {}
        #: Why the recovery log started warm or cold (with ``recovery=``).
        self.start_reason = ""
        #: What a cold start of this CQS moved to the cold queue, per structure.
        self.cold: dict[Kind, list[Message]] = {}

    def __repr__(self) -> str:
        state = "connected" if self._sites else "not connected"
        return f"<CQS {self.name} system={self.system} {state} pairs={self.structures}>"

    @property
    def structures(self) -> list[str]:
        return [p.primary for p in self.pairs.values()]

    @property
    def recovery_log(self) -> RecoveryLog | None:
        return self._log

    @property
    def on_work(self) -> WorkCallback | None:
        """The client's notification callback; one set before the first registration
        (a client made after its CQS, as an IMS given one, sets it so)."""
        return self._on_work

    @on_work.setter
    def on_work(self, callback: WorkCallback | None) -> None:
        self._on_work = callback

    # -- CQSCONN / CQSDISC -----------------------------------------------------------------

    def connect(self) -> CQS:
        """CQSCONN: check authority, recover the structures if need be, connect.

        The user needs UPDATE on ``CQSSTR.<primary>`` of each pair (the profile covers
        the pair as one unit); no profile means unprotected.  Refused with
        ``NOT_AUTHORIZED`` before anything is touched.
        """
        if self._sites:
            raise cqs_error(CQSReason.ALREADY_CONNECTED, f"{self.name} is connected")
        for pair in self.pairs.values():
            connecting.authorize(self._security, self.name, pair)
        primaries = self.structures
        if self._recovery is not None:
            self._log = RecoveryLog(
                self.name,
                self._facility,
                self._recovery,
                primaries,
                CQSClient(self.name, self.system),
                payload_key=PAYLOAD_KEY,
                facts=facts,
                overflow={p.primary: p.overflow for p in self.pairs.values() if p.overflow},
                faults=self._checkpoint_faults,
            )
        try:
            for kind, pair in self.pairs.items():
                self._sites[kind] = self._connect_one(kind, pair)
            warm = True
            if self._log is not None:
                warm, self.start_reason = self._log.decide_restart()
                self._log.after_restart()
                for primary in primaries:
                    self._log_event(primary, RecordType.CONNECT)
            for kind, site in self._sites.items():
                self.finished[kind] = finish_interrupted(site)
                cross.finish_crossings(self.overflow[kind], site.owner)
                if not warm:  # a CQS cold start: its client's locks to the cold queue
                    self.cold[kind] = self.cold_start_client(kind=kind)
        except CFError as error:
            self._drop()
            raise from_cf(error, f"{self.name} connect") from error
        except BaseException:
            self._drop()
            raise
        return self

    def _connect_one(self, kind: Kind, pair: StructurePair) -> Site:
        connecting.allocate_overflow(self._facility, pair, self.name)
        if self._log is not None:
            self._log.prepare(pair.primary)
        journal = NO_JOURNAL if self._log is None else self._log.journal
        accesses = []
        for slot, structure in enumerate(connecting.members(pair)):
            conn = connecting.connect_afresh(self._facility, structure, self.name)
            number = 2 * len(self._sites) + slot
            access = StructureAccess(conn, number, journal, _journal_failed, self._faults, facts)
            if self._log is not None:
                self._log.attach(access)
            accesses.append(access)
        acc, *overflow = accesses
        if self._log is None:  # held during an overflow selection all the same
            acc.gate = QuiesceGate(ControlArea(), max_wait=60.0, clock=SYSTEM_CLOCK).run
        if overflow:  # connected, logged and recovered with the pair
            self._overflow[kind] = overflow[0]
            self._watches[kind] = OverflowWatch(
                overflow[0], kind, self._on_work, self._work, self._stagger_s
            )
        owner = self.name.encode("ascii")
        interval = self._recovery is not None and self._recovery.durability.mode is INTERVAL
        synced = frozenset[Request]() if interval else self._sync.waits
        version = lock_version(owner)
        site = Site(acc, Layout(kind), owner, self.system, self.clock, self.tokens, version, synced)
        self.overflow[kind] = self._overflow_of(pair, site, kind)
        return site

    def _overflow_of(self, pair: StructurePair, site: Site, kind: Kind) -> Overflow:
        options, log = self._overflow_options, self._log
        other = self._overflow.get(kind)
        return Overflow(
            self.name,
            site,
            None if other is None else dataclasses.replace(site, acc=other),
            threshold=pair.ovflwmax,
            target=pair.target,
            clock=self.clock,
            check_every=options.check_every,
            refresh_s=options.refresh_s,
            record=None
            if log is None
            else (lambda **extra: self._log_event(pair.primary, RecordType.OVERFLOW, **extra)),
            scan_interval_s=options.scan_interval_s,
            exit=options.exit,
            notify=options.notify,
            faults=options.faults,
            checkpoint=None
            if log is None
            else (lambda: log.structure_checkpoint(pair.primary, "overflow")),
        )

    def _log_event(self, structure: str, record_type: RecordType, **extra: object) -> None:
        assert self._log is not None
        writer = self._log.journal.writer_for(structure)
        payload = {PAYLOAD_KEY: record_type.name.lower(), "system": self.system, **extra}
        writer.log_event(record_type, payload=payload, structure=structure, commit=True)

    def disconnect(self) -> None:
        """CQSDISC: stop listening, log statistics and the disconnect, checkpoint
        (system checkpoints at shutdown), disconnect.  The locks held stay on the lock
        queue.  Idempotent, and safe from two threads at once."""
        with self._ending:
            self._disconnect()

    def _disconnect(self) -> None:
        if not self._sites:
            return
        if self._log is not None:
            for kind, site in self._sites.items():
                try:
                    stats = site.acc.conn.statistics()
                    self._log_event(
                        site.acc.name,
                        RecordType.STATISTICS,
                        entries=stats.entries,
                        elements=stats.elements,
                        emcs=stats.emcs,
                    )
                    self._log_event(site.acc.name, RecordType.DISCONNECT)
                except (CFError, OSError) as error:
                    logger.warning("%s: disconnect records for %s: %s", self.name, kind, error)
            self._log.before_disconnect()
        self._drop()

    def stop_dead(self) -> None:
        """Stop as a process killed at this instant would: nothing more is written.

        The connections stay as they are (a peer or an operator declares the user
        failed; its locks and monitors stay, failed-persistent), the log's writers are
        let go unclosed.  For tests and demos in one process: the CQS's next
        incarnation connects under the same name and finishes what was left.
        """
        for listener in self._listeners.values():
            listener.stop()
        self._listeners.clear()
        for watch in self._watches.values():
            watch.stop()
        self._watches.clear()
        if self._log is not None:
            self._log.abandon()
        self._sites.clear()
        self._registered.clear()

    def _drop(self) -> None:
        for listener in self._listeners.values():
            listener.stop()
        self._listeners.clear()
        for watch in self._watches.values():
            watch.stop()
        self._watches.clear()
        for acc in [*(site.acc for site in self._sites.values()), *self._overflow.values()]:
            with contextlib.suppress(CFError):
                acc.disconnect()
        self._sites.clear()
        self._overflow.clear()
        self._registered.clear()
        if self._log is not None:
            self._log.close()

    def __enter__(self) -> CQS:
        return self if self._sites else self.connect()

    def __exit__(self, *exc: object) -> None:
        self.disconnect()

    # -- helpers ------------------------------------------------------------------------------

    def _site(self, kind: Kind) -> Site:
        try:
            site = self._sites.get(kind)
        except TypeError:  # an unhashable kind (a list): no kind either
            site = None
        if site is None:
            _check_kind(kind)
            what = "connected" if self._sites else "connected (call connect first)"
            raise cqs_error(CQSReason.NOT_CONNECTED, f"{self.name} is not {what} to {kind.name}")
        return site

    def _queue(self, site: Site, queue: object) -> bytes:
        return check_name(queue, site.layout.types)

    def _token(self, token: object) -> tuple[Site, LockToken]:
        if not (
            isinstance(token, LockToken)
            and type(token.queue) is bytes
            and type(token.entry_id) is bytes
            and type(token.staged) is bool  # "no" would delete through the delete queue
        ):
            raise cqs_error(CQSReason.BAD_TOKEN, f"{token!r} is not a lock token")
        site = self._site(token.kind)
        flow = self.overflow.get(token.kind)
        if flow is None or flow.overflow is None or not flow.table.mode:
            return site, token
        # The lock is where the queue was when it was read: look there.
        lock = ById(token.entry_id, Private.LOCK.header(token.queue))
        for where in (flow.site(token.queue), site, flow.overflow):
            with contextlib.suppress(NoSuchEntry, ListMismatch):  # ids are each structure's
                if where.acc.read(lock) is not None:
                    return where, token
        return site, token

    def _both(self, kind: Kind) -> list[Site]:
        """The pair's structures: the primary, and the overflow structure if any."""
        site = self._site(kind)
        flow = self.overflow.get(kind)
        return [site] if flow is None or flow.overflow is None else [site, flow.overflow]

    def _routed(self, kind: Kind, queue: object) -> tuple[Site, bytes]:
        """The structure of the pair that holds ``queue`` now, and its checked name."""
        site = self._site(kind)
        name = self._queue(site, queue)
        flow = self.overflow.get(kind)
        return (site if flow is None else flow.site(name)), name

    # -- CQSREG / CQSDEREG ------------------------------------------------------------------

    def register(self, queue: object, *, kind: Kind = Kind.MSGQ) -> bool:
        """CQSREG: be told when ``queue`` goes from empty to non-empty.

        One EMC per CQS and queue (registering again changes nothing); refused with
        ``EMC_FULL`` when the structure's EMC area is used up.  Returns whether the
        queue has messages now (the client may read at once: no event comes for them).
        """
        site = self._site(kind)
        name = self._queue(site, queue)
        with self._lock:
            if (kind, name) in self._registered:
                with requests.translated(f"register {text(name)}"):
                    return site.acc.read(ByKey(site.layout.header(name), name)) is not None
            staggered = self._stagger_s is not None
            spec = MonitorSpec(
                site.layout.header(name), name, name, notify_empty=staggered, token=name
            )
            with requests.translated(f"register {text(name)}"):
                registration = site.acc.register_monitor(spec)
                watch = self._watches.get(kind)
                there = watch is not None and watch.register(spec)
            self._registered[(kind, name)] = registration.monitor_id
            if kind not in self._listeners:
                self._listeners[kind] = (
                    Listener(site.acc, kind, self._on_work, self._work)
                    if self._stagger_s is None
                    else StaggeredListener(
                        site.acc, kind, self._on_work, self._work, self._stagger_s
                    )
                )
        return registration.nonempty or there

    def deregister(self, queue: object, *, kind: Kind = Kind.MSGQ) -> None:
        """CQSDEREG: no longer be told of ``queue``; frees its EMC."""
        site = self._site(kind)
        name = self._queue(site, queue)
        with self._lock:
            monitor = self._registered.pop((kind, name), None)
        if monitor is None:
            raise cqs_error(CQSReason.NOT_REGISTERED, f"{self.name} is not registered on {name!r}")
        with requests.translated(f"deregister {text(name)}"):
            site.acc.stop_monitor(monitor)
            if kind in self._watches:
                self._watches[kind].deregister(name)

    def registered(self) -> list[tuple[Kind, bytes]]:
        """The queues this CQS is registered on."""
        with self._lock:
            return sorted(self._registered, key=lambda k: (k[0].name, k[1]))

    def notifications(self) -> dict[str, int]:
        """How many notifications this CQS gave its client (``told``) and, when
        staggered, spared it because the queue went empty before its turn (``spared``)."""
        told = sum(listener.told for listener in self._listeners.values())
        spared = sum(listener.spared for listener in self._listeners.values())
        for watch in self._watches.values():
            told, spared = told + watch.counts()[0], spared + watch.counts()[1]
        return {"told": told, "spared": spared}

    def wait_for_work(self, timeout: float | None = None) -> tuple[Kind, bytes] | None:
        """The registered queue that went from empty to non-empty longest ago and was
        not taken yet (each queue once, however many times it was told), waiting up to
        ``timeout`` seconds (``None``: no limit); ``None`` when none came."""
        return self._work.get(timeout)

    # -- CQSPUT, CQSREAD, CQSBROWSE -----------------------------------------------------------

    def new_uow(self) -> Uow:
        """A unit of work for a message entering the system at this client now."""
        return Uow.new(self.system, self.tokens)

    def put(
        self,
        queue: object,
        body: bytes | Sequence[bytes],
        *,
        kind: Kind = Kind.MSGQ,
        uow: Uow | bytes | None = None,
        recoverable: bool = True,
        local: bool = False,
    ) -> LockToken | bytes:
        """CQSPUT: put a message (one part, or parts 2..n through a staging queue).

        ``uow``: the message's unit of work (a new one if not given).  ``recoverable``:
        logged, and kept by structure checkpoints.  ``local``: straight to the lock
        queue as this CQS's (local processing: no one is told); returns its lock
        token.  Otherwise returns the entry id of part 1.
        """
        site = self._site(kind)
        name = self._queue(site, queue)
        flow = self.overflow.get(kind)
        if flow is not None:
            site = flow.before_put(name)
        parts = (
            split(body)
            if isinstance(body, bytes)
            else list(body)
            if isinstance(body, Iterable)
            else []  # None, a number: refused below
        )
        if not parts or any(not isinstance(p, bytes) or len(p) > PART_BYTES for p in parts):
            raise cqs_error(
                CQSReason.MESSAGE_TOO_LARGE
                if parts and all(isinstance(p, bytes) for p in parts)
                else CQSReason.BAD_ARGUMENT,
                f"a message is bytes or parts of bytes, each at most {PART_BYTES}",
            )
        if len(parts) > 0xFFFF:
            raise cqs_error(CQSReason.MESSAGE_TOO_LARGE, f"{len(parts)} parts")
        if type(recoverable) is not bool or type(local) is not bool:
            raise cqs_error(CQSReason.BAD_ARGUMENT, "recoverable and local are True or False")
        uow_bytes = bytes(self.new_uow()) if uow is None else check_uow(uow)
        change = requests.put(site, name, parts, uow_bytes, recoverable=recoverable, local=local)
        if flow is not None:
            flow.after_put()
        if local:
            return LockToken(kind, name, change.entry.entry_id, len(parts) > 1)
        return change.entry.entry_id

    def read(self, queue: object, *, kind: Kind = Kind.MSGQ) -> Message | None:
        """CQSREAD: take the queue's first message onto the lock queue; ``None`` when
        the queue is empty (another reader was first: not an error)."""
        site, name = self._routed(kind, queue)
        found = requests.read(site, name)
        return found or cross.read_missed(self.overflow.get(kind), site, name)

    def browse(
        self, queue: object, *, kind: Kind = Kind.MSGQ, limit: int | None = None
    ) -> list[Message]:
        """CQSBROWSE: the queue's messages, whole, in order, without taking them."""
        site, name = self._routed(kind, queue)
        if limit is not None and (type(limit) is not int or limit < 0):
            raise cqs_error(CQSReason.BAD_ARGUMENT, f"limit {limit!r}")
        found: list[Message] = []
        for where in cross.holders(self.overflow.get(kind), site, name):
            left = None if limit is None else limit - len(found)
            found += requests.browse(where, name, left)
        return found

    def browse_locked(self, token: LockToken) -> Message:
        """CQSBROWSE of a message this CQS holds locked (its whole contents)."""
        site, token = self._token(token)
        entry = requests.locked_entry(site, token, force=False)
        return requests.whole(site, entry, token)

    # -- CQSMOVE, CQSDEL, CQSUNLCK ----------------------------------------------------------------

    def move(
        self, source: LockToken | object, to_queue: object, *, kind: Kind = Kind.MSGQ
    ) -> bytes | None:
        """CQSMOVE: a message to another queue, through the move queue.

        ``source``: a lock token (that locked message) or a queue name (its first
        message; ``None`` when it is empty).  Returns the moved entry's id.
        """
        if isinstance(source, LockToken):
            _check_kind(kind)  # the token's kind is the one used: but not just anything
            site, token = self._token(source)
            target = self._queue(site, to_queue)
            locator = ById(token.entry_id, Private.LOCK.header(token.queue))
            flow = self.overflow.get(token.kind)
            if flow is not None and cross.crosses(flow, site, target):
                return cross.cross(flow, site, locator, token.queue, target, locked=token)
            change = requests.move(site, locator, token.queue, target, locked=token)
            return change.entry.entry_id
        site, name = self._routed(kind, source)
        target = self._queue(site, to_queue)
        flow = self.overflow.get(kind)
        if flow is not None and cross.crosses(flow, site, target):
            return cross.cross_first(flow, site, name, target)
        with requests.translated(f"move from {text(name)}"):
            first = site.acc.read(ByKey(site.layout.header(name), name))
        while first is not None:
            try:
                change = requests.move(
                    site, ById(first.entry_id, site.layout.header(name)), name, target
                )
                return change.entry.entry_id
            except CQSError as error:  # another reader took it first: try the next
                if not isinstance(error.__cause__, NoSuchEntry | ListMismatch):
                    raise
            with requests.translated(f"move from {text(name)}"):
                first = site.acc.read(ByKey(site.layout.header(name), name))
        return None

    def delete(self, token: LockToken) -> None:
        """CQSDEL: delete a message this CQS holds locked, with its staging parts."""
        site, token = self._token(token)
        requests.delete(site, token)

    def unlock(
        self,
        token: LockToken,
        *,
        first: bool = True,
        to_queue: object = None,
        force: bool = False,
    ) -> None:
        """CQSUNLCK: a locked message back to its queue (``first``: at the head, the
        default, or the tail), or to ``to_queue``; ``force``: a lock of another
        (failed) client's CQS."""
        if type(first) is not bool or type(force) is not bool:  # force="no" would force
            raise cqs_error(CQSReason.BAD_ARGUMENT, "first and force are True or False")
        site, token = self._token(token)
        target = None if to_queue is None else self._queue(site, to_queue)
        flow = self.overflow.get(token.kind)
        if target is not None and flow is not None and cross.crosses(flow, site, target):
            locator = ById(token.entry_id, Private.LOCK.header(token.queue))
            cross.cross(flow, site, locator, token.queue, target, locked=token, first=first)
            return
        requests.unlock(site, token, to_queue=target, first=bool(first), force=bool(force))

    # -- the client's restart (CQSRSYNC) ---------------------------------------------------------

    def resync(
        self, done: Iterable[Uow | bytes] = (), *, kind: Kind = Kind.MSGQ
    ) -> resync.Resynced:
        """CQSRSYNC after the client's emergency restart: the messages this CQS holds
        whose units of work the client completed (``done``) are deleted; the others go
        back to the head of their queues.  Then the client registers again."""
        completed, report = (
            [check_uow(u) for u in check_collection(done, "done")],
            resync.Resynced(),
        )
        for site in self._both(kind):  # the overflow structure's locks too
            one = resync.resync(site, completed)
            report.deleted += one.deleted
            report.requeued += one.requeued
        return report

    def cold_start_client(self, *, kind: Kind = Kind.MSGQ) -> list[Message]:
        """CQSRSYNC after the client's cold start: every message this CQS holds moves
        to the cold queue; returns them (the client writes an X'6740' record for each)."""
        return [m for site in self._both(kind) for m in resync.to_cold_queue(site)]

    def cold_queue(self, *, kind: Kind = Kind.MSGQ) -> list[Message]:
        """The messages on the cold queue, whole, for an operator or a requeuer."""
        return [m for site in self._both(kind) for m in resync.cold_queue(site)]

    def locks(self, *, kind: Kind = Kind.MSGQ, owner: str | None = None) -> list[LockToken]:
        """The messages on the lock queue held by ``owner`` (this CQS by default)."""
        problem = None if owner is None else names.SERVER.problem(owner, kind="owner CQS name")
        if problem is not None:
            raise cqs_error(CQSReason.BAD_ARGUMENT, problem)
        who = None if owner is None else owner.encode("ascii")
        return [t for site in self._both(kind) for t in resync.held(site, who)]

    # -- CQSQUERY, CQSCHKPT ----------------------------------------------------------------------

    def query(self, queues: Iterable[object], *, kind: Kind = Kind.MSGQ) -> list[QueueCounts]:
        """CQSQUERY: per queue, messages ready and locked, and the oldest one's age."""
        now = self.clock.now_us()
        routed = [self._routed(kind, queue) for queue in check_collection(queues, "queues")]
        flow = self.overflow.get(kind)
        return [
            cross.merged(
                [requests.counts(w, [name], now)[0] for w in cross.holders(flow, site, name)]
            )
            for site, name in routed
        ]

    def statistics(self, *, kind: Kind = Kind.MSGQ) -> StructureStats:
        """CQSQUERY of the structure: its entries, elements and EMCs in use and at most."""
        site = self._site(kind)
        with requests.translated("statistics"):
            return site.acc.conn.statistics()

    def display_overflowq(self, *, kind: Kind = Kind.MSGQ) -> dict[str, object]:
        """``/DISPLAY OVERFLOWQ STRUCTURE``: the pair's overflow mode and each queue in
        overflow, since when and its size (:meth:`Overflow.state`, read afresh)."""
        self._site(kind)  # NOT_CONNECTED, or a bad kind, as every request
        with requests.translated("display_overflowq"):
            return self.overflow[kind].state()

    def checkpoint(self, scope: Literal["system", "structure"] = "system") -> None:
        """CQSCHKPT: a system checkpoint (this CQS's restart point in the log) or a
        structure checkpoint (each structure copied to its SRDS); needs recovery."""
        if self._log is None:
            raise cqs_error(CQSReason.BAD_ARGUMENT, f"{self.name} has no recovery settings")
        if scope == "system":
            self._log.system_checkpoint("request")
        elif scope == "structure":
            for primary in self.structures:
                self._log.structure_checkpoint(primary, "request")
        else:
            raise cqs_error(CQSReason.BAD_ARGUMENT, f"scope {scope!r}: system or structure")


def _pair(pair: StructurePair | str, kind: Kind) -> StructurePair:
    if isinstance(pair, str):
        return StructurePair(pair, kind=kind)
    if not isinstance(pair, StructurePair) or pair.kind is not kind:
        raise cqs_error(CQSReason.BAD_ARGUMENT, f"{pair!r} is not a {kind.name} structure pair")
    return pair


def _check_kind(kind: object) -> None:
    if not isinstance(kind, Kind):
        raise cqs_error(CQSReason.BAD_ARGUMENT, f"kind {kind!r}: Kind.MSGQ or Kind.EMHQ")


#: What a server's parts are (else a function to call, or a clock's methods).
_PART_KINDS: dict[str, type] = {
    "facility": CouplingFacility,
    "recovery": RecoverySettings,
    "security": SecuritySettings,
    "overflow": OverflowOptions,
}


def _check_parts(**parts: object) -> None:
    """``BAD_ARGUMENT`` for a part of the wrong kind, before anything is connected
    (a clock that is no clock used to fail only after the connect, leaving it made)."""
    for what, part in parts.items():
        if part is None and what != "facility":
            continue
        kind = _PART_KINDS.get(what)
        if kind is not None:
            wanted, fits = kind.__name__, isinstance(part, kind)
        elif what == "clock":
            wanted, fits = "Clock", is_clock(part)
        else:
            wanted, fits = "function", callable(part)
        if not fits:
            raise cqs_error(CQSReason.BAD_ARGUMENT, f"{what} {part!r}: not a {wanted}")
