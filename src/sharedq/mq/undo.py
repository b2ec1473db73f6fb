"""Taking back a change the journal could not record: "a failed log write deletes what
the request wrote".

A manager with a recovery log logs each change after the structure made it and before
the application hears of it (:mod:`sharedq.mq.journal`).  When that log write fails
(the log at its maximum, its disk full), :class:`~sharedq.mq.access.StructureAccess`
raises :class:`~sharedq.mq.errors.JournalFailed` and the request's code undoes the
change with the helpers here before raising it: a put's entry is deleted, a get's
message goes back to its put list, a deleted message is written back.  Otherwise the
change would stay in the structure unlogged, and on a full disk nothing would ever
remove it: an uncommitted put no unit of work owns, invisible but counted in the
queue's depth, until enough of them fill the queue (2053) for good.

Each undo is itself a structure request, logged if the log can take it; if it cannot,
the undo still stands (:func:`~sharedq.mq.access.tolerating`): the log then lacks both
the change and its undo, or (when only a sync failed) holds both.  An undo the
structure refuses leaves the change where recovery finds it: an uncommitted put is
deleted, and a message on the manager's get list returned, by the restart of the
manager (or a peer's recovery of it).  The caller then decides what its request
reports: an operation whose effect stands is reported done, never failed, so that the
application does not do it again.
"""

from __future__ import annotations

import logging
from enum import Enum

from sharedq.cf import ById, CFError, ListEntry, ListMismatch, NoSuchEntry
from sharedq.mq.definitions import QueueState
from sharedq.mq.errors import JournalFailed
from sharedq.mq.journal import ChangeKind
from sharedq.mq.units import Trop, TropKind, UnitState
from sharedq.seam.access import tolerating

logger = logging.getLogger("sharedq.mq")


class Undo(Enum):
    """How an undo went."""

    #: The change is taken back.
    DONE = "done"
    #: The entry was no longer where the change left it: another manager took it (a
    #: committed message is visible to every get at once).  The change stands.
    GONE = "gone"
    #: The structure refused the undo (or was lost).  The change stands, until the
    #: manager's restart or a peer's recovery settles it.
    REFUSED = "refused"


def _attempt(call: object, *args: object, **options: object) -> Undo:
    try:
        with tolerating() as failures:
            call(*args, **options)  # type: ignore[operator]
    except (NoSuchEntry, ListMismatch):
        return Undo.GONE
    except CFError as error:
        logger.warning("undo refused by the structure: %s", error)
        return Undo.REFUSED
    if failures:
        logger.warning("an undo could not be logged either: %s", failures[0])
    return Undo.DONE


def delete_put(
    queue: QueueState,
    entry_id: bytes,
    uow_id: bytes | None,
    persistent: bool,
    msg_id: bytes,
) -> Undo:
    """A put's entry, committed or not, comes off its put list."""
    return _attempt(
        queue.acc.delete,
        ById(entry_id, queue.put_list),
        kind=ChangeKind.BACKOUT_PUTS,
        queue=queue.name,
        uow=uow_id,
        persistent=persistent,
        msg_id=msg_id,
    )


def return_get(
    queue: QueueState,
    entry_id: bytes,
    from_list: int,
    uow_id: bytes | None,
    persistent: bool | None,
    msg_id: bytes | None,
) -> Undo:
    """A message a get moved (to the get list, or on to the expiry list) goes back to
    its place on its put list, its version (backout count) unchanged: the application
    never had it (backout last message)."""
    return _attempt(
        queue.acc.move,
        ById(entry_id, from_list),
        queue.put_list,
        ignore_limit=True,
        kind=ChangeKind.BACKOUT_LAST,
        queue=queue.name,
        uow=uow_id,
        persistent=persistent,
        msg_id=msg_id,
    )


def rewrite(
    queue: QueueState,
    entry: ListEntry,
    *,
    version: int,
    kind: ChangeKind,
    uow_id: bytes | None,
    persistent: bool | None,
    msg_id: bytes | None,
) -> Undo:
    """A message that was deleted is written back on its put list, as it was (same
    id, key, data, adjunct and secondary key), with ``version``."""
    return _attempt(
        queue.acc.write,
        queue.put_list,
        entry.key,
        entry.data,
        adjunct=entry.adjunct,
        secondary_key=entry.secondary_key,
        entry_id=entry.entry_id,
        version=version,
        ignore_limit=True,
        kind=kind,
        queue=queue.name,
        uow=uow_id,
        persistent=persistent,
        msg_id=msg_id,
    )


def unrecorded_put(
    queue: QueueState,
    failure: JournalFailed,
    entry_id: bytes,
    ukey: bytes,
    msg_id: bytes,
    secondary: bytes | None,
    uow: UnitState | None,
) -> bool:
    """The log could not record the put's write (or, out of syncpoint, its sync): the
    entry is deleted.  ``True``: it could not be, and the put stands (return it)."""
    about = failure.about
    persistent = bool(about.persistent)
    outcome = delete_put(queue, entry_id, about.uow_id, persistent, msg_id)
    if outcome is Undo.DONE:
        return False
    if failure.meaning is ChangeKind.SYNC_PUT:
        # Committed by the sync, the message was visible to every get at once: taken
        # already (GONE), or left on the queue by a structure that refused the delete,
        # it is on the queue for good.  Failing the put now would have the application
        # put it a second time.
        logger.warning("put to %s stands, unlogged: %s (undo: %s)", queue.name, failure, outcome)
        return True
    if uow is not None and outcome is Undo.REFUSED:
        # Why not leave it: an uncommitted put of this unit (its version is the UOW id)
        # that the unit does not know would outlive the unit's commit, still
        # uncommitted, until a restart swept it; and not at all if the unit ended
        # prepared, in doubt.  Recorded as a put the unit got itself, it is deleted
        # by the commit, the backout, and any recovery of the unit.
        trqs = uow.trqs_for(queue)
        trqs.add(Trop(TropKind.OWN_GET, entry_id, ukey, persistent, msg_id, secondary, None, trqs))
    # Out of syncpoint an uncommitted put no unit owns is deleted by the restart of this
    # manager, or a peer's recovery of it (found by its version, a UOW id of ours).
    return False


def take_back(queue: QueueState, failure: JournalFailed, uow: UnitState | None) -> None:
    """The log could not record a get's move to the get list: the message goes back."""
    entry = failure.entry
    assert entry is not None, "a get's move was not recorded: its entry is known"
    about = failure.about
    uow_id = uow.uow_id if uow is not None else None
    outcome = return_get(
        queue, entry.entry_id, queue.get_list, uow_id, about.persistent, about.msg_id
    )
    if outcome is not Undo.DONE:
        # Left on this manager's get list (not in the unit, which never had it): the
        # restart of this manager, or a peer's recovery of it, returns it to the queue.
        logger.warning("a get's message stays on the get list of %s: %s", queue.name, outcome)


def commit_one(trop: Trop, uow_id: bytes, failure: JournalFailed) -> bool:
    """Take back a one-operation commit the log could not record, leaving the unit as a
    backout would; ``False`` if the commit stands."""
    queue = trop.trqs.queue
    if trop.kind is TropKind.PUT:
        # Committed, the message is visible: deleted (the undo and the backout at once).
        outcome = delete_put(queue, trop.entry_id, uow_id, trop.persistent, trop.msg_id)
    elif trop.kind is TropKind.GET:
        # Deleted: written back where a backout returns it, its backout count + 1.
        entry = failure.entry
        assert entry is not None, "a commit's delete was not recorded: its entry is known"
        outcome = rewrite(
            queue,
            entry,
            version=entry.version + 1,
            kind=ChangeKind.BACKOUT_GETS,
            uow_id=uow_id,
            persistent=trop.persistent,
            msg_id=trop.msg_id,
        )
    else:
        return True  # the unit's own put it got: a backout deletes it as well
    return outcome is Undo.DONE
