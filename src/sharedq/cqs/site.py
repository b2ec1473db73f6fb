"""One structure as a CQS uses it: its access, its layout, and whose locks are whose.

The request functions (:mod:`sharedq.cqs.requests`) take a :class:`Site` rather than
the server: everything a request needs is here, typed, and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from sharedq.clock import Clock
from sharedq.cqs.layout import Kind, Layout
from sharedq.cqs.uow import TokenSource
from sharedq.seam.access import StructureAccess


@dataclass(frozen=True)
class Site:
    """A CQS's connection to one structure (the primary of a pair).

    ``owner``: the secondary key its locked messages carry on the lock queue (the
    CQS's name), so that a lock token can be checked to be this CQS's.
    ``system``: the client's system id (IMSID), for generated staging names.
    """

    acc: StructureAccess
    layout: Layout
    owner: bytes
    system: str
    clock: Clock
    tokens: TokenSource

    @property
    def kind(self) -> Kind:
        return self.layout.kind


@dataclass(frozen=True, slots=True)
class LockToken:
    """What names a message this CQS holds on the lock queue (from a read or a local
    put): the structure pair's kind, the queue's name and the entry's id."""

    kind: Kind
    queue: bytes
    entry_id: bytes
