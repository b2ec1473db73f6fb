"""A unit of work's commit in one request, without descriptors (issue 16).

A descriptor exists so that a peer can finish what its writer started, and one request
is never half done.  So a unit of work whose whole commit is one bulk request commits
with that request alone, as a one-operation unit commits with one move or delete
(:mod:`sharedq.mq.syncpoint`), when:

* it is active (a prepared unit has its descriptors already: it must survive its
  manager), with more than one operation;
* it touched one structure;
* its manager has no journal, and the structure's access records nothing: with a
  recovery log the bulk request's changes are logged one record per entry, after the
  request, and those records are not one atomic log write (a log cut short among them
  would hold part of a commit that nothing marks decided), so a logged manager keeps
  the descriptors and the logged decision;
* its commit actions are of one kind: all puts, committed with one ``move_entries`` of
  their commit moves (committed key, secondary key, version 0, as
  :func:`commit_move`), across the structure's queues; or all gets (the unit's own
  puts it got among them), deleted with one ``delete_entries``;
* they fit in one request: at most :data:`ONE_REQUEST_LIMIT` of them.

The order is the descriptor path's: queues in order of first access, each queue's
operations in priority and put-time order.  Entries already gone count as done, and an
entry found moved away (``ListMismatch``) is skipped, as the redriven bulk requests of
:mod:`sharedq.mq.bulk` do.
"""

from __future__ import annotations

from dataclasses import dataclass

from sharedq.cf import UNCHANGED, BulkMove, BulkResult, ById, ListMismatch
from sharedq.mq.core import ManagerCore
from sharedq.mq.journal import ChangeKind
from sharedq.mq.units import Trop, TropKind, UnitState, UowState
from sharedq.seam.access import StructureAccess, UowRef
from sharedq.seam.notes import NO_JOURNAL, EntryMeaning

#: The most commit actions one request carries.  A bulk request stops after its
#: backend's budget of entries (memory 1024, Redis 256 per request) and the list
#: structure interface has no public way to ask a connection for its budget, so the
#: smallest of them: a unit within it commits in one request on either backend.  (A
#: backend with a smaller budget is still correct: the request comes back part done,
#: and syncpoint finishes the rest through descriptors.)
ONE_REQUEST_LIMIT = 256


def meaning(trop: Trop) -> EntryMeaning:
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


@dataclass(frozen=True)
class OneRequest:
    """A unit's commit as one request: where, what, and whether it moves puts."""

    acc: StructureAccess
    trops: list[Trop]
    puts: bool


def plan(core: ManagerCore, uow: UnitState) -> OneRequest | None:
    """The unit's commit as one request, or ``None`` when it needs descriptors."""
    if uow.state is not UowState.ACTIVE or core.journal is not NO_JOURNAL:
        return None
    if len(uow.structures) != 1:
        return None
    (per_structure,) = uow.structures.values()
    trops: list[Trop] = []
    for trqs in per_structure.values():
        trops += trqs.ordered()
        if len(trops) > ONE_REQUEST_LIMIT:
            return None
    if len(trops) < 2:
        return None
    puts = trops[0].kind is TropKind.PUT
    for trop in trops:
        if (trop.kind is TropKind.PUT) is not puts:
            return None
    acc = trops[0].trqs.queue.acc
    if acc.journaling:
        return None
    return OneRequest(acc, trops, puts)


def send(request: OneRequest, uow_id: bytes) -> list[Trop]:
    """Send the one request; return the operations it left undone (none, normally).

    Raises what the structure raised when it refused the request as a whole.
    """
    trops = request.trops
    # Meanings are read only by a journal, and a unit planned here has none.
    meanings: tuple[EntryMeaning, ...] = ()
    result: BulkResult
    if request.puts:
        result = request.acc.move_entries(
            [commit_move(t) for t in trops],
            missing_ok=True,
            kind=ChangeKind.COMMIT_PUTS,
            uow=uow_id,
            meanings=meanings,
        )
    else:
        result = request.acc.delete_entries(
            [t.entry_id for t in trops],
            missing_ok=True,
            kind=ChangeKind.COMMIT_GETS,
            uow=uow_id,
            meanings=meanings,
        )
    done = result.processed
    if isinstance(result.error, ListMismatch):
        done += 1  # moved away: done, as bulk_move counts it
    return trops[done:]


def keep_only(uow: UnitState, rest: list[Trop]) -> None:
    """Leave in the unit only the operations ``rest`` (what is still to commit)."""
    keep = {id(t) for t in rest}
    for per_structure in uow.structures.values():
        for put_list, trqs in list(per_structure.items()):
            for trop in list(trqs.trops):
                if id(trop) not in keep:
                    trqs.remove(trop)
            if not trqs.trops:
                del per_structure[put_list]


def commit_one(trop: Trop, uow_id: UowRef) -> None:
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
