"""The queue manager: the public face of ``sharedq.mq``.

A :class:`QueueManager` is one member of a queue-sharing group: it has a name and a
numeric id (1-254) unique in the group, connects to the group's administrative
structure and to any other structures, and shares, through them, every queue defined
there with the other managers.  Creating one connects it and runs restart processing
(its previous incarnation's units of work are finished, and prepared ones kept in
doubt: see :meth:`indoubt`).

Several threads may use one manager, each with its own unit of work.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable
from dataclasses import dataclass, fields
from types import TracebackType
from typing import Any

from sharedq.cf import CFError, CouplingFacility, StructureParams, UserState
from sharedq.clock import SYSTEM_CLOCK, Clock
from sharedq.mq import (
    arguments,
    defining,
    directory,
    expiry_lists,
    peer_recovery,
    starting,
    syncpoint,
)
from sharedq.mq import descriptors as d
from sharedq.mq import messages as m
from sharedq.mq.commands import RecoveryCommands
from sharedq.mq.core import ManagerCore
from sharedq.mq.definitions import NOT_ATTRIBUTES, QueueDefinition
from sharedq.mq.errors import MQReason, mq_error, translated
from sharedq.mq.event_broadcast import RESPONDER_SUFFIX, EventService
from sharedq.mq.inspection import ManagerView
from sharedq.mq.logjournal import PAYLOAD_KEY
from sharedq.mq.messages import message_facts
from sharedq.mq.peer_recovery import PeerRecoveryReport
from sharedq.mq.private_queues import PrivateStore, is_private, private_structure_name
from sharedq.mq.queue import Queue
from sharedq.mq.recovery_client import ManagerClient
from sharedq.mq.security import Guard, OpenFor
from sharedq.mq.units import Status, UowState
from sharedq.mq.uow import UnitOfWork
from sharedq.recovery.copy import CopyResult
from sharedq.recovery.settings import RecoverySettings
from sharedq.recovery.structure_checkpoint import CheckpointResult, Faults
from sharedq.seam.access import FaultHook, StructureAccess
from sharedq.seam.notes import NO_JOURNAL, Journal
from sharedq.seam.recovery_log import RecoveryLog
from sharedq.security import Access, SecuritySettings

#: How long a restarting manager waits for a peer that is recovering it, in seconds.
DEFAULT_RESTART_WAIT = 10.0
#: Highest manager id: 255 starts every control entry id.
MAX_QM_ID = 254
_ENDED = UowState.ENDED  # as a global: read every unit


@dataclass(frozen=True)
class InDoubtUnit:
    """A unit of work whose outcome waits for its owner (§6.2)."""

    uow_id: bytes
    qmgr: str
    #: "prepared" (waits for resolution) or "begin-commit" (the owner's restart decides).
    status: str
    structures: tuple[str, ...]
    operations: int


class QueueManager:
    """A shared queue manager.

    Parameters:
        facility: where the structures are (``sharedq.cf.open_facility``).
        name: the manager's name, unique in the group (also its user name on every
            structure).
        qm_id: its numeric id, 1..254, unique in the group; it heads every UOW id.
        admin: the administrative structure (directory, descriptors; may hold queues).
        structures: further structures to connect to.
        clock: where the manager reads the time of day (put times, expiry, ids) and
            paces its waits for peers (``sharedq.clock.Clock``); by default the
            recovery settings' clock, else the system's.  Tests pass a ``ManualClock``.
        journal: receives every change (see :mod:`sharedq.seam.notes`).
        faults: a hook called around every structure request (crash tests).
        restart_wait: seconds to wait for a peer that is recovering this manager.
        recovery: log every recoverable change, take checkpoints and recover lost
            structures (``sharedq.recovery.RecoverySettings``; see docs/recovery.md);
            replaces ``journal``.
        checkpoint_faults: called at each point of a structure checkpoint this
            manager takes (crash tests).
        security: who the manager acts for, and its profiles (docs/security.md);
            ``None``: security off.
        performance_events: MQ's PERFMEV: issue queue depth event messages
            (docs/depth-events.md); see :meth:`set_performance_events`.
    """

    def __init__(
        self,
        facility: CouplingFacility,
        name: str,
        qm_id: int,
        *,
        admin: str,
        structures: Iterable[str] = (),
        clock: Clock | None = None,
        journal: Journal | None = None,
        faults: FaultHook | None = None,
        restart_wait: float = DEFAULT_RESTART_WAIT,
        recovery: RecoverySettings | None = None,
        checkpoint_faults: Faults | None = None,
        security: SecuritySettings | None = None,
        performance_events: bool = False,
    ) -> None:
        arguments.check_manager_name(name)
        structures = arguments.check_structures(admin, structures)  # a list: read twice
        arguments.check_settings(facility, recovery, security, clock, faults)
        arguments.check_seconds(restart_wait, "restart_wait")
        arguments.check_bool(performance_events, "performance_events")
        if type(qm_id) is not int or not 1 <= qm_id <= MAX_QM_ID:
            raise mq_error(MQReason.Q_MGR_NAME_ERROR, f"qm_id {qm_id!r} must be 1..{MAX_QM_ID}")
        guard = Guard(security, name, admin)
        guard.connect(admin, *structures)
        self._log: RecoveryLog | None = None
        self._private = private = PrivateStore(qm_id, recovery)  # for nonshared queues
        if recovery is not None:
            if journal is not None:
                raise mq_error(
                    MQReason.BAD_ARGUMENT, "give a journal or recovery settings, not both"
                )
            self._log = RecoveryLog(
                name,
                facility,
                recovery,
                [admin, *structures],
                ManagerClient(name, qm_id),
                payload_key=PAYLOAD_KEY,
                facts=message_facts,
                faults=checkpoint_faults,
                own=private.own,
            )
            journal = self._log.journal
        if clock is None:
            clock = recovery.clock if recovery is not None else SYSTEM_CLOCK
        core = self._core = ManagerCore(
            name, qm_id, clock, journal or NO_JOURNAL, facility, faults, guard
        )
        core.performance_events = performance_events
        self._commands = RecoveryCommands(core, self._log)
        try:
            with translated("connect"):
                core.admin = starting.connect(core, self._log, admin)
                directory.register_manager(core.admin, qm_id, name)
                core.admin.number = directory.structure_number(core.admin, admin)
                starting.claim_lists(core, core.admin, admin=True)
                descriptor_list = core.lists[admin].descriptor_list
                assert descriptor_list is not None
                core.descriptor_list = descriptor_list
                for other in structures:
                    if other not in core.structures:
                        acc = starting.connect(core, self._log, other)
                        acc.number = directory.structure_number(core.admin, other)
                        starting.claim_lists(core, acc, admin=False)
                private.start(core, self._log)
            self.restart_report = starting.restart(core, self._log, restart_wait)
            if self._log is not None:
                self._log.after_restart()
            self._events = EventService(core)
            self._events.start()
        except Exception:
            self._disconnect_all()
            if self._log is not None:
                self._log.abandon()
            raise

    def __repr__(self) -> str:
        state = "closed" if self._core.closed else "open"
        return f"<QueueManager {self.name} id={self.qm_id} {state} structures={self.structures}>"

    # -- who it is ---------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._core.name

    @property
    def qm_id(self) -> int:
        return self._core.qm_id

    @property
    def clock(self) -> Clock:
        return self._core.clock

    @property
    def journal(self) -> Journal:
        return self._core.journal

    @property
    def admin(self) -> StructureAccess:
        """The access to the administrative structure."""
        return self._core.admin

    @property
    def recovery_log(self) -> RecoveryLog | None:
        """The manager's recovery log: its journal, checkpoints and structure recovery
        (``None`` without ``recovery=RecoverySettings(...)``).  Not peer recovery,
        which :meth:`recover` does."""
        return self._log

    @property
    def structures(self) -> list[str]:
        """The group's structures it is connected to (not its own: :attr:`private`)."""
        return sorted(s for s in self._core.structures if not is_private(s))

    @property
    def private(self) -> str:
        """Its own structure, holding its nonshared queues (``sharedq.mq.private_queues``)."""
        return private_structure_name(self.qm_id)

    @property
    def closed(self) -> bool:
        return self._core.closed

    @property
    def performance_events(self) -> bool:
        """PERFMEV: whether this manager issues depth event messages."""
        return self._core.performance_events

    def set_performance_events(self, on: bool) -> None:
        """ALTER QMGR PERFMEV(ENABLED|DISABLED), from the next event on."""
        with translated("set PERFMEV"):
            self._events.set_enabled(arguments.check_bool(on, "on"))

    @property
    def descriptor_list(self) -> int:
        """The administrative structure's list holding this manager's descriptors."""
        return self._core.descriptor_list

    def view(self) -> ManagerView:
        """A read-only view of this manager's lists (for operators and tests)."""
        return ManagerView(self._core)

    # -- the end -------------------------------------------------------------------------

    def close(self) -> None:
        """Back out this manager's active units of work and disconnect.

        Prepared units stay in doubt: the next start of this manager rebuilds them.
        """
        core = self._core
        with core.lock:
            if core.closed:
                return
            units = list(core.active.values())  # one C call: safe against other threads
        active = [u for u in units if u.state is UowState.ACTIVE]
        for uow in active:
            with contextlib.suppress(Exception):
                syncpoint.backout(core, uow)
        if self._log is not None:
            self._log.before_disconnect()
        self._events.stop()
        core.closed = True
        self._disconnect_all()
        if self._log is not None:
            self._log.close()

    def stop_dead(self) -> None:
        """Stop as a process killed at this instant would: nothing more is written.

        The manager's connections are left as they are (its users on the structures
        are failed-persistent once their leases lapse, or when a peer declares it
        failed), its units of work are neither committed nor backed out, and its
        recovery log's writers are let go unclosed.  For demos and tests of peer
        recovery in one process; a peer then recovers it (``recover``), or its next
        incarnation restarts.
        """
        if self._log is not None:
            self._log.abandon()
        self._core.closed = True

    def _disconnect_all(self) -> None:
        self._core.closed = True
        for acc in self._core.structures.values():
            with contextlib.suppress(CFError):
                acc.disconnect()

    def __enter__(self) -> QueueManager:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None or isinstance(exc, Exception):
            self.close()

    # -- queues -----------------------------------------------------------------------------

    def define_queue(
        self, name: str, *, structure: str | None = None, **attributes: Any
    ) -> QueueDefinition:
        """Define a queue: shared, in ``structure`` (default: the administrative one),
        or with ``disposition=Disposition.QMGR`` this manager's own (docs/queue-manager.md).

        ``attributes`` are :class:`QueueDefinition` fields: ``max_depth``, ``index``,
        ``max_message_length``, ``put_inhibited``, ``get_inhibited``,
        ``default_priority``, ``default_persistent``, ``description``,
        ``depth_events``, ``disposition``.  ``QueueExists`` (2100) if the name is taken
        (shared and nonshared names never coincide).
        """
        return defining.define_queue(self._core, self._private, name, structure, attributes)

    def alter_queue(self, name: str, **changes: Any) -> QueueDefinition:
        """Change a queue's attributes for every manager (the LHQC protocol, p[119])."""
        self._core.check_open()
        self._core.guard.define(name, "alter")
        if (NOT_ATTRIBUTES | {"disposition"}) & set(changes) or set(changes) - {
            f.name for f in fields(QueueDefinition)
        }:  # where a queue is kept is for good: MQ's ALTER takes no QSGDISP either
            raise mq_error(MQReason.BAD_ARGUMENT, f"cannot alter {sorted(changes)}")
        state = self._core.state(name)
        with translated(f"alter {name}"):
            if (
                "index" in changes
                and changes["index"] != state.definition.index
                and state.acc.list_info(state.put_list).entries > 1
            ):
                raise mq_error(
                    MQReason.BAD_ARGUMENT, f"queue {name} must be empty to change its index"
                )
            return state.alter(**changes)

    def queue_definition(self, name: str) -> QueueDefinition:
        """A queue's definition, read afresh."""
        self._core.check_open()
        state = self._core.state(name)
        with translated(f"read {name}"):
            return state.refresh()

    def queue_names(self) -> list[str]:
        """Every shared queue of the group, and this manager's nonshared queues."""
        return defining.queue_names(self._core)

    def open(self, name: str, intent: OpenFor = OpenFor.ALL) -> Queue:
        """Open a shared queue by name; ``UnknownQueue`` (2085) if not defined.

        ``intent``: what the handle may do (``OpenFor.PUT | OpenFor.GET``...; all).
        """
        self._core.check_open()
        self._core.guard.open(name, intent)
        return Queue(self._core, self._core.state(name), intent)

    # -- units of work ------------------------------------------------------------------------

    def unit_of_work(self) -> UnitOfWork:
        """Begin a unit of work owned by the calling thread (one at a time per thread)."""
        core = self._core
        if core.closed:  # check_open(), called only when it raises (every unit)
            core.check_open()
        # Only the calling thread reads or writes its own slot, so no lock is needed.
        ident = threading.get_ident()
        current = core.active.get(ident)
        if current is not None and current.state is not _ENDED:
            raise mq_error(MQReason.UOW_IN_PROGRESS, "this thread has a unit of work in progress")
        uow = UnitOfWork(core, ident)
        core.active[ident] = uow
        return uow

    def indoubt(self, qmgr: str | None = None) -> list[InDoubtUnit]:
        """Units of work of ``qmgr`` (default: this manager) waiting for their owner."""
        core = self._core
        core.check_open()
        target = core.name if qmgr is None else arguments.check_manager_name(qmgr)
        with translated("list in-doubt units"):
            ids = {v: k for k, v in directory.managers(core.admin).items()}
            if target not in ids:
                raise mq_error(MQReason.Q_MGR_NAME_ERROR, f"no queue manager {target} in group")
            lists = directory.read_manager_lists(core.admin, ids[target])
            if lists is None or lists.descriptor_list is None:
                return []
            names = directory.structure_names(core.admin)
            found = []
            for record in d.load(core.admin, lists.descriptor_list).values():
                status = record.status()
                if status in (Status.IN_PREPARE, Status.BEGIN_COMMIT) and (record.is_complete()):
                    ops = sum(len(q.ops) for n in record.parts for q in record.ops(n)[1])
                    found.append(
                        InDoubtUnit(
                            record.uow_id,
                            target,
                            "prepared" if status is Status.IN_PREPARE else "begin-commit",
                            tuple(names.get(n, str(n)) for n in sorted(record.parts)),
                            ops,
                        )
                    )
            return found

    def resolve(self, uow_id: bytes, *, commit: bool) -> None:
        """Commit or back out an in-doubt unit this manager's restart recovered."""
        core = self._core
        core.check_open()
        arguments.check_uow_id(uow_id)
        arguments.check_bool(commit, "commit")
        core.guard.admin("RESOLVE.INDOUBT", Access.CONTROL, "resolve in-doubt units")
        uow = core.recovered.get(uow_id)
        if uow is None:
            live = any(u.has_id and u.uow_id == uow_id for u in core.active.values())
            reason = MQReason.UOW_NOT_OWNER if live else MQReason.NO_SUCH_UOW
            raise mq_error(reason, f"no in-doubt unit {uow_id.hex()} to resolve here")
        if commit:
            syncpoint.commit(core, uow)
        else:
            syncpoint.backout(core, uow)

    # -- failed peers ---------------------------------------------------------------------------

    def declare_failed(self, qmgr: str) -> None:
        """Declare a peer failed on every structure we share (an operator's decision)."""
        core = self._core
        core.check_open()
        arguments.check_manager_name(qmgr)
        core.guard.admin(f"DECLARE.{qmgr}", Access.CONTROL, f"declare {qmgr} failed")
        if qmgr == core.name:
            raise mq_error(MQReason.BAD_ARGUMENT, "a manager cannot declare itself failed")
        with translated(f"declare {qmgr} failed"):
            users = [(acc, user) for acc in core.structures.values() for user in acc.users()]
            if all(user.name != qmgr for _, user in users) and qmgr not in set(
                directory.managers(core.admin).values()
            ):
                raise mq_error(
                    MQReason.BAD_ARGUMENT,
                    f"no queue manager {qmgr} is known to the group: it is not registered "
                    f"and uses none of {core.name}'s structures",
                )
            for acc, user in users:
                # Its depth event responder's connection too (event_broadcast).
                mine = user.name in (qmgr, qmgr + RESPONDER_SUFFIX)
                if mine and user.state is UserState.ACTIVE:
                    acc.mark_failed(user.user_id)

    def recover(self, qmgr: str) -> PeerRecoveryReport:
        """Peer recovery of a failed manager in every structure we are connected to.

        Structures where the manager is still active, or where another active manager
        is recovering it, are skipped (``report.skipped``).
        """
        core = self._core
        core.check_open()
        arguments.check_manager_name(qmgr)
        report = PeerRecoveryReport(qmgr)
        with translated(f"recover {qmgr}"):
            if qmgr == core.name:
                raise mq_error(MQReason.Q_MGR_NAME_ERROR, "a manager does not recover itself")
            ids = {v: k for k, v in directory.managers(core.admin).items()}
            if qmgr not in ids:
                peer_recovery.clean_unregistered(core, qmgr)
                return report
            for acc in core.structures.values():
                peer_recovery.recover_structure(core, acc, ids[qmgr], qmgr, report, owner=False)
            self._events.finish_for(qmgr)  # its depth events left pending
        return report

    def recover_failed(self) -> list[PeerRecoveryReport]:
        """Recover every manager a structure we share records as failed."""
        core = self._core
        core.check_open()
        with translated("find failed managers"):
            known = set(directory.managers(core.admin).values())
            failed = sorted(
                {
                    u.name
                    for acc in core.structures.values()
                    for u in acc.users()
                    if u.state is UserState.FAILED and u.name in known and u.name != core.name
                }
            )
        return [self.recover(name) for name in failed]

    # -- expiry ---------------------------------------------------------------------------------

    def expired_messages(self) -> list[m.Message]:
        """Messages this manager's gets found expired (its expiry lists, §5.15)."""
        return expiry_lists.expired_messages(self._core)

    def purge_expired(self) -> int:
        """Delete the messages on this manager's expiry lists; returns how many."""
        return expiry_lists.purge_expired(self._core)

    # -- recovery commands (the operator's; see sharedq.mq.commands) ---------------------------

    def checkpoint(self, structure: str | None = None) -> list[CheckpointResult | None]:
        """Structure checkpoints of one structure or all (/CQCHKPT SHAREDQ STRUCTURE).

        A structure whose checkpoint another manager is taking gives ``None`` (after it
        finished).
        """
        return self._commands.checkpoint(structure)

    def system_checkpoint(self) -> None:
        """This manager's system checkpoint, on every structure (/CQCHKPT SYSTEM)."""
        self._commands.system_checkpoint()

    def set_shutdown_checkpoint(self, on: bool = True) -> None:
        """/CQSET SHUTDOWN SHAREDQ ON|OFF: structure checkpoints when *this* manager closes."""
        self._commands.set_shutdown_checkpoint(on)

    def copy_structure(self, params: StructureParams) -> CopyResult:
        """Copy a structure, every object in it, to a new allocation (say, larger).

        Other managers' requests wait during the copy and then go on with the copy;
        so do this manager's, and units of work in flight carry on.
        """
        return self._commands.copy_structure(params)

    def delete_structure(self, name: str) -> None:
        """Deallocate a structure no manager uses and no queue is defined on (MQ's
        ``DELETE CFSTRUCT``; 2346 otherwise).  Its log and SRDS stay: docs/recovery.md."""
        self._commands.delete_structure(name)

    def reconnect(self) -> PeerRecoveryReport:
        """Carry on after structures were lost (requests failed with 2373).

        Each lost structure is recovered (by this manager, or another one, which this
        one waits for) and connected to again; then this manager's restart processing
        runs as at a start: its units of work in flight at the loss are backed out
        (their objects end as the recovered structure and its descriptors say: "in
        commit" ones are completed), prepared ones are back in doubt.  Unit-of-work
        objects of the application raise ``BackedOut`` (2003) from then on.
        """
        report = self._commands.reconnect()
        self._events.reconnected()
        self.restart_report = report
        return report

    def cold_messages(self) -> list[m.Message]:
        """The messages on the cold queues of this manager's structures (§2.3.1, §B.4)."""
        return self._commands.cold_messages()

    def requeue_cold(self) -> int:
        """Put every cold-queue message back on its queue (the message requeuer's job).

        Each goes back to the put list it was gotten from, in its place, its backout
        count one higher; returns how many.
        """
        return self._commands.requeue_cold()
