"""Syncpoint: commit, backout, prepare, and the last-message services (§5.11-§5.16).

Commit is the patent's two calls.  *Begin* writes the descriptors with status "begin
commit"; *end* changes the status to "in commit" (from then on any peer can finish the
commit), carries it out structure by structure, queue by queue (moves of puts to their
committed keys, then deletes of gotten messages, gap O12), and deletes the
descriptors.  Backout writes descriptors "in abort" (or changes the status of a
prepared or begin-commit unit to it, gap O10) and does the reverse: puts are deleted,
the unit's own puts that it got are deleted too (gap O3), gotten messages go back to
their put lists at their original priority and put-time position, whatever the
queue's depth (the list limit is ignored, p[262]) and with their backout count + 1;
one that expired meanwhile goes to the manager's expiry list instead.

A unit of work with a single operation commits or backs out with one atomic request
and writes no descriptors: a descriptor exists so that a peer can finish what its
writer started, and one request is never half done.  (Prepare always writes them:
a prepared unit must survive its manager.)

Bulk requests stop after their budget of entries; every one here is redriven from the
first entry not processed (p[235]), and treats an entry already gone or already moved
as done, which is what makes recovery's redo safe.
"""

from __future__ import annotations

from collections.abc import Sequence

from sharedq.cf import (
    UNCHANGED,
    BulkMove,
    ById,
    CFError,
    ListMismatch,
    StructureFull,
)
from sharedq.mq import descriptors as d
from sharedq.mq.access import StructureAccess, UowRef
from sharedq.mq.definitions import QueueState
from sharedq.mq.errors import MQReason, from_cf, mq_error
from sharedq.mq.journal import NO_JOURNAL, ChangeKind, EntryMeaning
from sharedq.mq.uow import Trop, TropKind, Trqs, UnitOfWork, UowState

# -- bulk helpers ---------------------------------------------------------------------------


def bulk_move(
    acc: StructureAccess,
    moves: Sequence[BulkMove],
    meanings: Sequence[EntryMeaning],
    *,
    kind: ChangeKind,
    uow_id: bytes | None,
    ignore_limit: bool = False,
) -> None:
    """Move entries by id, redriving until done; absent or moved-away entries are done."""
    start = 0
    while start < len(moves):
        result = acc.move_entries(
            moves[start:],
            ignore_limit=ignore_limit,
            missing_ok=True,
            kind=kind,
            uow=uow_id,
            meanings=meanings[start:],
        )
        start += result.processed
        if result.error is not None:
            if not isinstance(result.error, ListMismatch):
                raise result.error
            start += 1


def bulk_delete(
    acc: StructureAccess,
    entry_ids: Sequence[bytes],
    meanings: Sequence[EntryMeaning],
    *,
    kind: ChangeKind,
    uow_id: bytes | None,
) -> None:
    """Delete entries by id, redriving until done; absent entries are done."""
    start = 0
    while start < len(entry_ids):
        result = acc.delete_entries(
            entry_ids[start:], missing_ok=True, kind=kind, uow=uow_id, meanings=meanings[start:]
        )
        start += result.processed
        if result.error is not None:  # pragma: no cover - missing_ok leaves none
            raise result.error


def _meaning(trop: Trop) -> EntryMeaning:
    return EntryMeaning(trop.entry_id, trop.trqs.queue.name, trop.persistent, trop.msg_id)


def commit_move(trop: Trop) -> BulkMove:
    """A put's commit: committed key, secondary key if indexed, version 0 (gap V1)."""
    plh = trop.trqs.queue.put_list
    return BulkMove(
        trop.entry_id,
        plh,
        new_key=trop.ckey,
        new_secondary_key=UNCHANGED if trop.secondary is None else trop.secondary,
        set_version=0,
        from_list=plh,
    )


def backout_move(trop: Trop) -> BulkMove:
    """A get's backout: back to its put list, same key, backout count + 1."""
    queue = trop.trqs.queue
    return BulkMove(trop.entry_id, queue.put_list, increment_version=True, from_list=queue.get_list)


# -- commit -------------------------------------------------------------------------------


def commit(uow: UnitOfWork) -> None:
    try:
        structures = uow.structures
        if uow.state is UowState.ACTIVE and len(structures) == 1:
            # The common case, one operation: no list of operations to build.
            (per_structure,) = structures.values()
            if len(per_structure) == 1:
                (trqs,) = per_structure.values()
                if len(trqs.trops) == 1:
                    _commit_one(trqs.trops[0], uow)
                    _ended(uow)
                    return
        if uow.state is UowState.PREPARED:
            if uow.descriptors is not None:
                _set_status(uow, d.Status.IN_COMMIT)
            _commit_end(uow)
        elif uow.state is UowState.BEGIN_COMMIT:
            _commit_end(uow)
        else:
            trops = _all_trops(uow)
            if not trops:
                _ended(uow)
            elif len(trops) == 1:
                _commit_one(trops[0], uow)
                _ended(uow)
            else:
                commit_begin(uow)
                _commit_end(uow)
    except CFError as error:
        raise from_cf(error, "commit") from error


def commit_begin(uow: UnitOfWork) -> None:
    """Phase 1: descriptors "begin commit".  No room for them: back out, BACKED_OUT."""
    mgr = uow.manager
    try:
        uow.descriptors = d.write(mgr.admin, mgr.descriptor_list, uow, d.Status.BEGIN_COMMIT)
    except StructureFull as error:
        backout(uow)
        raise mq_error(
            MQReason.BACKED_OUT,
            "no room in the administrative structure for the commit's descriptors; "
            "the unit of work was backed out",
        ) from error
    uow.state = UowState.BEGIN_COMMIT


def _commit_end(uow: UnitOfWork) -> None:
    """Phase 2: "in commit", the commit actions, then the descriptors go."""
    written = uow.descriptors
    if isinstance(written, d.Written) and written.status is not d.Status.IN_COMMIT:
        if written.status is d.Status.BEGIN_COMMIT:
            mgr = uow.manager
            mgr.journal.commit_decided(mgr.name, uow.uow_id, _structure_names(uow))
        _set_status(uow, d.Status.IN_COMMIT)
    uow_id = uow.uow_id
    for number in sorted(uow.structures):
        for trqs in uow.structures[number].values():
            commit_queue(trqs, uow_id)
        _delete_structure_descriptors(uow, number)
    _delete_muse(uow)
    _ended(uow)


def commit_queue(trqs: Trqs, uow_id: bytes) -> None:
    """One queue's commit actions: moves of puts, then deletes of gets (one TRQS)."""
    acc = trqs.queue.acc
    ordered = trqs.ordered()
    puts = [t for t in ordered if t.kind is TropKind.PUT]
    gets = [t for t in ordered if t.kind is not TropKind.PUT]
    if puts:
        bulk_move(
            acc,
            [commit_move(t) for t in puts],
            [_meaning(t) for t in puts],
            kind=ChangeKind.COMMIT_PUTS,
            uow_id=uow_id,
        )
    if gets:
        bulk_delete(
            acc,
            [t.entry_id for t in gets],
            [_meaning(t) for t in gets],
            kind=ChangeKind.COMMIT_GETS,
            uow_id=uow_id,
        )


def _commit_one(trop: Trop, uow_id: UowRef) -> None:
    """A one-operation commit: one atomic request."""
    queue = trop.trqs.queue
    if trop.kind is TropKind.PUT:
        queue.acc.move(
            ById(trop.entry_id, queue.put_list),
            queue.put_list,
            new_key=trop.ckey,
            new_secondary_key=UNCHANGED if trop.secondary is None else trop.secondary,
            set_version=0,
            kind=ChangeKind.COMMIT_PUTS,
            queue=queue.name,
            uow=uow_id,
            persistent=trop.persistent,
            msg_id=trop.msg_id,
        )
    else:
        where = queue.get_list if trop.kind is TropKind.GET else queue.put_list
        queue.acc.delete(
            ById(trop.entry_id, where),
            kind=ChangeKind.COMMIT_GETS,
            queue=queue.name,
            uow=uow_id,
            persistent=trop.persistent,
            msg_id=trop.msg_id,
            data_wanted=False,
        )


# -- backout ----------------------------------------------------------------------------------


def backout(uow: UnitOfWork) -> None:
    try:
        _backout(uow)
    except CFError as error:
        raise from_cf(error, "backout") from error


def _backout(uow: UnitOfWork) -> None:
    mgr = uow.manager
    if uow.state in (UowState.PREPARED, UowState.BEGIN_COMMIT):
        if uow.descriptors is not None:
            _set_status(uow, d.Status.IN_ABORT)
    else:
        trops = _all_trops(uow)
        acting = [t for t in trops if t is not uow.marked]
        if len(acting) == 1 and len(uow.structures) == 1:
            _backout_one(acting[0], uow, mgr.clock.time())
            _after_backout(uow)
            return
        if acting:
            try:
                uow.descriptors = d.write(mgr.admin, mgr.descriptor_list, uow, d.Status.IN_ABORT)
            except StructureFull:
                # Without descriptors a failure now leaves the unit in flight, and a
                # peer backs out in-flight work the same way: nothing is lost.
                uow.descriptors = None
    now = mgr.clock.time()
    uow_id = uow.uow_id
    for number in sorted(uow.structures):
        for trqs in uow.structures[number].values():
            backout_queue(trqs, uow_id, now, skip=uow.marked)
        _delete_structure_descriptors(uow, number)
    _delete_muse(uow)
    _after_backout(uow)


def backout_queue(trqs: Trqs, uow_id: bytes, now: float, skip: Trop | None = None) -> None:
    """One queue's backout actions: deletes of puts (and own gets), then gets go back."""
    acc = trqs.queue.acc
    ordered = trqs.ordered()
    puts = [t for t in ordered if t.kind is not TropKind.GET]
    gets = [t for t in ordered if t.kind is TropKind.GET and t is not skip]
    if puts:
        bulk_delete(
            acc,
            [t.entry_id for t in puts],
            [_meaning(t) for t in puts],
            kind=ChangeKind.BACKOUT_PUTS,
            uow_id=uow_id,
        )
    expired = [t for t in gets if t.expires_at is not None and now >= t.expires_at]
    returned = [t for t in gets if t not in expired] if expired else gets
    if returned:
        bulk_move(
            acc,
            [backout_move(t) for t in returned],
            [_meaning(t) for t in returned],
            kind=ChangeKind.BACKOUT_GETS,
            uow_id=uow_id,
            ignore_limit=True,
        )
    if expired:
        queue = trqs.queue
        bulk_move(
            acc,
            [BulkMove(t.entry_id, queue.expiry_list, from_list=queue.get_list) for t in expired],
            [_meaning(t) for t in expired],
            kind=ChangeKind.EXPIRE,
            uow_id=uow_id,
            ignore_limit=True,
        )


def _backout_one(trop: Trop, uow_id: UowRef, now: float) -> None:
    queue = trop.trqs.queue
    meaning = {
        "queue": queue.name,
        "uow": uow_id,
        "persistent": trop.persistent,
        "msg_id": trop.msg_id,
    }
    if trop.kind is not TropKind.GET:
        queue.acc.delete(
            ById(trop.entry_id, queue.put_list),
            kind=ChangeKind.BACKOUT_PUTS,
            **meaning,  # type: ignore[arg-type]
        )
    elif trop.expires_at is not None and now >= trop.expires_at:
        queue.acc.move(
            ById(trop.entry_id, queue.get_list),
            queue.expiry_list,
            ignore_limit=True,
            kind=ChangeKind.EXPIRE,
            **meaning,  # type: ignore[arg-type]
        )
    else:
        queue.acc.move(
            ById(trop.entry_id, queue.get_list),
            queue.put_list,
            ignore_limit=True,
            increment_version=True,
            kind=ChangeKind.BACKOUT_GETS,
            **meaning,  # type: ignore[arg-type]
        )


def _after_backout(uow: UnitOfWork) -> None:
    """End the unit, or carry a mark-skip-backout get into a new one (gap O8)."""
    marked = uow.marked
    if marked is None:
        _ended(uow)
        return
    uow.structures.clear()
    uow.renew_id()
    uow.marked = None
    uow.descriptors = None
    uow.state = UowState.ACTIVE
    trqs = uow.trqs_for(marked.trqs.queue)
    marked.trqs = trqs
    trqs.add(marked)


# -- prepare ------------------------------------------------------------------------------


def prepare(uow: UnitOfWork) -> None:
    """Write the descriptors "in prepare"; only commit or backout may follow (§5.13)."""
    if uow.state is not UowState.ACTIVE:
        raise mq_error(MQReason.UOW_STATE_ERROR, f"cannot prepare a unit that is {uow.state.value}")
    mgr = uow.manager
    if _all_trops(uow):
        try:
            uow.descriptors = d.write(mgr.admin, mgr.descriptor_list, uow, d.Status.IN_PREPARE)
        except CFError as error:
            raise from_cf(error, "prepare") from error
    uow.state = UowState.PREPARED


# -- mark skip backout, last-message services ---------------------------------------------------


def mark_skip_backout(uow: UnitOfWork, token: bytes) -> None:
    """Mark one get of this unit to stay gotten if the unit backs out (§5.16)."""
    trop = uow.find(token) if token else None
    if trop is None:
        raise mq_error(MQReason.BAD_ARGUMENT, "that message was not gotten in this unit of work")
    if trop.kind is not TropKind.GET:
        raise mq_error(
            MQReason.NOT_A_GET,
            "only a gotten committed message can be marked skip-backout (this one is the "
            "unit's own put, which a backout removes)",
        )
    if uow.marked is not None:
        raise mq_error(
            MQReason.SECOND_MARK_NOT_ALLOWED, "a message of this unit of work is marked already"
        )
    uow.marked = trop


def backout_last(
    queue: QueueState, entry_id: bytes, uow_id: bytes | None, persistent: bool, msg_id: bytes
) -> None:
    """The get just done took a message the caller cannot take (truncation refused).

    It goes back to its put list at its place, its backout count unchanged: the
    application never had it (gap V2).  (A unit's own put that it got instead turns back
    into a put in place, §5.14: see :meth:`Trqs.give_back_own`.)
    """
    queue.acc.move(
        ById(entry_id, queue.get_list),
        queue.put_list,
        ignore_limit=True,
        kind=ChangeKind.BACKOUT_LAST,
        queue=queue.name,
        uow=uow_id,
        persistent=persistent,
        msg_id=msg_id,
    )


def expire_last(
    acc: StructureAccess,
    entry_id: bytes,
    get_list: int,
    expiry_list: int,
    queue: str,
    persistent: bool,
    msg_id: bytes,
) -> None:
    """The get just done found the message expired: to the expiry list (§5.15)."""
    acc.move(
        ById(entry_id, get_list),
        expiry_list,
        ignore_limit=True,
        kind=ChangeKind.EXPIRE,
        queue=queue,
        persistent=persistent,
        msg_id=msg_id,
    )


# -- descriptors and the end ------------------------------------------------------------------


def _all_trops(uow: UnitOfWork) -> list[Trop]:
    return [t for qs in uow.structures.values() for q in qs.values() for t in q.trops]


def _set_status(uow: UnitOfWork, status: d.Status) -> None:
    written = uow.descriptors
    assert isinstance(written, d.Written)
    d.set_status(uow.manager.admin, uow, written, status)


def _delete_structure_descriptors(uow: UnitOfWork, number: int) -> None:
    written = uow.descriptors
    if isinstance(written, d.Written) and number in written.parts:
        d.delete_structure(uow.manager.admin, uow.uow_id, written.parts.pop(number))


def _delete_muse(uow: UnitOfWork) -> None:
    written = uow.descriptors
    if isinstance(written, d.Written) and written.muse_id is not None:
        d.delete_muse(uow.manager.admin, uow.uow_id, written.muse_id)
        written.muse_id = None


def _structure_names(uow: UnitOfWork) -> list[str]:
    return sorted(
        {trqs.queue.acc.name for queues in uow.structures.values() for trqs in queues.values()}
    )


def _ended(uow: UnitOfWork) -> None:
    mgr = uow.manager
    if mgr.journal is not NO_JOURNAL:
        uow_id = uow.uow_id if uow.has_id else None
        mgr.journal.unit_ended(mgr.name, uow_id, _structure_names(uow))
    uow.state = UowState.ENDED
    uow.structures.clear()
    uow.descriptors = None
    uow.marked = None
    uow.manager._unit_ended(uow)
