"""What a read or browse returns: a whole message, all its parts joined."""

from __future__ import annotations

from dataclasses import dataclass

from sharedq.cqs.site import LockToken
from sharedq.cqs.uow import Uow


@dataclass(frozen=True)
class Message:
    """A message as the client put it.

    ``parts``: the parts as put (one for a one-part message); ``body`` them joined.
    ``token``: for a read, the lock the reader holds (to delete, unlock or move it);
    ``None`` for a browse.  ``put_us``: when it was put, microseconds since 1970.
    """

    queue: bytes
    parts: tuple[bytes, ...]
    uow: Uow
    put_us: int
    recoverable: bool
    entry_id: bytes
    token: LockToken | None = None

    @property
    def body(self) -> bytes:
        return b"".join(self.parts)


@dataclass(frozen=True)
class QueueCounts:
    """CQSQUERY for one queue: messages ready, messages locked, age of the oldest ready."""

    queue: bytes
    ready: int
    locked: int
    oldest_age_s: float | None
