"""A queue manager with a recovery log: checkpoints, structure recovery, restart.

``QueueManager(..., recovery=RecoverySettings(root=...))`` gives the manager, for each
structure it uses (each is a structure *pair* of its own: the queue manager has no
overflow structures), a :class:`~sharedq.recovery.pair.PairRecovery` and one
:class:`~sharedq.mq.logjournal.LogJournal` writing to every pair's log stream.  This
module is the glue, and the manager's side of the recovery client protocol:

* which entries are recoverable (:mod:`sharedq.mq.classify`);
* its restart state: the units of work whose commit it decided and has not finished,
  so that a warm restart from a system checkpoint still commits them;
* the restart decision, warm or cold, and the log position each pair restarts from;
* after restart (and after a structure recovery it performed) the checkpoints the
  seeds ask for, and at close the shutdown checkpoints.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sharedq.cf import CFError, CouplingFacility, ListEntry
from sharedq.log import RecordType
from sharedq.mq.access import StructureAccess
from sharedq.mq.classify import classify, list_roles
from sharedq.mq.logjournal import LogJournal
from sharedq.recovery import system_checkpoint
from sharedq.recovery.pair import PairRecovery
from sharedq.recovery.settings import RecoverySettings
from sharedq.recovery.structure_checkpoint import CheckpointResult, Classifier, Faults

if TYPE_CHECKING:
    from sharedq.mq.manager import QueueManager

logger = logging.getLogger("sharedq.mq")


class ManagerRecovery:
    """One queue manager's recovery log and checkpoints, over all its structures."""

    def __init__(
        self,
        mgr: QueueManager,
        facility: CouplingFacility,
        settings: RecoverySettings,
        structures: Sequence[str],
        *,
        faults: Faults | None = None,
    ) -> None:
        self.mgr = mgr
        self.settings = settings
        self.pairs: dict[str, PairRecovery] = {}
        for name in dict.fromkeys(structures):
            self.pairs[name] = PairRecovery(
                facility, settings, [name], mgr.name, self, faults=faults
            )
        self.journal = LogJournal(mgr.name, {s: p.stream for s, p in self.pairs.items()})
        #: /CQSET SHUTDOWN SHAREDQ ON: take structure checkpoints when this manager closes.
        self.shutdown_checkpoint = False
        self._closed = False
        self._running = False

    def __repr__(self) -> str:
        return f"<ManagerRecovery {self.mgr.name} pairs={sorted(self.pairs)}>"

    # -- connecting ----------------------------------------------------------------------

    def prepare(self, structure: str) -> None:
        """Recover the structure if it is missing or empty, before connecting to it."""
        pair = self.pairs[structure]
        pair.prepare(self.journal.writer_for(structure))
        self.journal.listeners[structure] = pair.note_appended

    def attach(self, acc: StructureAccess) -> None:
        pair = self.pairs[acc.name]
        acc.gate = pair.gate
        acc.relocate = lambda lost: pair.relocate(acc.name, lost)
        pair.attach(acc.name, acc.conn)

    def rebuilt(self) -> list[str]:
        """The structures this manager recovered or adopted as it connected."""
        return [o.structure for p in self.pairs.values() for o in p.outcomes if o.rebuilt]

    # -- restart --------------------------------------------------------------------------

    def decide_restart(self) -> tuple[bool, str]:
        """Warm or cold, and why; sets where a warm restart reads the manager's log.

        A manager that is running and reconnects after a structure loss restarts warm
        from what it knows: the units whose commit it decided are in memory.
        """
        if self._running:
            self.journal.restart_points = {
                name: (pair.last_system_checkpoint, frozenset(self.journal.committing))
                for name, pair in self.pairs.items()
                if pair.last_system_checkpoint is not None
            }
            return True, f"{self.mgr.name}: reconnected after a structure loss"
        decisions = {}
        for name, pair in self.pairs.items():
            found = system_checkpoint.find(
                pair.layout, self.mgr.name, pair.conns.get(name), pair.area
            )
            decisions[name] = system_checkpoint.decide(
                pair.stream, name, self.mgr.name, found, cold_requested=self.settings.cold_start
            )
        cold = [d for d in decisions.values() if not d.warm]
        if cold:
            reason = cold[0].reason
            logger.warning("%s", reason)
            return False, reason
        points = {n: d.point for n, d in decisions.items() if d.point is not None}
        if len(points) == len(decisions):
            self.journal.restart_points = {
                name: (
                    point.position,
                    frozenset(bytes.fromhex(u) for u in point.state.get("committing", ())),
                )
                for name, point in points.items()
            }
        return True, "; ".join(d.reason for d in decisions.values())

    def after_restart(self) -> None:
        """The end of restart: a system checkpoint per pair, the triggers, and a
        structure checkpoint of each structure this manager recovered."""
        self.journal.restart_points = {}
        self._running = True
        for pair in self.pairs.values():
            pair.system_checkpoint("restart")
            pair.start()
        for name in self.rebuilt():
            self.pairs[name].structure_checkpoint("after-recovery")

    # -- the client protocol ----------------------------------------------------------------

    def classifier(self, structure: str, control_entries: Sequence[ListEntry]) -> Classifier:
        roles = list_roles(control_entries)

        def of(entry: ListEntry) -> tuple[bool, bytes | None, bytes | None]:
            found = classify(entry, roles)
            return found.recoverable, found.queue, found.uow

        return of

    def restart_state(self) -> dict[str, Any]:
        return {
            "qmgr": self.mgr.name,
            "qm_id": self.mgr.qm_id,
            "structures": sorted(self.pairs),
            "committing": sorted(u.hex() for u in self.journal.committing),
        }

    # -- requests ---------------------------------------------------------------------------

    def structure_checkpoint(self, structure: str, reason: str) -> CheckpointResult | None:
        return self.pairs[structure].structure_checkpoint(reason)

    def system_checkpoint(self, reason: str) -> None:
        for pair in self.pairs.values():
            pair.system_checkpoint(reason)

    # -- the end ----------------------------------------------------------------------------

    def before_disconnect(self) -> None:
        """Shutdown: structure checkpoints if asked beforehand, then system checkpoints."""
        if self._closed:
            return
        for pair in self.pairs.values():
            pair.stop()
        for name, pair in self.pairs.items():
            try:
                if self.shutdown_checkpoint:
                    pair.structure_checkpoint("shutdown")
                pair.system_checkpoint("shutdown")
                if pair.writer is not None:
                    pair.writer.log_event(
                        RecordType.SHUTDOWN, payload={"qmgr": self.mgr.name}, commit=True
                    )
            except (CFError, Exception) as exc:  # a lost structure: the log has the rest
                logger.warning("%s: shutdown checkpoint of %s failed: %s", self.mgr.name, name, exc)

    def close(self) -> None:
        """Close the log (after disconnecting)."""
        if self._closed:
            return
        self._closed = True
        for pair in self.pairs.values():
            pair.stop()
        self.journal.close()
        for pair in self.pairs.values():
            pair.close()

    def abandon(self) -> None:
        """Let go of everything without writing anything, as a process that died would.

        For tests that kill a manager in-process: its watcher stops and its log writers
        are closed, so that its next incarnation can open them.
        """
        self._closed = True
        for pair in self.pairs.values():
            pair.stop()
        with contextlib.suppress(Exception):
            self.journal.close()
        for pair in self.pairs.values():
            with contextlib.suppress(Exception):
                pair.close()
