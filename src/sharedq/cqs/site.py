"""One structure as a CQS uses it: its access, its layout, and whose locks are whose.

The request functions (:mod:`sharedq.cqs.requests`) take a :class:`Site` rather than
the server: everything a request needs is here, typed, and nothing else.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from sharedq.clock import Clock
from sharedq.cqs.journal import UNSYNCED, Request, Unsynced
from sharedq.cqs.layout import Kind, Layout
from sharedq.cqs.uow import TokenSource
from sharedq.seam.access import StructureAccess


@dataclass(frozen=True)
class Site:
    """A CQS's connection to one structure (the primary of a pair).

    ``owner``: the secondary key its locked messages carry on the lock queue (the
    CQS's name), so that a lock token can be checked to be this CQS's.
    ``system``: the client's system id (IMSID), for generated staging names.
    ``lock_version``: the version its locked messages carry (:func:`lock_version`):
    unlock, delete and move of a lock are conditioned on it, so that the check that
    the lock is this CQS's and the change are one atomic request.
    """

    acc: StructureAccess
    layout: Layout
    owner: bytes
    system: str
    clock: Clock
    tokens: TokenSource
    lock_version: int
    #: The requests that wait for the log's sync: all (the default), only puts
    #: (``Sync.PUTS``), or none (interval durability).
    synced: frozenset[Request] = frozenset(Request)

    def means(self, request: Request) -> Request | Unsynced:
        """What a request's change means to the log (see :mod:`sharedq.cqs.journal`)."""
        return request if request in self.synced else UNSYNCED[request]

    @property
    def kind(self) -> Kind:
        return self.layout.kind


def lock_version(owner: bytes) -> int:
    """The version a CQS's locked messages carry: 8 bytes of a hash of its name (never
    0, the version of a message not locked)."""
    return int.from_bytes(hashlib.sha256(owner).digest()[:8], "big") or 1


@dataclass(frozen=True, slots=True)
class LockToken:
    """What names a message this CQS holds on the lock queue (from a read or a local
    put): the structure pair's kind, the queue's name and the entry's id; ``staged``:
    the message has parts on a staging queue (a delete then goes through the delete
    queue; a one-part message is deleted in one request)."""

    kind: Kind
    queue: bytes
    entry_id: bytes
    staged: bool = False
