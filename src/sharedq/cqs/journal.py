"""What each CQS change means to its recovery log (the seam's ``Meaning``).

Record types are the redbook's Appendix B: put 07, read 08, move 0B, delete 0D; unlock
is sharedq's 0C (Appendix B lists none, though CQSUNLCK changes the structure: a
replay must repeat it, so it has a record of its own rather than hiding in a move).
Each step of a request is one record: a move's two steps (to the move queue, then to
its target) are two ``MOVE`` records; a delete's (to the delete queue, the staging
parts, the message) are ``DELETE`` records, the first a move.  The log syncs once per
request, after its last step (a server stopped before it finishes the request at its
restart from what the structure holds; a structure lost meanwhile is rebuilt from the
log as far as it was synced).  With interval durability (``Durability.interval``) no
request waits for the disk: its records are synced within the interval
(:class:`Unsynced`), the loss a machine crash may cost being what that setting accepts.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from sharedq.log import RecordType


class Request(Enum):
    """A CQS change: its tag in the log payload and its record type."""

    PUT = ("put", RecordType.PUT)
    STAGE = ("stage", RecordType.PUT)
    READ = ("read", RecordType.READ)
    MOVE_STEP = ("move-step", RecordType.MOVE)
    MOVE = ("move", RecordType.MOVE)
    UNLOCK = ("unlock", RecordType.UNLOCK)
    COLD = ("cold", RecordType.MOVE)
    DELETE_STEP = ("delete-step", RecordType.DELETE)
    DELETE = ("delete", RecordType.DELETE)

    @property
    def tag(self) -> str:
        return self.value[0]

    @property
    def record_type(self) -> RecordType:
        return self.value[1]

    @property
    def ends_operation(self) -> bool:
        return self not in _STEPS

    @property
    def learns_facts(self) -> bool:
        return True


#: The first steps of a request of several: the log syncs after the last one only.
_STEPS = frozenset({Request.STAGE, Request.MOVE_STEP, Request.DELETE_STEP})


@dataclass(frozen=True)
class Unsynced:
    """A request's meaning when the log syncs on its own clock (interval durability):
    the same record, but the request does not wait for the disk."""

    request: Request

    @property
    def tag(self) -> str:
        return self.request.tag

    @property
    def record_type(self) -> RecordType:
        return self.request.record_type

    @property
    def ends_operation(self) -> bool:
        return False

    @property
    def learns_facts(self) -> bool:
        return True


#: One :class:`Unsynced` per request, made once: the log journal keeps what a meaning
#: becomes (record type, packed payload) by the meaning object, so that a new one per
#: request would be worked out again each time.
UNSYNCED: dict[Request, Unsynced] = {request: Unsynced(request) for request in Request}


class Sync(Enum):
    """Which requests wait for the log's sync before they return (``CQS(sync=...)``).

    ``EVERY_REQUEST`` (the default, strict): every request's records are on the disk
    before it returns, a read's too: a read whose record a machine crash lost, with the
    structure lost as well, would leave its message ready again, which an emergency
    restart would have deleted (a unit the client completed) and a cold start parked
    on the cold queue (docs/cqs.md, "Why a read still waits").  ``PUTS``: only a put
    waits; a read's, move's, unlock's or delete's records are written to the operating
    system at once and reach the disk with the next sync of the stream (the next
    put's, a checkpoint's, the disconnect's).
    Only a put's record lost can lose a message; the others lost in a machine crash
    that also loses the structure make a recovery put the message back where it was
    before that request: delivered again, never lost (docs/cqs.md, "Durability").
    """

    EVERY_REQUEST = "every-request"
    PUTS = "puts"

    @property
    def waits(self) -> frozenset[Request]:
        """The requests whose records are synced before they return."""
        if self is Sync.PUTS:
            return frozenset({Request.PUT})
        return frozenset(Request)


#: The key of the CQS's words in its log records' payloads.
PAYLOAD_KEY = "cqs"
