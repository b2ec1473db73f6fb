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
a prepared unit must survive its manager.)  So does an active unit of one structure
whose commit is one bulk request (its puts moved, its gets deleted, or both in one
request), when its manager has no recovery log (:mod:`sharedq.mq.onecommit`): a
logged bulk request's per-entry records are not one atomic log write, so a logged
manager keeps the descriptors and the logged decision.

Bulk requests are redriven until done (:mod:`sharedq.mq.bulk`).  Every function takes
the manager's :class:`~sharedq.mq.core.ManagerCore` and the unit's state.
"""

from __future__ import annotations

import contextlib
import logging
from typing import NoReturn

from sharedq.cf import (
    BulkMove,
    ById,
    CFError,
    StructureFull,
)
from sharedq.mq import descriptors as d
from sharedq.mq import onecommit as one
from sharedq.mq import undo
from sharedq.mq.bulk import bulk_delete, bulk_move
from sharedq.mq.core import ManagerCore
from sharedq.mq.definitions import QueueState
from sharedq.mq.errors import JournalFailed, MQReason, from_cf, mq_error
from sharedq.mq.journal import ChangeKind
from sharedq.mq.onecommit import commit_move
from sharedq.mq.onecommit import meaning as _meaning
from sharedq.mq.units import Status, Trop, TropKind, Trqs, UnitState, UowState, Written
from sharedq.seam.access import StructureAccess, UowRef, tolerating
from sharedq.seam.notes import NO_JOURNAL, DecisionUncertain

logger = logging.getLogger("sharedq.mq")
_ACTIVE, _ENDED = UowState.ACTIVE, UowState.ENDED  # as globals: read every unit


def backout_move(trop: Trop) -> BulkMove:
    """A get's backout: back to its put list, same key, backout count + 1."""
    queue = trop.trqs.queue
    return BulkMove(trop.entry_id, queue.put_list, increment_version=True, from_list=queue.get_list)


# -- commit -------------------------------------------------------------------------------


def commit(core: ManagerCore, uow: UnitState) -> None:
    """Commit.  A commit that fails ends the unit all the same: the thread may go on.

    Failed before the decision to commit was durable, the unit is backed out instead
    (what the structure would not take back now, restart or peer recovery backs out)
    and ``BackedOut`` (2003) is raised.  Failed after it (the descriptors say "in
    commit", or the log holds the decision), the unit is never backed out: it is left
    to this manager's restart, or a peer's recovery of it, which completes it, and
    ``OutcomePending`` (2124) is raised.
    """
    structures = uow.structures
    if uow.state is _ACTIVE and len(structures) == 1:
        # The common case, one operation: no list of operations to build.
        (per_structure,) = structures.values()
        if len(per_structure) == 1:
            (trqs,) = per_structure.values()
            if len(trqs.trops) == 1:
                _commit_single(core, trqs.trops[0], uow)
                return
    if uow.state is UowState.PREPARED:
        if uow.descriptors is not None:
            try:
                _set_status(core, uow, Status.IN_COMMIT)
            except (CFError, JournalFailed) as error:
                _pending(core, uow, error, "the commit of the prepared unit could not be recorded")
    elif uow.state is UowState.ACTIVE:
        trops = _all_trops(uow)
        if not trops:
            _ended(core, uow)
            return
        if len(trops) == 1:
            _commit_single(core, trops[0], uow)
            return
        request = one.plan(core, uow)
        if request is not None:
            _commit_in_one(core, uow, request)
            return
        commit_begin(core, uow)
    if uow.state is UowState.BEGIN_COMMIT:
        _decide(core, uow)
    _commit_end(core, uow)


def commit_begin(core: ManagerCore, uow: UnitState) -> None:
    """Phase 1: descriptors "begin commit".  Not written (no room for them, refused,
    not logged): the unit is backed out instead, BACKED_OUT."""
    try:
        uow.descriptors = d.write(core.admin, core.descriptor_list, uow, Status.BEGIN_COMMIT)
    except StructureFull as error:
        _backed_out_instead(
            core, uow, error, "no room in the administrative structure for the commit's descriptors"
        )
    except (CFError, JournalFailed) as error:
        _backed_out_instead(
            core, uow, error, f"the commit's descriptors could not be written ({error})"
        )
    uow.state = UowState.BEGIN_COMMIT


def _decide(core: ManagerCore, uow: UnitState) -> None:
    """Between the two calls: the decision is logged, then the descriptors say "in
    commit"; from either on, the unit is committed whatever happens (p[223]-p[229])."""
    written = uow.descriptors
    if not isinstance(written, Written) or written.status is not Status.BEGIN_COMMIT:
        return
    try:
        recorded = core.journal.commit_decided(core.name, uow.uow_id, _structure_names(uow))
    except DecisionUncertain as error:
        _pending(core, uow, error, "the commit decision was only partly logged")
    except Exception as error:
        _backed_out_instead(core, uow, error, f"the commit decision could not be logged ({error})")
    try:
        _set_status(core, uow, Status.IN_COMMIT)
    except JournalFailed as error:
        _pending(core, uow, error, 'the descriptors say "in commit", unlogged')
    except CFError as error:
        if recorded:
            _pending(core, uow, error, 'the structure refused "in commit" after the log decided')
        _backed_out_instead(core, uow, error, f'the structure refused "in commit" ({error})')


def _commit_end(core: ManagerCore, uow: UnitState) -> None:
    """Phase 2 ("in commit"): the commit actions, then the descriptors go."""
    uow_id = uow.uow_id
    numbers = sorted(uow.structures)
    acted = not numbers
    try:
        for number in numbers:
            for trqs in uow.structures[number].values():
                commit_queue(trqs, uow_id)
            acted = number == numbers[-1]
            _delete_structure_descriptors(core, uow, number)
        _delete_muse(core, uow)
    except (CFError, JournalFailed) as error:
        if not acted:
            # Undoing a decided commit is not ours to do: the descriptors ("in commit")
            # or the logged decision make the restart complete it.
            _pending(core, uow, error, "the commit stopped part-way")
        # Every commit action is done: the unit is committed.  Descriptors left behind
        # (or deleted unlogged) make a restart find it done, and delete them.
        logger.warning("unit %s committed; its descriptors: %s", uow_id.hex(), error)
    _ended(core, uow)


def _commit_single(core: ManagerCore, trop: Trop, uow: UnitState) -> None:
    """A one-operation commit: one request, no descriptors."""
    try:
        one.commit_one(trop, uow)
    except JournalFailed as failure:
        if not undo.commit_one(trop, uow.uow_id, failure):
            # The commit stands (taken by another manager, or the structure refused the
            # undo): failing it now would have the application do its work again.
            logger.warning("unit %s committed, unlogged: %s", uow.uow_id.hex(), failure)
            _ended(core, uow)
            return
        _ended(core, uow)
        raise mq_error(
            MQReason.BACKED_OUT,
            f"the recovery log could not record the commit ({failure}); "
            "the unit of work was backed out",
        ) from failure
    except CFError as error:
        _backed_out_instead(core, uow, error, f"the structure refused the commit ({error})")
    _ended(core, uow)


def _commit_in_one(core: ManagerCore, uow: UnitState, request: one.OneRequest) -> None:
    """A unit's commit as one request, no descriptors (:mod:`sharedq.mq.onecommit`).

    Refused as a whole, the unit is backed out, as a one-operation commit is.  Come
    back part done (an entry the structure would not move, or a backend whose budget
    is smaller), the commit is decided (what it did is seen): the rest goes on as the
    descriptor path's second call, from descriptors written "in commit" for the rest
    alone.  The window: should the manager fail between the one request and the write
    of the last part of those descriptors, the parts written commit and recovery backs
    out the rest as in flight; should the structure refuse them, the rest is carried
    out directly, and what it refuses then is left in flight (``OutcomePending``).
    """
    try:
        rest = one.send(request, uow.uow_id)
    except CFError as error:
        _backed_out_instead(core, uow, error, f"the structure refused the commit ({error})")
    if not rest:
        _ended(core, uow)
        return
    one.keep_only(uow, rest)
    try:
        uow.descriptors = d.write(core.admin, core.descriptor_list, uow, Status.IN_COMMIT)
    except CFError as error:
        uow.descriptors = None
        logger.warning(
            "unit %s: no descriptors for the rest of its commit: %s", uow.uow_id.hex(), error
        )
        try:
            for trqs in next(iter(uow.structures.values())).values():
                commit_queue(trqs, uow.uow_id)
        except CFError as failed:
            _ended(core, uow)
            raise mq_error(
                MQReason.OUTCOME_PENDING,
                f"the commit stopped part-way ({failed}) and its descriptors could not be "
                f"written ({error}): the unit of work has ended here, and what is left of "
                "it is backed out by this manager's restart, or a peer's recovery of it",
            ) from failed
        _ended(core, uow)
        return
    _commit_end(core, uow)


def _backed_out_instead(
    core: ManagerCore, uow: UnitState, cause: BaseException, why: str
) -> NoReturn:
    """A commit that failed before its decision was durable: back out, BACKED_OUT."""
    try:
        _backout(core, uow)
    except CFError as error:
        # Ended here; its descriptors ("in abort", or "begin commit" with no decision
        # logged) or none (in flight) make restart and peer recovery back it out.
        _ended(core, uow)
        why += (
            f"; what the structure refused to take back now ({error}) is backed out by "
            "this manager's restart or a peer's recovery of it"
        )
    raise mq_error(MQReason.BACKED_OUT, f"{why}; the unit of work was backed out") from cause


def _pending(core: ManagerCore, uow: UnitState, cause: BaseException, why: str) -> NoReturn:
    """End the unit here, its decided outcome left to this manager's restart (or a
    peer's recovery of it): OUTCOME_PENDING."""
    written = uow.descriptors
    prepared = uow.state is UowState.PREPARED
    if prepared and _status_is(uow, Status.IN_PREPARE):
        what = "it is in doubt again at this manager's restart, for its coordinator"
    else:
        what = "this manager's restart, or a peer's recovery of it, carries it out"
        if isinstance(written, Written) and written.status is Status.BEGIN_COMMIT:
            # Decided, perhaps in the log alone: "in commit" in the descriptors as well
            # if the structure takes it, so that nothing can back the unit out.
            with contextlib.suppress(CFError), tolerating():
                _set_status(core, uow, Status.IN_COMMIT)
    # The journal is not told the unit ended: a log keeps it among the units whose
    # commit it decided, for the restart.
    _ended(core, uow, journal=False)
    raise mq_error(
        MQReason.OUTCOME_PENDING,
        f"{why} ({cause}): the unit of work has ended here, and {what}",
    ) from cause


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


# -- backout ----------------------------------------------------------------------------------


def backout(core: ManagerCore, uow: UnitState) -> None:
    """Back out.  A backout that fails ends the unit all the same: what is left of it,
    this manager's restart (or a peer's recovery of it) backs out, and the structure's
    error is raised.  A prepared unit whose "in abort" cannot be recorded stays in doubt
    for that restart instead (OUTCOME_PENDING)."""
    try:
        _backout(core, uow)
    except CFError as error:
        if uow.state is UowState.PREPARED and not _status_is(uow, Status.IN_ABORT):
            _pending(core, uow, error, "the backout of the prepared unit could not be recorded")
        _ended(core, uow)
        raise from_cf(
            error,
            "backout (the unit of work has ended; this manager's restart, or a peer's "
            "recovery of it, backs out what is left)",
        ) from error


def _backout(core: ManagerCore, uow: UnitState) -> None:
    """Back out, carrying on through journal failures: nothing of a backout is undone,
    and recovery backs out whatever of it a log lacks (an uncommitted put is deleted,
    a gotten message returned, descriptors "in abort" followed)."""
    with tolerating() as failures:
        _backout_actions(core, uow)
    if failures:
        logger.warning("backout of unit %s not all logged: %s", uow.uow_id.hex(), failures[0])
    _after_backout(core, uow)


def _backout_actions(core: ManagerCore, uow: UnitState) -> None:
    if uow.state in (UowState.PREPARED, UowState.BEGIN_COMMIT):
        if uow.descriptors is not None:
            try:
                _set_status(core, uow, Status.IN_ABORT)
            except CFError:
                if uow.state is UowState.PREPARED:
                    raise
                # "Begin commit" with no decision logged (else this is not a backout):
                # a restart backs such a unit out, so the backout goes on without it.
    else:
        trops = _all_trops(uow)
        acting = [t for t in trops if t is not uow.marked]
        if len(acting) == 1 and len(uow.structures) == 1:
            _backout_one(acting[0], uow, core.clock.now_s())
            return
        if acting:
            try:
                uow.descriptors = d.write(core.admin, core.descriptor_list, uow, Status.IN_ABORT)
            except CFError:
                # Without descriptors a failure now leaves the unit in flight, and a
                # peer backs out in-flight work the same way: nothing is lost.
                uow.descriptors = None
    now = core.clock.now_s()
    uow_id = uow.uow_id
    for number in sorted(uow.structures):
        for trqs in uow.structures[number].values():
            backout_queue(trqs, uow_id, now, skip=uow.marked)
        _delete_structure_descriptors(core, uow, number)
    _delete_muse(core, uow)


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


def _after_backout(core: ManagerCore, uow: UnitState) -> None:
    """End the unit, or carry a mark-skip-backout get into a new one (gap O8)."""
    marked = uow.marked
    if marked is None:
        _ended(core, uow)
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


def prepare(core: ManagerCore, uow: UnitState) -> None:
    """Write the descriptors "in prepare"; only commit or backout may follow (§5.13)."""
    if uow.state is not UowState.ACTIVE:
        raise mq_error(MQReason.UOW_STATE_ERROR, f"cannot prepare a unit that is {uow.state.value}")
    if _all_trops(uow):
        try:
            uow.descriptors = d.write(core.admin, core.descriptor_list, uow, Status.IN_PREPARE)
        except CFError as error:
            raise from_cf(error, "prepare") from error
    uow.state = UowState.PREPARED


# -- mark skip backout, last-message services ---------------------------------------------------


def mark_skip_backout(uow: UnitState, token: bytes) -> None:
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


def _all_trops(uow: UnitState) -> list[Trop]:
    return [t for qs in uow.structures.values() for q in qs.values() for t in q.trops]


def _set_status(core: ManagerCore, uow: UnitState, status: Status) -> None:
    written = uow.descriptors
    assert isinstance(written, Written)
    d.set_status(core.admin, uow, written, status)


def _delete_structure_descriptors(core: ManagerCore, uow: UnitState, number: int) -> None:
    written = uow.descriptors
    if isinstance(written, Written) and number in written.parts:
        d.delete_structure(core.admin, uow.uow_id, written.parts.pop(number))


def _delete_muse(core: ManagerCore, uow: UnitState) -> None:
    written = uow.descriptors
    if isinstance(written, Written) and written.muse_id is not None:
        d.delete_muse(core.admin, uow.uow_id, written.muse_id)
        written.muse_id = None


def _structure_names(uow: UnitState) -> list[str]:
    """The structures the unit changed that the manager's journal records (not the
    manager's own structure when a journal replaces recovery settings)."""
    return sorted(
        {
            trqs.queue.acc.name
            for queues in uow.structures.values()
            for trqs in queues.values()
            if trqs.queue.acc.journal is not NO_JOURNAL
        }
    )


def _status_is(uow: UnitState, status: Status) -> bool:
    written = uow.descriptors
    return isinstance(written, Written) and written.status is status


def _ended(core: ManagerCore, uow: UnitState, *, journal: bool = True) -> None:
    """The unit has ended (its thread may begin another); then the journal is told."""
    told = journal and core.journal is not NO_JOURNAL
    if told:
        uow_id = uow.uow_id if uow.has_id else None
        names = _structure_names(uow)
    uow.state = _ENDED
    uow.structures.clear()
    uow.descriptors = None
    uow.marked = None
    core.unit_ended(uow)
    if told:
        try:
            core.journal.unit_ended(core.name, uow_id, names)
        except Exception as error:
            # What the unit did stands in the structure; raising now would have the
            # application do it again.  The log keeps failing visibly elsewhere.
            logger.warning("unit %s ended; its log records not synced: %s", uow_id, error)
