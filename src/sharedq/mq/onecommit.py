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
* they fit in one request: at most :data:`ONE_REQUEST_LIMIT` commit actions.

Its puts are committed with their commit moves (committed key, secondary key, version
0, as :func:`commit_move`), across the structure's queues; its gets (the unit's own
puts it got among them) are deleted.  All puts: one ``move_entries``; all gets: one
``delete_entries``; both, the request/reply unit (get a request, put the reply,
commit): one ``move_and_delete_entries``, the moves and then the deletes in one atomic
request.

The order: the puts, queues in order of first access and each queue's in priority and
put-time order, then the gets in the same order.  The descriptor path takes each
queue's puts and then its gets, queue by queue; one atomic request shows nobody any
order between them, and its monitors are told of each list's transitions as the two
bulk requests would tell them.  Entries already gone count as done, and an entry found
moved away (``ListMismatch``) is skipped, as the redriven bulk requests of
:mod:`sharedq.mq.bulk` do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import MethodType
from typing import Any

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
    """A unit's commit as one request: where, its puts and its gets (either may be
    empty), and all of them in the request's order."""

    acc: StructureAccess
    puts: list[Trop]
    gets: list[Trop]

    @property
    def trops(self) -> list[Trop]:
        return self.puts + self.gets


def plan(core: ManagerCore, uow: UnitState) -> OneRequest | None:
    """The unit's commit as one request, or ``None`` when it needs descriptors."""
    if uow.state is not UowState.ACTIVE or core.journal is not NO_JOURNAL:
        return None
    if len(uow.structures) != 1:
        return None
    (per_structure,) = uow.structures.values()
    puts: list[Trop] = []
    gets: list[Trop] = []
    for trqs in per_structure.values():
        for trop in trqs.ordered():
            (puts if trop.kind is TropKind.PUT else gets).append(trop)
        if len(puts) + len(gets) > ONE_REQUEST_LIMIT:
            return None
    if len(puts) + len(gets) < 2:
        return None
    acc = (puts or gets)[0].trqs.queue.acc
    if acc.journaling:
        return None
    return OneRequest(acc, puts, gets)


def send(request: OneRequest, uow_id: bytes) -> list[Trop]:
    """Send the one request; return the operations it left undone (none, normally).

    Raises what the structure raised when it refused the request as a whole.
    """
    puts, gets = request.puts, request.gets
    # Meanings are read only by a journal, and a unit planned here has none.
    meanings: tuple[EntryMeaning, ...] = ()
    result: BulkResult
    if puts and gets:
        result = request.acc.move_and_delete_entries(
            [commit_move(t) for t in puts],
            [t.entry_id for t in gets],
            missing_ok=True,
            move_kind=ChangeKind.COMMIT_PUTS,
            delete_kind=ChangeKind.COMMIT_GETS,
            uow=uow_id,
            move_meanings=meanings,
            delete_meanings=meanings,
        )
    elif puts:
        result = request.acc.move_entries(
            [commit_move(t) for t in puts],
            missing_ok=True,
            kind=ChangeKind.COMMIT_PUTS,
            uow=uow_id,
            meanings=meanings,
        )
    else:
        result = request.acc.delete_entries(
            [t.entry_id for t in gets],
            missing_ok=True,
            kind=ChangeKind.COMMIT_GETS,
            uow=uow_id,
            meanings=meanings,
        )
    trops = request.trops
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


#: Enum members commit_one names, as globals (cheaper to read than from their class).
_PUT_OP, _GET_OP = TropKind.PUT, TropKind.GET
_COMMIT_PUTS, _COMMIT_GETS = ChangeKind.COMMIT_PUTS, ChangeKind.COMMIT_GETS
#: ``ById(entry_id, list)`` made as a plain tuple is (no Python-level ``__new__``).
_by_id: Callable[[tuple[Any, ...]], ById] = MethodType(tuple.__new__, ById)


def commit_one(trop: Trop, uow_id: UowRef) -> None:
    """A one-operation commit: one atomic request."""
    queue = trop.trqs.queue
    if trop.kind is _PUT_OP:
        queue.acc.move(
            _by_id((trop.entry_id, queue.put_list)),
            queue.put_list,
            new_key=trop.ckey,
            new_secondary_key=UNCHANGED if trop.secondary is None else trop.secondary,
            set_version=0,
            kind=_COMMIT_PUTS,
            queue=queue.name,
            uow=uow_id,
            persistent=trop.persistent,
            msg_id=trop.msg_id,
        )
    else:
        where = queue.get_list if trop.kind is _GET_OP else queue.put_list
        queue.acc.delete_seq(
            _by_id((trop.entry_id, where)),
            _COMMIT_GETS,
            queue.name,
            uow_id,
            trop.persistent,
            trop.msg_id,
        )
