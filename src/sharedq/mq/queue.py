"""An open shared queue: the handle applications put to, get from and browse."""

from __future__ import annotations

from sharedq.cf import CFError
from sharedq.mq import operations
from sharedq.mq.browse import Browser
from sharedq.mq.core import ManagerCore
from sharedq.mq.definitions import QueueDefinition, QueueState
from sharedq.mq.errors import from_cf
from sharedq.mq.getting import GetRequest
from sharedq.mq.messages import Message
from sharedq.mq.units import UnitState


class Queue:
    """A shared queue opened on one queue manager.

    ``uow=None`` means out of syncpoint: a put is visible at once, a get is final at
    once.  Pass a :class:`UnitOfWork` to put or get within it.
    """

    def __init__(self, core: ManagerCore, state: QueueState) -> None:
        self._core = core
        self._state = state

    def __repr__(self) -> str:
        return f"<Queue {self.name!r} on {self._core.name} structure={self._state.acc.name}>"

    @property
    def name(self) -> str:
        return self._state.name

    @property
    def definition(self) -> QueueDefinition:
        """The definition as this manager last read it."""
        return self._state.definition

    def put(
        self,
        body: bytes,
        *,
        uow: UnitState | None = None,
        priority: int | None = None,
        persistent: bool | None = None,
        msg_id: bytes | None = None,
        correl_id: bytes | None = None,
        expiry: float | None = None,
    ) -> Message:
        """Put a message; returns it as put (with its generated message id).

        ``priority`` 0-9 (9 highest) and ``persistent`` default to the queue's
        defaults; ``expiry`` is a lifetime in seconds; ids are up to 24 bytes (padded
        with zeros) and a message id is generated when none is given.
        """
        self._core.check_open()
        return operations.put(
            self._core,
            self._state,
            body,
            priority=priority,
            persistent=persistent,
            msg_id=msg_id,
            correl_id=correl_id,
            expiry=expiry,
            uow=uow,
        )

    def get(
        self,
        *,
        uow: UnitState | None = None,
        wait: float | None = None,
        msg_id: bytes | None = None,
        correl_id: bytes | None = None,
        max_length: int | None = None,
        accept_truncated: bool = False,
        if_persistent: bool = False,
    ) -> Message:
        """Get the first message in priority and put-time order.

        ``wait`` seconds to wait for one (woken by a commit or backout that makes one
        available, not by polling).  ``msg_id``/``correl_id`` select by id (the queue
        must be indexed by it).  ``max_length`` with ``accept_truncated`` cuts a longer
        body; without it a longer message stays on the queue and ``Truncated`` (2080)
        says how long it is.  ``if_persistent`` (MQ's SYNCPOINT_IF_PERSISTENT): in
        ``uow`` only if the message is persistent, and of the unit's own puts only the
        persistent ones are candidates.  ``NoMessageAvailable`` (2033) if none.
        """
        self._core.check_open()
        request = GetRequest(
            self._state, uow, msg_id, correl_id, max_length, accept_truncated, if_persistent
        )
        return operations.get(self._core, self._state, request, wait)

    def browser(self, *, msg_id: bytes | None = None, correl_id: bytes | None = None) -> Browser:
        """A browse cursor; iterate it, or call ``first``/``next``/``get``."""
        self._core.check_open()
        return Browser(self._core, self._state, msg_id=msg_id, correl_id=correl_id)

    def depth(self) -> int:
        """Messages on the put list: committed and uncommitted puts (gap S7)."""
        self._core.check_open()
        try:
            return self._state.acc.list_info(self._state.put_list).entries - 1
        except CFError as error:
            raise from_cf(error, f"depth of {self.name}") from error
