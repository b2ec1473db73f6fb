"""A queue manager's recovery commands: checkpoints, reconnect, cold queue, copy.

The operator's side of the recovery log (the seeds' ``/CQCHKPT``, ``/CQSET SHUTDOWN
SHAREDQ``, structure copy with ``SETXCF START,REBUILD``), mixed into
:class:`~sharedq.mq.manager.QueueManager`.  Every command but the cold-queue ones needs
the manager to have been started with ``recovery=RecoverySettings(...)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sharedq.cf import BulkMove, StructureParams
from sharedq.mq import directory, keys
from sharedq.mq import messages as m
from sharedq.mq.errors import MQReason, mq_error, translated
from sharedq.mq.journal import ChangeKind, EntryMeaning
from sharedq.mq.recovering import ManagerRecovery
from sharedq.mq.recovery import RecoveryReport
from sharedq.mq.syncpoint import bulk_move
from sharedq.mq.uow import UowState
from sharedq.recovery.copy import CopyResult
from sharedq.recovery.structure_checkpoint import CheckpointResult

if TYPE_CHECKING:
    from sharedq.mq.manager import QueueManager

#: Seconds ``reconnect`` waits for a peer that is recovering this manager.
RECONNECT_WAIT = 10.0


class RecoveryCommands:
    """Checkpoints, structure copy, reconnect after a loss, and the cold queue."""

    _recovery: ManagerRecovery | None

    @property
    def recovery(self: QueueManager) -> ManagerRecovery | None:  # type: ignore[misc]
        """The manager's recovery log and checkpoints (``None`` without settings)."""
        return self._recovery

    def _needs_recovery(self: QueueManager) -> ManagerRecovery:  # type: ignore[misc]
        self._check_open()
        if self._recovery is None:
            raise mq_error(
                MQReason.BAD_ARGUMENT, f"{self.name} was started without recovery settings"
            )
        return self._recovery

    def checkpoint(  # type: ignore[misc]
        self: QueueManager, structure: str | None = None
    ) -> list[CheckpointResult | None]:
        """Structure checkpoints of one structure or all (/CQCHKPT SHAREDQ STRUCTURE).

        A structure whose checkpoint another manager is taking gives ``None`` (after it
        finished).
        """
        rec = self._needs_recovery()
        names = [structure] if structure is not None else self.structures
        return [rec.structure_checkpoint(name, "request") for name in names]

    def system_checkpoint(self: QueueManager) -> None:  # type: ignore[misc]
        """This manager's system checkpoint, on every structure (/CQCHKPT SYSTEM)."""
        self._needs_recovery().system_checkpoint("request")

    def set_shutdown_checkpoint(self: QueueManager, on: bool = True) -> None:  # type: ignore[misc]
        """/CQSET SHUTDOWN SHAREDQ ON|OFF: structure checkpoints when *this* manager closes."""
        self._needs_recovery().shutdown_checkpoint = on

    def copy_structure(self: QueueManager, params: StructureParams) -> CopyResult:  # type: ignore[misc]
        """Copy a structure, every object in it, to a new allocation (say, larger).

        Other managers' requests wait during the copy and then go on with the copy;
        so do this manager's, and units of work in flight carry on.
        """
        rec = self._needs_recovery()
        if params.name not in rec.pairs:
            raise mq_error(MQReason.CF_NOT_AVAILABLE, f"{self.name} does not use {params.name}")
        return rec.pairs[params.name].copy_structure(params)

    def reconnect(self: QueueManager) -> RecoveryReport:  # type: ignore[misc]
        """Carry on after structures were lost (requests failed with 2373).

        Each lost structure is recovered (by this manager, or another one, which this
        one waits for) and connected to again; then this manager's restart processing
        runs as at a start: its units of work in flight at the loss are backed out
        (their objects end as the recovered structure and its descriptors say: "in
        commit" ones are completed), prepared ones are back in doubt.  Unit-of-work
        objects of the application raise ``BackedOut`` (2003) from then on.
        """
        rec = self._needs_recovery()
        with self._lock:
            for uow in list(self._active.values()) + list(self._recovered.values()):
                if uow.state is not UowState.ENDED:
                    uow.lost = f"unit of work ended: a structure of {self.name} was lost"
                    uow.state = UowState.ENDED
            self._active.clear()
            self._recovered.clear()
            self._dispatchers.clear()
            for name, acc in self._structures.items():
                if acc.conn.connected:
                    continue
                rec.prepare(name)
                with translated(f"reconnect to {name}"):
                    acc.conn = self._facility.connect(name, self.name)
                    acc.generation += 1
                rec.attach(acc)
                with translated(f"reconnect to {name}"):
                    self._claim_lists(acc, admin=acc is self.admin)
            self.restart_report = report = self._restart(RECONNECT_WAIT)
            rec.after_restart()
        return report

    # -- the cold queue ---------------------------------------------------------------------

    def cold_messages(self: QueueManager) -> list[m.Message]:  # type: ignore[misc]
        """The messages on the cold queues of this manager's structures (§2.3.1, §B.4)."""
        self._check_open()
        found = []
        with translated("read cold queues"):
            for acc in self._structures.values():
                for number, claim in directory.claims(acc).items():
                    if claim.get("use") == directory.USE_COLD:
                        for entry in acc.scan(number, keys.COMMITTED_LOW, b"\xff" * 16):
                            found.append(m.to_message(entry.data, entry.version, entry.entry_id))
        return found

    def requeue_cold(self: QueueManager) -> int:  # type: ignore[misc]
        """Put every cold-queue message back on its queue (the message requeuer's job).

        Each goes back to the put list it was gotten from, in its place, its backout
        count one higher; returns how many.
        """
        self._check_open()
        count = 0
        with translated("requeue cold messages"):
            for acc in self._structures.values():
                for number, claim in directory.claims(acc).items():
                    if claim.get("use") != directory.USE_COLD:
                        continue
                    entries = list(acc.scan(number, keys.COMMITTED_LOW, b"\xff" * 16))
                    moves = [
                        BulkMove(
                            e.entry_id,
                            m.decode_adjunct(e.adjunct)[0],
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
