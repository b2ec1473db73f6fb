"""An open shared queue: the handle applications put to, get from and browse."""

from __future__ import annotations

from collections.abc import Sequence

from sharedq.cf import CFError
from sharedq.mq import batches, operations
from sharedq.mq.browse import Browser
from sharedq.mq.core import ManagerCore
from sharedq.mq.definitions import QueueDefinition, QueueState
from sharedq.mq.errors import MQReason, from_cf, mq_error
from sharedq.mq.getting import GetRequest
from sharedq.mq.messages import Message
from sharedq.mq.security import OpenFor
from sharedq.mq.units import UnitState


class Queue:
    """A shared queue opened on one queue manager.

    ``uow=None`` means out of syncpoint: a put is visible at once, a get is final at
    once.  Pass a :class:`UnitOfWork` to put or get within it.  The handle does only
    what it was opened for (``opened_for``); anything else is ``NotOpenFor``.
    """

    def __init__(
        self, core: ManagerCore, state: QueueState, opened_for: OpenFor = OpenFor.ALL
    ) -> None:
        self._core = core
        self._state = state
        self._opened_for = opened_for
        # Checked on every call: plain booleans, worked out once.
        self._may_put = OpenFor.PUT in opened_for
        self._may_get = OpenFor.GET in opened_for
        self._may_browse = OpenFor.BROWSE in opened_for

    def __repr__(self) -> str:
        return f"<Queue {self.name!r} on {self._core.name} structure={self._state.acc.name}>"

    @property
    def name(self) -> str:
        return self._state.name

    @property
    def opened_for(self) -> OpenFor:
        """What the handle may do (``QueueManager.open``'s ``intent``)."""
        return self._opened_for

    def _not_open_for(self, intent: OpenFor, reason: MQReason) -> Exception:
        return mq_error(
            reason,
            f"queue {self.name} was opened for {self._opened_for.describe()}, not "
            f"{intent.describe()} (open it with OpenFor.{intent.name})",
        )

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
        if self._core.closed:  # check_open(), called only when it raises (every put)
            self._core.check_open()
        if not self._may_put:
            raise self._not_open_for(OpenFor.PUT, MQReason.NOT_OPEN_FOR_OUTPUT)
        # By position, in operations.put's order.
        return operations.put(
            self._core, self._state, body, priority, persistent, msg_id, correl_id, expiry, uow
        )

    def put_many(
        self,
        bodies: Sequence[bytes],
        *,
        uow: UnitState | None = None,
        priority: int | None = None,
        persistent: bool | None = None,
        expiry: float | None = None,
    ) -> list[Message]:
        """Put 1 to 1,000 messages with one request (256 a request), all or none.

        Each is put as :meth:`put` puts it (a message id generated for each), in the
        order given; in ``uow`` they are uncommitted until it commits, out of syncpoint
        one more request commits the batch.  ``QueueFull`` (2053) if they do not all
        fit: none is put then.  With a recovery log, one request a message still (see
        :mod:`sharedq.mq.batches`).
        """
        self._core.check_open()
        if not self._may_put:
            raise self._not_open_for(OpenFor.PUT, MQReason.NOT_OPEN_FOR_OUTPUT)
        return batches.put_many(
            self._core,
            self._state,
            bodies,
            priority=priority,
            persistent=persistent,
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
        if self._core.closed:  # check_open(), called only when it raises (every get)
            self._core.check_open()
        if not self._may_get:
            raise self._not_open_for(OpenFor.GET, MQReason.NOT_OPEN_FOR_INPUT)
        request = GetRequest(
            self._state, uow, msg_id, correl_id, max_length, accept_truncated, if_persistent
        )
        return operations.get(self._core, self._state, request, wait)

    def get_many(
        self, count: int, *, uow: UnitState | None = None, wait: float | None = None
    ) -> list[Message]:
        """Get up to ``count`` messages (1 to 1,000) in one request; ``[]`` if none.

        The messages ``count`` gets would return, in the same order, each exactly as
        :meth:`get` returns it, in ``uow`` or out of syncpoint; the batch moves with
        one request to the structure instead of one a message (with a recovery log,
        one a message still: see :mod:`sharedq.mq.batches`).  ``wait`` seconds to wait
        for the first if none is available; then the batch holds what is there.
        """
        self._core.check_open()
        if not self._may_get:
            raise self._not_open_for(OpenFor.GET, MQReason.NOT_OPEN_FOR_INPUT)
        request = GetRequest(self._state, uow, None, None, None, False, False)
        return batches.get_many(self._core, self._state, request, count, wait)

    def browser(self, *, msg_id: bytes | None = None, correl_id: bytes | None = None) -> Browser:
        """A browse cursor; iterate it, or call ``first``/``next``/``get`` (``get`` needs
        the handle opened for get too)."""
        self._core.check_open()
        if not self._may_browse:
            raise self._not_open_for(OpenFor.BROWSE, MQReason.NOT_OPEN_FOR_BROWSE)
        return Browser(
            self._core, self._state, msg_id=msg_id, correl_id=correl_id, may_get=self._may_get
        )

    def depth(self) -> int:
        """Messages on the put list: committed and uncommitted puts (gap S7)."""
        self._core.check_open()
        try:
            return self._state.acc.list_info(self._state.put_list).entries - 1
        except CFError as error:
            raise from_cf(error, f"depth of {self.name}") from error
