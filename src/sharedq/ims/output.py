"""Output for terminals: an IMS's sessions, its LTERMs' deliveries and acknowledgements.

The IMS the terminal is in session with registers interest in the node's LTERMs at
logon (redbook §1.11).  When an LTERM's ready queue goes from empty to non-empty the
CQS tells the IMS; its dispatcher reads the LTERM's next message (to the lock queue),
sends it to the terminal, and deletes it when the terminal acknowledges it (Appendix
A, steps 18-22): one output per LTERM in flight.  Logoff deregisters; an output not
yet acknowledged goes back to the head of its queue and waits for the next logon.
A conversation's response (its first segment the SPA) is sent without the SPA and,
unless it ends the conversation, held on the lock queue after its acknowledgement
(:mod:`sharedq.ims.conversation`).
"""

from __future__ import annotations

import logging
import threading

from sharedq.cqs import CQSError, CQSReason, CQSService, Uow
from sharedq.ims import messages, queues
from sharedq.ims.conversation import Conversations
from sharedq.ims.errors import IMSReason, ims_error
from sharedq.ims.terminal import Delivered, Terminal

logger = logging.getLogger("sharedq.ims")


class Outputs:
    """An IMS's terminals and their LTERMs' output.  ``lock`` is the IMS's condition:
    its dispatcher waits on it for LTERMs with output due (:meth:`has_due`)."""

    def __init__(
        self, cqs: CQSService, lock: threading.Condition, conversations: Conversations
    ) -> None:
        self._cqs = cqs
        self._lock = lock
        self._conversations = conversations
        #: Outputs in flight that a conversation holds: their acknowledgement does not
        #: delete them (the next input or /EXIT does).
        self._keep: set[int] = set()
        self._work: dict[str, None] = {}  # LTERMs told of output, not yet read
        self._in_flight: dict[str, Delivered] = {}
        self._terminals: dict[str, Terminal] = {}  # by node
        self._by_lterm: dict[str, Terminal] = {}
        self._completed: list[Uow] = []  # acknowledged while the CQS was down

    def terminals(self) -> list[Terminal]:
        with self._lock:
            return list(self._terminals.values())

    def terminal_of(self, lterm: str) -> Terminal | None:
        """The terminal in session with ``lterm``, if any."""
        with self._lock:
            return self._by_lterm.get(lterm)

    def logon(self, terminal: Terminal) -> Terminal:
        """Put ``terminal`` in session and register its LTERMs; an LTERM whose queue
        has messages already gets them (no event comes for those)."""
        with self._lock:
            if terminal.node in self._terminals:
                raise ims_error(IMSReason.NODE_IN_SESSION, f"{terminal.node} is in session")
            self._terminals[terminal.node] = terminal
            for name in terminal.lterms:
                self._by_lterm[name] = terminal
        for name in terminal.lterms:
            if self._cqs.register(queues.lterm_ready(name)):
                self.told(name)
        return terminal

    def logoff(self, terminal: Terminal) -> None:
        with self._lock:
            if self._terminals.get(terminal.node) is not terminal:
                return
            del self._terminals[terminal.node]
            terminal.in_session = False
            held = []
            for name in terminal.lterms:
                self._by_lterm.pop(name, None)
                self._work.pop(name, None)
                if name in self._in_flight:
                    output = self._in_flight.pop(name)
                    if id(output) in self._keep:  # held by a conversation
                        self._keep.discard(id(output))
                        if not self._conversations.unsent(output, output.uow.origin_id):
                            continue  # already deleted (a next input, /EXIT): not unlocked
                    held.append(output)
        for name in terminal.lterms:
            self._cqs.deregister(queues.lterm_ready(name))
        for output in held:
            self._cqs.unlock(output.token, first=True)

    def drop_sessions(self) -> None:
        """The IMS died: every session ends with nothing deregistered or unlocked
        (an output in flight stays locked by its CQS until the IMS restarts)."""
        with self._lock:
            for terminal in self._terminals.values():
                terminal.in_session = False
            self._terminals.clear()
            self._by_lterm.clear()
            self._work.clear()
            self._in_flight.clear()
            self._keep.clear()

    def told(self, lterm: str) -> None:
        """The LTERM's queue has output (a notification, or found at logon)."""
        with self._lock:
            self._work[lterm] = None
            self._lock.notify_all()

    def has_due(self) -> bool:
        """Whether an LTERM in session has output to read (the caller holds the lock)."""
        return any(lt not in self._in_flight and lt in self._by_lterm for lt in self._work)

    def due(self) -> list[str]:
        """The LTERMs to read for now, taken off the list (the caller holds the lock)."""
        lterms = [lt for lt in self._work if lt not in self._in_flight]
        for lterm in lterms:
            del self._work[lterm]
        return lterms

    def deliver(self, lterm: str) -> None:
        """Read the LTERM's next output (to the lock queue) and send it."""
        with self._lock:
            terminal = self._by_lterm.get(lterm)
            if terminal is None or lterm in self._in_flight:
                return
        try:
            got = self._cqs.read(queues.lterm_ready(lterm))
        except CQSError as error:
            logger.warning("%s: read for %s failed: %s", self._cqs.system, lterm, error)
            return
        if got is None:
            return
        assert got.token is not None
        decoded = messages.decode(got.body)
        spa, segments = (decoded.segments[0], decoded.segments[1:]) if decoded.spa else (None, ())
        output = Delivered(lterm, segments if spa else decoded.segments, got.uow, got.token)
        orphan = False
        with self._lock:
            still = self._by_lterm.get(lterm) is terminal
            if still and spa is not None:
                conversation = self._conversations.response(lterm, spa, got.uow.origin_id)
                if conversation is None and self._conversations.adopt(terminal, lterm, got.uow):
                    conversation = self._conversations.response(lterm, spa, got.uow.origin_id)
                orphan = conversation is None
                if conversation is not None and conversation.code:  # it goes on: held
                    self._keep.add(id(output))
                    self._conversations.hold(conversation, spa, output)
            if still and not orphan:
                self._in_flight[lterm] = output
        if not still:  # logged off meanwhile
            self._cqs.unlock(got.token, first=True)
            return
        if orphan:
            assert spa is not None
            if self._conversations.orphan(lterm, spa):
                self.drop_held(output)  # no conversation here: never sent
                self.told(lterm)
                return
            with self._lock:
                self._in_flight[lterm] = output  # the exit said send it after all
        terminal.arrive(output)

    def put_back(self, output: Delivered) -> None:
        """A held response back to the head of its LTERM's queue (a shutdown)."""
        try:
            self._cqs.unlock(output.token, first=True)
        except CQSError as error:
            logger.warning("%s: unlock of %s's held output failed: %s", self._cqs.system,
                           output.lterm, error)  # fmt: skip

    def drop_held(self, output: Delivered) -> None:
        """Delete a response a conversation held (its next input is put, or /EXIT), or
        one no conversation here wants.  Still in flight, its acknowledgement then
        deletes nothing."""
        try:
            self._cqs.delete(output.token)
        except CQSError as error:
            logger.warning("%s: delete of %s's held output failed: %s", self._cqs.system,
                           output.lterm, error)  # fmt: skip

    def acknowledge(self, output: Delivered) -> None:
        """Delete the acknowledged output; the LTERM's next is due."""
        with self._lock:
            if self._in_flight.get(output.lterm) is not output:
                raise ims_error(IMSReason.BAD_ARGUMENT, f"{output.lterm}: nothing to acknowledge")
            del self._in_flight[output.lterm]
            kept = id(output) in self._keep  # held by its conversation: not deleted now
            self._keep.discard(id(output))
        if kept:
            self.told(output.lterm)
            return
        try:
            self._cqs.delete(output.token)
        except CQSError as error:
            if error.reason is not CQSReason.NOT_CONNECTED:
                raise
            with self._lock:  # deleted when the IMS reconnects (resync)
                self._completed.append(output.uow)
        finally:
            self.told(output.lterm)

    def take_completed(self) -> list[Uow]:
        """The outputs acknowledged while the CQS was down (the caller holds the lock)."""
        done, self._completed = self._completed, []
        return done

    def reconnected(self) -> None:
        """The CQS is back and resynchronized: outputs that were in flight went back to
        their queues (a stale acknowledgement is refused), the LTERMs in session are
        registered again and their queues read."""
        with self._lock:
            self._in_flight.clear()
            lterms = list(self._by_lterm)
        for name in lterms:
            if self._cqs.register(queues.lterm_ready(name)):
                self.told(name)
