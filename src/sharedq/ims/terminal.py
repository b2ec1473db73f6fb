"""A terminal in session with one IMS: input in, output delivered and acknowledged.

A node logs on to an IMS (:meth:`sharedq.ims.IMS.logon`): the IMS registers interest in
the node's static LTERMs' ready queues (redbook §1.11).  Output for an LTERM is read by
that IMS (to its CQS's lock queue) one message at a time per LTERM, handed to the
terminal (:meth:`Terminal.receive`), and deleted from the structure only when the
terminal acknowledges it (:meth:`Terminal.ack`: Appendix A, step 22).  Logoff
deregisters; an output not yet acknowledged goes back to the head of its queue, where
it waits for the next logon.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from sharedq.cqs import LockToken, Uow
from sharedq.ims.definitions import Lterm
from sharedq.ims.errors import IMSReason, ims_error
from sharedq.ims.queues import Routed


@dataclass(frozen=True)
class Delivered:
    """An output message at the terminal: its LTERM, segments and unit of work."""

    lterm: str
    segments: tuple[bytes, ...]
    uow: Uow
    token: LockToken

    @property
    def text(self) -> str:
        return b"".join(self.segments).decode("ascii", "replace")


class Session(Protocol):
    """What a terminal needs of the IMS it is in session with."""

    imsid: str

    def enter(
        self, source: str, segments: Sequence[bytes | str], *, terminal: Terminal | None = None
    ) -> Routed: ...

    def acknowledge(self, terminal: Terminal, output: Delivered) -> None: ...

    def logoff(self, terminal: Terminal) -> None: ...

    def in_conversation(self, terminal: Terminal) -> bool: ...

    def exit_conversation(self, terminal: Terminal) -> str: ...


class Terminal:
    """A node in session with an IMS (made by :meth:`IMS.logon`)."""

    def __init__(
        self, ims: Session, node: str, lterms: list[Lterm], *, user: str | None = None
    ) -> None:
        self._ims = ims
        self.node = node
        #: The user signed on (ETO, :meth:`IMS.signon`); ``None`` for a static terminal.
        self.user = user
        self.lterms = [lt.name for lt in lterms]
        self._arrived: deque[Delivered] = deque()
        self._ready = threading.Condition()
        self.in_session = True
        self._awaiting: tuple[str, bytes] | None = None  # response mode: code, origin

    def __repr__(self) -> str:
        return f"<Terminal {self.node} on {self._ims.imsid} lterms={self.lterms}>"

    def enter(self, *segments: bytes | str, lterm: str | None = None) -> Routed:
        """Enter a message: the first segment starts with the transaction code.  From
        the node's first LTERM unless ``lterm`` says which of its LTERMs."""
        if not self.in_session:
            raise ims_error(IMSReason.NOT_IN_SESSION, f"{self.node} is logged off")
        source = self.lterms[0] if lterm is None else lterm
        if source not in self.lterms:
            raise ims_error(IMSReason.UNKNOWN_RESOURCE, f"{self.node} has no LTERM {lterm!r}")
        # Held while the IMS routes it, so that a reply cannot arrive before the
        # terminal knows it waits for one.
        with self._ready:
            if self._awaiting is not None:
                raise ims_error(
                    IMSReason.RESPONSE_MODE,
                    f"{self.node} is in response mode: waiting for the reply to "
                    f"{self._awaiting[0]}",
                )
            routed = self._ims.enter(source, segments, terminal=self)
            if routed.response:
                code = segments[0] if isinstance(segments[0], str) else segments[0].decode()
                self._awaiting = (code.split(" ", 1)[0], routed.uow.origin_id)
            return routed

    @property
    def response_mode(self) -> bool:
        """Whether the terminal waits for the reply to a response-mode transaction."""
        with self._ready:
            return self._awaiting is not None

    def reset(self) -> None:
        """The master terminal operator resets the terminal: response mode ends without
        the reply (which is still delivered when it comes)."""
        with self._ready:
            self._awaiting = None

    def receive(self, timeout: float | None = None) -> Delivered | None:
        """The next output delivered to this terminal, waiting up to ``timeout``
        seconds; ``None`` if none came.  Acknowledge it with :meth:`ack`."""
        with self._ready:
            if not self._ready.wait_for(lambda: bool(self._arrived), timeout):
                return None
            return self._arrived.popleft()

    def ack(self, output: Delivered) -> None:
        """Acknowledge receipt: the IMS deletes the message from the shared queues
        and sends the LTERM's next one."""
        self._ims.acknowledge(self, output)

    @property
    def in_conversation(self) -> bool:
        """Whether this terminal's IMS holds a conversation for it (its node, or its
        user when signed on): the next input continues it."""
        return self._ims.in_conversation(self)

    def exit(self) -> str:
        """/EXIT: end the conversation (only on the IMS where it started).  Returns
        ``DFS576I EXIT COMPLETED``, or ``DFS577I ... TRANSACTION STILL ACTIVE.`` when
        its input was being processed (its response will not be sent)."""
        return self._ims.exit_conversation(self)

    def logoff(self) -> None:
        """End the session (a signoff for a dynamic terminal): the IMS deregisters
        the LTERMs."""
        self._ims.logoff(self)

    signoff = logoff

    def arrive(self, output: Delivered) -> None:
        """The IMS sent ``output`` (the IMS's call)."""
        with self._ready:
            self._arrived.append(output)
            if self._awaiting is not None and output.uow.origin_id == self._awaiting[1]:
                self._awaiting = None  # its reply (the same first 16 bytes): unlocked
            self._ready.notify_all()
