"""Queue depth event messages: their queue, their format, and a reader.

Every manager that issues a depth event message puts it on the shared queue
``SYSTEM.ADMIN.PERFM.EVENT`` (MQ's performance event queue), defined in the
administrative structure by the first manager that needs it.  The message's
``correl_id`` is the event's CorrelId (the same 24 bytes in every message of one
event: spec QD-4, QD-5), and its body a msgpack map (docs/depth-events.md):

======================  ==========================================================
key                     value
======================  ==========================================================
``format``              ``"sharedq.depth-event/1"``
``event``               ``"high"``, ``"low"`` or ``"full"``
``qmgr``                the manager that issued this message
``queue``               the queue the event is about
``coordinator``         the manager that toggled the queue (the event's coordinator)
``correl_id``           the CorrelId again (24 bytes)
``time_since_reset_s``  seconds since the issuer's previous event message on the queue
``high_depth``          the highest depth the issuer saw in that window, or nil
``enqueues``            the issuer's puts in that window
``dequeues``            the issuer's gets in that window
``depth``               the queue's depth at the crossing, as the coordinator saw it
``max_depth``           the queue's maximum depth then
``issued_at_s``         when the issuer put the message (seconds since the epoch)
======================  ==========================================================

:func:`read_depth_event` decodes one (``sharedq.mq.read_depth_event``).
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from typing import Any

import msgpack

from sharedq.mq import messages as m
from sharedq.mq.errors import MQReason, mq_error

#: The queue every depth event message goes to.
EVENT_QUEUE = "SYSTEM.ADMIN.PERFM.EVENT"
#: Its maximum depth (an operator empties it; when full, event messages are dropped).
EVENT_QUEUE_MAX_DEPTH = 100_000
#: The value of the body's ``format`` key.
FORMAT = "sharedq.depth-event/1"
#: How a CorrelId starts.
CORREL_PREFIX = b"QDEV"

_EVENTS = ("high", "low", "full")


@dataclass(frozen=True)
class DepthEvent:
    """One depth event message, decoded: one manager's view of one event."""

    event: str
    qmgr: str
    queue: str
    coordinator: str
    correl_id: bytes
    time_since_reset_s: float
    high_depth: int | None
    enqueues: int
    dequeues: int
    depth: int
    max_depth: int
    issued_at_s: float

    @property
    def null(self) -> bool:
        """The issuer did nothing on the queue in its window (spec QD-6)."""
        return self.enqueues == 0 and self.dequeues == 0


def encode(event: DepthEvent) -> bytes:
    """The body of an event message."""
    value: dict[str, Any] = {"format": FORMAT, **event.__dict__}
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


def read_depth_event(message: m.Message | bytes) -> DepthEvent:
    """Decode a message from ``SYSTEM.ADMIN.PERFM.EVENT`` (or its body).

    ``InvalidArgument`` if it is not a depth event message of this format.
    """
    body = message.body if isinstance(message, m.Message) else message
    if not isinstance(body, bytes):
        raise mq_error(MQReason.BAD_ARGUMENT, f"{message!r} is not a message or its body")
    try:
        value = msgpack.unpackb(body, raw=False)
    except Exception as error:
        raise mq_error(MQReason.BAD_ARGUMENT, f"not a depth event message: {error}") from None
    if not isinstance(value, dict) or value.pop("format", None) != FORMAT:
        raise mq_error(MQReason.BAD_ARGUMENT, f"not a depth event message (format {FORMAT})")
    try:
        event = DepthEvent(**value)
    except TypeError as error:
        raise mq_error(MQReason.BAD_ARGUMENT, f"a damaged depth event message: {error}") from None
    if event.event not in _EVENTS or len(event.correl_id) != m.ID_LENGTH:
        raise mq_error(MQReason.BAD_ARGUMENT, f"a damaged depth event message: {value!r}")
    return event


class CorrelIds:
    """A manager's CorrelIds for the events it coordinates: unique in the group.

    24 bytes: ``QDEV``, the manager id (1 byte), the stamp of the event (8 bytes: the
    time of day in microseconds, made unique per manager), the incarnation nonce (3
    bytes), a counter (4 bytes), then 4 zero bytes.
    """

    def __init__(self, qm_id: int, nonce: bytes) -> None:
        self._head = CORREL_PREFIX + bytes((qm_id,))
        self._nonce = nonce
        self._counter = itertools.count(1)
        self._lock = threading.Lock()

    def new(self, stamp: int) -> bytes:
        with self._lock:
            count = next(self._counter) & 0xFFFFFFFF
        correl = self._head + stamp.to_bytes(8, "big") + self._nonce + count.to_bytes(4, "big")
        return correl.ljust(m.ID_LENGTH, b"\x00")
