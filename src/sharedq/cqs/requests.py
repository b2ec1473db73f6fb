"""The CQS requests that change a structure, each as the list requests it makes.

Every function takes the :class:`~sharedq.cqs.site.Site` of the structure and makes its
requests through the site's :class:`~sharedq.seam.access.StructureAccess`, so each
step is logged (with a recovery log) before the next is made.  A request of several
steps goes through a private queue (staging, move, delete) so that a server that
stops between two steps leaves every message whole on exactly one queue:

* put: parts 2..n to a staging queue under a generated name, then part 1 (naming the
  staging queue in its prefix) to the ready queue: no reader sees part of a message;
* move: to the move queue keyed by the target's name, then to the target;
* delete: to the delete queue, then the staging parts, then part 1.
"""

from __future__ import annotations

import base64
import os
from contextlib import nullcontext, suppress

from sharedq.cf import ById, ByKey, CFError, Change, ListEntry, NoSuchEntry, Position
from sharedq.cf.errors import ListMismatch, VersionMismatch
from sharedq.cqs import takeback
from sharedq.cqs.errors import CQSJournalFailed, CQSReason, cqs_error, from_cf
from sharedq.cqs.journal import Request
from sharedq.cqs.layout import Private
from sharedq.cqs.message import Message, QueueCounts
from sharedq.cqs.messages import Prefix, unpack, uow_in
from sharedq.cqs.names import STAGING_TYPE, make_name, text
from sharedq.cqs.site import LockToken, Site
from sharedq.cqs.takeback import Origin
from sharedq.cqs.uow import Uow
from sharedq.seam.access import FromEntry, tolerating

#: The unit of work of a moved message, read from its prefix.
OWN_UOW = FromEntry(uow_in)


class translated:
    """List-structure errors a request did not expect, as CQS errors.

    ``what`` says what the request was doing; with ``queue``, the queue's name follows
    it, put together only when an error needs it.  A class rather than a generator
    context manager: every request enters one, and this costs a third of it.
    """

    __slots__ = ("_queue", "_what")

    def __init__(self, what: str, queue: bytes | None = None) -> None:
        self._what = what
        self._queue = queue

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, _: object
    ) -> None:
        if isinstance(error, CFError):
            what = self._what if self._queue is None else f"{self._what} {text(self._queue)}"
            raise from_cf(error, what) from error


def staging_name(site: Site, queue: bytes) -> bytes:
    """A unique staging queue name for one multi-part message (redbook §2.5): the
    staging type of the queue's type, 8 random base32 characters (40 bits), the
    client's system id, so that names of different systems never meet."""
    qtype = STAGING_TYPE.get(queue[0], queue[0])
    if qtype not in site.layout.types:
        qtype = queue[0]
    unique = base64.b32encode(os.urandom(5)).decode("ascii")
    return make_name(qtype, unique, site.system)


def put(
    site: Site, queue: bytes, parts: list[bytes], uow: bytes, *, recoverable: bool, local: bool
) -> Change:
    """CQSPUT: the message to the queue's ready sublist, or with ``local`` straight to
    the lock queue as this CQS's (nobody is told).  Returns part 1's write."""
    acc, now = site.acc, site.clock.now_us()
    staging: bytes | None = None
    written: list[ListEntry] = []
    with translated("put to", queue):
        try:
            if len(parts) > 1:
                staging = staging_name(site, queue)
                header = site.layout.header(staging)
                for index, part in enumerate(parts[1:], start=1):
                    data = Prefix(recoverable, index, len(parts), now, uow, None).pack(part)
                    change = acc.write(
                        header,
                        staging,
                        data,
                        kind=site.means(Request.STAGE),
                        queue=text(staging),
                        uow=uow,
                        persistent=recoverable,
                    )
                    written.append(change.entry)
            data = Prefix(recoverable, 0, len(parts), now, uow, staging).pack(parts[0])
            return acc.write(
                Private.LOCK.header(queue) if local else site.layout.header(queue),
                queue,
                data,
                secondary_key=site.owner if local else None,
                version=site.lock_version if local else 0,
                kind=site.means(Request.PUT),
                queue=text(queue),
                uow=uow,
                persistent=recoverable,
            )
        except CQSJournalFailed as failure:
            # Part 1 (or a part) was written but not logged: take it back with the rest.
            if failure.entry is not None:
                written.append(failure.entry)
            _drop_staged(site, written)
            raise
        except CFError:
            _drop_staged(site, written)
            raise


def _drop_staged(site: Site, written: list[ListEntry]) -> None:
    """A put that failed takes back what it wrote: the parts it staged, and part 1 if
    its record could not be logged."""
    with tolerating():
        for part in written:
            # A failing structure may refuse this too: recovery of the log has the rest.
            with suppress(CFError):
                remove(site, part, unpack(part.data)[0])


def read(site: Site, queue: bytes) -> Message | None:
    """CQSREAD: the first message of the queue, moved to the lock queue as this CQS's.

    One atomic move: of several readers the first wins, the others find the sublist
    empty and get ``None``.  Parts 2..n are read from the staging queue (they need no
    lock: only the locked part 1 leads to them)."""
    header = site.layout.header(queue)
    with translated("read", queue):
        try:
            change = site.acc.move(
                ByKey(header, queue),
                Private.LOCK.header(queue),
                new_secondary_key=site.owner,
                set_version=site.lock_version,
                kind=site.means(Request.READ),
                queue=text(queue),
                uow=OWN_UOW,
            )
        except CQSJournalFailed as failure:
            # Taken but not logged: back to the head of its queue, as if never read.
            takeback.move_back(site, failure, Origin(queue))
            raise
        if change is None:
            return None
        staged = unpack(change.entry.data)[0].staging is not None
        token = LockToken(site.kind, queue, change.entry.entry_id, staged)
        return whole(site, change.entry, token)


def whole(site: Site, entry: ListEntry, token: LockToken | None) -> Message:
    """Part 1 and its staging parts, as one message."""
    prefix, body = unpack(entry.data)
    parts = [body]
    if prefix.staging is not None:
        header = site.layout.header(prefix.staging)
        for part in site.acc.scan(header, prefix.staging, prefix.staging):
            parts.append(unpack(part.data)[1])
    return Message(
        entry.key,
        tuple(parts),
        Uow.from_bytes(prefix.uow),
        prefix.put_us,
        prefix.recoverable,
        entry.entry_id,
        token,
    )


def browse(site: Site, queue: bytes, limit: int | None) -> list[Message]:
    """CQSBROWSE: the queue's messages in order, whole, left where they are."""
    found: list[Message] = []
    with translated(f"browse {text(queue)}"):
        for entry in site.acc.scan(site.layout.header(queue), queue, queue):
            if limit is not None and len(found) >= limit:
                break
            found.append(whole(site, entry, None))
    return found


def counts(site: Site, queues: list[bytes], now_us: int) -> list[QueueCounts]:
    """CQSQUERY: per queue, its messages ready and locked, and the oldest one's age."""
    found = []
    for name in queues:
        header, lock = site.layout.header(name), Private.LOCK.header(name)
        with translated(f"query {text(name)}"):
            ready = sum(1 for _ in site.acc.scan(header, name, name, with_data=False))
            locked = sum(1 for _ in site.acc.scan(lock, name, name, with_data=False))
            head = site.acc.read(ByKey(header, name))
        age = None if head is None else max(0, now_us - unpack(head.data)[0].put_us) / 1e6
        found.append(QueueCounts(name, ready, locked, age))
    return found


def locked_entry(site: Site, token: LockToken, *, force: bool) -> ListEntry:
    """The entry a lock token names, checked to be this CQS's unless ``force``."""
    with translated("find a locked message"):
        try:
            entry = site.acc.read(ById(token.entry_id, Private.LOCK.header(token.queue)))
        except (NoSuchEntry, ListMismatch):
            entry = None
    if entry is None:
        raise cqs_error(
            CQSReason.NOT_LOCKED,
            f"no message {token.entry_id.hex()} of {text(token.queue)} on the lock queue",
        )
    if not force and entry.secondary_key != site.owner:
        holder = (entry.secondary_key or b"").decode("ascii", "replace")
        raise cqs_error(
            CQSReason.NOT_LOCKED_BY_YOU,
            f"message {token.entry_id.hex()} of {text(token.queue)} is locked by {holder}",
        )
    return entry


class holding:
    """A change of a locked message, conditioned on the lock being this CQS's (the
    entry's version is its :attr:`~Site.lock_version`) unless ``force``: gives the
    version to expect, and turns the conditions' failures into ``NOT_LOCKED`` (no such
    message on the lock queue) and ``NOT_LOCKED_BY_YOU`` (another CQS's lock).  A
    class, as :class:`translated` is, for what it saves on every delete."""

    __slots__ = ("_force", "_site", "_token")

    def __init__(self, site: Site, token: LockToken, *, force: bool) -> None:
        self._site = site
        self._token = token
        self._force = force

    def __enter__(self) -> int | None:
        return None if self._force else self._site.lock_version

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, _: object
    ) -> None:
        token = self._token
        if isinstance(error, NoSuchEntry | ListMismatch):
            raise cqs_error(
                CQSReason.NOT_LOCKED,
                f"no message {token.entry_id.hex()} of {text(token.queue)} on the lock queue",
            ) from None
        if isinstance(error, VersionMismatch):
            with suppress(CFError):
                locked_entry(self._site, token, force=False)  # says whose it is
            raise cqs_error(
                CQSReason.NOT_LOCKED_BY_YOU, f"{token} is not locked by this CQS"
            ) from None


def unlock(
    site: Site, token: LockToken, *, to_queue: bytes | None, first: bool, force: bool
) -> Change:
    """CQSUNLCK: a locked message back to its ready queue (first or last), or to
    another queue; ``force`` takes a failed client's lock."""
    target = to_queue or token.queue
    origin = Origin(token.queue, site.owner, site.lock_version)
    if force:  # whose lock it is, to give it back if the log fails
        held = locked_entry(site, token, force=True)
        origin = Origin(token.queue, held.secondary_key, held.version)
    with translated(f"unlock to {text(target)}"), holding(site, token, force=force) as version:
        try:
            change = site.acc.move(
                ById(token.entry_id, Private.LOCK.header(token.queue)),
                site.layout.header(target),
                new_key=target,
                new_secondary_key=None,
                set_version=0,
                position=Position.HEAD if first else Position.TAIL,
                expect_version=version,
                kind=site.means(Request.UNLOCK),
                queue=text(target),
                uow=OWN_UOW,
            )
        except CQSJournalFailed as failure:
            takeback.move_back(site, failure, origin)
            raise
    assert change is not None  # ById finds it or raises
    return change


def move(
    site: Site,
    source: ById,
    source_queue: bytes,
    target: bytes,
    *,
    locked: LockToken | None = None,
) -> Change:
    """CQSMOVE: the message to ``target`` through the move queue, in two logged steps
    (``locked``: the source is that lock of this CQS's).

    On the move queue the entry is keyed by its target and carries this CQS's name as
    its secondary key: a CQS that stopped between the steps finishes its own moves when
    it connects again (:func:`finish_move`)."""
    via = Private.MOVE.header(target)
    origin = Origin(source_queue)
    if locked is not None:
        origin = Origin(source_queue, site.owner, site.lock_version)
    try:
        with translated(f"move {text(source_queue)} to {text(target)}"):
            guard = holding(site, locked, force=False) if locked else nullcontext(None)
            with guard as version:
                staged = site.acc.move(
                    source,
                    via,
                    new_key=target,
                    new_secondary_key=site.owner,
                    expect_version=version,
                    kind=site.means(Request.MOVE_STEP),
                    queue=text(source_queue),
                    uow=OWN_UOW,
                )
            assert staged is not None
        return finish_move(site, staged.entry.entry_id, via, target)
    except CQSJournalFailed as failure:  # either step: back where it was
        takeback.move_back(site, failure, origin)
        raise


def finish_move(site: Site, entry_id: bytes, via: int, target: bytes) -> Change:
    """A move's second step: from the move queue to the target's ready queue."""
    with translated(f"move to {text(target)}"):
        done = site.acc.move(
            ById(entry_id, via),
            site.layout.header(target),
            new_secondary_key=None,
            set_version=0,
            kind=site.means(Request.MOVE),
            queue=text(target),
            uow=OWN_UOW,
        )
    assert done is not None
    return done


def delete(site: Site, token: LockToken) -> Change:
    """CQSDEL: a locked message and its staging parts, through the delete queue.

    On the delete queue the entry keeps this CQS's name as its secondary key: a CQS
    that stopped before the last step finishes its own deletes when it connects again
    (:func:`finish_delete`)."""
    queue = token.queue
    if not token.staged:
        with translated("delete from", queue), holding(site, token, force=False) as v:
            try:
                gone = site.acc.delete(
                    ById(token.entry_id, Private.LOCK.header(queue)),
                    expect_version=v,
                    kind=site.means(Request.DELETE),
                    queue=text(queue),
                    uow=OWN_UOW,
                )
            except CQSJournalFailed as failure:
                takeback.write_back(site, failure)
                raise
        assert gone is not None
        prefix, _ = unpack(gone.entry.data)
        if prefix.staging is not None:  # a token that did not say: its parts too
            _remove_staged(site, prefix)
        return gone
    with translated("delete from", queue), holding(site, token, force=False) as version:
        try:
            staged = site.acc.move(
                ById(token.entry_id, Private.LOCK.header(queue)),
                Private.DELETE.header(queue),
                expect_version=version,
                kind=site.means(Request.DELETE_STEP),
                queue=text(queue),
                uow=OWN_UOW,
            )
        except CQSJournalFailed as failure:
            takeback.move_back(site, failure, Origin(queue, site.owner, site.lock_version))
            raise
    assert staged is not None
    with tolerating() as failures:  # partly gone: finished rather than taken back
        done = finish_delete(site, staged.entry)
    if failures:
        unlogged = failures[0]
        assert isinstance(unlogged, CQSJournalFailed)
        unlogged.context["deleted"] = True
        raise unlogged
    return done


def finish_delete(site: Site, entry: ListEntry) -> Change:
    """A delete's last steps: the staged parts, then part 1 from the delete queue."""
    prefix, _ = unpack(entry.data)
    _remove_staged(site, prefix)
    with translated(f"delete from {text(entry.key)}"):
        gone = remove(site, entry, prefix)
    assert gone is not None
    return gone


def _remove_staged(site: Site, prefix: Prefix) -> None:
    """Delete a message's parts on its staging queue (none if it has one part)."""
    if prefix.staging is None:
        return
    header = site.layout.header(prefix.staging)
    with translated(f"delete from {text(prefix.staging)}"):
        for part in list(site.acc.scan(header, prefix.staging, prefix.staging, with_data=False)):
            remove(site, part, prefix)


def remove(site: Site, entry: ListEntry, prefix: Prefix) -> Change | None:
    """Delete one entry of a message (``prefix``: the message's) where it is."""
    return site.acc.delete(
        ById(entry.entry_id, entry.list_number),
        data_wanted=False,
        kind=site.means(Request.DELETE),
        queue=text(entry.key),
        uow=prefix.uow,
        persistent=prefix.recoverable,
    )
