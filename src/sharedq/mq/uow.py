"""The application's unit of work: puts and gets that commit or back out together.

What a unit tracks (its TRQS and TROPs, its status, its descriptors) is
:class:`~sharedq.mq.units.UnitState`; :class:`UnitOfWork` adds what an application
does with it, each handed to :mod:`sharedq.mq.syncpoint`, which owns commit, backout and
prepare.
"""

from __future__ import annotations

from types import TracebackType

from sharedq.mq import syncpoint
from sharedq.mq.core import ManagerCore
from sharedq.mq.errors import MQReason, mq_error
from sharedq.mq.messages import Message
from sharedq.mq.units import Trop, TropKind, Trqs, UnitState, UowState

__all__ = ["Trop", "TropKind", "Trqs", "UnitOfWork", "UowState"]


class UnitOfWork(UnitState):
    """A unit of work: puts and gets that commit or back out together.

    Use it as a context manager: the block's end commits, an exception backs out (and
    propagates).  Only the thread that began it may use it.  After :meth:`prepare`,
    only :meth:`commit` or :meth:`backout` are allowed (two-phase commit with an
    external coordinator).

    If a get was marked with :meth:`mark_skip_backout`, a backout returns every other
    message, and that one stays gotten in a *new* unit of work, which this object
    then represents (:attr:`uow_id` changes); commit it to remove the message (after,
    typically, putting a copy on a dead-letter queue).
    """

    def __init__(self, core: ManagerCore, owner: int | None) -> None:
        UnitState.__init__(self, core.stamps, owner)  # not super(): one object less a unit
        self._core = core

    @property
    def manager_name(self) -> str:
        """The name of the queue manager the unit belongs to."""
        return self._core.name

    def commit(self) -> None:
        """Commit: puts become visible to every manager, gotten messages are removed."""
        self.check_usable(for_operation=False)
        syncpoint.commit(self._core, self)

    def backout(self) -> None:
        """Back out: puts vanish, gotten messages return to their place, count + 1."""
        self.check_usable(for_operation=False)
        syncpoint.backout(self._core, self)

    def prepare(self) -> None:
        """Phase 1 of two-phase commit: the outcome survives this manager's failure."""
        self.check_usable(for_operation=False)
        syncpoint.prepare(self._core, self)

    def mark_skip_backout(self, message: Message) -> None:
        """Keep this gotten message out of a backout (at most one per unit of work)."""
        self.check_usable(for_operation=True)
        syncpoint.mark_skip_backout(self, message.token)

    @property
    def active(self) -> bool:
        return self.state is not UowState.ENDED

    def __enter__(self) -> UnitOfWork:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.state is UowState.ENDED:
            if self.lost is not None and exc_type is None:
                raise mq_error(MQReason.BACKED_OUT, self.lost)
            return
        if exc_type is None:
            self.commit()
        elif isinstance(exc, Exception):
            self.backout()
        # A BaseException (KeyboardInterrupt, a simulated failure) leaves the unit as it
        # is: a dying process does not back out; recovery will.
