"""A server's recovery log: its journal, its checkpoints, structure recovery, restart.

A server started with ``RecoverySettings`` gets a :class:`RecoveryLog`: for each
structure it uses (each a structure *pair* of its own, or a primary with its overflow
structure), a :class:`~sharedq.recovery.pair.PairRecovery`, and one
:class:`~sharedq.seam.logjournal.LogJournal` writing to every pair's log stream.  This
is the glue between a server and the recovery machinery, the same for every server (the
queue manager, the Common Queue Server):

* structure recovery before the server connects to a structure (:meth:`prepare`), and
  the quiesce gate and relocation on its access to it (:meth:`attach`);
* the restart decision, warm or cold, and the log position each pair restarts from;
* after restart (and after a structure recovery it performed) the checkpoints the
  seeds ask for, and at close the shutdown checkpoints;
* the recovery client the pairs ask (:class:`~sharedq.recovery.pair.RecoveryClient`):
  which entries are recoverable (the server's :class:`ServerClient` says), and the
  restart state: the units of work whose commit the server decided and has not
  finished, so that a warm restart from a system checkpoint still commits them.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from sharedq.cf import CFError, CouplingFacility, ListEntry
from sharedq.log import RecordType
from sharedq.recovery import system_checkpoint
from sharedq.recovery.pair import PairRecovery
from sharedq.recovery.settings import RecoverySettings
from sharedq.recovery.structure_checkpoint import CheckpointResult, Classifier, Faults
from sharedq.seam.access import FactsOf, StructureAccess
from sharedq.seam.logjournal import LogJournal

logger = logging.getLogger("sharedq.seam")


class ServerClient(Protocol):
    """What a server tells its recovery log."""

    def classifier(self, structure: str, control_entries: Sequence[ListEntry]) -> Classifier:
        """Says, for each entry of the structure, whether it is recoverable, its queue
        name and its unit of work (``control_entries``: the server's control list)."""

    def identity(self) -> dict[str, Any]:
        """Who the server is, for its restart state and its shutdown record."""


class RecoveryLog:
    """One server's recovery log and checkpoints, over all its structures.

    Args:
        server: the server's name (its user name, its log writer's name).
        facility: where the structures are.
        settings: the server's recovery settings.
        structures: the structures it uses (each the primary of a pair of its own).
        client: the server's side (recoverable entries, identity).
        payload_key: the key of the server's words in its log records' payloads.
        facts: reads a message's facts from an entry's data (for the log records).
        faults: called at each point of a structure checkpoint (crash tests).
        own: structures only this server uses, each in a facility of its own (a
            queue manager's structure for its nonshared queues): each is a pair of
            its own too, logged and checkpointed like the others.
        overflow: a pair's overflow structure, by its primary's name: the two are
            one pair, logged to the primary's stream, checkpointed and recovered as
            one (``pairs`` stays keyed by the primary; :meth:`pair_of` finds either).
    """

    def __init__(
        self,
        server: str,
        facility: CouplingFacility,
        settings: RecoverySettings,
        structures: Sequence[str],
        client: ServerClient,
        *,
        payload_key: str,
        facts: FactsOf,
        faults: Faults | None = None,
        own: Mapping[str, CouplingFacility] | None = None,
        overflow: Mapping[str, str] | None = None,
    ) -> None:
        self.server = server
        self.settings = settings
        self._client = client
        self._faults = faults
        self.pairs: dict[str, PairRecovery] = {}
        overflow = overflow or {}
        for name in dict.fromkeys(structures):
            members = [name] if overflow.get(name) is None else [name, overflow[name]]
            self.pairs[name] = PairRecovery(
                facility, settings, members, server, self, faults=faults
            )
        for name, own_facility in (own or {}).items():
            self.pairs[name] = PairRecovery(
                own_facility, settings, [name], server, self, faults=faults
            )
        self.journal = LogJournal(
            server,
            {s: p.stream for p in self.pairs.values() for s in p.structures},
            payload_key=payload_key,
            facts=facts,
        )
        #: /CQSET SHUTDOWN SHAREDQ ON: take structure checkpoints when this server closes.
        self.shutdown_checkpoint = False
        self._closed = False
        self._running = False

    def __repr__(self) -> str:
        return f"<RecoveryLog {self.server} pairs={sorted(self.pairs)}>"

    # -- connecting ----------------------------------------------------------------------

    def pair_of(self, structure: str) -> PairRecovery:
        """The pair ``structure`` belongs to (as its primary or its overflow)."""
        pair = self.pairs.get(structure)
        if pair is None:
            [pair] = [p for p in self.pairs.values() if structure in p.structures]
        return pair

    def prepare(self, structure: str) -> None:
        """Recover the structure's pair (both structures) if it is missing, empty or
        behind its log, before connecting to it."""
        pair = self.pair_of(structure)
        pair.prepare(self.journal.writer_for(structure))
        for name in pair.structures:
            self.journal.listeners[name] = pair.note_appended

    def attach(self, acc: StructureAccess) -> None:
        """The server connected: its changes go through the pair's quiesce gate."""
        pair = self.pair_of(acc.name)
        acc.gate = pair.gate.run
        acc.relocate = lambda lost: pair.relocate(acc.name, lost)
        pair.attach(acc.name, acc.conn)

    def add_own(self, structure: str, facility: CouplingFacility) -> None:
        """A structure only this server uses, made as it runs (see ``own``): a pair of
        its own from now on, prepared as the server connects to it, then
        :meth:`started_own`."""
        pair = PairRecovery(
            facility, self.settings, [structure], self.server, self, faults=self._faults
        )
        self.journal.add_stream(structure, pair.stream)
        self.pairs = {**self.pairs, structure: pair}  # a new dict, as for the journal

    def started_own(self, structure: str) -> None:
        """The server connected to a structure :meth:`add_own` added: what
        :meth:`after_restart` does for a pair (nothing of it needs a restart)."""
        pair = self.pairs[structure]
        pair.system_checkpoint("restart")
        pair.start()

    def rebuilt(self) -> list[str]:
        """The structures this server recovered or adopted as it connected."""
        return [o.structure for p in self.pairs.values() for o in p.outcomes if o.rebuilt]

    # -- restart --------------------------------------------------------------------------

    def decide_restart(self) -> tuple[bool, str]:
        """Warm or cold, and why; sets where a warm restart reads the server's log.

        A server that is running and reconnects after a structure loss restarts warm
        from what it knows: the units whose commit it decided are in memory.
        """
        if self._running:
            self.journal.restart_points = {
                name: (pair.last_system_checkpoint, frozenset(self.journal.committing))
                for name, pair in self.pairs.items()
                if pair.last_system_checkpoint is not None
            }
            return True, f"{self.server}: reconnected after a structure loss"
        decisions = {}
        for name, pair in self.pairs.items():
            found = system_checkpoint.find(
                pair.layout, self.server, pair.conns.get(name), pair.area
            )
            decisions[name] = system_checkpoint.decide(
                pair.stream, name, self.server, found, cold_requested=self.settings.cold_start
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
        structure checkpoint of each structure this server recovered."""
        self.journal.restart_points = {}
        self._running = True
        for pair in self.pairs.values():
            pair.system_checkpoint("restart")
            pair.start()
        for primary in dict.fromkeys(self.pair_of(name).primary for name in self.rebuilt()):
            self.pairs[primary].structure_checkpoint("after-recovery")

    # -- the recovery client the pairs ask -----------------------------------------------------

    def classifier(self, structure: str, control_entries: Sequence[ListEntry]) -> Classifier:
        return self._client.classifier(structure, control_entries)

    def restart_state(self) -> dict[str, Any]:
        return {
            **self._client.identity(),
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
                        RecordType.SHUTDOWN, payload=self._client.identity(), commit=True
                    )
            except (CFError, Exception) as exc:  # a lost structure: the log has the rest
                logger.warning("%s: shutdown checkpoint of %s failed: %s", self.server, name, exc)

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

        For tests that kill a server in-process: its watcher stops and its log writers
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
