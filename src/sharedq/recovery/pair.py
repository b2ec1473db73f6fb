"""One server's part in the checkpoints and recovery of one structure pair.

A server layer (the queue manager now, the Common Queue Server later) makes a
:class:`PairRecovery` for each pair it uses and implements :class:`RecoveryClient`:
which entries are recoverable, and what its restart state is.  The object then

* recovers the pair's structures before the server connects (:meth:`prepare`);
* gives the server the :class:`~sharedq.recovery.quiesce.QuiesceGate` its changes go
  through;
* takes system checkpoints (:meth:`system_checkpoint`): every ``syschkpt`` records,
  after each structure checkpoint (any server's), at the end of restart, at shutdown,
  and on request;
* takes structure checkpoints (:meth:`structure_checkpoint`): on request, every
  ``strchkpt`` records, when the log approaches or reaches its maximum (CHKNEARFULL,
  the log's full handler), after a structure recovery, and at shutdown when asked
  beforehand;
* watches the pair's checkpoint entry (a thread, every ``poll_seconds``): a completed
  structure checkpoint asks this server for a system checkpoint; a master that died
  is taken over.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from contextlib import ExitStack, suppress
from typing import Any, Protocol

from sharedq.cf import CFError, CouplingFacility, ListEntry, ListStructure, StructureParams
from sharedq.errors import SharedqError
from sharedq.log import LogFullEvent, LogPosition, LogStream, LogWriter
from sharedq.recovery import master, structure_checkpoint, structure_recovery, system_checkpoint
from sharedq.recovery.control import KIND_CHECKPOINT, ControlArea
from sharedq.recovery.copy import CopyResult, CopySite, copy_structure
from sharedq.recovery.layout import PairLayout
from sharedq.recovery.quiesce import QuiesceGate
from sharedq.recovery.settings import RecoverySettings
from sharedq.recovery.structure_checkpoint import CheckpointJob, CheckpointResult, Classifier

logger = logging.getLogger("sharedq.recovery")

#: How often a trigger looks at the log's size, in records appended.
_SIZE_CHECK_EVERY = 64
#: Structure checkpoints the log-full handler may take in a row before giving up.
_LOG_FULL_ATTEMPTS = 3
#: Seconds at least that a checkpoint waits for the active servers' system checkpoints.
_SETTLE_SECONDS = 1.0
#: Seconds a ``wait`` for another master's checkpoint looks at its entry.
_MASTER_POLL = 0.02


class RecoveryClient(Protocol):
    """What the server layer tells the recovery machinery."""

    def classifier(self, structure: str, control_entries: Sequence[ListEntry]) -> Classifier:
        """Says, for each entry of the structure, whether it is recoverable, its queue
        name and its unit of work (``control_entries``: the control list, to read)."""

    def restart_state(self) -> dict[str, Any]:
        """The server's restart state, for its system checkpoint (msgpack-able)."""


class PairRecovery:
    """One server's recovery of one structure pair.

    Args:
        facility: where the structures are.
        settings: the server's recovery settings.
        structures: the pair's structures, primary first (the pair is named after it).
        server: the server's name (its user name, its log writer's name).
        client: the server layer.
        area: where the machinery's entries and locks are in each structure.
        faults: checkpoint fault hook (crash tests).
    """

    def __init__(
        self,
        facility: CouplingFacility,
        settings: RecoverySettings,
        structures: Sequence[str],
        server: str,
        client: RecoveryClient,
        *,
        area: ControlArea | None = None,
        faults: structure_checkpoint.Faults | None = None,
    ) -> None:
        self.facility = facility
        self.settings = settings
        self.structures = tuple(structures)
        self.primary = self.structures[0]
        self.pair = self.primary
        self.server = server
        self.client = client
        self.area = area or ControlArea()
        self.faults = faults
        self.layout = PairLayout(settings.root, self.pair)
        self.layout.make_dirs()
        self.stream = LogStream(
            self.layout.log,
            name=f"{self.pair}.LOG",
            structure=self.primary,
            config=settings.log(),
            clock=settings.clock,
            copy_root=(
                None
                if settings.dual_log_root is None
                else PairLayout(settings.dual_log_root, self.pair).log
            ),
            logging_structure=settings.logging_structure,
        )
        self.gate = QuiesceGate(
            self.area,
            max_wait=settings.max_wait_seconds,
            on_master_failed=self._master_failed,
            clock=settings.clock,
        )
        self.writer: LogWriter | None = None
        self.conns: dict[str, ListStructure] = {}
        #: Each structure's identity (``V`` marker) when this server connected.
        self.identities: dict[str, str] = {}
        self.outcomes: list[structure_recovery.StructureOutcome] = []
        self.last_checkpoint: CheckpointResult | None = None
        self.last_system_checkpoint: LogPosition | None = None
        self._lock = threading.Lock()
        self._checkpointing = threading.Lock()
        self._relocating = threading.Lock()
        self._sys_lsn = 0
        self._str_lsn = 0
        self._appends = 0
        self._seen_generation = 0
        self._background: threading.Thread | None = None
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"<PairRecovery {self.pair!r} server={self.server!r}>"

    # -- before and after connecting -----------------------------------------------------

    def prepare(
        self, writer: LogWriter, params_hint: dict[str, StructureParams] | None = None
    ) -> list[structure_recovery.StructureOutcome]:
        """Recover the pair's structures if they need it (before the server connects)."""
        self.writer = writer
        self.outcomes = [
            structure_recovery.ensure(
                self.facility,
                layout=self.layout,
                structure=name,
                stream=self.stream,
                writer=writer,
                area=self.area,
                server=self.server,
                params_hint=(params_hint or {}).get(name),
                timeout=self.settings.max_wait_seconds,
                clock=self.settings.clock,
            )
            for name in self.structures
        ]
        return self.outcomes

    def attach(self, structure: str, conn: ListStructure) -> None:
        """The server connected to one of the pair's structures."""
        self.conns[structure] = conn
        found = structure_recovery.marker(conn, self.area)
        self.identities[structure] = "" if found is None else str(found["id"])
        if structure == self.primary:
            state = master.read_function(conn, self.area, KIND_CHECKPOINT)
            self._seen_generation = state.generation

    def start(self) -> None:
        """Start the triggers: the log-full handler and the watcher thread."""
        assert self.writer is not None, "prepare() first"
        if self._watcher is not None and self._watcher.is_alive():
            return
        self._sys_lsn = self._str_lsn = self.writer.last_lsn
        if self.settings.chknearfull and self.settings.max_log_bytes is not None:
            self.stream.set_full_handler(self._log_full)
        self._stop.clear()
        self._watcher = threading.Thread(
            target=self._watch, name=f"sharedq-recovery-{self.server}-{self.pair}", daemon=True
        )
        self._watcher.start()

    def stop(self) -> None:
        """Stop the watcher and the triggers, and wait for a background checkpoint."""
        self._stop.set()
        self.stream.set_full_handler(None)
        for thread in (self._watcher, self._background):
            if thread is not None and thread is not threading.current_thread():
                thread.join()
        self._watcher = None

    # -- system checkpoints ----------------------------------------------------------------

    def system_checkpoint(self, reason: str) -> LogPosition:
        """Write this server's restart state to the log and record where (never quiesces)."""
        assert self.writer is not None
        with self.stream.exempt_from_maximum():
            position = system_checkpoint.take(
                conn=self.conns[self.primary],
                area=self.area,
                writer=self.writer,
                layout=self.layout,
                server=self.server,
                structure=self.primary,
                state=self.client.restart_state(),
                reason=reason,
                run=self.gate.run,
                clock=self.settings.clock,
            )
        self._sys_lsn = self.writer.last_lsn
        self.last_system_checkpoint = position
        return position

    # -- structure checkpoints ---------------------------------------------------------------

    def structure_checkpoint(self, reason: str, *, wait: bool = True) -> CheckpointResult | None:
        """Take a structure checkpoint as master.

        ``None`` when another checkpoint is being taken (by another server, or by this
        one in another thread): with ``wait``, after it finished.
        """
        assert self.writer is not None
        if not self._checkpointing.acquire(blocking=wait):
            return None
        try:
            with self.stream.exempt_from_maximum():
                result = self._structure_checkpoint(reason, wait)
        finally:
            self._checkpointing.release()
        if result is not None:
            self.last_checkpoint = result
            self._str_lsn = self.writer.last_lsn
            primary = self.conns.get(self.primary)
            if primary is not None:
                with suppress(CFError):
                    state = master.read_function(primary, self.area, KIND_CHECKPOINT)
                    self._seen_generation = max(self._seen_generation, state.generation)
        return result

    def _structure_checkpoint(self, reason: str, wait: bool) -> CheckpointResult | None:
        assert self.writer is not None
        with ExitStack() as stack:
            conns = {
                name: stack.enter_context(self.facility.connect(name, f"{self.server}.CHKPT"))
                for name in self.structures
            }
            job = CheckpointJob(
                pair=self.pair,
                structures=self.structures,
                server=self.server,
                conns=conns,
                area=self.area,
                layout=self.layout,
                stream=self.stream,
                writer=self.writer,
                classifier=self.client.classifier,
                own_system_checkpoint=self.system_checkpoint,
                timeout=self.settings.max_wait_seconds,
                clock=self.settings.clock,
                faults=self.faults,
                settle=max(_SETTLE_SECONDS, 4 * self.settings.poll_seconds),
            )
            result = structure_checkpoint.run(job, reason)
            if result is None and wait:
                self._wait_for_master(conns[self.primary])
            return result

    def _wait_for_master(self, conn: ListStructure) -> None:
        while not self._stop.is_set():
            state = master.read_function(conn, self.area, KIND_CHECKPOINT)
            if state.master is None or not master.alive(conn, state.user_id, state.master):
                return
            self._stop.wait(_MASTER_POLL)

    def request_checkpoint(self, reason: str) -> None:
        """Start a structure checkpoint in the background, unless one is running here."""
        with self._lock:
            if self._background is not None and self._background.is_alive():
                return
            self._background = threading.Thread(
                target=self._background_checkpoint,
                args=(reason,),
                name=f"sharedq-checkpoint-{self.server}-{self.pair}",
                daemon=True,
            )
            self._background.start()

    def _background_checkpoint(self, reason: str) -> None:
        try:
            self.structure_checkpoint(reason, wait=False)
        except Exception as exc:  # a background thread: report it, the next trigger retries
            logger.warning(
                "%s: structure checkpoint of %s (%s) failed: %s",
                self.server,
                self.pair,
                reason,
                exc,
            )

    # -- triggers ------------------------------------------------------------------------------

    def note_appended(self) -> None:
        """The server appended a record to this pair's log: take checkpoints that are due."""
        writer = self.writer
        if writer is None or self._stop.is_set():
            return
        lsn = writer.last_lsn
        if lsn - self._sys_lsn >= self.settings.syschkpt:
            self._sys_lsn = lsn
            self.system_checkpoint("syschkpt")
        strchkpt = self.settings.strchkpt
        if strchkpt is not None and lsn - self._str_lsn >= strchkpt:
            self._str_lsn = lsn
            self.request_checkpoint("strchkpt")
        self._appends += 1
        limit = self.settings.max_log_bytes
        if (
            limit is not None
            and self.settings.chknearfull
            and self._appends % _SIZE_CHECK_EVERY == 0
        ) and self.stream.space.size * 100 >= limit * self.settings.near_full_percent:
            self.request_checkpoint("log-near-full")

    def _log_full(self, event: LogFullEvent) -> None:
        """The log is at its maximum (CHKNEARFULL): checkpoint until records can go."""
        for _ in range(_LOG_FULL_ATTEMPTS):
            self.structure_checkpoint("log-full", wait=True)
            if self.stream.size_bytes() + event.needed <= event.max_bytes:
                return

    # -- the watcher ----------------------------------------------------------------------------

    def _watch(self) -> None:
        while not self._stop.wait(self.settings.poll_seconds):
            try:
                self.look()
            except (SharedqError, CFError) as exc:
                logger.debug("%s: watching %s: %s", self.server, self.pair, exc)
            except Exception:  # a watcher that died would leave checkpoints unanswered
                logger.warning(
                    "%s: watching %s failed; going on", self.server, self.pair, exc_info=True
                )

    def look(self) -> None:
        """Do what the pair's checkpoint entry asks of this server (the watcher calls it)."""
        conn = self.conns.get(self.primary)
        if conn is None:
            return
        state = master.read_function(conn, self.area, KIND_CHECKPOINT)
        if state.generation > self._seen_generation:
            self._seen_generation = state.generation
            if self.writer is not None:
                self._str_lsn = self.writer.last_lsn
            self.system_checkpoint("structure-checkpoint")
        if (
            state.master is not None
            and not master.alive(conn, state.user_id, state.master)
            # Read again: a master that finished gives up its entry before it goes.
            and master.read_function(conn, self.area, KIND_CHECKPOINT) == state
        ):
            logger.info(  # a takeover, done here: nothing for an operator to do
                "%s: structure checkpoint master %s of %s is gone: taking over",
                self.server,
                state.master,
                self.pair,
            )
            self.request_checkpoint("takeover")
        holder = conn.lock_holder(self.area.quiesce_lock)
        if holder is not None:
            master.release_if_failed(conn, holder, self._master_failed)

    def _master_failed(self, name: str) -> None:
        if name.endswith(".CHKPT"):
            self.request_checkpoint("takeover")

    # -- structure copy --------------------------------------------------------------------------

    def copy_structure(self, params: StructureParams) -> CopyResult:
        """Copy one of the pair's structures to a new allocation (see ``copy.py``)."""
        assert self.writer is not None, "prepare() first"
        site = CopySite(
            facility=self.facility,
            layout=self.layout,
            area=self.area,
            stream=self.stream,
            writer=self.writer,
            pair=self.pair,
            structures=self.structures,
            server=self.server,
            max_wait_seconds=self.settings.max_wait_seconds,
            clock=self.settings.clock,
        )
        return copy_structure(site, params)

    def relocate(self, structure: str, lost: ListStructure) -> ListStructure | None:
        """The connection to use after ``lost`` found its structure gone.

        Waits for a copy or recovery in progress (the pair's recovery lock).  If the
        structure now there is a copy of the one this server used, connects to it and
        returns the connection; ``None`` if the structure was lost (recovered, or not
        there): the server's requests fail and it reconnects.
        """
        with self._relocating:
            current = self.conns.get(structure)
            if current is not None and current is not lost and current.connected:
                return current
            with self.layout.recovery_lock(
                self.settings.max_wait_seconds, clock=self.settings.clock
            ):
                pass
            if not self.facility.exists(structure):
                return None
            conn = self.facility.connect(structure, self.server)
            try:
                found = structure_recovery.marker(conn, self.area)
            except CFError:
                found = None
            if (
                found is not None
                and found.get("how") == "copy"
                and found.get("from") == self.identities.get(structure)
            ):
                self.conns[structure] = conn
                self.identities[structure] = str(found["id"])
                logger.info("%s: moved to the copy of structure %s", self.server, structure)
                return conn
            with suppress(CFError):
                conn.disconnect()
            return None

    # -- the end ---------------------------------------------------------------------------------

    def close(self) -> None:
        self.stop()
        with suppress(Exception):
            self.stream.close()
