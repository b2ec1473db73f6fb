"""Batches: many gets (``take_many``) or many puts (``write_entries``) in one request.

A consumer working in batches (a unit of work of a hundred gets, or a hundred gets out
of syncpoint) would otherwise pay one round trip a message.  ``get_many`` moves up to
``count`` committed heads of the put list to the manager's get list in one request, in
priority and put-time order, exactly as that many gets would, one after another with
nothing in between; out of syncpoint without a recovery log the same request deletes
them too.  From there each message is what one get made of it (:func:`getting.took`):
kept in the unit of work, or expired to the expiry list.  A unit's own uncommitted puts
are candidates where a get would take them (Example 1): the batch stops at the first
that would come next, returns it, and goes on.  The commit of the unit then deletes
the batch with one bulk request (:func:`syncpoint.commit_queue`).

Put many: ``put_many`` writes a batch of messages with one request (``write_entries``
conditioned on the list authority the queue's definition was read under, as each put
is), each as a put writes it, uncommitted.  In a unit of work they stay so until
commit, which gives them their committed keys with one bulk request per queue; out of
syncpoint one bulk move gives them their committed keys at once (two requests for the
batch, where single puts take one each).  The batch is put whole or not at all: when
the structure cannot take one of them (``Q_FULL`` at the queue's maximum depth, which
the list limit holds exactly), the ones written are deleted before the error.

With a recovery log every get is logged before the next change is made, and a get the
log cannot record is undone alone: there ``get_many`` is that many gets and
``put_many`` that many puts, each its own request (no fewer round trips, the same
guarantees).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from typing import overload

from sharedq.cf import (
    UNCHANGED,
    AuthorityMismatch,
    BulkMove,
    BulkWrite,
    CFError,
    EntryExists,
    Head,
    ListFull,
    Position,
)
from sharedq.cf.api import MAX_TAKE_MANY
from sharedq.mq import arguments, depth_events, getting, keys, operations
from sharedq.mq import messages as m
from sharedq.mq.bulk import bulk_move
from sharedq.mq.clock import stamp_seconds
from sharedq.mq.core import ManagerCore
from sharedq.mq.definitions import IndexType, QueueState
from sharedq.mq.errors import MQReason, NoMessageAvailable, from_cf, mq_error
from sharedq.mq.journal import ChangeKind
from sharedq.mq.units import Trop, TropKind, UnitState
from sharedq.seam.access import tolerating
from sharedq.seam.notes import EntryMeaning

#: Entries one bulk write carries (the backends' default bulk budget).
PUT_CHUNK = 256


def get_many(
    core: ManagerCore,
    queue: QueueState,
    request: getting.GetRequest,
    count: int,
    wait: float | None,
) -> list[m.Message]:
    """Up to ``count`` messages; ``[]`` when none is available (after ``wait``)."""
    if type(count) is not int or not 1 <= count <= MAX_TAKE_MANY:
        raise mq_error(MQReason.BAD_ARGUMENT, f"count {count!r} must be 1..{MAX_TAKE_MANY}")
    if request.uow is not None:
        core.check_unit(request.uow)
    wait = arguments.check_wait(wait)
    getting.check_get_allowed(queue)
    out = _batch(core, queue, request, count)
    if out or not wait:
        return out
    try:
        first = operations.get(core, queue, request, wait)
    except NoMessageAvailable:
        return []
    return [first, *(_batch(core, queue, request, count - 1) if count > 1 else [])]


def _batch(
    core: ManagerCore, queue: QueueState, request: getting.GetRequest, count: int
) -> list[m.Message]:
    acc = queue.acc
    out: list[m.Message] = []
    if acc.journaling:
        while len(out) < count:
            try:
                out.append(operations.get(core, queue, request, None))
            except NoMessageAvailable:
                break
        return out
    uow = request.uow
    fused = uow is None  # out of syncpoint: moved and deleted in the one request
    try:
        while len(out) < count:
            trqs = uow.existing_trqs(queue) if uow is not None else None
            best = trqs.best_key(False) if trqs is not None else keys.COMMITTED_COMPARATOR
            wanted = count - len(out)
            try:
                done = acc.take_many(
                    Head(queue.put_list, best),
                    queue.get_list,
                    wanted,
                    delete=fused,
                    expect_authority=queue.authority,
                    kind=ChangeKind.GET,
                    then=ChangeKind.SYNC_GET,
                    queue=queue.name,
                    uow=uow,
                )
            except AuthorityMismatch:
                core.refresh(queue)
                getting.check_get_allowed(queue)
                continue
            whole = request.max_length is None
            after_get, took_whole = depth_events.after_get, getting.took_whole
            for moved, deleted in done:
                after_get(core, queue, moved.entries)
                gone = deleted is not None
                entry = (deleted or moved).entry
                if not whole:
                    message = getting.took(core, queue, request, entry, gone=gone)
                else:
                    message = took_whole(core, queue, request, entry, gone, trqs)
                    if trqs is None and uow is not None:
                        trqs = uow.existing_trqs(queue)  # made by the first one kept
                if message is not None:
                    out.append(message)
            if len(done) == wanted:
                continue  # all there were: unless some had expired, the batch is full
            own = trqs.best(False) if trqs is not None else None
            if own is None:
                break
            message = getting.own_get(core, queue, request, own)
            if message is not None:
                out.append(message)
    except CFError as error:
        raise from_cf(error, f"get from {queue.name}") from error
    return out


# -- put many ---------------------------------------------------------------------------


class _Put:
    """One message of a batch, as its put would write it."""

    __slots__ = ("entry_id", "expires_at", "ident", "message", "secondary", "ukey", "write")

    def __init__(
        self,
        write: BulkWrite,
        entry_id: bytes,
        ukey: bytes,
        ident: bytes,
        secondary: bytes | None,
        expires_at: float | None,
        message: m.Message,
    ) -> None:
        self.write = write
        self.entry_id = entry_id
        self.ukey = ukey
        self.ident = ident
        self.secondary = secondary
        self.expires_at = expires_at
        self.message = message


class _Meanings(Sequence[EntryMeaning]):
    """What each message of a batch is to a journal, made only if one reads it (the
    batch path runs without a recording journal: see the module's docstring)."""

    __slots__ = ("_puts", "_queue")

    def __init__(self, puts: list[_Put], queue: str) -> None:
        self._puts = puts
        self._queue = queue

    def __len__(self) -> int:
        return len(self._puts)

    @overload
    def __getitem__(self, index: int) -> EntryMeaning: ...

    @overload
    def __getitem__(self, index: slice) -> _Meanings: ...

    def __getitem__(self, index: int | slice) -> EntryMeaning | _Meanings:
        if isinstance(index, slice):
            return _Meanings(self._puts[index], self._queue)
        put = self._puts[index]
        return EntryMeaning(put.entry_id, self._queue, bool(put.message.persistent), put.ident)


def put_many(
    core: ManagerCore,
    queue: QueueState,
    bodies: Sequence[bytes],
    *,
    priority: int | None,
    persistent: bool | None,
    expiry: float | None,
    uow: UnitState | None,
) -> list[m.Message]:
    """Put every body, whole batch or nothing; every argument checked before a write."""
    if uow is not None:
        core.check_unit(uow)
    if isinstance(bodies, bytes | bytearray | memoryview | str) or not isinstance(bodies, Sequence):
        raise mq_error(MQReason.BAD_ARGUMENT, "put_many takes a sequence of message bodies")
    if not 1 <= len(bodies) <= MAX_TAKE_MANY:
        raise mq_error(MQReason.BAD_ARGUMENT, f"put_many takes 1..{MAX_TAKE_MANY} bodies")
    if queue.acc.journaling:
        return [
            operations.put(
                core,
                queue,
                body,
                priority=priority,
                persistent=persistent,
                msg_id=None,
                correl_id=None,
                expiry=expiry,
                uow=uow,
            )
            for body in bodies
        ]
    checked = [body if type(body) is bytes else _body(body) for body in bodies]
    definition = queue.definition
    priority, persistent, tenths = operations.put_options(definition, priority, persistent, expiry)
    if definition.put_inhibited or max(map(len, checked)) > queue.max_body:
        for body in checked:  # the first body a put would refuse says why
            if definition.put_inhibited or len(body) > queue.max_body:
                operations.check_put_allowed(queue, len(body))
    puts = _prepare(core, queue, checked, priority, persistent, tenths, expiry, uow)
    try:
        _write(core, queue, puts, uow, checked)
        if uow is None:
            _sync(queue, puts)
        depth_events.after_batch(core, queue, len(puts), 0)
    except CFError as error:
        raise from_cf(error, f"put to {queue.name}") from error
    if uow is not None:
        trqs = uow.trqs_for(queue)
        put_kind = TropKind.PUT
        trqs.add_puts(
            [
                Trop(
                    put_kind,
                    put.entry_id,
                    put.ukey,
                    persistent,
                    put.ident,
                    put.secondary,
                    put.expires_at,
                    trqs,
                )
                for put in puts
            ]
        )
    return [put.message for put in puts]


def _body(body: object) -> bytes:
    if type(body) is bytes:
        return body
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body)
    raise mq_error(MQReason.BAD_ARGUMENT, f"a message body is bytes, not {type(body)}")


def _prepare(
    core: ManagerCore,
    queue: QueueState,
    bodies: list[bytes],
    priority: int,
    persistent: bool,
    tenths: int,
    expiry: float | None,
    uow: UnitState | None,
) -> list[_Put]:
    """What a put writes for each body (operations.put, up to its request), with what
    every message of the batch shares made once: the header around the stamp, the
    adjunct (a generated msg id is kept as the entry id's), the unit's version."""
    stamps = core.stamps
    stamp_of = stamps.stamp
    qm_id = core.qm_id
    nonce = stamps.nonce
    head, tail = m.generated_frame(priority, persistent, tenths, qm_id, core.name_bytes, nonce)
    id_prefix, id_suffix, eid_prefix = core.msg_id_prefix, core.msg_id_suffix, core.entry_id_prefix
    put_list = queue.put_list
    key_head, key_tail = keys.uncommitted_key_around(priority, qm_id)
    index = queue.index
    by_msg_id = index is IndexType.MSG_ID
    secondary: bytes | None = m.NO_ID if index is IndexType.CORREL_ID else None
    lifetime = None if expiry is None else tenths / 10
    name = core.name
    message_of = m.Message
    no_id = m.NO_ID
    new_tuple = tuple.__new__
    tail_position = Position.TAIL
    adjunct = b""
    version: int | None = None
    puts: list[_Put] = []
    for body in bodies:
        stamp = stamp_of()
        stamp_bytes = stamp.to_bytes(8, "big")
        ident = id_prefix + stamp_bytes + id_suffix
        entry_id = eid_prefix + stamp_bytes + nonce
        if uow is None:
            version = int.from_bytes(stamps.uow_id(stamp), "big")
        elif version is None:  # the unit's id, made at its first put if not before
            version = int.from_bytes(uow.uow_id, "big")
        if not adjunct:  # the same for every message of the batch
            adjunct = m.encode_adjunct(put_list, ident, m.NO_ID, entry_id, True)
        ukey = key_head + stamp_bytes + key_tail
        write = new_tuple(
            BulkWrite,
            (
                put_list,
                ukey,
                b"".join((head, stamp_bytes, tail, body)),
                adjunct,
                None,
                entry_id,
                version,
                tail_position,
            ),
        )
        put_time = stamp_seconds(stamp)
        message = message_of(
            body,
            priority,
            persistent,
            ident,
            no_id,
            lifetime,
            put_time,
            name,
            0,
            len(body),
            False,
            entry_id,
        )
        puts.append(
            _Put(
                write,
                entry_id,
                ukey,
                ident,
                ident if by_msg_id else secondary,
                None if lifetime is None else put_time + lifetime,
                message,
            )
        )
    return puts


def _write(
    core: ManagerCore,
    queue: QueueState,
    puts: list[_Put],
    uow: UnitState | None,
    bodies: list[bytes],
) -> None:
    """Write the batch uncommitted, a chunk a request; all of it, or none of it."""
    acc = queue.acc
    done = 0
    try:
        while done < len(puts):
            chunk = puts[done : done + PUT_CHUNK]
            try:
                result = acc.write_entries(
                    [put.write for put in chunk],
                    expect_authority=queue.authority,
                    kind=ChangeKind.PUT,
                    uow=uow.uow_id if uow is not None else None,
                    meanings=_Meanings(chunk, queue.name),
                )
            except AuthorityMismatch:
                core.refresh(queue)  # the definition changed: check the batch again
                for body in bodies:
                    operations.check_put_allowed(queue, len(body))
                continue
            done += result.processed
            if isinstance(result.error, EntryExists):
                put = puts[done]
                put.entry_id = core.stamps.entry_id()
                # A generated msg id is kept in the adjunct as "the entry id's": the new one.
                adjunct = m.encode_adjunct(queue.put_list, put.ident, m.NO_ID, put.entry_id)
                put.write = put.write._replace(entry_id=put.entry_id, adjunct=adjunct)
                put.message = dataclasses.replace(put.message, token=put.entry_id)
            elif result.error is not None:
                raise result.error
    except Exception as error:  # not a dying process's BaseException: no clean-up then
        _unwrite(queue, puts[:done])
        if isinstance(error, ListFull):
            depth_events.queue_full(core, queue)
            raise mq_error(
                MQReason.Q_FULL,
                f"queue {queue.name} holds its maximum depth "
                f"({queue.definition.max_depth} messages): none of the batch was put",
            ) from error
        raise


def _unwrite(queue: QueueState, written: list[_Put]) -> None:
    """Delete what a batch that failed wrote (uncommitted: nobody saw it)."""
    if not written:
        return
    # Left behind if the structure refuses: uncommitted, recovery deletes them as it
    # deletes any put a failed manager left.
    with tolerating(), contextlib.suppress(CFError):
        queue.acc.delete_entries(
            [put.entry_id for put in written],
            missing_ok=True,
            kind=ChangeKind.BACKOUT_PUTS,
            uow=None,
            meanings=_Meanings(written, queue.name),
        )


def _sync(queue: QueueState, puts: list[_Put]) -> None:
    """Out of syncpoint: the batch takes its committed keys (sync last message)."""
    bulk_move(
        queue.acc,
        [
            BulkMove(
                put.entry_id,
                queue.put_list,
                new_key=keys.committed_form(put.ukey),
                new_secondary_key=UNCHANGED if put.secondary is None else put.secondary,
                set_version=0,
                from_list=queue.put_list,
            )
            for put in puts
        ],
        _Meanings(puts, queue.name),
        kind=ChangeKind.SYNC_PUT,
        uow_id=None,
    )
