"""Conversations: an IMS's conversational control blocks (CCBs) and /EXIT.

On shared queues a conversation's *status* is local to the IMS where it started, the
front end (redbook §10.2), anchored off the node (static terminal) or the user (ETO);
every iteration's input and output carry the SPA (:mod:`sharedq.ims.spa`), so any
IMS may process them.  The front end's part (§10.3):

1. the first input of a conversational transaction makes a CCB (``ACTIVE``: waiting
   for output) and goes out with a SPA of binary zeros as its first segment;
2. a response with a SPA reaching the front end is sent without it; unless the SPA's
   code is blank (the program ended the conversation) it stays on the lock queue, held
   with the SPA (``HELD``), after the terminal acknowledged it;
3. the terminal's next input goes out with the held SPA to the SPA's transaction, and
   only then is the held response deleted.

A response with a SPA that finds no CCB here (the user logged on to another IMS, or
ended the conversation with /EXIT while its input was being processed) goes to the
conversation exit (DFSCONE0, ``IMS(conversation_exit=...)``), whose default deletes
it: it is never sent.  One such response is not an orphan: one whose unit of work
this IMS started before its current start (its origin system this IMSID, its arrival
earlier), reaching a terminal with no conversation here: the conversation of an
earlier incarnation, which the restart lost with the CCBs.  It is adopted: a CCB is
made for it, so a conversation outlives its front end's failure and restart (the
held response, put back on its LTERM's queue by the emergency restart, is sent again
at logon; a response still being made reaches it later), as IMS's restart restores
its CCBs.  /EXIT (:meth:`Conversations.exit`) is accepted only where the
CCB is.  A logoff leaves the CCB (the conversation is suspended) and its held
response; a logon to this IMS again resumes it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from sharedq.cqs import Uow
from sharedq.ims.errors import IMSReason, ims_error
from sharedq.ims.spa import Spa
from sharedq.ims.terminal import Delivered

ACTIVE = "ACTIVE"
HELD = "HELD"
#: /EXIT's answers (the SPA available, or the conversation's input still running).
EXIT_COMPLETED = "DFS576I EXIT COMPLETED"
EXIT_STILL_ACTIVE = "DFS577I EXIT COMPLETED. TRANSACTION STILL ACTIVE."


class Anchored(Protocol):
    """What a CCB is anchored off: a terminal's node or its signed-on user."""

    node: str
    user: str | None
    lterms: list[str]


@dataclass(frozen=True)
class ConversationEnd:
    """What the conversation exit (DFSCONE0) is told: the LTERM, the SPA (code and user
    area; ``None``: the dummy SPA of an /EXIT while the input runs) and why:
    ``"exit"`` (/EXIT) or ``"no-conversation"`` (a response with a SPA and no CCB)."""

    lterm: str
    spa: bytes | None
    reason: Literal["exit", "no-conversation"]


#: The conversation exit: for ``"no-conversation"``, ``False`` sends the response
#: (without its SPA) as ordinary output; anything else deletes it.
ConversationExit = Callable[[ConversationEnd], object]


@dataclass
class Conversation:
    """A CCB: the terminal's conversation on this IMS."""

    node: str
    user: str | None
    lterm: str
    #: The SPA's transaction code: where the next input goes.
    code: str
    #: The origin of the unit of work of the input waited for (``ACTIVE``): its
    #: response, and a switched-to program's, carry the same (a late response of an
    #: input this CCB no longer waits for does not).
    origin: bytes = b""
    state: str = ACTIVE
    #: The response held on the lock queue (``HELD``): its SPA segment and the object
    #: the terminal received (its token deletes it).
    spa: bytes | None = None
    held: Delivered | None = None

    def row(self) -> dict[str, object]:
        return {
            "node": self.node,
            "user": self.user,
            "lterm": self.lterm,
            "transaction": self.code,
            "state": self.state,
        }


def _anchor(terminal: Anchored) -> str:
    return f"user {terminal.user}" if terminal.user else f"node {terminal.node}"


def _default_exit(end: ConversationEnd) -> object:
    return True


class Conversations:
    """One IMS's CCBs, by anchor."""

    def __init__(self, imsid: str, exit: ConversationExit | None = None) -> None:
        if exit is not None and not callable(exit):
            raise ims_error(IMSReason.BAD_ARGUMENT, "conversation_exit: a callable")
        self._exit = exit or _default_exit
        self._lock = threading.Lock()
        self._ccbs: dict[str, Conversation] = {}
        #: This IMSID as a unit of work's origin system, and the arrival token of this
        #: incarnation's start: units of work from before it are an earlier one's.
        self._origin = imsid.encode("ascii").ljust(8)
        self._since = 0

    def started(self, token: int) -> None:
        """This IMS (re)started at ``token`` (a unit of work's arrival clock)."""
        self._since = token

    def adopt(self, terminal: Anchored, lterm: str, uow: Uow) -> Conversation | None:
        """The CCB of a conversation an earlier incarnation of this IMS held, made
        ``ACTIVE`` for its response (``uow``'s); ``None`` if the response is not one
        (another IMS's, or this incarnation's), or the terminal has a conversation."""
        if uow.origin != self._origin or uow.arrival >= self._since:
            return None
        with self._lock:
            if _anchor(terminal) in self._ccbs:
                return None
            conversation = Conversation(terminal.node, terminal.user, lterm, "", uow.origin_id)
            self._ccbs[_anchor(terminal)] = conversation
            return conversation

    def of(self, terminal: Anchored) -> Conversation | None:
        with self._lock:
            return self._ccbs.get(_anchor(terminal))

    def begin(self, terminal: Anchored, lterm: str, code: str, origin: bytes) -> Conversation:
        """A CCB for the conversation ``terminal`` starts with ``code`` (its input's unit
        of work from ``origin``): ``ACTIVE``."""
        conversation = Conversation(terminal.node, terminal.user, lterm, code, origin)
        with self._lock:
            self._ccbs[_anchor(terminal)] = conversation
        return conversation

    def next_input(
        self, terminal: Anchored, origin: bytes
    ) -> tuple[Conversation, Spa, bytes, Delivered | None] | None:
        """The terminal's conversation, its held SPA (decoded and as held) and held
        response, for its next input (whose unit of work is from ``origin``): the CCB
        ``ACTIVE`` again, holding nothing (:meth:`resumed` puts them back if the input
        cannot be put); ``None`` without one; ``CONVERSATION_BUSY`` while it waits for
        its output."""
        with self._lock:
            conversation = self._ccbs.get(_anchor(terminal))
            if conversation is None:
                return None
            if conversation.state != HELD or conversation.spa is None:
                raise ims_error(
                    IMSReason.CONVERSATION_BUSY,
                    f"{terminal.node} is in conversation with {conversation.code}, "
                    "waiting for its output",
                )
            spa, held = conversation.spa, conversation.held
            conversation.state, conversation.origin = ACTIVE, origin
            conversation.spa = conversation.held = None
            return conversation, Spa.decode(spa), spa, held

    def resumed(self, conversation: Conversation, spa: bytes, held: Delivered | None) -> None:
        """The next input could not be put: the conversation holds its response again."""
        with self._lock:
            conversation.state, conversation.spa, conversation.held = HELD, spa, held

    def unsent(self, held: Delivered, origin: bytes) -> bool:
        """A held response not yet acknowledged at a logoff: if its conversation still
        holds it, the conversation waits for it again (``True``: the caller puts it back
        on its queue, to be sent at the next logon); ``False`` if the conversation let
        it go (its next input or /EXIT deleted it)."""
        with self._lock:
            for conversation in self._ccbs.values():
                if conversation.held is held:
                    conversation.state, conversation.spa, conversation.held = ACTIVE, None, None
                    conversation.origin = origin
                    return True
        return False

    def end(self, conversation: Conversation) -> None:
        with self._lock:
            for anchor, ccb in list(self._ccbs.items()):
                if ccb is conversation:
                    del self._ccbs[anchor]

    def response(self, lterm: str, spa_segment: bytes, origin: bytes) -> Conversation | None:
        """A response with a SPA for ``lterm`` (its unit of work from ``origin``): its
        conversation, if one here waits for it (``None``: none does).  A blank code ends
        the conversation (the CCB goes); otherwise the caller holds the response with
        :meth:`hold`."""
        spa = Spa.decode(spa_segment)
        with self._lock:
            found = next(
                (
                    c
                    for c in self._ccbs.values()
                    if c.lterm == lterm and c.state == ACTIVE and c.origin == origin
                ),
                None,
            )
            if found is None:
                return None
            found.code = spa.code
            if not spa.code:
                self._ccbs = {a: c for a, c in self._ccbs.items() if c is not found}
            return found

    def hold(self, conversation: Conversation, spa_segment: bytes, held: Delivered) -> None:
        """The response sent is held with its SPA until the next input or /EXIT."""
        with self._lock:
            conversation.state, conversation.spa, conversation.held = HELD, spa_segment, held

    def orphan(self, lterm: str, spa_segment: bytes) -> bool:
        """A response with a SPA and no CCB: ``True`` to delete it (the exit's default)."""
        spa = Spa.decode(spa_segment)
        end = ConversationEnd(lterm, spa.presented(len(spa.data)), "no-conversation")
        return self._exit(end) is not False

    def exit(self, terminal: Anchored) -> tuple[str, Delivered | None]:
        """/EXIT: the CCB ends (the exit told, with the SPA if it is here, or the dummy
        one); returns /EXIT's answer and the held response to delete, if any."""
        with self._lock:
            conversation = self._ccbs.pop(_anchor(terminal), None)
        if conversation is None:
            raise ims_error(
                IMSReason.NO_CONVERSATION, f"{_anchor(terminal)} has no conversation here"
            )
        if conversation.state == HELD and conversation.spa is not None:
            spa = Spa.decode(conversation.spa)
            self._exit(ConversationEnd(conversation.lterm, spa.presented(len(spa.data)), "exit"))
            return EXIT_COMPLETED, conversation.held
        self._exit(ConversationEnd(conversation.lterm, None, "exit"))
        return EXIT_STILL_ACTIVE, None

    def release(self) -> list[Delivered]:
        """The IMS shuts down: every held response, let go by its CCB (the caller puts
        them back on their queues, where the next incarnation adopts them)."""
        with self._lock:
            held = [c.held for c in self._ccbs.values() if c.held is not None]
            self._ccbs.clear()
        return held

    def display(self) -> list[dict[str, object]]:
        """/DISPLAY CONVERSATION: each CCB's node, user, LTERM, transaction and state."""
        with self._lock:
            return [c.row() for c in self._ccbs.values()]
