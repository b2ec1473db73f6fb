"""What get and browse share: a get's options, and what becomes of a message taken.

A get (:mod:`sharedq.mq.operations`) and a get under a browse cursor
(:mod:`sharedq.mq.browse`) differ in how they choose the message they move to the
manager's get list; from there on they are one: a message found expired goes to the
manager's expiry list (expire last message), one the caller cannot take whole goes
back (backout last message), one gotten out of syncpoint is deleted (sync last
message), and one gotten in a unit of work is recorded in it (§5.6, §5.8, §5.14-§5.15).
"""

from __future__ import annotations

import logging

from sharedq.cf import ById, CFError, ListEntry
from sharedq.mq import arguments, syncpoint, undo
from sharedq.mq import messages as m
from sharedq.mq.core import ManagerCore
from sharedq.mq.definitions import IndexType, QueueDefinition, QueueState
from sharedq.mq.errors import JournalFailed, MQReason, from_cf, mq_error
from sharedq.mq.journal import ChangeKind
from sharedq.mq.units import Trop, TropKind, Trqs, UnitState
from sharedq.seam.access import tolerating

logger = logging.getLogger("sharedq.mq")


class GetRequest:
    """A get's options, checked once."""

    __slots__ = (
        "accept_truncated",
        "both",
        "correl_id",
        "if_persistent",
        "index_key",
        "max_length",
        "msg_id",
        "uow",
    )

    def __init__(
        self,
        queue: QueueState,
        uow: UnitState | None,
        msg_id: bytes | None,
        correl_id: bytes | None,
        max_length: int | None,
        accept_truncated: bool,
        if_persistent: bool,
    ) -> None:
        self.uow = uow
        self.max_length = max_length
        if accept_truncated.__class__ is not bool or if_persistent.__class__ is not bool:
            for flag, what in (
                (accept_truncated, "accept_truncated"),
                (if_persistent, "if_persistent"),
            ):
                arguments.check_bool(flag, what)  # "no" is truthy: it must not cut a message
        self.accept_truncated = accept_truncated
        self.if_persistent = if_persistent
        if msg_id is None and correl_id is None and max_length is None:
            # The common get: first in order, whole message.  Nothing else to check.
            self.msg_id = self.correl_id = self.index_key = None
            self.both = False
            return
        self.msg_id = _selector(m.check_id(msg_id, "msg_id", MQReason.MSG_ID_ERROR))
        self.correl_id = _selector(m.check_id(correl_id, "correl_id", MQReason.CORREL_ID_ERROR))
        if max_length is not None and (type(max_length) is not int or max_length < 0):
            raise mq_error(MQReason.BAD_ARGUMENT, f"max_length {max_length!r} is not valid")
        self.both = self.msg_id is not None and self.correl_id is not None
        self.index_key = self.index_key_for(queue)

    def index_key_for(self, queue: QueueState) -> bytes | None:
        """The secondary key to look up, checking the queue's index (MQRC 2206/2207)."""
        if self.msg_id is None and self.correl_id is None:
            return None
        index = queue.index
        if index is IndexType.MSG_ID and self.msg_id is not None:
            return self.msg_id
        if index is IndexType.CORREL_ID and self.correl_id is not None:
            return self.correl_id
        if self.msg_id is not None and (self.correl_id is None or index is IndexType.NONE):
            raise mq_error(
                MQReason.MSG_ID_ERROR,
                f"queue {queue.name} is not indexed by message id (index: {index.value})",
            )
        raise mq_error(
            MQReason.CORREL_ID_ERROR,
            f"queue {queue.name} is not indexed by correlation id (index: {index.value})",
        )


#: An enum member as a global (cheaper to read than from its class: every get).
_GET_OP = TropKind.GET


def _selector(value: bytes | None) -> bytes | None:
    """An all-zero id selects nothing, as MQMI_NONE and MQCI_NONE do."""
    return None if value is None or value == m.NO_ID else value


def revalidated(queue: QueueState) -> QueueDefinition:
    try:
        return queue.revalidate()
    except CFError as error:
        raise from_cf(error, f"re-read {queue.name}") from error


def check_get_allowed(queue: QueueState) -> None:
    if queue.definition.get_inhibited and revalidated(queue).get_inhibited:
        raise mq_error(MQReason.GET_INHIBITED, f"gets are inhibited on queue {queue.name}")


def took(
    core: ManagerCore,
    queue: QueueState,
    request: GetRequest,
    entry: ListEntry,
    *,
    gone: bool = False,
) -> m.Message | None:
    """A committed message is on our get list: expire, refuse, sync or keep it.

    ``gone``: the request that moved it deleted it too (a get out of syncpoint without a
    recovery log, and with no length to check, is one ``take``): it is synced already,
    and one found expired is written to the expiry list, where a move would have put it.
    """
    if request.max_length is None and (
        gone or (request.uow is not None and not request.if_persistent)
    ):
        return took_whole(core, queue, request, entry, gone, None)  # the common gets
    header = m.Decoded(entry.data)
    # header.expired(now), with the clock read only for a message that can expire.
    expires_at = header.expires_at
    if expires_at is not None and core.clock.now_s() >= expires_at:
        _expired(queue, request, entry, header, gone)
        return None
    if gone:
        return m.to_message(entry.data, entry.version, entry.entry_id, header=header)
    return _took_live(queue, request, entry, header)


def _expired(
    queue: QueueState, request: GetRequest, entry: ListEntry, header: m.Decoded, gone: bool
) -> None:
    """What :func:`took` does with a message it found expired."""
    if gone:
        _expired_after_take(queue, entry, header)
    else:
        uow = request.uow
        try:
            syncpoint.expire_last(
                queue.acc,
                entry.entry_id,
                queue.get_list,
                queue.expiry_list,
                queue.name,
                header.persistent,
                header.msg_id,
            )
        except JournalFailed:
            # Not logged: the message goes back to its queue (the next get expires it
            # again) and this get fails.  If the structure refuses that, it stays expired.
            uow_id = uow.uow_id if uow is not None else None
            back = undo.return_get(
                queue, entry.entry_id, queue.expiry_list, uow_id, header.persistent, header.msg_id
            )
            if back is undo.Undo.DONE:
                raise


def _took_live(
    queue: QueueState, request: GetRequest, entry: ListEntry, header: m.Decoded
) -> m.Message | None:
    """The rest of :func:`took`: a message not expired that the take left on the get
    list: refused (too long), kept in the unit of work, or deleted now."""
    uow = request.uow
    body_length = len(entry.data) - header.body_offset
    if (
        request.max_length is not None
        and body_length > request.max_length
        and (not request.accept_truncated)
    ):
        with tolerating() as failures:
            # The message goes back where it was, which is what Truncated promises, log
            # or no log: a log that lacks this has it on our get list, and a restart
            # returns it from there.
            syncpoint.backout_last(
                queue,
                entry.entry_id,
                uow.uow_id if uow is not None else None,
                header.persistent,
                header.msg_id,
            )
        if failures:
            logger.warning("backout of a truncated get from %s not logged", queue.name)
        raise mq_error(
            MQReason.TRUNCATED_MSG_FAILED,
            f"the message is {body_length} bytes, more than max_length {request.max_length}",
            data_length=body_length,
        )
    keep = uow is not None and (header.persistent or not request.if_persistent)
    if keep:
        assert uow is not None
        _keep_get(uow.trqs_for(queue), entry, header.persistent, header.msg_id, header.expires_at)
    message = m.to_message(
        entry.data,
        entry.version,
        entry.entry_id,
        max_length=request.max_length if request.accept_truncated else None,
        header=header,
    )
    if not keep:
        try:
            queue.acc.delete(
                ById(entry.entry_id, queue.get_list),
                kind=ChangeKind.SYNC_GET,
                queue=queue.name,
                persistent=header.persistent,
                msg_id=header.msg_id,
                data_wanted=False,
            )
        except JournalFailed as failure:
            # Not logged: the message is written back on its queue, as it was, and the
            # get fails.  If the structure refuses that, the get stands: the message is
            # gone from the structure, and only the application has it now.
            back = undo.rewrite(
                queue,
                entry,
                version=entry.version,
                kind=ChangeKind.BACKOUT_LAST,
                uow_id=None,
                persistent=header.persistent,
                msg_id=header.msg_id,
            )
            if back is undo.Undo.DONE:
                raise
            logger.warning("get from %s stands, unlogged: %s", queue.name, failure)
    return message


def took_whole(
    core: ManagerCore,
    queue: QueueState,
    request: GetRequest,
    entry: ListEntry,
    gone: bool,
    trqs: Trqs | None,
) -> m.Message | None:
    """:func:`took` for a request without ``max_length`` (a batch's), the common cases
    (not expired; deleted by the take, or kept in the unit of work, whose TRQS for the
    queue is ``trqs``) in one pass; the others as ``took`` has them."""
    message = m.whole_message(entry.data, entry.version, entry.entry_id)
    expiry = message.expiry
    if expiry is not None and core.clock.now_s() >= message.put_time + expiry:
        _expired(queue, request, entry, m.Decoded(entry.data), gone)
        return None
    if gone:
        return message
    uow = request.uow
    if uow is None or not (message.persistent or not request.if_persistent):
        return _took_live(queue, request, entry, m.Decoded(entry.data))  # deleted now
    if trqs is None:
        trqs = uow.trqs_for(queue)
    _keep_get(
        trqs,
        entry,
        message.persistent,
        message.msg_id,
        None if expiry is None else message.put_time + expiry,
    )
    return message


def _keep_get(
    trqs: Trqs, entry: ListEntry, persistent: bool, msg_id: bytes, expires_at: float | None
) -> None:
    """A get the unit of work keeps: its TROP, to delete the message at commit."""
    trqs.add(Trop(_GET_OP, entry.entry_id, entry.key, persistent, msg_id, None, expires_at, trqs))


def own_get(
    core: ManagerCore, queue: QueueState, request: GetRequest, trop: Trop
) -> m.Message | None:
    """Return the unit's own uncommitted put (read by id, gap O5); it stays put."""
    entry = queue.acc.read(ById(trop.entry_id, queue.put_list))
    assert entry is not None
    header = m.Decoded(entry.data)
    trop.trqs.take_own(trop)
    if header.expired(core.clock.now_s()):
        return None  # discarded within the unit: commit and backout both delete it
    body_length = len(entry.data) - header.body_offset
    if (
        request.max_length is not None
        and body_length > request.max_length
        and (not request.accept_truncated)
    ):
        trop.trqs.give_back_own(trop)
        raise mq_error(
            MQReason.TRUNCATED_MSG_FAILED,
            f"the message is {body_length} bytes, more than max_length {request.max_length}",
            data_length=body_length,
        )
    return m.to_message(
        entry.data,
        0,
        trop.entry_id,
        max_length=request.max_length if request.accept_truncated else None,
        header=header,
    )


def _expired_after_take(queue: QueueState, entry: ListEntry, header: m.Decoded) -> None:
    """An expired message a take deleted: written to the expiry list as it was (the
    move expire last message makes), or, if the structure refuses, gone a little early."""
    try:
        queue.acc.write(
            queue.expiry_list,
            entry.key,
            entry.data,
            adjunct=entry.adjunct,
            secondary_key=entry.secondary_key,
            entry_id=entry.entry_id,
            version=entry.version,
            ignore_limit=True,
            kind=ChangeKind.EXPIRE,
            queue=queue.name,
            persistent=header.persistent,
            msg_id=header.msg_id,
        )
    except CFError as error:
        logger.warning("expired message from %s not kept on the expiry list: %s", queue.name, error)
