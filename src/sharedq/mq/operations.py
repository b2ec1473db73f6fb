"""Put and get (§5.2-§5.6, §5.9, §5.10).

Put.  Every put is written with its uncommitted key first.  In syncpoint it stays so
until commit; out of syncpoint *sync last message* gives it its committed key (and its
secondary key on an indexed queue) at once: the two-phase put of §5.3.  Both changes
are made by one request, ``write_and_rekey`` (one round trip), so the put happens
entirely or not at all; with a recovery log they are two requests, each logged before
the next (a committed message must never exist unlogged), and with a fault hook too, so
that a test can stop the manager between them.

Get.  A get moves the head of the put list to the manager's get list, on condition
that the head's key is at most the *best key*: X'0A00..' (committed messages only),
or, in syncpoint, the committed form of the unit's own best uncommitted put, so that a
unit gets its own puts where they would stand once committed (Example 1).  If the
head does not qualify and the unit has such a put, the get returns that put: its entry
stays where it is, and its TROP says get.  Out of syncpoint, sync last message deletes
the message from the get list.  A message found expired goes to the manager's expiry
list (expire last message) and the get goes on; one that does not fit the caller's
``max_length`` when truncation is not accepted goes back (backout last message).

Every put and get passes the list authority the queue's definition was read under;
a mismatch means the definition changed: re-read it, re-check, retry.

A change the recovery log could not record is undone before the error is raised
(:mod:`sharedq.mq.undo`): the put's entry is deleted, the get's message goes back.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import TYPE_CHECKING

from sharedq.cf import (
    UNCHANGED,
    AuthorityMismatch,
    ById,
    BySecondaryKey,
    CFError,
    EntryExists,
    Head,
    ListEntry,
    ListFull,
    ListMismatch,
    MonitorSpec,
    NoSuchEntry,
)
from sharedq.mq import keys, syncpoint, undo
from sharedq.mq import messages as m
from sharedq.mq.access import tolerating
from sharedq.mq.clock import stamp_seconds
from sharedq.mq.definitions import IndexType, QueueDefinition, QueueState
from sharedq.mq.errors import JournalFailed, MQError, MQReason, from_cf, mq_error
from sharedq.mq.journal import ChangeKind
from sharedq.mq.uow import Trop, TropKind, UnitOfWork

if TYPE_CHECKING:
    from sharedq.mq.manager import QueueManager

logger = logging.getLogger("sharedq.mq")

#: How long a get by both ids sleeps at a time while its sublist holds only other
#: messages (an event says only that a sublist went non-empty; see ``_wait``).
AMBIGUOUS_WAIT_SLICE = 0.25


def _check_put_allowed(queue: QueueState, length: int) -> None:
    definition = queue.definition
    if definition.put_inhibited and _revalidated(queue).put_inhibited:
        raise mq_error(MQReason.PUT_INHIBITED, f"puts are inhibited on queue {queue.name}")
    if length > queue.max_body:
        reason = (
            MQReason.MSG_TOO_BIG_FOR_Q
            if definition.max_message_length is not None and length > definition.max_message_length
            else MQReason.MSG_TOO_BIG_FOR_Q_MGR
        )
        raise mq_error(
            reason,
            f"{length}-byte message; queue {queue.name} takes at most {queue.max_body} bytes",
        )


def put(
    mgr: QueueManager,
    queue: QueueState,
    body: bytes,
    *,
    priority: int | None,
    persistent: bool | None,
    msg_id: bytes | None,
    correl_id: bytes | None,
    expiry: float | None,
    uow: UnitOfWork | None,
) -> m.Message:
    """Put a message; every argument is checked before anything is written."""
    if uow is not None:
        mgr._check_unit(uow)
    if type(body) is not bytes:
        if isinstance(body, bytes | bytearray | memoryview):
            body = bytes(body)
        else:
            raise mq_error(MQReason.BAD_ARGUMENT, f"a message body is bytes, not {type(body)}")
    definition = queue.definition
    if priority is None:
        priority = definition.default_priority
    elif type(priority) is not int or not 0 <= priority <= 9:
        raise mq_error(MQReason.PRIORITY_ERROR, f"priority {priority!r} must be 0..9")
    if persistent is None:
        persistent = definition.default_persistent
    elif not isinstance(persistent, bool):
        raise mq_error(MQReason.PERSISTENCE_ERROR, f"persistent {persistent!r} is not a bool")
    tenths = m.UNLIMITED if expiry is None else m.expiry_tenths(expiry)
    given_msg_id = None if msg_id is None else m.check_id(msg_id, "msg_id", MQReason.MD_ERROR)
    correl = (
        m.NO_ID
        if correl_id is None
        else m.check_id(correl_id, "correl_id", MQReason.MD_ERROR) or m.NO_ID
    )
    if definition.put_inhibited or len(body) > queue.max_body:
        _check_put_allowed(queue, len(body))

    stamps = mgr.stamps
    stamp = stamps.stamp()
    stamp_bytes = stamp.to_bytes(8, "big")
    if given_msg_id is None or given_msg_id == m.NO_ID:
        given_msg_id = mgr._msg_id_prefix + stamp_bytes + mgr._msg_id_suffix
    ident: bytes = given_msg_id
    entry_id = mgr._entry_id_prefix + stamp_bytes + stamps.nonce
    ukey = keys.uncommitted_key(priority, stamp, mgr.qm_id)
    data = m.encode(
        body, priority, persistent, ident, correl, stamp, tenths, mgr.qm_id, mgr._name_bytes
    )
    adjunct = m.encode_adjunct(queue.put_list, ident, correl)
    uow_id = uow.uow_id if uow is not None else stamps.uow_id(stamp)
    version = int.from_bytes(uow_id, "big")
    acc = queue.acc
    while True:
        index = queue.index
        secondary = (
            ident if index is IndexType.MSG_ID else correl if index is IndexType.CORREL_ID else None
        )
        try:
            if uow is not None:
                acc.write(
                    queue.put_list,
                    ukey,
                    data,
                    adjunct=adjunct,
                    entry_id=entry_id,
                    version=version,
                    expect_authority=queue.authority,
                    kind=ChangeKind.PUT,
                    queue=queue.name,
                    uow=uow_id,
                    persistent=persistent,
                    msg_id=ident,
                )
            else:
                # Out of syncpoint: the write and sync last message in one request.
                acc.write_and_rekey(
                    queue.put_list,
                    ukey,
                    data,
                    adjunct=adjunct,
                    entry_id=entry_id,
                    version=version,
                    expect_authority=queue.authority,
                    kind=ChangeKind.PUT,
                    then=ChangeKind.SYNC_PUT,
                    queue=queue.name,
                    uow=uow_id,
                    persistent=persistent,
                    msg_id=ident,
                    new_key=keys.committed_form(ukey),
                    new_secondary_key=UNCHANGED if secondary is None else secondary,
                    set_version=0,
                )
            break
        except JournalFailed as failure:
            if not undo.unrecorded_put(queue, failure, entry_id, ukey, ident, secondary, uow):
                raise
            break  # it could not be taken back, and stands
        except AuthorityMismatch:
            mgr._refresh(queue)
            _check_put_allowed(queue, len(body))
        except EntryExists:
            entry_id = stamps.entry_id()
        except ListFull as error:
            raise mq_error(
                MQReason.Q_FULL,
                f"queue {queue.name} holds its maximum depth "
                f"({queue.definition.max_depth} messages)",
            ) from error
        except CFError as error:
            # Out of syncpoint with a fault hook (two requests), the sync may be what
            # failed: the uncommitted entry stays; recovery deletes it (no put happened).
            raise from_cf(error, f"put to {queue.name}") from error
    if uow is not None:
        expires_at = None if expiry is None else stamp_seconds(stamp) + tenths / 10
        trqs = uow.trqs_for(queue)
        trqs.add(Trop(TropKind.PUT, entry_id, ukey, persistent, ident, secondary, expires_at, trqs))
    return m.Message(
        body,
        priority,
        persistent,
        ident,
        correl,
        None if expiry is None else tenths / 10,
        stamp_seconds(stamp),
        mgr.name,
        0,
        len(body),
        False,
        entry_id,
    )


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
        uow: UnitOfWork | None,
        msg_id: bytes | None,
        correl_id: bytes | None,
        max_length: int | None,
        accept_truncated: bool,
        if_persistent: bool,
    ) -> None:
        self.uow = uow
        self.max_length = max_length
        self.accept_truncated = bool(accept_truncated)
        self.if_persistent = bool(if_persistent)
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
        self.index_key = self._index_key(queue)

    def _index_key(self, queue: QueueState) -> bytes | None:
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


def _selector(value: bytes | None) -> bytes | None:
    """An all-zero id selects nothing, as MQMI_NONE and MQCI_NONE do."""
    return None if value is None or value == m.NO_ID else value


def get(
    mgr: QueueManager,
    queue: QueueState,
    request: GetRequest,
    wait: float | None,
) -> m.Message:
    """Get a message, waiting up to ``wait`` seconds for one if asked."""
    if request.uow is not None:
        mgr._check_unit(request.uow)
    if wait is not None and (
        isinstance(wait, bool) or not isinstance(wait, int | float) or wait < 0
    ):
        raise mq_error(MQReason.BAD_ARGUMENT, f"wait {wait!r} must be seconds >= 0")
    _check_get_allowed(queue)
    try:
        found = _attempt(mgr, queue, request)
        if found is not None:
            return found
        if wait:
            found = _wait(mgr, queue, request, wait)
            if found is not None:
                return found
    except CFError as error:
        raise from_cf(error, f"get from {queue.name}") from error
    except JournalFailed as failure:
        if failure.note.kind is ChangeKind.GET:
            undo.take_back(queue, failure, request.uow)
        raise
    raise mq_error(MQReason.NO_MSG_AVAILABLE, f"no message available on queue {queue.name}")


def _revalidated(queue: QueueState) -> QueueDefinition:
    try:
        return queue.revalidate()
    except CFError as error:
        raise from_cf(error, f"re-read {queue.name}") from error


def _check_get_allowed(queue: QueueState) -> None:
    if queue.definition.get_inhibited and _revalidated(queue).get_inhibited:
        raise mq_error(MQReason.GET_INHIBITED, f"gets are inhibited on queue {queue.name}")


def _attempt(mgr: QueueManager, queue: QueueState, request: GetRequest) -> m.Message | None:
    """One try: a message, or ``None`` when none is available now."""
    acc = queue.acc
    uow = request.uow
    while True:
        trqs = uow.existing_trqs(queue) if uow is not None else None
        try:
            if request.index_key is not None:
                entry = _take_by_id(mgr, queue, request)
            else:
                best = (
                    trqs.best_key(request.if_persistent)
                    if trqs is not None
                    else keys.COMMITTED_COMPARATOR
                )
                change = acc.move(
                    Head(queue.put_list, best),
                    queue.get_list,
                    expect_authority=queue.authority,
                    kind=ChangeKind.GET,
                    queue=queue.name,
                    uow=uow,
                )
                entry = None if change is None else change.entry
                if entry is None:
                    own = trqs.best(request.if_persistent) if trqs is not None else None
                    if own is None:
                        return None
                    message = _own_get(mgr, queue, request, own)
                    if message is None:
                        continue
                    return message
        except AuthorityMismatch:
            mgr._refresh(queue)
            _check_get_allowed(queue)
            request.index_key = request._index_key(queue)
            continue
        if entry is None:
            return None
        message = _took(mgr, queue, request, entry)
        if message is not None:
            return message


def _took(
    mgr: QueueManager, queue: QueueState, request: GetRequest, entry: ListEntry
) -> m.Message | None:
    """A committed message is on our get list: expire, refuse, sync or keep it."""
    header = m.Decoded(entry.data)
    uow = request.uow
    if header.expired(mgr.clock.time()):
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
        return None
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
        trqs = uow.trqs_for(queue)
        trqs.add(
            Trop(
                TropKind.GET,
                entry.entry_id,
                entry.key,
                header.persistent,
                header.msg_id,
                None,
                header.expires_at,
                trqs,
            )
        )
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


def _own_get(
    mgr: QueueManager, queue: QueueState, request: GetRequest, trop: Trop
) -> m.Message | None:
    """Return the unit's own uncommitted put (read by id, gap O5); it stays put."""
    entry = queue.acc.read(ById(trop.entry_id, queue.put_list))
    assert entry is not None
    header = m.Decoded(entry.data)
    trop.trqs.take_own(trop)
    if header.expired(mgr.clock.time()):
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


def _take_by_id(mgr: QueueManager, queue: QueueState, request: GetRequest) -> ListEntry | None:
    """Move the first committed message with the id(s) to the get list (§5.9).

    The secondary key is assigned at commit, so only committed messages match.  With
    both ids, the other id is checked in the adjunct (gap O6); candidates are taken in
    put-list order, that is priority then put time.
    """
    acc = queue.acc
    key = request.index_key
    assert key is not None
    uow_id = request.uow.uow_id if request.uow is not None else None
    if not request.both:
        change = acc.move(
            BySecondaryKey(queue.put_list, key),
            queue.get_list,
            expect_authority=queue.authority,
            kind=ChangeKind.GET,
            queue=queue.name,
            uow=uow_id,
        )
        return None if change is None else change.entry
    for _ in range(100):
        candidate = _matching(mgr, queue, request)
        if candidate is None:
            return None
        try:
            change = acc.move(
                ById(candidate.entry_id, queue.put_list),
                queue.get_list,
                expect_authority=queue.authority,
                kind=ChangeKind.GET,
                queue=queue.name,
                uow=uow_id,
            )
        except (NoSuchEntry, ListMismatch):
            continue  # another manager took it first
        return None if change is None else change.entry
    return None


def _matching(mgr: QueueManager, queue: QueueState, request: GetRequest) -> ListEntry | None:
    acc = queue.acc
    key = request.index_key
    assert key is not None
    first = acc.read(BySecondaryKey(queue.put_list, key))
    if first is None:
        return None
    if _other_id_matches(first, request):
        return first
    for entry in acc.scan(queue.put_list, keys.COMMITTED_LOW, keys.COMMITTED_HIGH, with_data=False):
        if entry.secondary_key == key and _other_id_matches(entry, request):
            return entry
    return None


def _other_id_matches(entry: ListEntry, request: GetRequest) -> bool:
    _, msg_id, correl_id = m.decode_adjunct(entry.adjunct)
    return msg_id == request.msg_id and correl_id == request.correl_id


def _wait(
    mgr: QueueManager, queue: QueueState, request: GetRequest, wait: float
) -> m.Message | None:
    """Sleep until the committed range (or the id's sublist) fills, then try again."""
    deadline = time.monotonic() + wait
    acc = queue.acc
    if request.index_key is not None:
        spec = MonitorSpec(queue.put_list, secondary_key=request.index_key)
    else:
        spec = MonitorSpec(queue.put_list, keys.COMMITTED_LOW, keys.COMMITTED_HIGH)
    dispatcher = mgr._dispatcher(acc)
    registration = acc.register_monitor(spec)
    generation = acc.generation
    try:
        retry_now = registration.nonempty
        while True:
            if acc.generation != generation:  # the structure was copied: watch the copy
                generation = acc.generation
                registration = acc.register_monitor(spec)
                retry_now = True
            if retry_now:
                found = _attempt(mgr, queue, request)
                if found is not None:
                    return found
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if request.both:
                # The sublist may hold only messages whose other id differs, and a
                # new match arriving then queues no event: look again now and then.
                remaining = min(remaining, AMBIGUOUS_WAIT_SLICE)
                dispatcher.wait(registration.monitor_id, remaining)
                retry_now = True
            else:
                retry_now = dispatcher.wait(registration.monitor_id, remaining)
            _check_get_allowed(queue)
    finally:
        # The connection may be the reason we are leaving.
        with contextlib.suppress(CFError, MQError):
            acc.stop_monitor(registration.monitor_id)
        dispatcher.forget(registration.monitor_id)
