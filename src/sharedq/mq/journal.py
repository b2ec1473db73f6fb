"""What a change meant to the queue manager: its kinds, for the journal seam.

The journal seam itself (the notes a request hands the journal, the ``Journal`` base
class) is :mod:`sharedq.seam.notes`, shared by every server.  The queue manager's words
for its changes are :class:`ChangeKind`: each is a :class:`~sharedq.seam.notes.Meaning`,
so that a recovery log knows the Appendix B record type of each, the name it writes in
the record's payload (``{"mq": kind}``, which the pipeline reads), and which end an
operation out of syncpoint (the log syncs after them).

:meth:`~sharedq.seam.notes.Journal.begin_commit_outcome` is the other half: at restart,
a unit of work whose descriptors say "begin commit" is decided by the owner's private
log (p[308]).  With no log, the answer is ``None`` and the unit of work is backed out
(presumed abort): its commit never returned to the application, so either outcome
keeps the promise made to it.
"""

from __future__ import annotations

from enum import Enum

from sharedq.log import RecordType


class ChangeKind(Enum):
    """What a change to a structure meant to the queue manager (a seam ``Meaning``)."""

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

    @property
    def tag(self) -> str:
        return self.value

    @property
    def record_type(self) -> RecordType:
        """The Appendix B type of its records: a message's change, or ``CHANGE``."""
        return _RECORD_TYPES.get(self, RecordType.CHANGE)

    @property
    def ends_operation(self) -> bool:
        return self in _ENDS_AN_OPERATION

    @property
    def learns_facts(self) -> bool:
        """A get learns what it took (persistence, id) only from the entry it moved."""
        return self is ChangeKind.GET


_RECORD_TYPES: dict[ChangeKind, RecordType] = {
    ChangeKind.PUT: RecordType.PUT,
    ChangeKind.SYNC_PUT: RecordType.MOVE,
    ChangeKind.COMMIT_PUTS: RecordType.MOVE,
    ChangeKind.GET: RecordType.READ,
    ChangeKind.SYNC_GET: RecordType.DELETE,
    ChangeKind.COMMIT_GETS: RecordType.DELETE,
    ChangeKind.BACKOUT_PUTS: RecordType.DELETE,
    ChangeKind.BACKOUT_GETS: RecordType.UNLOCK,
    ChangeKind.BACKOUT_LAST: RecordType.UNLOCK,
    ChangeKind.EXPIRE: RecordType.MOVE,
    ChangeKind.PURGE: RecordType.DELETE,
    ChangeKind.COLD_QUEUE: RecordType.MOVE,
    ChangeKind.REQUEUE: RecordType.MOVE,
}
_ENDS_AN_OPERATION = frozenset({ChangeKind.SYNC_PUT, ChangeKind.SYNC_GET})
