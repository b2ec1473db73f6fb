"""The journal seam: what a server tells its recovery log about each change it made.

Every structure request a server makes goes through
:class:`sharedq.seam.access.StructureAccess`; after each request that changed the
structure it hands the server's :class:`Journal` one *note*: a frozen record of the
request as made (the change the structure returned, and every argument a log needs to
repeat it exactly) and of what the change meant to the server.  There is one note type
per list-structure request, built from the request's typed arguments, so a renamed or
forgotten argument is a type error here, never a default silently logged.

What a change *meant* is the server's own vocabulary (the queue manager's
:class:`~sharedq.mq.journal.ChangeKind`, the CQS's requests): the seam asks of it only
what the :class:`Meaning` protocol says, the Appendix B record type, the name a log
writes in the record's payload, whether the change ends an operation (the log syncs
after it), and whether the message's facts are to be read from the entry it moved.

Notes and :class:`About` are named tuples: immutable, and cheap to make (a server
makes one of each for every change): one call that builds the tuple, where a frozen
dataclass's ``__init__`` sets each field through ``object.__setattr__``.

A journal that raises fails the request: the access raises the server's own error (a
:class:`~sharedq.seam.access.JournalFailure`) carrying the note, after the change was
made, so that the server can undo it before its caller hears of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from sharedq.cf import BulkMove, BulkResult, Change, Position
from sharedq.cf.types import Unchanged
from sharedq.log import RecordType


class Meaning(Protocol):
    """What a change meant to the server that made it, as its journal needs it."""

    @property
    def tag(self) -> str:
        """The server's name for it (a log writes it in the record's payload)."""
        ...

    @property
    def record_type(self) -> RecordType:
        """The Appendix B record type of a change of a message; ``CHANGE`` otherwise."""
        ...

    @property
    def ends_operation(self) -> bool:
        """Whether it ends an operation out of syncpoint: a log syncs after it."""
        ...

    @property
    def learns_facts(self) -> bool:
        """Whether the message's facts (persistence, id) come from the entry it moved."""
        ...


class About(NamedTuple):
    """What a change concerns: its queue, unit of work and message (each if known)."""

    queue: str | None = None
    uow_id: bytes | None = None
    persistent: bool | None = None
    msg_id: bytes | None = None


#: A change that concerns nothing in particular (a control entry).
NOTHING = About()


class EntryMeaning(NamedTuple):
    """What one entry of a bulk request is: aligned with the request's entries."""

    entry_id: bytes
    queue: str | None
    persistent: bool | None
    msg_id: bytes | None


class WriteNote(NamedTuple):
    """A ``write`` (or the write half of ``write_and_rekey``)."""

    meaning: Meaning
    structure: str
    change: Change
    position: Position
    ignore_limit: bool
    about: About


class MoveNote(NamedTuple):
    """A ``move`` (or the rekey half of ``write_and_rekey``).

    ``from_list``: the list the entry was taken from, when the request named it.
    """

    meaning: Meaning
    structure: str
    change: Change
    from_list: int | None
    position: Position
    ignore_limit: bool
    about: About


class DeleteNote(NamedTuple):
    """A ``delete``."""

    meaning: Meaning
    structure: str
    change: Change
    about: About


class UpdateNote(NamedTuple):
    """An ``update``: which of the data and adjunct it replaced."""

    meaning: Meaning
    structure: str
    change: Change
    data_changed: bool
    adjunct_changed: bool
    increment_authority: bool
    about: About


class ControlsNote(NamedTuple):
    """A ``set_list_controls``: the change's sequence number and what it set."""

    meaning: Meaning
    structure: str
    seq: int
    list_number: int
    limit: int | Unchanged | None
    increment_authority: bool
    about: About


class BulkMoveNote(NamedTuple):
    """A ``move_entries``: the moves as sent, how far it got, what each entry is."""

    meaning: Meaning
    structure: str
    moves: Sequence[BulkMove]
    result: BulkResult
    ignore_limit: bool
    uow_id: bytes | None
    entries: Sequence[EntryMeaning]


class BulkDeleteNote(NamedTuple):
    """A ``delete_entries``: the ids as sent, how far it got, what each entry is."""

    meaning: Meaning
    structure: str
    entry_ids: Sequence[bytes]
    result: BulkResult
    uow_id: bytes | None
    entries: Sequence[EntryMeaning]


#: A change of one entry (or of a list's controls).
ChangeNote = WriteNote | MoveNote | DeleteNote | UpdateNote | ControlsNote
#: A bulk change, possibly only part of what was asked.
BulkNote = BulkMoveNote | BulkDeleteNote
#: Any note.
Note = ChangeNote | BulkNote


class DecisionUncertain(Exception):
    """Raised by :meth:`Journal.commit_decided` when it failed after some of the decision
    was written (a record not synced, one stream of several): a restart may find it, so
    the unit of work counts as decided.  The journal's own exception is the cause."""


class Journal:
    """Receives every change a server makes; this default records nothing."""

    def changed(self, note: ChangeNote) -> None:
        """One single-entry change or list-controls change was made."""

    def bulk_changed(self, note: BulkNote) -> None:
        """A bulk move or delete was made (possibly only part of it)."""

    def commit_decided(self, server: str, uow_id: bytes, structures: Sequence[str]) -> bool | None:
        """A unit of work whose descriptors say "begin commit" is now to be committed.

        Called between the two calls of commit (p[223]-p[229]), before the descriptors
        are changed to "in commit".  A log records the decision durably here; a server
        that dies before changing its descriptors is then committed at its restart,
        which is what the owner's private log decides in the patent (p[308]).
        ``structures`` are the structures the unit touched.

        Returns ``True`` when the decision is recorded durably, so that
        :meth:`begin_commit_outcome` will say "commit" at a restart (the unit must then
        never be backed out); this default records nothing.  Raising means the decision
        was *not* recorded (the unit is backed out), unless the exception is
        :class:`DecisionUncertain`: part of it may have been.
        """
        return None

    def unit_ended(self, server: str, uow_id: bytes | None, structures: Sequence[str]) -> None:
        """A unit of work (or an operation out of syncpoint) completed, committed or not.

        The point at which a log with per-commit durability makes its records durable.
        """

    def begin_commit_outcome(self, server: str, uow_id: bytes) -> bool | None:
        """At restart: did the owner's log commit this "begin commit" unit of work?

        ``True`` commit, ``False`` back out, ``None`` not known (backed out).
        """
        return None


#: The journal a server uses when none is given.
NO_JOURNAL = Journal()
