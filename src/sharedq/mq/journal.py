"""The journal seam: what the queue manager tells a recovery log about each change.

Every structure request the queue manager makes goes through
:class:`sharedq.mq.access.StructureAccess`; after each request that changed the
structure, it calls the manager's :class:`Journal` with the change (the ``Change``,
``BulkResult`` or sequence number the structure returned) and what the change meant:
its :class:`ChangeKind`, the queue, the unit of work, the message's persistence and
its message id.  The default journal does nothing.

The recovery log (:class:`sharedq.mq.logjournal.LogJournal`: "every change to a
recoverable object is logged before its request returns to the caller; nonpersistent
messages are not logged") subclasses :class:`Journal`, writes a record in
:meth:`Journal.changed` and :meth:`Journal.bulk_changed`, and skips the changes whose
``persistent`` is ``False``.
Because the seam is called after the change and before the manager's call returns to
the application, logging there meets that rule.  A journal method that raises fails
the request: ``StructureAccess`` raises :class:`~sharedq.mq.errors.JournalFailed` with
the note, and the manager undoes the change before the application hears of it ("a
failed log write deletes what the request wrote": a put's entry is deleted, a get's
message goes back to its queue).  Where an undo is unsafe, the change stands and the
unit of work's descriptors (or the recovery that follows a restart) settle it: the work
of a unit whose commit was decided is finished, never undone, and a backout is never
undone (recovery backs out whatever a log lacks of it).

:meth:`Journal.begin_commit_outcome` is the other half: at restart, a unit of work
whose descriptors say "begin commit" is decided by the owner's private log (p[308]).
With no log, the answer is ``None`` and the unit of work is backed out (presumed
abort): its commit never returned to the application, so either outcome keeps the
promise made to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any, NamedTuple

from sharedq.cf import BulkMove, BulkResult, Change


class ChangeKind(Enum):
    """What a change to a structure meant to the queue manager."""

    #: A put wrote a message with its uncommitted key (in or out of syncpoint).
    PUT = "put"
    #: Sync last message: an out-of-syncpoint put took its committed key.
    SYNC_PUT = "sync-put"
    #: A get moved a committed message to the manager's get list (a read).
    GET = "get"
    #: Sync last message: an out-of-syncpoint get deleted the message from the get list.
    SYNC_GET = "sync-get"
    #: Backout last message: a get's message went back to its put list (not counted).
    BACKOUT_LAST = "backout-last"
    #: Expire last message: a gotten message went to the manager's expiry list.
    EXPIRE = "expire"
    #: Commit: uncommitted puts took their committed keys (bulk move).
    COMMIT_PUTS = "commit-puts"
    #: Commit: gotten messages (and the UOW's own puts it got) were deleted (bulk delete).
    COMMIT_GETS = "commit-gets"
    #: Backout: the UOW's uncommitted puts were deleted (bulk delete).
    BACKOUT_PUTS = "backout-puts"
    #: Backout: gotten messages went back to their put lists, backout count + 1 (an
    #: unlock, in CQS terms).
    BACKOUT_GETS = "backout-gets"
    #: A UOW descriptor or MUSE was written, updated or deleted.
    DESCRIPTOR = "descriptor"
    #: A queue was defined or altered (LHQC, list limit).
    DEFINITION = "definition"
    #: Control entries: list claims, the group directory, recovery claims.
    CONTROL = "control"
    #: Expired messages were purged from an expiry list.
    PURGE = "purge"
    #: A cold start moved the messages the manager had gotten to the cold queue.
    COLD_QUEUE = "cold-queue"
    #: Messages went back from the cold queue to their queues (an operator's requeue).
    REQUEUE = "requeue"


class EntryMeaning(NamedTuple):
    """What one entry of a bulk request is: aligned with the request's entries."""

    entry_id: bytes
    queue: str | None
    persistent: bool | None
    msg_id: bytes | None


class ChangeNote(NamedTuple):
    """One single-entry change (or list-controls change) and what it meant.

    ``request`` names the structure request (``write``, ``move``, ``delete``,
    ``update``, ``set_list_controls``) and ``options`` holds the keyword arguments it
    was made with (position, ignore_limit, new key, limit...; a move's ``locator`` and
    list controls' ``list_number`` too), so that a log can record the change exactly;
    ``result`` is what the structure returned (for list controls, the sequence number).
    """

    kind: ChangeKind
    structure: str
    request: str
    result: Change | int
    options: Mapping[str, Any]
    queue: str | None
    uow_id: bytes | None
    persistent: bool | None
    msg_id: bytes | None


class BulkNote(NamedTuple):
    """A bulk move or delete and what it meant.

    ``items`` is the request as sent (the ``BulkMove`` list or the entry ids) and
    ``entries`` says what each item is, aligned with it; ``result`` says how far the
    request got, possibly not all the way.
    """

    kind: ChangeKind
    structure: str
    request: str
    items: Sequence[BulkMove] | Sequence[bytes]
    result: BulkResult
    options: Mapping[str, Any]
    uow_id: bytes | None
    entries: Sequence[EntryMeaning]


class DecisionUncertain(Exception):
    """Raised by :meth:`Journal.commit_decided` when it failed after some of the decision
    was written (a record not synced, one stream of several): a restart may find it, so
    the unit of work counts as decided.  The journal's own exception is the cause."""


class Journal:
    """Receives every change the queue manager makes; this default records nothing."""

    def changed(self, note: ChangeNote) -> None:
        """One single-entry change or list-controls change was made."""

    def bulk_changed(self, note: BulkNote) -> None:
        """A bulk move or delete was made (possibly only part of it)."""

    def commit_decided(self, qm_name: str, uow_id: bytes, structures: Sequence[str]) -> bool | None:
        """A unit of work whose descriptors say "begin commit" is now to be committed.

        Called between the two calls of commit (p[223]-p[229]), before the descriptors
        are changed to "in commit".  A log records the decision durably here; a manager
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

    def unit_ended(self, qm_name: str, uow_id: bytes | None, structures: Sequence[str]) -> None:
        """A unit of work (or an out-of-syncpoint operation) completed, committed or not.

        The point at which a log with per-commit durability makes its records durable.
        """

    def begin_commit_outcome(self, qm_name: str, uow_id: bytes) -> bool | None:
        """At restart: did the owner's log commit this "begin commit" UOW?

        ``True`` commit, ``False`` back out, ``None`` not known (backed out).
        """
        return None


#: The journal a manager uses when none is given.
NO_JOURNAL = Journal()
