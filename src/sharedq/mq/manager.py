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
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, fields
from types import TracebackType
from typing import Any

from sharedq.cf import CFError, CouplingFacility, UserState
from sharedq.cf.types import MAX_ELEMENTS_PER_ENTRY, MAX_ENTRY_BYTES
from sharedq.mq import descriptors as d
from sharedq.mq import directory, recovery, syncpoint
from sharedq.mq import messages as m
from sharedq.mq.access import FaultHook, StructureAccess, tolerating
from sharedq.mq.clock import Clock, Stamps, SystemClock
from sharedq.mq.commands import RecoveryCommands
from sharedq.mq.definitions import QueueDefinition, QueueState, define
from sharedq.mq.errors import MQReason, mq_error, translated
from sharedq.mq.journal import NO_JOURNAL, ChangeKind, EntryMeaning, Journal
from sharedq.mq.queue import Queue
from sharedq.mq.recovering import ManagerRecovery
from sharedq.mq.recovery import RecoveryReport
from sharedq.mq.uow import Trop, UnitOfWork, UowState
from sharedq.mq.waiting import EventDispatcher
from sharedq.recovery.settings import RecoverySettings
from sharedq.recovery.structure_checkpoint import Faults

#: How long a restarting manager waits for a peer that is recovering it, in seconds.
DEFAULT_RESTART_WAIT = 10.0
_QM_NAME = re.compile(r"^[A-Za-z0-9._/%@#$]{1,48}$")
#: Highest manager id: 255 starts every control entry id.
MAX_QM_ID = 254


@dataclass(frozen=True)
class InDoubtUnit:
    """A unit of work whose outcome waits for its owner (§6.2)."""

    uow_id: bytes
    qmgr: str
    #: "prepared" (waits for resolution) or "begin-commit" (the owner's restart decides).
    status: str
    structures: tuple[str, ...]
    operations: int


class QueueManager(RecoveryCommands):
    """A shared queue manager.

    Parameters:
        facility: where the structures are (``sharedq.cf.open_facility``).
        name: the manager's name, unique in the group (also its user name on every
            structure).
        qm_id: its numeric id, 1..254, unique in the group; it heads every UOW id.
        admin: the administrative structure (directory, descriptors; may hold queues).
        structures: further structures to connect to.
        clock: where time comes from (tests pass a ``ManualClock``).
        journal: receives every change (see :mod:`sharedq.mq.journal`).
        faults: a hook called around every structure request (crash tests).
        restart_wait: seconds to wait for a peer that is recovering this manager.
        recovery: log every recoverable change, take checkpoints and recover lost
            structures (``sharedq.recovery.RecoverySettings``; see docs/recovery.md);
            replaces ``journal``.
        checkpoint_faults: called at each point of a structure checkpoint this
            manager takes (crash tests).
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
    ) -> None:
        if not isinstance(name, str) or not _QM_NAME.match(name):
            raise mq_error(MQReason.Q_MGR_NAME_ERROR, f"bad queue-manager name {name!r}")
        if type(qm_id) is not int or not 1 <= qm_id <= MAX_QM_ID:
            raise mq_error(MQReason.Q_MGR_NAME_ERROR, f"qm_id {qm_id!r} must be 1..{MAX_QM_ID}")
        self.name = name
        self.qm_id = qm_id
        self.clock: Clock = clock or SystemClock()
        self.stamps = Stamps(self.clock, qm_id)
        self._recovery: ManagerRecovery | None = None
        if recovery is not None:
            if journal is not None:
                raise mq_error(
                    MQReason.BAD_ARGUMENT, "give a journal or recovery settings, not both"
                )
            self._recovery = ManagerRecovery(
                self, facility, recovery, [admin, *structures], faults=checkpoint_faults
            )
            journal = self._recovery.journal
        self.journal = journal or NO_JOURNAL
        self._faults = faults
        self._name_bytes = name.encode()
        # A generated message id is like MQ's: 'CSQ ', the name's first 4 characters,
        # the put's stamp, then the manager id and incarnation nonce (unique in the
        # group); an entry id is the manager id, the stamp and the nonce.
        self._msg_id_prefix = b"CSQ " + self._name_bytes[:4].ljust(4)
        self._msg_id_suffix = bytes((qm_id,)) + self.stamps.nonce + b"\x00" * 4
        self._entry_id_prefix = bytes((qm_id,))
        self._lock = threading.RLock()
        self._closed = False
        self._active: dict[int, UnitOfWork] = {}
        self._recovered: dict[bytes, UnitOfWork] = {}
        self._queues: dict[str, QueueState] = {}
        self._dispatchers: dict[str, EventDispatcher] = {}
        self._structures: dict[str, StructureAccess] = {}
        self._list_counts: dict[str, int] = {}
        self._entry_limits: dict[str, int] = {}
        self._lists: dict[str, directory.ManagerLists] = {}
        self._facility = facility
        try:
            with translated("connect"):
                self.admin = self._connect(admin)
                directory.register_manager(self.admin, qm_id, name)
                self.admin.number = directory.structure_number(self.admin, admin)
                self._claim_lists(self.admin, admin=True)
                descriptor_list = self._lists[admin].descriptor_list
                assert descriptor_list is not None
                self.descriptor_list: int = descriptor_list
                for other in structures:
                    if other not in self._structures:
                        acc = self._connect(other)
                        acc.number = directory.structure_number(self.admin, other)
                        self._claim_lists(acc, admin=False)
            self.restart_report = self._restart(restart_wait)
            if self._recovery is not None:
                self._recovery.after_restart()
        except Exception:
            self._disconnect_all()
            if self._recovery is not None:
                self._recovery.abandon()
            raise

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<QueueManager {self.name} id={self.qm_id} {state} structures={self.structures}>"

    # -- connection --------------------------------------------------------------------

    def _connect(self, structure: str) -> StructureAccess:
        if self._recovery is not None:
            self._recovery.prepare(structure)  # structure recovery, if it needs one
        conn = self._facility.connect(structure, self.name)
        acc = StructureAccess(conn, 0, self.journal, self._faults)
        if self._recovery is not None:
            self._recovery.attach(acc)
        self._structures[structure] = acc
        stats = conn.statistics()
        self._list_counts[structure] = stats.list_count
        entry_bytes = min(MAX_ELEMENTS_PER_ENTRY * stats.element_size, MAX_ENTRY_BYTES)
        self._entry_limits[structure] = entry_bytes - m.header_length(self.name)
        return acc

    def _claim_lists(self, acc: StructureAccess, *, admin: bool) -> None:
        self._lists[acc.name] = directory.manager_lists(
            acc, self.qm_id, self.name, self._list_counts[acc.name], admin=admin
        )

    def _restart(self, wait: float) -> RecoveryReport:
        """Finish what this manager's previous incarnation left (§5.21, restart).

        With a recovery log the restart is warm (its log from its last system
        checkpoint decides "begin commit" units) or cold (asked for, or its log was
        deleted: the messages it had gotten go to the cold queue).
        """
        report = RecoveryReport(self.name)
        warm = True
        if self._recovery is not None:
            with translated("restart"):
                warm, report.start_reason = self._recovery.decide_restart()
            report.start = "warm" if warm else "cold"
        kept: dict[bytes, d.UowRecord] = {}
        for acc in self._structures.values():
            with translated("restart"):
                for record in recovery.recover_structure(
                    self, acc, self.qm_id, self.name, report, owner=True, wait=wait, cold=not warm
                ):
                    kept[record.uow_id] = record
        for record in kept.values():
            self._rebuild(record)
        return report

    def _rebuild(self, record: d.UowRecord) -> None:
        """A prepared unit of the previous incarnation, back in memory to be resolved."""
        uow = UnitOfWork(self, None)
        uow._uow_id = record.uow_id
        uow.state = UowState.PREPARED
        numbers = {acc.number: acc for acc in self._structures.values()}
        for number in record.parts:
            acc = numbers.get(number)
            if acc is None:
                continue  # resolvable once the manager connects to that structure
            _, queues = record.ops(number)
            claims = directory.claims(acc)
            for queue_record in queues:
                state = self._state(claims[queue_record.put_list]["name"])
                trqs = uow.trqs_for(state)
                for op in queue_record.ops:
                    trqs.trops.append(
                        Trop(
                            op.kind,
                            op.entry_id,
                            op.key,
                            op.persistent,
                            op.msg_id,
                            op.secondary,
                            None,
                            trqs,
                        )
                    )
        status = record.status_entry()
        assert status is not None
        uow.descriptors = d.Written(
            d.Status.IN_PREPARE,
            {n: record.all_entry_ids(n) for n in record.parts},
            status.entry_id,
            status.version,
            record.muse.entry_id if record.muse is not None else None,
        )
        self._recovered[record.uow_id] = uow

    @property
    def structures(self) -> list[str]:
        return sorted(self._structures)

    def close(self) -> None:
        """Back out this manager's active units of work and disconnect.

        Prepared units stay in doubt: the next start of this manager rebuilds them.
        """
        with self._lock:
            if self._closed:
                return
            units = list(self._active.values())  # one C call: safe against other threads
        active = [u for u in units if u.state is UowState.ACTIVE]
        for uow in active:
            with contextlib.suppress(Exception):
                syncpoint.backout(uow)
        if self._recovery is not None:
            self._recovery.before_disconnect()
        self._closed = True
        self._disconnect_all()
        if self._recovery is not None:
            self._recovery.close()

    def _disconnect_all(self) -> None:
        self._closed = True
        for acc in self._structures.values():
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

    def _check_open(self) -> None:
        if self._closed:
            raise mq_error(MQReason.HCONN_ERROR, f"queue manager {self.name} is closed")

    # -- queues -----------------------------------------------------------------------------

    def define_queue(
        self,
        name: str,
        *,
        structure: str | None = None,
        **attributes: Any,
    ) -> QueueDefinition:
        """Define a shared queue in ``structure`` (default: the administrative one).

        ``attributes`` are :class:`QueueDefinition` fields: ``max_depth``, ``index``,
        ``max_message_length``, ``put_inhibited``, ``get_inhibited``,
        ``default_priority``, ``default_persistent``, ``description``,
        ``depth_events``.  ``QueueExists`` (2100) if the name is taken.
        """
        self._check_open()
        target = structure or self.admin.name
        unknown = set(attributes) - {f.name for f in fields(QueueDefinition)}
        if unknown or {"name", "structure"} & set(attributes):
            raise mq_error(MQReason.BAD_ARGUMENT, f"unknown queue attributes {sorted(unknown)}")
        definition = QueueDefinition(name, target, **attributes)
        definition.check()
        acc = self._structures.get(target)
        if acc is None:
            raise mq_error(
                MQReason.CF_NOT_AVAILABLE, f"{self.name} is not connected to structure {target}"
            )
        with translated(f"define {name}"):
            if directory.queue_entry(self.admin, name) is not None:
                raise mq_error(MQReason.OBJECT_ALREADY_EXISTS, f"queue {name} exists already")
            if not define(self.admin, acc, definition, self._list_counts[target]):
                raise mq_error(MQReason.OBJECT_ALREADY_EXISTS, f"queue {name} exists already")
        return definition

    def alter_queue(self, name: str, **changes: Any) -> QueueDefinition:
        """Change a queue's attributes for every manager (the LHQC protocol, p[119])."""
        self._check_open()
        if {"name", "structure"} & set(changes) or set(changes) - {
            f.name for f in fields(QueueDefinition)
        }:
            raise mq_error(MQReason.BAD_ARGUMENT, f"cannot alter {sorted(changes)}")
        state = self._state(name)
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
        self._check_open()
        state = self._state(name)
        with translated(f"read {name}"):
            return state.refresh()

    def queue_names(self) -> list[str]:
        """Every shared queue of the group."""
        self._check_open()
        with translated("list queues"):
            return [entry.name for entry in directory.queue_entries(self.admin)]

    def open(self, name: str) -> Queue:
        """Open a shared queue by name; ``UnknownQueue`` (2085) if not defined."""
        self._check_open()
        return Queue(self, self._state(name))

    def _state(self, name: str) -> QueueState:
        state = self._queues.get(name)
        if state is not None:
            return state
        with self._lock, translated(f"open {name}"):
            state = self._queues.get(name)
            if state is not None:
                return state
            entry = directory.queue_entry(self.admin, name) if isinstance(name, str) else None
            if entry is None:
                raise mq_error(MQReason.UNKNOWN_OBJECT_NAME, f"no shared queue named {name!r}")
            acc = self._structures.get(entry.structure)
            if acc is None:
                raise mq_error(
                    MQReason.CF_NOT_AVAILABLE,
                    f"queue {name} is in structure {entry.structure}, which {self.name} "
                    "is not connected to",
                )
            lists = self._lists[entry.structure]
            state = QueueState(
                name,
                acc,
                entry.list_number,
                lists.get_list,
                lists.expiry_list,
                self._entry_limits[entry.structure],
            )
            self._queues[name] = state
            return state

    def _refresh(self, queue: QueueState) -> None:
        with translated(f"re-read {queue.name}"):
            queue.refresh()

    def _dispatcher(self, acc: StructureAccess) -> EventDispatcher:
        with self._lock:
            found = self._dispatchers.get(acc.name)
            if found is None:
                found = self._dispatchers[acc.name] = EventDispatcher(acc)
            return found

    # -- units of work ------------------------------------------------------------------------

    def unit_of_work(self) -> UnitOfWork:
        """Begin a unit of work owned by the calling thread (one at a time per thread)."""
        self._check_open()
        # Only the calling thread reads or writes its own slot, so no lock is needed.
        ident = threading.get_ident()
        current = self._active.get(ident)
        if current is not None and current.state is not UowState.ENDED:
            raise mq_error(MQReason.UOW_IN_PROGRESS, "this thread has a unit of work in progress")
        uow = self._active[ident] = UnitOfWork(self, ident)
        return uow

    def _check_unit(self, uow: UnitOfWork) -> None:
        if not isinstance(uow, UnitOfWork) or uow.manager is not self:
            raise mq_error(MQReason.BAD_ARGUMENT, f"{uow!r} is not a unit of work of {self.name}")
        uow.check_usable(for_operation=True)

    def _unit_ended(self, uow: UnitOfWork) -> None:
        owner = uow.owner
        if owner is None:  # a unit recovered at restart, resolved
            with self._lock:
                self._recovered.pop(uow.uow_id, None)
        elif self._active.get(owner) is uow:
            del self._active[owner]

    def indoubt(self, qmgr: str | None = None) -> list[InDoubtUnit]:
        """Units of work of ``qmgr`` (default: this manager) waiting for their owner."""
        self._check_open()
        target = qmgr or self.name
        with translated("list in-doubt units"):
            ids = {v: k for k, v in directory.managers(self.admin).items()}
            if target not in ids:
                raise mq_error(MQReason.Q_MGR_NAME_ERROR, f"no queue manager {target} in group")
            lists = directory.read_manager_lists(self.admin, ids[target])
            if lists is None or lists.descriptor_list is None:
                return []
            names = directory.structure_names(self.admin)
            found = []
            for record in d.load(self.admin, lists.descriptor_list).values():
                status = record.status()
                if status in (d.Status.IN_PREPARE, d.Status.BEGIN_COMMIT) and (
                    record.is_complete()
                ):
                    ops = sum(len(q.ops) for n in record.parts for q in record.ops(n)[1])
                    found.append(
                        InDoubtUnit(
                            record.uow_id,
                            target,
                            "prepared" if status is d.Status.IN_PREPARE else "begin-commit",
                            tuple(names.get(n, str(n)) for n in sorted(record.parts)),
                            ops,
                        )
                    )
            return found

    def resolve(self, uow_id: bytes, *, commit: bool) -> None:
        """Commit or back out an in-doubt unit this manager's restart recovered."""
        self._check_open()
        uow = self._recovered.get(uow_id)
        if uow is None:
            live = any(u.has_id and u.uow_id == uow_id for u in self._active.values())
            reason = MQReason.UOW_NOT_OWNER if live else MQReason.NO_SUCH_UOW
            raise mq_error(reason, f"no in-doubt unit {uow_id.hex()} to resolve here")
        if commit:
            syncpoint.commit(uow)
        else:
            syncpoint.backout(uow)

    # -- failed peers ---------------------------------------------------------------------------

    def declare_failed(self, qmgr: str) -> None:
        """Declare a peer failed on every structure we share (an operator's decision)."""
        self._check_open()
        if qmgr == self.name:
            raise mq_error(MQReason.BAD_ARGUMENT, "a manager cannot declare itself failed")
        with translated(f"declare {qmgr} failed"):
            for acc in self._structures.values():
                for user in acc.users():
                    if user.name == qmgr and user.state is UserState.ACTIVE:
                        acc.mark_failed(user.user_id)

    def recover(self, qmgr: str) -> RecoveryReport:
        """Peer recovery of a failed manager in every structure we are connected to.

        Structures where the manager is still active, or where another active manager
        is recovering it, are skipped (``report.skipped``).
        """
        self._check_open()
        report = RecoveryReport(qmgr)
        with translated(f"recover {qmgr}"):
            if qmgr == self.name:
                raise mq_error(MQReason.Q_MGR_NAME_ERROR, "a manager does not recover itself")
            ids = {v: k for k, v in directory.managers(self.admin).items()}
            if qmgr not in ids:
                # It died before it registered: it has no work, only its connections.
                for acc in self._structures.values():
                    for user in acc.users():
                        if user.name == qmgr and user.state is UserState.FAILED:
                            acc.cleanup_user(user.user_id)
                return report
            for acc in self._structures.values():
                recovery.recover_structure(self, acc, ids[qmgr], qmgr, report, owner=False)
        return report

    def recover_failed(self) -> list[RecoveryReport]:
        """Recover every manager a structure we share records as failed."""
        self._check_open()
        with translated("find failed managers"):
            known = set(directory.managers(self.admin).values())
            failed = sorted(
                {
                    u.name
                    for acc in self._structures.values()
                    for u in acc.users()
                    if u.state is UserState.FAILED and u.name in known and u.name != self.name
                }
            )
        return [self.recover(name) for name in failed]

    # -- expiry ---------------------------------------------------------------------------------

    def expired_messages(self) -> list[m.Message]:
        """Messages this manager's gets found expired (its expiry lists, §5.15)."""
        self._check_open()
        found = []
        with translated("read expiry lists"):
            for name, acc in self._structures.items():
                for entry in acc.scan(self._lists[name].expiry_list, b"\x00" * 16, b"\xff" * 16):
                    found.append(m.to_message(entry.data, entry.version, b""))
        return found

    def purge_expired(self) -> int:
        """Delete the messages on this manager's expiry lists; returns how many."""
        self._check_open()
        count = 0
        with translated("purge expiry lists"):
            for name, acc in self._structures.items():
                entries = list(acc.scan(self._lists[name].expiry_list, b"\x00" * 16, b"\xff" * 16))
                meanings = [EntryMeaning(e.entry_id, None, *m.entry_facts(e.data)) for e in entries]
                # Purged even if the log cannot say so: rebuilt from such a log, the
                # structure has them on the expiry list again, to be purged again.
                with tolerating():
                    syncpoint.bulk_delete(
                        acc,
                        [e.entry_id for e in entries],
                        meanings,
                        kind=ChangeKind.PURGE,
                        uow_id=None,
                    )
                count += len(entries)
        return count
