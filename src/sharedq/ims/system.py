"""An IMS system on shared queues: one per CQS, several in a shared-queues group.

:class:`IMS` owns its CQS connection (made through the CQS's public requests), starts
its regions, registers interest as the seed's triggers say (redbook §1.11): a
transaction when the IMS starts, when the transaction is started again and when a
region serving its class starts (§9.1: interest follows the regions that can process
it); an LTERM at logon.  It deregisters on stop, logoff and shutdown.

Input (§1.16, §9.2): a full-function transaction is processed **locally** (the CQS
put goes straight to the lock queue; no one is told) when a region serving its class
is waiting, its PSB is started, the message fits one queue buffer, it is not serial
and ``MAXRGN`` allows; otherwise **globally**: on the transaction ready queue (the
serial queue for a serial transaction), where every registered IMS is told when it
goes from empty to non-empty, each schedules a region, and the first to read wins:
the others' ``GU`` gets ``QC``.  Limit priority and ``PARLIM`` are ignored.

A dispatcher thread per IMS turns notifications into scheduling and LTERM output
into deliveries; each region is a thread of its own (:mod:`sharedq.ims.region`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Literal

from sharedq.cf import CouplingFacility
from sharedq.clock import Clock
from sharedq.cqs import CQS, CQSError, CQSReason, CQSService, Kind, Uow
from sharedq.ims import display, messages, queues
from sharedq.ims.commands import Commands
from sharedq.ims.conversation import Conversation, ConversationExit, Conversations
from sharedq.ims.definitions import SystemDefinition, Transaction, check_name
from sharedq.ims.display import QcntRow
from sharedq.ims.dli import DLI, Destination, Input, Output, Program
from sharedq.ims.errors import U3303, IMSReason, ims_error
from sharedq.ims.eto import ETO
from sharedq.ims.events import FailureEvents
from sharedq.ims.failure import Failures
from sharedq.ims.fastpath import FastPath, FastPathDefinition, IFPProgram
from sharedq.ims.output import Outputs
from sharedq.ims.queues import Routed
from sharedq.ims.region import Assignment, Region
from sharedq.ims.restart import ColdMessage, Restart, Restarted, check_mode, resynchronize
from sharedq.ims.spa import Spa
from sharedq.ims.terminal import Delivered, Terminal
from sharedq.recovery.settings import RecoverySettings

logger = logging.getLogger("sharedq.ims")
#: How often the dispatcher retries committed output the structure had no room for.
RETRY_S = 0.2


class IMS(Commands, Failures, ETO):
    """One IMS system: definitions, programs, its CQS, regions and terminals.

    Args:
        facility: where the shared queue structures are.
        definition: the system's resources and IMSID.
        programs: the application program for each PSB (a callable taking a ``DLI``).
        msgq: the MSGQ structure (its CQS connects to it).
        cqs_name: its CQS's name (``CQS<IMSID>`` by default).
        recovery: the CQS's log and checkpoints, if any.
        clock: time for units of work and put stamps.
        cqs: a CQS made elsewhere instead of one made here: a
            :class:`~sharedq.cqs.RemoteCQS` whose CQS runs in a process of its own, or
            a ``CQS`` (its system id must be this IMSID; with Fast Path it has the
            EMHQ); ``msgq``, ``emhq``, ``cqs_name`` and ``recovery`` are then its.
        peer_watch_s: look for failed members this often (seconds) and drop them from
            the Fast Path global tables by itself (:mod:`sharedq.ims.events`).
        reconnect_on_restart: with a ``RemoteCQS``, reconnect when its server is back.
        conversation_exit: the conversation exit routine (DFSCONE0), told of /EXIT and
            of a conversation's response arriving where it has no CCB
            (:mod:`sharedq.ims.conversation`); by default such a response is deleted.
    """

    def __init__(
        self,
        facility: CouplingFacility,
        definition: SystemDefinition,
        programs: Mapping[str, Program],
        *,
        msgq: str = "MSGQ01",
        cqs_name: str | None = None,
        recovery: RecoverySettings | None = None,
        clock: Clock | None = None,
        fastpath: FastPathDefinition | None = None,
        ifp_programs: Mapping[str, IFPProgram] | None = None,
        emhq: str = "EMHQ01",
        cqs: CQSService | None = None,
        peer_watch_s: float | None = None,
        reconnect_on_restart: bool = False,
        conversation_exit: ConversationExit | None = None,
    ) -> None:
        if not isinstance(definition, SystemDefinition):
            raise ims_error(IMSReason.BAD_ARGUMENT, "definition: a SystemDefinition")
        for program in definition.programs:
            if not callable(programs.get(program.psb)):
                raise ims_error(IMSReason.NO_PROGRAM, f"no callable for PSB {program.psb}")
        self.definition = definition
        self.imsid = definition.imsid
        self._facility = facility
        self._programs = dict(programs)
        self.cqs: CQSService = (
            CQS(
                facility,
                cqs_name or f"CQS{self.imsid}",
                system=self.imsid,
                msgq=msgq,
                emhq=emhq if fastpath is not None else None,
                recovery=recovery,
                on_work=self._told,
                clock=clock,
            )
            if cqs is None
            else self._given(cqs, fastpath is not None)
        )
        #: Fast Path (:mod:`sharedq.ims.fastpath`), when defined (the CQS has the EMHQ).
        self.fastpath = (
            None
            if fastpath is None
            else FastPath(self.cqs, self.imsid, fastpath, ifp_programs or {})
        )
        #: The peer-failure and CQS-restart events (:mod:`sharedq.ims.events`).
        self.events = FailureEvents(
            self.imsid,
            facility,
            self.cqs,
            peer_failed=self.peer_failed,
            reconnect=self.reconnect,
            running=lambda: self._started and not self._stopping and not self._dead,
            peer_watch_s=peer_watch_s,
            reconnect_on_restart=reconnect_on_restart,
        )
        self._lock = threading.Condition()
        self._reg_lock = threading.Lock()
        self._started = False
        self._stopping = False
        self._dead = False  # stop_dead: nothing more reaches the structures from here
        self._reconnecting = False  # reconnect: nothing scheduled until resynchronized
        self._completed: list[Uow] = []  # inputs processed while the CQS was down
        self._dynamic: dict[str, Terminal | None] = {}  # ETO LTERMs signed on here
        self._regions: dict[str, Region] = {}
        self._running: dict[str, int] = {}
        self._work: dict[str, None] = {}  # transactions with work (the SMB flag)
        self._conversations = Conversations(self.imsid, conversation_exit)
        self._outputs = Outputs(self.cqs, self._lock, self._conversations)
        self._stopped_trans: set[str] = set()
        self._stopped_psbs: set[str] = set()
        self._interest: set[str] = set()  # transaction codes registered
        self._pending: list[tuple[Input | None, Output, Uow]] = []
        self._full = False
        self._dispatcher: threading.Thread | None = None
        #: What the last start did with the messages a failure left locked.
        self.restarted = Restarted("normal")
        #: What this IMS did: inputs local/global/serial, messages processed, QCs,
        #: abends, outputs put and delivered.
        self.counts: dict[str, int] = dict.fromkeys(
            ("local", "global", "serial", "processed", "qc", "abends", "outputs", "delivered"),
            0,
        )

    def __repr__(self) -> str:
        return f"<IMS {self.imsid} {'started' if self._started else 'stopped'}>"

    def _given(self, cqs: CQSService, fastpath: bool) -> CQSService:
        """A CQS made elsewhere, checked to be this system's, its notifications ours."""
        if cqs.system != self.imsid or (fastpath and Kind.EMHQ not in cqs.pairs):
            raise ims_error(
                IMSReason.BAD_ARGUMENT,
                f"{cqs.name} serves {cqs.system} on {[k.name for k in cqs.pairs]}: "
                f"not {self.imsid}{' with Fast Path' if fastpath else ''}",
            )
        if cqs.on_work is not None:
            raise ims_error(IMSReason.BAD_ARGUMENT, f"{cqs.name} tells another client already")
        cqs.on_work = self._told
        return cqs

    # -- start and shutdown -------------------------------------------------------------------

    def start(self, restart: Restart = "normal") -> IMS:
        """Connect the CQS, resynchronize after a failure (``restart``: ``"emergency"``
        or ``"cold"``, :mod:`sharedq.ims.restart`), start the defined regions, register
        the static transactions."""
        if self._started:
            raise ims_error(IMSReason.ALREADY_STARTED, f"{self.imsid} is started")
        mode = check_mode(restart)
        self.cqs.connect()
        try:
            self.restarted = resynchronize(self.cqs, self.imsid, mode)
        except BaseException:
            self.cqs.disconnect()
            raise
        self._started, self._stopping = True, False
        self._conversations.started(self.cqs.tokens.next())  # earlier ones are adopted
        self._dispatcher = threading.Thread(
            target=self._dispatch, name=f"ims-{self.imsid}", daemon=True
        )
        self._dispatcher.start()
        with self._lock:
            for region in self.definition.regions:
                self._regions[region.name] = Region(self, region)
        self._reconcile()
        if self.fastpath is not None:
            self.fastpath.start()
        self.events.start()
        return self

    def shutdown(self) -> None:
        """Stop the regions (a program's next ``GU`` gets ``QC``), log every terminal
        off, deregister everything, put the responses conversations hold back on their
        queues (the next start adopts them) and disconnect the CQS.  Messages stay on
        the shared queues; committed output the structure still has no room for is lost
        (logged as a warning: this model has no IMS checkpoint to keep it in)."""
        if not self._started:
            return
        self.events.stop()
        with self._lock:
            self._stopping = True
            regions = list(self._regions.values())
            self._regions.clear()
            self._lock.notify_all()
        for region in regions:
            region.stop()
        if self.fastpath is not None:
            self.fastpath.shutdown()
        if self._dispatcher is not None:
            self._dispatcher.join()
        for terminal in self._outputs.terminals():
            self.logoff(terminal)
        with self._reg_lock:
            for code in sorted(self._interest):
                self._deregister(code)
        with self._lock:
            pending, self._pending = self._pending, []
        lost = [p for p in pending if not self._put_output(*p)]
        if lost:
            logger.warning("%s: %d committed outputs lost at shutdown", self.imsid, len(lost))
        for held in self._conversations.release():  # adopted again after the restart
            self._outputs.put_back(held)
        self.cqs.disconnect()
        self._started = False

    @property
    def cold_messages(self) -> list[ColdMessage]:
        """The X'6740' records of the last cold start: messages left on the cold queue."""
        return list(self.restarted.cold)

    def __enter__(self) -> IMS:
        return self if self._started else self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _check_started(self) -> None:
        if not self._started:
            raise ims_error(IMSReason.NOT_STARTED, f"{self.imsid} is not started")

    # -- interest registration ----------------------------------------------------------------

    def _wanted(self, tran: Transaction) -> bool:
        served = any(r.serves(tran.message_class) for r in self._regions.values())
        return self._started and not tran.remote and tran.code not in self._stopped_trans and served

    def _queue_of(self, tran: Transaction) -> bytes:
        if tran.serial:
            return queues.transaction_serial(tran.code, self.imsid)
        return queues.transaction_ready(tran.code)

    def _reconcile(self) -> None:
        """Register interest in each transaction that should have it, deregister the rest."""
        with self._reg_lock:
            for tran in self.definition.transactions:
                with self._lock:
                    wanted = self._wanted(tran) and not self._stopping
                if wanted and tran.code not in self._interest:
                    if self.cqs.register(self._queue_of(tran)):
                        self._flag(tran.code)  # work there already: no event comes for it
                    self._interest.add(tran.code)
                elif not wanted and tran.code in self._interest:
                    self._deregister(tran.code)

    def _deregister(self, code: str) -> None:
        self.cqs.deregister(self._queue_of(self._transaction(code)))
        self._interest.discard(code)
        with self._lock:
            self._work.pop(code, None)

    def interests(self) -> list[str]:
        """The transaction codes this IMS is registered on."""
        with self._reg_lock:
            return sorted(self._interest)

    def display_overflowq(self) -> list[dict[str, object]]:
        """/DISPLAY OVERFLOWQ STRUCTURE ALL: each structure pair's overflow state, as
        its CQS keeps it (MSGQ, and EMHQ with Fast Path): the mode, and each queue in
        the overflow structure with since when and its size."""
        return [self.cqs.display_overflowq(kind=kind) for kind in self.cqs.pairs]

    def display_active(self) -> dict[str, str]:
        """/DISPLAY ACTIVE REGION: each message region, ``ACTIVE`` while it runs a
        program, ``WAITING`` when a message would be processed locally at once.

        Its output reaches the terminal before a program ends, so a region is briefly
        still ``ACTIVE`` after its response was delivered."""
        with self._lock:
            return {name: "ACTIVE" if r.busy else "WAITING" for name, r in self._regions.items()}

    # -- notification -------------------------------------------------------------------------

    def _told(self, kind: Kind, queue: bytes) -> None:
        """The CQS says ``queue`` went from empty to non-empty (its listener thread)."""
        name = queues.resource(queue)
        if kind is Kind.EMHQ and self.fastpath is not None:
            self.fastpath.told(queue)
        elif queue[0] == queues.LTERM_READY:
            self._outputs.told(name)
        else:
            self._flag(name)

    def _flag(self, code: str) -> None:
        with self._lock:
            self._work[code] = None
            self._lock.notify_all()

    def _wake(self) -> None:
        with self._lock:
            self._lock.notify_all()

    # -- input --------------------------------------------------------------------------------

    def enter(
        self, source: str, segments: Sequence[bytes | str], *, terminal: Terminal | None = None
    ) -> Routed:
        """A message from LTERM ``source`` whose first segment starts with a transaction
        code: FINDDEST, then local or global processing (§9.2).  Unknown code:
        ``UNKNOWN_DESTINATION``; the structure full: ``STRUCTURE_FULL`` (DFS070)."""
        self._check_started()
        message = messages.make(segments, source)
        if terminal is None:
            terminal = self._outputs.terminal_of(source)
        uow = self.cqs.new_uow()
        if terminal is not None and (
            going := self._conversations.next_input(terminal, uow.origin_id)
        ):
            return self._converse(message, uow, *going)
        code = message.segments[0].split(b" ", 1)[0].decode("ascii", "replace")
        tran = self.definition.transaction(code)
        if tran is None:
            raise ims_error(IMSReason.UNKNOWN_DESTINATION, f"{self.imsid}: {code!r}: no such code")
        if not tran.conversational:
            return self._route(tran, message, uow)
        if terminal is None:
            raise ims_error(
                IMSReason.NOT_IN_SESSION, f"{code} is conversational: {source} is in no session"
            )
        truncation = tran.truncation or self.definition.spa_truncation
        first = Spa.start(code, tran.spa, truncation).encode()
        conversation = self._conversations.begin(terminal, source, code, uow.origin_id)
        try:  # the CCB first: the response may come back before the put returns
            body = messages.ImsMessage((first, *message.segments), source, True)
            return self._route(tran, body, uow)
        except BaseException:
            self._conversations.end(conversation)
            raise

    def _converse(
        self,
        message: messages.ImsMessage,
        uow: Uow,
        conversation: Conversation,
        spa: Spa,
        spa_segment: bytes,
        held: Delivered | None,
    ) -> Routed:
        """A conversation's next input: out with the held SPA to the SPA's transaction,
        then the response held until now deleted (§10.3 steps 10-12)."""
        tran = self.definition.transaction(spa.code)
        try:
            if tran is None:
                raise ims_error(
                    IMSReason.UNKNOWN_DESTINATION,
                    f"{self.imsid}: the conversation goes on to {spa.code!r}: no such code here",
                )
            body = messages.ImsMessage((spa_segment, *message.segments), message.source, True)
            routed = self._route(tran, body, uow)
        except BaseException:
            self._conversations.resumed(conversation, spa_segment, held)
            raise
        if held is not None:
            self._outputs.drop_held(held)
        return routed

    def _route(self, tran: Transaction, message: messages.ImsMessage, uow: Uow) -> Routed:
        """Put ``message`` for ``tran`` in unit of work ``uow``: locally or globally (§9.2)."""
        code = tran.code
        parts = messages.buffers(message.encode(), self.definition.queue_buffer)
        region = self._claim_region(tran) if len(parts) == 1 and not tran.serial else None
        if region is not None:
            try:
                token = self.cqs.put(queues.transaction_ready(code), parts, uow=uow, local=True)
            except CQSError as error:
                self._release(region, tran)
                raise self._rejected(error) from error
            assert not isinstance(token, bytes)
            self._count("local")
            first = Input(code, message, uow, token)
            region.assign(Assignment(tran, self._programs[tran.psb], first))
            return Routed("local", uow, 1, tran.response)
        try:
            self.cqs.put(self._queue_of(tran), parts, uow=uow)
        except CQSError as error:
            raise self._rejected(error) from error
        routing: Literal["global", "serial"] = "serial" if tran.serial else "global"
        self._count(routing)
        return Routed(routing, uow, len(parts), tran.response)

    def _rejected(self, error: CQSError) -> Exception:
        if error.reason is CQSReason.STRUCTURE_FULL:
            with self._lock:
                self._full = True
            return ims_error(IMSReason.STRUCTURE_FULL, f"DFS070 UNABLE TO ROUTE MESSAGE: {error}")
        if error.reason is CQSReason.NOT_CONNECTED:
            return ims_error(IMSReason.CQS_UNAVAILABLE, f"{self.cqs.name} not available: {error}")
        return ims_error(IMSReason.QUEUE_ERROR, str(error))

    def _claim_region(self, tran: Transaction) -> Region | None:
        """A waiting region that may process ``tran`` now, marked busy; ``None`` if none."""
        with self._lock:
            if (
                tran.remote
                or not self.definition.local_processing
                or tran.code in self._stopped_trans
                or tran.psb in self._stopped_psbs
                or self._stopping
                or self._reconnecting
                or (tran.maxrgn and self._running.get(tran.code, 0) >= tran.maxrgn)
            ):
                return None
            for region in self._regions.values():
                if not region.busy and region.serves(tran.message_class):
                    region.busy = True
                    self._running[tran.code] = self._running.get(tran.code, 0) + 1
                    return region
        return None

    def _release(self, region: Region, tran: Transaction) -> None:
        with self._lock:
            region.busy = False
            self._running[tran.code] -= 1
            self._lock.notify_all()

    def _count(self, what: str, n: int = 1) -> None:
        with self._lock:
            self.counts[what] += n

    # -- what regions call (region.Host) ------------------------------------------------------

    def read_input(self, transaction: Transaction) -> Input | None:
        """A ``GU``: read the transaction's next message, or ``None`` (``QC``, and the
        work flag reset)."""
        with self._lock:
            if (
                transaction.code in self._stopped_trans
                or transaction.psb in self._stopped_psbs
                or self._stopping
                or self._dead
                or self._reconnecting
            ):
                return None
            self._work.pop(transaction.code, None)
        try:
            got = self.cqs.read(self._queue_of(transaction))
        except CQSError as error:
            logger.warning("%s: read of %s failed: %s", self.imsid, transaction.code, error)
            got = None
        if got is None:
            self._count("qc")
            return None
        self._flag(transaction.code)  # there may be more: the flag stays until a QC
        assert got.token is not None
        return Input(transaction.code, messages.decode(got.body), got.uow, got.token)

    def sync_point(self, held: Input | None, outputs: list[Output]) -> None:
        """Put what the program inserted, then delete its input (Table 4's order).
        Output the structure has no room for stays here and is put when it can be.
        After :meth:`stop_dead` nothing is done: the process is gone."""
        if self._dead:
            return
        for output in outputs:
            uow = held.uow.spawn(self.imsid, self.cqs.tokens) if held else self.cqs.new_uow()
            with self._lock:  # behind output already waiting for room: keep the order
                if self._pending:
                    self._pending.append((held, output, uow))
                    continue
            if not self._put_output(held, output, uow):
                with self._lock:
                    self._pending.append((held, output, uow))
                    self._lock.notify_all()
        if held is not None:
            try:
                self.cqs.delete(held.token)
            except CQSError as error:
                if error.reason is CQSReason.NOT_CONNECTED:  # in doubt until reconnect
                    with self._lock:
                        self._completed.append(held.uow)
                else:
                    logger.warning("%s: delete of an input failed: %s", self.imsid, error)
            self._count("processed")

    def _put_output(self, held: Input | None, output: Output, uow: Uow) -> bool:
        dest = output.destination
        source = held.message.source if held is not None else ""
        segments = tuple(output.segments)
        if output.spa is not None:  # a conversation's: the SPA first
            segments = (output.spa, *segments)
        body = messages.ImsMessage(
            segments, source if dest.transaction else "", output.spa is not None
        )
        if dest.transaction:
            queue = self._queue_of(self._transaction(dest.name))
        else:
            queue = queues.lterm_ready(dest.name)
        parts = messages.buffers(body.encode(), self.definition.queue_buffer)
        try:
            self.cqs.put(queue, parts, uow=uow)
        except CQSError as error:
            if error.reason is CQSReason.STRUCTURE_FULL:
                with self._lock:
                    self._full = True
            else:
                logger.warning("%s: output put failed: %s", self.imsid, error)
            return False
        self._count("outputs")
        return True

    def back_out(self, held: Input | None, transaction: Transaction, error: BaseException) -> None:
        """An abend: the input back to the head of its queue, the PSB stopped here.
        A serial transaction is USTOPped instead (deregistered, §9.6); a ``U3303`` of
        another goes to the transaction suspend queue (§9.7)."""
        if self._dead:
            return
        self._count("abends")
        to_queue = None
        with self._lock:
            if transaction.serial:
                self._stopped_trans.add(transaction.code)
            elif isinstance(error, U3303):
                to_queue = queues.transaction_suspend(transaction.code)
            else:
                self._stopped_psbs.add(transaction.psb)
        if transaction.serial:
            self._reconcile()
        if held is not None:
            try:
                self.cqs.unlock(held.token, first=True, to_queue=to_queue)
            except CQSError as failure:
                logger.warning("%s: unlock after an abend failed: %s", self.imsid, failure)

    def destination(self, name: str) -> Destination | None:
        """FINDDEST for an alternate PCB: a transaction or an LTERM defined here."""
        if self.definition.transaction(name) is not None:
            return Destination(name, True)
        if self.definition.lterm(name) is not None:
            return Destination(name, False)
        with self._lock:
            if self._dynamic.get(name) is not None:  # an ETO LTERM signed on here
                return Destination(name, False)
        return None

    def structure_full(self) -> bool:
        """Whether the MSGQ structure is known full (an insert then gets ``A7``):
        set by a put that found no room, cleared when the structure has room again."""
        with self._lock:
            if not self._full:
                return False
        stats = self.cqs.statistics()
        room = stats.entries < stats.max_entries and stats.elements < stats.max_elements
        with self._lock:
            self._full = not room
            return self._full

    def region_done(self, region: Region, transaction: Transaction, dli: DLI) -> None:
        self._release(region, transaction)

    # -- the dispatcher -----------------------------------------------------------------------

    def _dispatch(self) -> None:
        while True:
            with self._lock:
                while not self._has_business():
                    self._lock.wait(RETRY_S if self._pending else None)
                    if self._pending:  # committed output waiting for room: retry now
                        break
                if self._stopping:
                    return
                jobs = self._schedulable()
                lterms = self._outputs.due()
            for region, job in jobs:
                region.assign(job)
            for lterm in lterms:
                self._outputs.deliver(lterm)
            self._retry_pending()

    def _retry_pending(self) -> None:
        """Put the output kept for want of room, oldest first, until one is refused
        again.  Each stays at the head of the list until it is put, so a sync point
        meanwhile queues its output behind it: output keeps the order it was made in."""
        while True:
            with self._lock:
                if not self._pending:
                    return
                held, output, uow = self._pending[0]
            if not self._put_output(held, output, uow):
                return
            with self._lock:
                self._pending.pop(0)

    def _has_business(self) -> bool:
        if self._stopping:
            return True
        if self._outputs.has_due():
            return True
        return any(self._can_schedule(code) is not None for code in self._work)

    def _can_schedule(self, code: str) -> Region | None:
        tran = self.definition.transaction(code)
        if (
            tran is None
            or tran.remote
            or self._reconnecting
            or code in self._stopped_trans
            or tran.psb in self._stopped_psbs
        ):
            return None
        limit = 1 if tran.serial else tran.maxrgn
        if limit and self._running.get(code, 0) >= limit:
            return None
        return next(
            (r for r in self._regions.values() if not r.busy and r.serves(tran.message_class)),
            None,
        )

    def _schedulable(self) -> list[tuple[Region, Assignment]]:
        """Scheduling (under the lock): a free region for each transaction with work."""
        jobs = []
        progress = True
        while progress:
            progress = False
            for code in list(self._work):
                region = self._can_schedule(code)
                if region is None:
                    continue
                tran = self._transaction(code)
                region.busy = True
                self._running[code] = self._running.get(code, 0) + 1
                jobs.append((region, Assignment(tran, self._programs[tran.psb], None)))
                # one region per notified transaction per pass: a GU that reads resets
                # or keeps the flag; the next pass schedules more if the work is there
                self._work.pop(code)
                progress = True
        return jobs

    def display_qcnt_lterm(self, msgage_days: int, *, lterms: Sequence[str] = ()) -> list[QcntRow]:
        """/DISPLAY QCNT LTERM MSGAGE n (§9.12): LTERM queues on the shared queues with
        messages older than ``n`` days; this IMS's LTERMs and ``lterms`` (other systems')."""
        names = [lt.name for lt in self.definition.lterms] + list(lterms)
        return display.qcnt(self.cqs, display.lterm_queues(names), msgage_days)

    # -- conversations ------------------------------------------------------------------------

    def in_conversation(self, terminal: Terminal) -> bool:
        """Whether this IMS holds a conversation (a CCB) for ``terminal``."""
        return self._conversations.of(terminal) is not None

    def exit_conversation(self, terminal: Terminal) -> str:
        """/EXIT from ``terminal``: its conversation here ends; ``NO_CONVERSATION`` if
        this IMS holds none for it (/EXIT is accepted only where it started)."""
        answer, held = self._conversations.exit(terminal)
        if held is not None:
            self._outputs.drop_held(held)
        return answer

    def display_conversations(self) -> list[dict[str, object]]:
        """/DISPLAY CONVERSATION: this IMS's conversations, each with its node, user,
        LTERM, the transaction its next input goes to, and ``ACTIVE`` (waiting for
        its output) or ``HELD`` (output sent, SPA held for the next input)."""
        return self._conversations.display()

    # -- terminals (sharedq.ims.output) -------------------------------------------------------

    def logon(self, node: str) -> Terminal:
        """A node logs on: its static LTERMs are registered; output waiting for them
        on the shared queues is delivered."""
        self._check_started()
        check_name(node, "node")
        lterms = self.definition.lterms_of(node)
        if not lterms:
            raise ims_error(IMSReason.UNKNOWN_NODE, f"{self.imsid}: no node {node}")
        return self._outputs.logon(Terminal(self, node, lterms))

    def logoff(self, terminal: Terminal) -> None:
        """Deregister the terminal's LTERMs; an output not acknowledged goes back to
        the head of its queue.  For a dynamic LTERM this is the signoff: the LTERM
        goes, and its EMHQ LTERM queue is deregistered too."""
        self._outputs.logoff(terminal)
        self._signed_off(terminal)

    def _session(self) -> IMS:
        return self

    def acknowledge(self, terminal: Terminal, output: Delivered) -> None:
        """The terminal received ``output``: delete it; send the LTERM's next."""
        self._outputs.acknowledge(output)
        self._count("delivered")
