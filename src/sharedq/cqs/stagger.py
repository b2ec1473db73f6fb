"""Telling one client first (beyond the seed): a burst of one message wakes one system.

With the seed's notification every registered CQS tells its client at once when a
queue goes from empty to non-empty, and all but one of the clients that schedule for
it find it empty again.  With ``stagger_s`` set, the CQSs connected to the structure
take turns by queue: for queue ``q`` the users of the structure, in user-id order,
are ranked from ``crc32(q) mod n``; the first tells its client at once, the one ranked
``r`` only after ``r * stagger_s`` seconds, and not at all if the queue went empty
again meanwhile (its monitor also reports going empty).  One message is then read by
the first system's client and the others are never woken; a queue that stays
non-empty (a burst the first cannot drain) still reaches the others, one step later
each.

Decision: the turn is computed from the structure's user list (one request per
event), so every CQS agrees on it without talking to the others; a user that is not
registered on the queue still takes a turn, which costs latency (``stagger_s``), not
messages.
"""

from __future__ import annotations

import time
import zlib

from sharedq.cf import CFError
from sharedq.cf.types import UserState
from sharedq.cqs.errors import CQSReason, cqs_error
from sharedq.cqs.layout import Kind
from sharedq.cqs.notify import STOP_CHECK_S, Listener, Work, WorkCallback
from sharedq.seam.access import StructureAccess

#: The longest turn, in seconds.
MAX_STAGGER_S = 3600.0


def check_stagger(value: object) -> float | None:
    """``stagger_s`` as given, if ``None`` or a number of seconds above 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise cqs_error(CQSReason.BAD_ARGUMENT, f"stagger_s {value!r} is not a number")
    if not 0 < value <= MAX_STAGGER_S:
        raise cqs_error(CQSReason.BAD_ARGUMENT, f"stagger_s {value!r}: 0 to 3600 seconds")
    return float(value)


class StaggeredListener(Listener):
    """A :class:`Listener` that tells its client in its turn (see the module)."""

    def __init__(
        self,
        acc: StructureAccess,
        kind: Kind,
        callback: WorkCallback | None,
        work: Work,
        stagger_s: float,
    ) -> None:
        self._stagger_s = stagger_s
        #: Queues whose notification waits for its turn: queue -> monotonic deadline.
        self._deferred: dict[bytes, float] = {}
        super().__init__(acc, kind, callback, work)

    def rank(self, queue: bytes) -> int:
        """This CQS's turn for ``queue``: 0 tells at once."""
        try:
            users = sorted(u.user_id for u in self._acc.users() if u.state is UserState.ACTIVE)
        except CFError:
            return 0  # tell rather than risk never telling
        me = self._acc.user_id
        if me not in users:
            return 0
        start = zlib.crc32(queue) % len(users)
        return (users.index(me) - start) % len(users)

    def _timeout(self) -> float:
        if not self._deferred:
            return STOP_CHECK_S
        wait = min(self._deferred.values()) - time.monotonic()
        return max(0.0, min(STOP_CHECK_S, wait))

    def _nonempty(self, queue: bytes) -> None:
        turn = self.rank(queue)
        if turn == 0:
            self.tell(queue)
        else:
            self._deferred[queue] = time.monotonic() + turn * self._stagger_s

    def _empty(self, queue: bytes) -> None:
        if self._deferred.pop(queue, None) is not None:
            self.spared += 1

    def _due(self) -> None:
        now = time.monotonic()
        for queue, deadline in list(self._deferred.items()):
            if deadline <= now:
                del self._deferred[queue]
                self.tell(queue)
