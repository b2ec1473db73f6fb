"""Browse and get under cursor (§5.7, §5.8).

A browse reads without removing.  Browse-first reads the head of the put list;
browse-next reads the first entry whose key is at least the cursor token (the last
browsed message's committed key) with its low four bytes set to X'00000001', that is
the next message after it, whether or not the one browsed before is still there.
An uncommitted entry or the LHQC ends the browse: "no message available" (p[178]).
Messages past their expiry are passed over.

Get under cursor moves the message whose key equals the cursor to the manager's get
list, if it is still there (gap O1: the patent's text repeats browse-first here).

A browse by message or correlation id (on a queue indexed by it) follows the same
order among the messages with that secondary key.
"""

from __future__ import annotations

from collections.abc import Iterator

from sharedq.cf import ByKey, BySecondaryKey, CFError, Compare, ListEntry
from sharedq.mq import depth_events, keys, undo
from sharedq.mq import messages as m
from sharedq.mq.core import ManagerCore
from sharedq.mq.definitions import QueueState
from sharedq.mq.errors import JournalFailed, MQReason, NoMessageAvailable, from_cf, mq_error
from sharedq.mq.getting import GetRequest, check_get_allowed, took
from sharedq.mq.journal import ChangeKind
from sharedq.mq.units import UnitState


class Browser:
    """A browse cursor on one queue.

    ``first()`` and ``next()`` return the message under the cursor after moving it, or
    raise ``NoMessageAvailable``; iterating yields every message from the first on.
    ``token`` is the cursor: the committed key of the message last browsed.
    """

    def __init__(
        self,
        core: ManagerCore,
        queue: QueueState,
        *,
        msg_id: bytes | None = None,
        correl_id: bytes | None = None,
        may_get: bool = True,
    ) -> None:
        self._core = core
        self._queue = queue
        #: Whether its queue handle was opened for get too (get under cursor).
        self._may_get = may_get
        self._select = GetRequest(queue, None, msg_id, correl_id, None, False, False)
        self.token: bytes | None = None

    def __repr__(self) -> str:
        cursor = self.token.hex() if self.token else "-"
        return f"<Browser {self._queue.name} cursor={cursor}>"

    def first(self) -> m.Message:
        """Browse the first message in priority and put-time order."""
        return self._browse(None)

    def next(self) -> m.Message:
        """Browse the message after the cursor (the first if nothing was browsed yet)."""
        return self._browse(self.token)

    def __iter__(self) -> Iterator[m.Message]:
        try:
            message = self.first()
            while True:
                yield message
                message = self.next()
        except NoMessageAvailable:
            return

    def get(
        self,
        *,
        uow: UnitState | None = None,
        max_length: int | None = None,
        accept_truncated: bool = False,
    ) -> m.Message:
        """Get, destructively, the message under the cursor, if it is still there."""
        if not self._may_get:
            raise mq_error(
                MQReason.NOT_OPEN_FOR_INPUT,
                f"queue {self._queue.name} was not opened for get (open it with OpenFor.GET)",
            )
        if self.token is None:
            raise mq_error(MQReason.NO_MSG_AVAILABLE, "nothing has been browsed yet")
        core, queue = self._core, self._queue
        if uow is not None:
            core.check_unit(uow)
        request = GetRequest(queue, uow, None, None, max_length, accept_truncated, False)
        self._fresh()
        try:
            change = queue.acc.move(
                ByKey(queue.put_list, self.token, Compare.EQ),
                queue.get_list,
                expect_authority=queue.authority,
                kind=ChangeKind.GET,
                queue=queue.name,
                uow=uow.uow_id if uow is not None else None,
            )
            if change is not None:
                depth_events.after_get(core, queue, change.entries)
                message = took(core, queue, request, change.entry)
                if message is not None:
                    return message
        except CFError as error:
            raise from_cf(error, f"get under cursor from {queue.name}") from error
        except JournalFailed as failure:
            if failure.meaning is ChangeKind.GET:
                undo.take_back(queue, failure, uow)
            raise
        raise mq_error(
            MQReason.NO_MSG_AVAILABLE, "the message under the cursor is no longer on the queue"
        )

    # -- the reads --------------------------------------------------------------------------

    def _fresh(self) -> None:
        """Re-read the definition if it changed (a browse passes no authority)."""
        queue = self._queue
        try:
            queue.revalidate()
        except CFError as error:
            raise from_cf(error, f"browse {queue.name}") from error
        check_get_allowed(queue)

    def _browse(self, after: bytes | None) -> m.Message:
        self._fresh()
        queue = self._queue
        now = self._core.clock.now_s()
        try:
            for entry in self._candidates(after):
                if not keys.is_committed(entry.key):
                    break
                header = m.Decoded(entry.data)
                if header.expired(now):
                    continue
                self.token = entry.key
                return m.to_message(entry.data, entry.version, b"", header=header)
        except CFError as error:
            raise from_cf(error, f"browse {queue.name}") from error
        raise mq_error(MQReason.NO_MSG_AVAILABLE, f"no more messages to browse on {queue.name}")

    def _candidates(self, after: bytes | None) -> Iterator[ListEntry]:
        """Entries from the cursor on, in list order; the first is read directly."""
        queue = self._queue
        acc = queue.acc
        select = self._select
        low = keys.COMMITTED_LOW if after is None else keys.browse_next_key(after)
        if select.index_key is None:
            while True:
                entry = acc.read(ByKey(queue.put_list, low, Compare.GE))
                if entry is None:
                    return
                yield entry
                low = keys.browse_next_key(entry.key)
        if after is None and not select.both:
            first = acc.read(BySecondaryKey(queue.put_list, select.index_key))
            if first is None:
                return
            yield first
            low = keys.browse_next_key(first.key)
        for entry in acc.scan(queue.put_list, low, keys.COMMITTED_HIGH):
            if entry.secondary_key != select.index_key:
                continue
            if select.both:
                _, msg_id, correl_id = m.decode_adjunct(entry.adjunct, entry.entry_id)
                if msg_id != select.msg_id or correl_id != select.correl_id:
                    continue
            yield entry
