"""What a client system depends on of its CQS: one interface, two servers.

A :class:`~sharedq.cqs.CQS` in the client's process and a
:class:`~sharedq.cqs.remote.RemoteCQS` talking to a CQS in a process of its own
(:mod:`sharedq.cqs.serve_socket`) both satisfy :class:`CQSService`, so an IMS (or any
subsystem) is written once against the requests and works with either (issue 17).
When the server is gone, each request is refused with ``NOT_CONNECTED`` by both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, Protocol, runtime_checkable

from sharedq.cf import StructureStats
from sharedq.clock import Clock
from sharedq.cqs.layout import Kind
from sharedq.cqs.message import Message, QueueCounts
from sharedq.cqs.notify import WorkCallback
from sharedq.cqs.pair import StructurePair
from sharedq.cqs.resync import Resynced
from sharedq.cqs.site import LockToken
from sharedq.cqs.uow import TokenSource, Uow


@runtime_checkable
class CQSService(Protocol):
    """The public requests of a Common Queue Server, wherever it runs."""

    name: str
    system: str
    pairs: dict[Kind, StructurePair]
    clock: Clock
    tokens: TokenSource
    #: Called with ``(kind, queue)`` when a registered queue gets work; set before the
    #: first registration.
    on_work: WorkCallback | None

    def connect(self) -> CQSService: ...

    def disconnect(self) -> None: ...

    def stop_dead(self) -> None: ...

    def register(self, queue: object, *, kind: Kind = Kind.MSGQ) -> bool: ...

    def deregister(self, queue: object, *, kind: Kind = Kind.MSGQ) -> None: ...

    def registered(self) -> list[tuple[Kind, bytes]]: ...

    def notifications(self) -> dict[str, int]: ...

    def wait_for_work(self, timeout: float | None = None) -> tuple[Kind, bytes] | None: ...

    def new_uow(self) -> Uow: ...

    def put(
        self,
        queue: object,
        body: bytes | Sequence[bytes],
        *,
        kind: Kind = Kind.MSGQ,
        uow: Uow | bytes | None = None,
        recoverable: bool = True,
        local: bool = False,
    ) -> LockToken | bytes: ...

    def read(self, queue: object, *, kind: Kind = Kind.MSGQ) -> Message | None: ...

    def browse(
        self, queue: object, *, kind: Kind = Kind.MSGQ, limit: int | None = None
    ) -> list[Message]: ...

    def browse_locked(self, token: LockToken) -> Message: ...

    def move(
        self, source: LockToken | object, to_queue: object, *, kind: Kind = Kind.MSGQ
    ) -> bytes | None: ...

    def delete(self, token: LockToken) -> None: ...

    def unlock(
        self,
        token: LockToken,
        *,
        first: bool = True,
        to_queue: object = None,
        force: bool = False,
    ) -> None: ...

    def resync(self, done: Iterable[Uow | bytes] = (), *, kind: Kind = Kind.MSGQ) -> Resynced: ...

    def cold_start_client(self, *, kind: Kind = Kind.MSGQ) -> list[Message]: ...

    def cold_queue(self, *, kind: Kind = Kind.MSGQ) -> list[Message]: ...

    def locks(self, *, kind: Kind = Kind.MSGQ, owner: str | None = None) -> list[LockToken]: ...

    def query(self, queues: Iterable[object], *, kind: Kind = Kind.MSGQ) -> list[QueueCounts]: ...

    def statistics(self, *, kind: Kind = Kind.MSGQ) -> StructureStats: ...

    def display_overflowq(self, *, kind: Kind = Kind.MSGQ) -> dict[str, object]: ...

    def checkpoint(self, scope: Literal["system", "structure"] = "system") -> None: ...
