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
    Locator,
    MonitorSpec,
    NoSuchEntry,
    Registration,
)
from sharedq.mq import arguments, depth_events, getting, keys, undo
from sharedq.mq import messages as m
from sharedq.mq.clock import STAMP_SHIFT, stamp_seconds
from sharedq.mq.core import ManagerCore
from sharedq.mq.definitions import IndexType, QueueDefinition, QueueState
from sharedq.mq.errors import JournalFailed, MQError, MQReason, from_cf, mq_error
from sharedq.mq.journal import ChangeKind
from sharedq.mq.units import Trop, TropKind, UnitState
from sharedq.mq.waiting import EventDispatcher

logger = logging.getLogger("sharedq.mq")

#: How long a get by both ids sleeps at a time while its sublist holds only other
#: messages (an event says only that a sublist went non-empty; see ``_wait``).
AMBIGUOUS_WAIT_SLICE = 0.25


#: Enum members the put and get paths name, as globals: an enum member read from its
#: class costs some 100 ns more than a global (Python 3.11), several times a message.
_PUT, _SYNC_PUT, _GET, _SYNC_GET = (
    ChangeKind.PUT,
    ChangeKind.SYNC_PUT,
    ChangeKind.GET,
    ChangeKind.SYNC_GET,
)
_BY_MSG_ID, _BY_CORREL_ID = IndexType.MSG_ID, IndexType.CORREL_ID
_PUT_OP = TropKind.PUT


def check_put_allowed(queue: QueueState, length: int) -> None:
    """Refuse a put the queue's definition does not allow (inhibited, too long)."""
    definition = queue.definition
    if definition.put_inhibited and getting.revalidated(queue).put_inhibited:
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


def put_options(
    definition: QueueDefinition, priority: int | None, persistent: bool | None, expiry: float | None
) -> tuple[int, bool, int]:
    """A put's priority, persistence and expiry (in tenths), checked, defaults applied."""
    if priority is None:
        priority = definition.default_priority
    elif type(priority) is not int or not 0 <= priority <= 9:
        raise mq_error(MQReason.PRIORITY_ERROR, f"priority {priority!r} must be 0..9")
    if persistent is None:
        persistent = definition.default_persistent
    elif not isinstance(persistent, bool):
        raise mq_error(MQReason.PERSISTENCE_ERROR, f"persistent {persistent!r} is not a bool")
    return priority, persistent, m.UNLIMITED if expiry is None else m.expiry_tenths(expiry)


def put(
    core: ManagerCore,
    queue: QueueState,
    body: bytes,
    priority: int | None,
    persistent: bool | None,
    msg_id: bytes | None,
    correl_id: bytes | None,
    expiry: float | None,
    uow: UnitState | None,
) -> m.Message:
    """Put a message; every argument is checked before anything is written.

    ``Queue.put`` passes the options by position (each keyword costs a put about 0.1
    microseconds); the other callers name them."""
    if uow is not None:
        core.check_unit(uow)
    if type(body) is not bytes:
        if isinstance(body, bytes | bytearray | memoryview):
            body = bytes(body)
        else:
            raise mq_error(MQReason.BAD_ARGUMENT, f"a message body is bytes, not {type(body)}")
    definition = queue.definition
    if priority is None and expiry is None and (persistent is True or persistent is False):
        priority, tenths = definition.default_priority, m.UNLIMITED  # put_options' answer
    else:
        priority, persistent, tenths = put_options(definition, priority, persistent, expiry)
    given_msg_id = None if msg_id is None else m.check_id(msg_id, "msg_id", MQReason.MD_ERROR)
    correl = (
        m.NO_ID
        if correl_id is None
        else m.check_id(correl_id, "correl_id", MQReason.MD_ERROR) or m.NO_ID
    )
    if definition.put_inhibited or len(body) > queue.max_body:
        check_put_allowed(queue, len(body))

    stamps = core.stamps
    if uow is None:
        stamp, uow_id = stamps.stamp_and_uow_id()
    else:
        stamp, uow_id = stamps.stamp(), uow.uow_id
    stamp_bytes = stamp.to_bytes(8, "big")
    if given_msg_id is None or given_msg_id == m.NO_ID:
        ident = core.msg_id_prefix + stamp_bytes + core.msg_id_suffix
        generated = True
    else:
        ident, generated = given_msg_id, False
    entry_id = core.entry_id_prefix + stamp_bytes + core.nonce
    if generated and tenths == m.UNLIMITED and correl == m.NO_ID:
        # The common put: what encode, encode_adjunct and uncommitted_key would make,
        # from the frame the queue's puts of this priority and persistence share.
        frame = core.put_frames.get((queue.put_list, priority, persistent))
        if frame is None:
            frame = _put_frame(core, queue.put_list, priority, persistent)
        head, tail, adjunct, key_head, key_tail = frame
        data = b"".join((head, stamp_bytes, tail, body))
        ukey = key_head + stamp_bytes + key_tail
    else:
        ukey = keys.uncommitted_key(priority, stamp, core.qm_id)
        data = m.encode(
            body,
            priority,
            persistent,
            ident,
            correl,
            stamp,
            tenths,
            core.qm_id,
            core.name_bytes,
            generated,
        )
        adjunct = m.encode_adjunct(queue.put_list, ident, correl, entry_id, generated)
    version = int.from_bytes(uow_id, "big")
    acc = queue.acc
    entries: int | None = None  # on the put list after the put: its depth, for events
    while True:
        index = queue.index
        secondary = ident if index is _BY_MSG_ID else correl if index is _BY_CORREL_ID else None
        try:
            if uow is not None:
                entries = acc.write(
                    queue.put_list,
                    ukey,
                    data,
                    adjunct=adjunct,
                    entry_id=entry_id,
                    version=version,
                    expect_authority=queue.authority,
                    kind=_PUT,
                    queue=queue.name,
                    uow=uow_id,
                    persistent=persistent,
                    msg_id=ident,
                ).entries
            else:
                # Out of syncpoint: the write and sync last message in one request.
                # (By position: write_and_rekey's arguments, in its order.)
                entries = acc.write_and_rekey_entries(
                    queue.put_list,
                    ukey,
                    data,
                    adjunct,
                    entry_id,
                    version,
                    queue.authority,
                    keys.committed_form(ukey),
                    UNCHANGED if secondary is None else secondary,
                    0,
                    _PUT,
                    _SYNC_PUT,
                    queue.name,
                    uow_id,
                    persistent,
                    ident,
                )
            break
        except JournalFailed as failure:
            if not undo.unrecorded_put(queue, failure, entry_id, ukey, ident, secondary, uow):
                raise
            break  # it could not be taken back, and stands
        except AuthorityMismatch:
            core.refresh(queue)
            check_put_allowed(queue, len(body))
        except EntryExists:
            entry_id = stamps.entry_id()
            # A generated msg id is kept in the adjunct as "the entry id's": not this one.
            adjunct = m.encode_adjunct(queue.put_list, ident, correl, entry_id)
        except ListFull as error:
            depth_events.queue_full(core, queue)
            raise mq_error(
                MQReason.Q_FULL,
                f"queue {queue.name} holds its maximum depth "
                f"({queue.definition.max_depth} messages)",
            ) from error
        except CFError as error:
            # Out of syncpoint with a fault hook (two requests), the sync may be what
            # failed: the uncommitted entry stays; recovery deletes it (no put happened).
            raise from_cf(error, f"put to {queue.name}") from error
    depth_events.after_put(core, queue, entries)
    if uow is not None:
        expires_at = None if expiry is None else stamp_seconds(stamp) + tenths / 10
        trqs = uow.trqs_for(queue)
        trqs.add(Trop(_PUT_OP, entry_id, ukey, persistent, ident, secondary, expires_at, trqs))
    return m.Message(
        body,
        priority,
        persistent,
        ident,
        correl,
        None if expiry is None else tenths / 10,
        (stamp >> STAMP_SHIFT) / 1_000_000,  # stamp_seconds(stamp), without the call
        core.name,
        0,
        len(body),
        False,
        entry_id,
    )


def _put_frame(
    core: ManagerCore, put_list: int, priority: int, persistent: bool
) -> tuple[bytes, bytes, bytes, bytes, bytes]:
    """What every put to ``put_list`` with a generated msg id, no correl id and no
    expiry shares, kept on ``core``: the data's header around the stamp
    (:func:`messages.generated_frame`), the adjunct, the uncommitted key around the
    stamp."""
    head, tail = m.generated_frame(
        priority, persistent, m.UNLIMITED, core.qm_id, core.name_bytes, core.nonce
    )
    # A generated msg id is kept as the entry id's: the adjunct names the manager only.
    adjunct = m.encode_adjunct(put_list, core.msg_id_prefix, m.NO_ID, bytes(12), True)
    frame = (head, tail, adjunct, *keys.uncommitted_key_around(priority, core.qm_id))
    core.put_frames[(put_list, priority, persistent)] = frame
    return frame


def get(
    core: ManagerCore,
    queue: QueueState,
    request: getting.GetRequest,
    wait: float | None,
) -> m.Message:
    """Get a message, waiting up to ``wait`` seconds for one if asked."""
    if request.uow is not None:
        core.check_unit(request.uow)
    if wait is not None:
        wait = arguments.check_wait(wait)
    if queue.definition.get_inhibited:  # as last read: check_get_allowed reads it again
        getting.check_get_allowed(queue)
    try:
        found = _wait(core, queue, request, wait) if wait else _attempt(core, queue, request)[0]
        if found is not None:
            return found
    except CFError as error:
        raise from_cf(error, f"get from {queue.name}") from error
    except JournalFailed as failure:
        if failure.meaning is ChangeKind.GET:
            undo.take_back(queue, failure, request.uow)
        raise
    raise mq_error(MQReason.NO_MSG_AVAILABLE, f"no message available on queue {queue.name}")


def _attempt(
    core: ManagerCore,
    queue: QueueState,
    request: getting.GetRequest,
    watch: MonitorSpec | None = None,
    dispatcher: EventDispatcher | None = None,
    wait: float = 0.0,
) -> tuple[m.Message | None, Registration | None]:
    """One try: a message, or ``None`` when none is available now.

    With ``watch``, a try that finds nothing registers that monitor in the same request
    (returned); with ``dispatcher``, the request takes the manager's events first and
    hands them out.  Out of syncpoint without a recovery log, and with no length limit
    to check first, the message is moved and deleted in one request (``take``).  With
    ``wait`` (and ``dispatcher``), that request first sleeps until the manager has an
    event, up to ``wait`` seconds (``take`` with ``wait``).
    """
    acc = queue.acc
    uow = request.uow
    registration: Registration | None = None
    fused = uow is None and request.max_length is None and not acc.journaling
    while True:
        # A unit that has done nothing yet has no TRQS to look up (every get's first).
        trqs = uow.existing_trqs(queue) if uow is not None and uow.structures else None
        gone = False
        try:
            if request.both:
                entry = _take_by_id(core, queue, request)
            else:
                if request.index_key is not None:
                    locator: Locator = BySecondaryKey(queue.put_list, request.index_key)
                elif trqs is None:
                    locator = _COMMITTED_HEADS.get(queue.put_list) or _committed_head(queue)
                else:
                    locator = Head(queue.put_list, trqs.best_key(request.if_persistent))
                if fused or dispatcher is not None or (watch is not None and registration is None):
                    try:
                        taken = acc.take(
                            locator,
                            queue.get_list,
                            delete=fused,
                            expect_authority=queue.authority,
                            monitor=watch if registration is None else None,
                            take_events=dispatcher is not None,
                            kind=_GET,
                            then=_SYNC_GET,
                            queue=queue.name,
                            uow=uow,
                            wait=wait,
                        )
                        wait = 0.0  # a try made again (authority) does not sleep
                    except JournalFailed:
                        if dispatcher is not None:
                            dispatcher.wake_all()  # the events it took are not handed out
                        raise
                    if dispatcher is not None:
                        dispatcher.deliver(taken.events)
                    registration = registration or taken.registration
                    change = taken.deleted or taken.moved
                    gone = taken.deleted is not None
                    if taken.moved is not None:
                        depth_events.after_get(core, queue, taken.moved.entries)
                else:
                    change = acc.move(
                        locator,
                        queue.get_list,
                        expect_authority=queue.authority,
                        kind=_GET,
                        queue=queue.name,
                        uow=uow,
                    )
                    if change is not None:
                        depth_events.after_get(core, queue, change.entries)
                entry = None if change is None else change.entry
                if entry is None and request.index_key is None:
                    own = trqs.best(request.if_persistent) if trqs is not None else None
                    if own is None:
                        return None, registration
                    message = getting.own_get(core, queue, request, own)
                    if message is None:
                        continue
                    return message, registration
        except AuthorityMismatch:
            core.refresh(queue)
            getting.check_get_allowed(queue)
            request.index_key = request.index_key_for(queue)
            continue
        if entry is None:
            return None, registration
        message = getting.took(core, queue, request, entry, gone=gone)
        if message is not None:
            return message, registration


#: ``Head(put list, COMMITTED_COMPARATOR)`` by put list: what a get out of a unit's own
#: puts takes (made once: a named tuple's ``__new__`` is a Python call).
_COMMITTED_HEADS: dict[int, Head] = {}


def _committed_head(queue: QueueState) -> Head:
    head = _COMMITTED_HEADS[queue.put_list] = Head(queue.put_list, keys.COMMITTED_COMPARATOR)
    return head


def _take_by_id(
    core: ManagerCore, queue: QueueState, request: getting.GetRequest
) -> ListEntry | None:
    """Move the first committed message with both ids to the get list (§5.9).

    The secondary key is assigned at commit, so only committed messages match.  (With
    one id, :func:`_attempt` locates the message by its secondary key.)  The other id is
    checked in the adjunct (gap O6); candidates are taken in put-list order, that is
    priority then put time.
    """
    acc = queue.acc
    key = request.index_key
    assert key is not None
    uow_id = request.uow.uow_id if request.uow is not None else None
    for _ in range(100):
        candidate = _matching(core, queue, request)
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
        if change is None:
            return None
        depth_events.after_get(core, queue, change.entries)
        return change.entry
    return None


def _matching(
    core: ManagerCore, queue: QueueState, request: getting.GetRequest
) -> ListEntry | None:
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


def _other_id_matches(entry: ListEntry, request: getting.GetRequest) -> bool:
    _, msg_id, correl_id = m.decode_adjunct(entry.adjunct, entry.entry_id)
    return msg_id == request.msg_id and correl_id == request.correl_id


def _wait(
    core: ManagerCore, queue: QueueState, request: getting.GetRequest, wait: float
) -> m.Message | None:
    """Try, and sleep until the committed range (or the id's sublist) fills, and again.

    Two round trips per message delivered to a waiting get (see
    :mod:`sharedq.mq.waiting`): the try registers the monitor if it finds nothing; the
    sleep and the try after it, which takes the events, are one request when this
    thread is the dispatcher's pump (``pump``).  The committed range's monitor is kept
    registered for this manager's next wait on the queue.
    """
    deadline = time.monotonic() + wait
    acc = queue.acc
    if request.index_key is not None:
        spec = MonitorSpec(queue.put_list, secondary_key=request.index_key)
    else:
        spec = MonitorSpec(queue.put_list, keys.COMMITTED_LOW, keys.COMMITTED_HIGH)
    dispatcher = core.dispatcher(acc)
    kept = request.index_key is None  # one per queue: worth keeping between waits
    monitor_id = dispatcher.borrow(spec) if kept else None
    generation = acc.generation
    ended = False
    pumped: list[tuple[m.Message | None, Registration | None]] = []

    def pump(seconds: float) -> None:
        # The pump's sleep and the try after it, in one request (take with wait).
        assert monitor_id is not None
        getting.check_get_allowed(queue)
        dispatcher.clear(monitor_id)  # what fired before this try is seen by it
        pumped.append(_attempt(core, queue, request, None, dispatcher, seconds))

    try:
        while True:
            if acc.generation != generation:  # the structure was copied: watch the copy
                generation = acc.generation
                monitor_id = None
            if pumped:
                found, registration = pumped.pop()  # the try the wait made
            else:
                if monitor_id is not None:
                    dispatcher.clear(monitor_id)  # what fired before this try is seen by it
                found, registration = _attempt(
                    core, queue, request, spec if monitor_id is None else None, dispatcher
                )
            if registration is not None:
                monitor_id = registration.monitor_id
            if found is not None:
                ended = True
                return found
            if monitor_id is None:  # a get by both ids: it registers on its own
                registration = acc.register_monitor(spec)
                monitor_id = registration.monitor_id
                if registration.nonempty:
                    continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                ended = True
                return None
            if request.both:
                # The sublist may hold only messages whose other id differs, and a
                # new match arriving then queues no event: look again now and then.
                dispatcher.wait(monitor_id, min(remaining, AMBIGUOUS_WAIT_SLICE))
            elif not dispatcher.wait(monitor_id, remaining, pump):
                ended = True
                return None
            if not pumped:
                getting.check_get_allowed(queue)
    finally:
        if monitor_id is not None and not (
            ended and kept and dispatcher.give_back(spec, monitor_id, generation)
        ):
            # The connection may be the reason we are leaving.
            with contextlib.suppress(CFError, MQError):
                acc.stop_monitor(monitor_id)
            dispatcher.forget(monitor_id)
