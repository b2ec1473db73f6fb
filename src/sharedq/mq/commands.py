"""A queue manager's recovery commands: checkpoints, reconnect, cold queue, copy, delete.

The operator's side of the recovery log (the seeds' ``/CQCHKPT``, ``/CQSET SHUTDOWN
SHAREDQ``, structure copy with ``SETXCF START,REBUILD``) and of the cold queue.
:class:`RecoveryCommands` is one of the parts a
:class:`~sharedq.mq.manager.QueueManager` is made of; the manager's methods of the
same names call it.  Every command but the cold-queue ones needs the manager to have
been started with ``recovery=RecoverySettings(...)``.
"""

from __future__ import annotations

from sharedq.cf import BulkMove, StructureParams
from sharedq.cf import errors as cfe
from sharedq.mq import arguments, directory, keys, starting
from sharedq.mq import messages as m
from sharedq.mq.bulk import bulk_move
from sharedq.mq.core import ManagerCore
from sharedq.mq.errors import MQReason, mq_error, translated
from sharedq.mq.journal import ChangeKind
from sharedq.mq.peer_recovery import PeerRecoveryReport
from sharedq.mq.units import UowState
from sharedq.recovery.copy import CopyResult
from sharedq.recovery.structure_checkpoint import CheckpointResult
from sharedq.seam.notes import EntryMeaning
from sharedq.seam.recovery_log import RecoveryLog
from sharedq.security import Access

#: Seconds ``reconnect`` waits for a peer that is recovering this manager.
RECONNECT_WAIT = 10.0


class RecoveryCommands:
    """Checkpoints, structure copy, reconnect after a loss, and the cold queue."""

    def __init__(self, core: ManagerCore, log: RecoveryLog | None) -> None:
        self._core = core
        self._log = log

    def _needs_log(self) -> RecoveryLog:
        self._core.check_open()
        if self._log is None:
            raise mq_error(
                MQReason.BAD_ARGUMENT, f"{self._core.name} was started without recovery settings"
            )
        return self._log

    def checkpoint(self, structure: str | None = None) -> list[CheckpointResult | None]:
        """Structure checkpoints of one structure or all (/CQCHKPT SHAREDQ STRUCTURE).

        A structure whose checkpoint another manager is taking gives ``None`` (after it
        finished).
        """
        log = self._needs_log()
        names = [structure] if structure is not None else sorted(self._core.structures)
        return [log.structure_checkpoint(name, "request") for name in names]

    def system_checkpoint(self) -> None:
        """This manager's system checkpoint, on every structure (/CQCHKPT SYSTEM)."""
        self._needs_log().system_checkpoint("request")

    def set_shutdown_checkpoint(self, on: bool = True) -> None:
        """/CQSET SHUTDOWN SHAREDQ ON|OFF: structure checkpoints when *this* manager closes."""
        self._needs_log().shutdown_checkpoint = on

    def copy_structure(self, params: StructureParams) -> CopyResult:
        """Copy a structure, every object in it, to a new allocation (say, larger)."""
        log = self._needs_log()
        self._core.guard.alter_structure(params.name, "copy")
        if params.name not in log.pairs:
            raise mq_error(
                MQReason.CF_NOT_AVAILABLE, f"{self._core.name} does not use {params.name}"
            )
        return log.pairs[params.name].copy_structure(params)

    def delete_structure(self, name: str) -> None:
        """Deallocate a structure no manager uses and no queue is defined on (MQ's
        ``DELETE CFSTRUCT``).  Checked as a copy is (CQSSTR ALTER), before anything."""
        core = self._core
        core.check_open()
        arguments.check_structure_name(name)
        core.guard.alter_structure(name, "delete")
        if name == core.admin.name:
            raise mq_error(
                MQReason.CF_STRUC_IN_USE, f"{name} is the group's administrative structure"
            )
        if name in core.structures:
            raise mq_error(
                MQReason.CF_STRUC_IN_USE, f"{core.name} uses {name}: delete it from another manager"
            )
        with translated(f"delete {name}"):
            defined = [q.name for q in directory.queue_entries(core.admin) if q.structure == name]
            if defined:
                raise mq_error(
                    MQReason.CF_STRUC_IN_USE,
                    f"queues are defined on {name}: {', '.join(defined[:5])}"
                    + (f" and {len(defined) - 5} more" if len(defined) > 5 else ""),
                )
            try:
                core.facility.delete(name)
            except cfe.NoSuchStructure:
                raise mq_error(
                    MQReason.CF_NOT_AVAILABLE, f"no structure {name} is allocated"
                ) from None
            except cfe.CFError as error:
                if error.reason is not cfe.CFReason.USER_ACTIVE:
                    raise
                raise mq_error(
                    MQReason.CF_STRUC_IN_USE, f"managers are connected to {name}"
                ) from None

    def reconnect(self) -> PeerRecoveryReport:
        """Carry on after structures were lost (see ``QueueManager.reconnect``)."""
        log = self._needs_log()
        core = self._core
        # Connecting again is connecting: checked before anything is ended or changed.
        core.guard.connect(*(n for n, acc in core.structures.items() if not acc.conn.connected))
        with core.lock:
            for uow in list(core.active.values()) + list(core.recovered.values()):
                if uow.state is not UowState.ENDED:
                    uow.lost = f"unit of work ended: a structure of {core.name} was lost"
                    uow.state = UowState.ENDED
            core.active.clear()
            core.recovered.clear()
            core.dispatchers.clear()
            for name, acc in core.structures.items():
                if acc.conn.connected:
                    continue
                log.prepare(name)
                with translated(f"reconnect to {name}"):
                    acc.conn = core.facility.connect(name, core.name)
                    acc.generation += 1
                log.attach(acc)
                with translated(f"reconnect to {name}"):
                    starting.claim_lists(core, acc, admin=acc is core.admin)
            report = starting.restart(core, log, RECONNECT_WAIT)
            log.after_restart()
        return report

    # -- the cold queue ---------------------------------------------------------------------

    def cold_messages(self) -> list[m.Message]:
        """The messages on the cold queues of this manager's structures (§2.3.1, §B.4)."""
        self._core.check_open()
        self._core.guard.admin("COLDQ", Access.READ, "read the cold queues")
        found = []
        with translated("read cold queues"):
            for acc in self._core.structures.values():
                for number, claim in directory.claims(acc).items():
                    if claim.get("use") == directory.USE_COLD:
                        for entry in acc.scan(number, keys.COMMITTED_LOW, b"\xff" * 16):
                            found.append(m.to_message(entry.data, entry.version, entry.entry_id))
        return found

    def requeue_cold(self) -> int:
        """Put every cold-queue message back on its queue (the message requeuer's job).

        Each goes back to the put list it was gotten from, in its place, its backout
        count one higher; returns how many.
        """
        self._core.check_open()
        self._core.guard.admin("COLDQ", Access.CONTROL, "requeue cold-queue messages")
        count = 0
        with translated("requeue cold messages"):
            for acc in self._core.structures.values():
                for number, claim in directory.claims(acc).items():
                    if claim.get("use") != directory.USE_COLD:
                        continue
                    entries = list(acc.scan(number, keys.COMMITTED_LOW, b"\xff" * 16))
                    moves = [
                        BulkMove(
                            e.entry_id,
                            m.adjunct_put_list(e.adjunct),
                            increment_version=True,
                            from_list=number,
                        )
                        for e in entries
                    ]
                    meanings = [
                        EntryMeaning(e.entry_id, None, *m.entry_facts(e.data)) for e in entries
                    ]
                    bulk_move(
                        acc,
                        moves,
                        meanings,
                        kind=ChangeKind.REQUEUE,
                        uow_id=None,
                        ignore_limit=True,
                    )
                    count += len(moves)
        return count
