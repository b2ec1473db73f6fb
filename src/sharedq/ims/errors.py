"""The IMS systems' reasons and exceptions (codes 5500-5999).

An IMS refuses a definition, a command or a terminal's input with an :class:`IMSError`
whose reason says why; the CQS errors underneath are translated at this layer's edge
(an input the shared queues cannot take is the seed's ``DFS070 UNABLE TO ROUTE
MESSAGE``: ``STRUCTURE_FULL``).  What an application program sees is not an exception
but a DL/I status code (:mod:`sharedq.ims.dli`).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from sharedq.errors import InvalidArgument, SharedqError


class IMSReason(IntEnum):
    """Why an IMS refused a definition, a command or an input."""

    BAD_ARGUMENT = 5501
    BAD_DEFINITION = 5502
    NO_PROGRAM = 5503
    UNKNOWN_DESTINATION = 5510
    UNKNOWN_NODE = 5511
    UNKNOWN_RESOURCE = 5512
    NODE_IN_SESSION = 5513
    NOT_IN_SESSION = 5514
    SIGNON_REJECTED = 5515
    LTERM_ACTIVE = 5516
    RESPONSE_MODE = 5517
    CONVERSATION_BUSY = 5518
    NO_CONVERSATION = 5519
    NOT_STARTED = 5520
    ALREADY_STARTED = 5521
    STRUCTURE_FULL = 5530
    QUEUE_ERROR = 5540
    CQS_UNAVAILABLE = 5541
    ROUTING_NOT_ACTIVE = 5550
    DATA_UNAVAILABLE = 5560


class IMSError(SharedqError):
    """An IMS refused a definition, a command or an input; ``reason`` says why."""


class InvalidIMSRequest(IMSError, InvalidArgument):
    """A bad definition or argument: refused before anything was changed."""


class U3303(IMSError):
    """Raised by a program whose data is unavailable: IMS abends it with U3303.  A
    serial transaction is USTOPped, another's message goes to the suspend queue.

    The one IMS exception an application raises rather than receives, so it takes
    only a detail; its reason is always ``DATA_UNAVAILABLE``.
    """

    def __init__(self, detail: str = "data unavailable", **context: Any) -> None:
        super().__init__(IMSReason.DATA_UNAVAILABLE, detail, **context)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_u3303, (self.detail, self.context))


def _rebuild_u3303(detail: str, context: dict[str, Any]) -> U3303:
    return U3303(detail, **context)


_BAD = {
    IMSReason.BAD_ARGUMENT,
    IMSReason.BAD_DEFINITION,
    IMSReason.NO_PROGRAM,
    IMSReason.UNKNOWN_DESTINATION,
    IMSReason.UNKNOWN_NODE,
    IMSReason.UNKNOWN_RESOURCE,
}


def ims_error(reason: IMSReason, detail: str = "", **context: Any) -> IMSError:
    """Build the exception of the right class for ``reason``."""
    cls = InvalidIMSRequest if reason in _BAD else IMSError
    return cls(reason, detail, **context)
