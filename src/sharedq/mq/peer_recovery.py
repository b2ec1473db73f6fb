"""Peer recovery: finishing a failed manager's units of work, and a manager's own at
its restart (§5.21).  (Not structure recovery, which is :mod:`sharedq.recovery`.)

A manager that fails leaves, in each structure it used, uncommitted puts (keys X'F6',
version = the UOW id, whose first byte is the manager's id), gotten messages on its
get list, and in the administrative structure the descriptors of the units that were
committing, backing out or prepared.  Recovery is per structure, by a peer connected
to it, or by the manager itself when it restarts:

1. *claim* the structure's recovery of that manager (a control entry; a recoverer
   that fails leaves its claim to be taken over: rolling recovery);
2. *descriptors*: a unit "in commit" is committed, one "in abort" backed out, from its
   descriptors.  "Begin commit" and "in prepare" belong to the owner (p[308]): a peer
   leaves them, with their puts and gets, in doubt; the restarting owner asks its
   journal how a "begin commit" ended (with no log: backed out) and keeps "in
   prepare" units in doubt until resolved.  A descriptor set cut short by the writer's
   failure (gap U3) means the unit never got past writing it, so it is backed out; the
   first recoverer to see that changes its status to "in abort" (version-compared),
   so that every structure's recoverer decides alike;
3. *in flight* (gap U4): every other uncommitted put of that manager is deleted and
   every other message on its get list goes back to the put list its adjunct names,
   backout count + 1, whatever the queue's depth;
4. delete the descriptors done with (the MUSE after the last structure's), release
   the claim, and (a peer) clean up the failed user's connection.

Every step is idempotent: entries are inspected before they are moved or deleted, so
a recovery that is itself interrupted can be run again by anyone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sharedq.cf import (
    BulkMove,
    ById,
    ListEntry,
    NoSuchEntry,
    UserState,
)
from sharedq.clock import retry_until
from sharedq.mq import descriptors as d
from sharedq.mq import directory, keys
from sharedq.mq import messages as m
from sharedq.mq.bulk import bulk_delete, bulk_move
from sharedq.mq.core import ManagerCore
from sharedq.mq.errors import MQReason, mq_error
from sharedq.mq.journal import ChangeKind
from sharedq.mq.units import Status, TropKind
from sharedq.seam.access import StructureAccess
from sharedq.seam.notes import EntryMeaning

#: Seconds between looks at another manager's recovery claim, while waiting for it.
_CLAIM_PAUSE = 0.01


@dataclass
class PeerRecoveryReport:
    """What a recovery did, for operators and tests."""

    manager: str
    structures: list[str] = field(default_factory=list)
    committed: int = 0
    backed_out: int = 0
    puts_deleted: int = 0
    gets_returned: int = 0
    #: UOW ids left for the owner: "begin commit" and "in prepare" units.
    in_doubt: list[bytes] = field(default_factory=list)
    #: Structures another active manager was recovering (or the failed one was active).
    skipped: list[str] = field(default_factory=list)
    #: How the manager restarted: "warm", or "cold" (its log was not used).
    start: str = "warm"
    #: Why, in words: the message an operator reads (a cold start's cause, above all).
    start_reason: str = ""
    #: A cold start's messages moved to the cold queue, which the manager is told.
    cold_queued: list[ColdMessage] = field(default_factory=list)


@dataclass(frozen=True)
class ColdMessage:
    """A message a cold start moved to its structure's cold queue (redbook §B.4)."""

    structure: str
    queue: str | None
    msg_id: bytes
    entry_id: bytes


def is_active(acc: StructureAccess, name: str) -> bool:
    """Whether a user of that name is connected and active on the structure."""
    return any(u.name == name and u.state is UserState.ACTIVE for u in acc.users())


def clean_unregistered(core: ManagerCore, qmgr: str) -> None:
    """Peer recovery of a manager the directory does not know: one that died before it
    registered has no work, only its connections, which go.  A name that no structure
    knows either is refused as ``declare_failed`` refuses it: an empty report would
    read as a recovery done for a mistyped name."""
    known = False
    for acc in core.structures.values():
        for user in acc.users():
            if user.name == qmgr:
                known = True
                if user.state is UserState.FAILED:
                    acc.cleanup_user(user.user_id)
    if not known:
        raise mq_error(
            MQReason.BAD_ARGUMENT,
            f"no queue manager {qmgr} is known to the group: it is not registered "
            f"and uses none of {core.name}'s structures",
        )


def recover_structure(
    core: ManagerCore,
    acc: StructureAccess,
    failed_id: int,
    failed_name: str,
    report: PeerRecoveryReport,
    *,
    owner: bool,
    wait: float = 0.0,
    cold: bool = False,
) -> list[d.UowRecord]:
    """Recover one structure for a failed manager (or for ourselves at restart).

    Returns the records of units left in doubt there (for the owner to rebuild).  A
    *cold* restart (the owner's, without its log) leaves nothing in doubt: units whose
    outcome only the log could tell are backed out, and every message the manager had
    gotten goes to the structure's cold queue (redbook §2.3.1, §B.4), listed in
    ``report.cold_queued``.
    """
    if not owner and acc is core.private:
        return []  # our own structure (nonshared queues): no other manager was in it
    names = directory.managers(core.admin)

    def holder_active(holder: int) -> bool:
        return holder in names and is_active(acc, names[holder])

    def claimed() -> bool:
        return directory.take_recovery_claim(acc, failed_id, core.qm_id, holder_active)

    if not retry_until(claimed, timeout_s=wait, first_pause_s=_CLAIM_PAUSE, clock=core.clock):
        if owner:
            raise mq_error(
                MQReason.CF_STRUC_LIST_HDR_IN_USE,
                f"a peer is recovering {failed_name} in structure {acc.name}",
            )
        report.skipped.append(acc.name)
        return []
    try:
        if not owner and is_active(acc, failed_name):
            report.skipped.append(acc.name)  # it came back while we claimed
            return []
        left = _recover_claimed(core, acc, failed_id, failed_name, report, owner=owner, cold=cold)
        if not owner:
            for user in acc.users():
                if user.name == failed_name and user.state is UserState.FAILED:
                    acc.cleanup_user(user.user_id)
        report.structures.append(acc.name)
        return left
    finally:
        directory.release_recovery_claim(acc, failed_id, core.qm_id)


def _recover_claimed(
    core: ManagerCore,
    acc: StructureAccess,
    failed_id: int,
    failed_name: str,
    report: PeerRecoveryReport,
    *,
    owner: bool,
    cold: bool,
) -> list[d.UowRecord]:
    number = acc.number
    admin_lists = directory.read_manager_lists(core.admin, failed_id)
    lists = directory.read_manager_lists(acc, failed_id)
    descriptor_list = admin_lists.descriptor_list if admin_lists is not None else None
    records = d.load(core.admin, descriptor_list) if descriptor_list is not None else {}
    kept: list[d.UowRecord] = []
    # In a cold start the units only the log could decide are backed out, and every
    # message the manager had gotten and does not delete goes to the cold queue.
    cold_list = directory.cold_list(acc, core.list_counts[acc.name]) if cold else None
    for record in records.values():
        outcome = _decide(core, record, failed_name, owner=owner, cold=cold)
        if outcome is None:
            kept.append(record)
            if record.uow_id not in report.in_doubt:
                report.in_doubt.append(record.uow_id)
            continue
        if number not in record.parts:
            if record.muse is not None and not record.parts:
                d.delete_muse(core.admin, record.uow_id, record.muse.entry_id)
            continue
        get_list, queues = record.ops(number)
        committing = outcome is Status.IN_COMMIT
        _forward(
            acc,
            record.uow_id,
            get_list,
            queues,
            commit=committing,
            cold_list=cold_list,
            report=report,
        )
        if committing:
            report.committed += 1
        else:
            report.backed_out += 1
        d.delete_record_structure(core.admin, record, number)
    if lists is not None:
        excluded_uows = {r.uow_id for r in kept}
        excluded_entries = {op.entry_id for r in kept for q in r.ops(number)[1] for op in q.ops}
        report.puts_deleted += _sweep_puts(acc, failed_id, excluded_uows)
        report.gets_returned += _sweep_gets(
            acc, lists.get_list, excluded_entries, cold_list=cold_list, report=report
        )
    return kept


def _decide(
    core: ManagerCore, record: d.UowRecord, failed_name: str, *, owner: bool, cold: bool
) -> Status | None:
    """``IN_COMMIT`` or ``IN_ABORT`` to carry out, or ``None`` to leave in doubt."""
    for _ in range(10):
        status = record.status()
        if status is None or status.peer_recoverable:
            return status or Status.IN_ABORT
        entry = record.status_entry()
        assert entry is not None
        if not record.is_complete():
            target = Status.IN_ABORT
        elif cold and owner:
            target = Status.IN_ABORT  # only the log could decide it: cold start
        elif not owner or status is Status.IN_PREPARE:
            return None
        else:
            outcome = core.journal.begin_commit_outcome(failed_name, record.uow_id)
            target = Status.IN_COMMIT if outcome else Status.IN_ABORT
        if d.change_status(core.admin, entry, target):
            _set_entry_status(record, entry, target)
            return target
        # Someone changed it first: read again and follow them.
        reread = _where(core.admin, entry.entry_id)
        if reread is None:
            return Status.IN_ABORT
        _set_entry_status(record, reread, None)
    raise mq_error(MQReason.UNEXPECTED_ERROR, f"unit {record.uow_id.hex()} kept changing")


def _set_entry_status(record: d.UowRecord, entry: ListEntry, status: Status | None) -> None:
    """Keep the in-memory record in step with a status entry just changed or re-read."""
    if status is not None:
        entry = entry._replace(adjunct=bytes((status,)), version=entry.version + 1)
    if record.muse is not None and record.muse.entry_id == entry.entry_id:
        record.muse = entry
        return
    for per in record.parts.values():
        if 0 in per and per[0].entry_id == entry.entry_id:
            per[0] = entry


def _where(acc: StructureAccess, entry_id: bytes) -> ListEntry | None:
    try:
        return acc.read(ById(entry_id))
    except NoSuchEntry:
        return None


def _forward(
    acc: StructureAccess,
    uow_id: bytes,
    get_list: int | None,
    queues: list[d.QueueRecord],
    *,
    commit: bool,
    cold_list: int | None = None,
    report: PeerRecoveryReport | None = None,
) -> None:
    """Carry out a unit's commit (or backout) in one structure, from its descriptors.

    Each entry is looked at first and changed only if it is still where the unit left
    it: an uncommitted put on its put list, a gotten message on the get list.  So a
    recovery interrupted part-way can be run again by anyone.  With ``cold_list`` (a
    cold start) a backout's gotten messages go to the cold queue instead.
    """
    cold_moves: list[ListEntry] = []
    for queue in queues:
        moves: list[BulkMove] = []
        move_meanings: list[EntryMeaning] = []
        deletes: list[bytes] = []
        delete_meanings: list[EntryMeaning] = []
        for op in queue.ops:
            entry = _where(acc, op.entry_id)
            if entry is None:
                continue
            meaning = EntryMeaning(op.entry_id, None, op.persistent, op.msg_id)
            if op.kind is not TropKind.GET:
                if entry.list_number != queue.put_list or not keys.is_uncommitted(entry.key):
                    continue
                if commit and op.kind is TropKind.PUT:
                    secondary = entry.secondary_key if op.secondary is None else op.secondary
                    moves.append(
                        BulkMove(
                            op.entry_id,
                            queue.put_list,
                            new_key=keys.committed_form(op.key),
                            new_secondary_key=secondary,
                            set_version=0,
                            from_list=queue.put_list,
                        )
                    )
                    move_meanings.append(meaning)
                else:  # a put backed out, or the unit's own put it got
                    deletes.append(op.entry_id)
                    delete_meanings.append(meaning)
            elif get_list is not None and entry.list_number == get_list:
                if commit:
                    deletes.append(op.entry_id)
                    delete_meanings.append(meaning)
                elif cold_list is not None:
                    cold_moves.append(entry)
                else:
                    moves.append(
                        BulkMove(
                            op.entry_id, queue.put_list, increment_version=True, from_list=get_list
                        )
                    )
                    move_meanings.append(meaning)
        if moves:
            bulk_move(
                acc,
                moves,
                move_meanings,
                kind=ChangeKind.COMMIT_PUTS if commit else ChangeKind.BACKOUT_GETS,
                uow_id=uow_id,
                ignore_limit=not commit,
            )
        if deletes:
            bulk_delete(
                acc,
                deletes,
                delete_meanings,
                kind=ChangeKind.COMMIT_GETS if commit else ChangeKind.BACKOUT_PUTS,
                uow_id=uow_id,
            )
    if cold_moves and cold_list is not None and report is not None:
        _to_cold_queue(acc, cold_moves, get_list, cold_list, report, uow_id)


def _sweep_puts(acc: StructureAccess, failed_id: int, excluded: set[bytes]) -> int:
    """Delete the failed manager's uncommitted puts of units nobody will finish."""
    count = 0
    for number, claim in directory.claims(acc).items():
        if claim.get("use") != directory.USE_QUEUE:
            continue
        doomed: list[bytes] = []
        meanings: list[EntryMeaning] = []
        for entry in acc.scan(number, keys.UNCOMMITTED_LOW, keys.UNCOMMITTED_HIGH):
            uow_id = entry.version.to_bytes(8, "big")
            if uow_id[0] != failed_id or uow_id in excluded:
                continue
            persistent, msg_id = m.entry_facts(entry.data)
            doomed.append(entry.entry_id)
            meanings.append(EntryMeaning(entry.entry_id, claim.get("name"), persistent, msg_id))
        if doomed:
            bulk_delete(acc, doomed, meanings, kind=ChangeKind.BACKOUT_PUTS, uow_id=None)
            count += len(doomed)
    return count


def _sweep_gets(
    acc: StructureAccess,
    get_list: int,
    excluded: set[bytes],
    *,
    cold_list: int | None = None,
    report: PeerRecoveryReport | None = None,
) -> int:
    """Return every other message on the failed manager's get list to its put list
    (or, in a cold start, move it to the cold queue)."""
    moves: list[BulkMove] = []
    meanings: list[EntryMeaning] = []
    entries = list(acc.scan(get_list, keys.COMMITTED_LOW, b"\xff" * 16))
    if cold_list is not None and report is not None:
        _to_cold_queue(
            acc, [e for e in entries if e.entry_id not in excluded], get_list, cold_list, report
        )
        return 0
    for entry in entries:
        if entry.entry_id in excluded:
            continue
        put_list = m.adjunct_put_list(entry.adjunct)
        persistent, msg_id = m.entry_facts(entry.data)
        moves.append(BulkMove(entry.entry_id, put_list, increment_version=True, from_list=get_list))
        meanings.append(EntryMeaning(entry.entry_id, None, persistent, msg_id))
    if moves:
        bulk_move(
            acc, moves, meanings, kind=ChangeKind.BACKOUT_GETS, uow_id=None, ignore_limit=True
        )
    return len(moves)


def _to_cold_queue(
    acc: StructureAccess,
    entries: list[ListEntry],
    get_list: int | None,
    cold_list: int,
    report: PeerRecoveryReport,
    uow_id: bytes | None = None,
) -> int:
    """Move gotten messages to the cold queue, as they are; list them in the report."""
    if not entries:
        return 0
    names = {n: c.get("name") for n, c in directory.claims(acc).items()}
    moves = [BulkMove(e.entry_id, cold_list, from_list=get_list) for e in entries]
    meanings = []
    for entry in entries:
        persistent, msg_id = m.entry_facts(entry.data)
        queue = names.get(m.adjunct_put_list(entry.adjunct))
        meanings.append(EntryMeaning(entry.entry_id, queue, persistent, msg_id))
        report.cold_queued.append(ColdMessage(acc.name, queue, msg_id, entry.entry_id))
    bulk_move(acc, moves, meanings, kind=ChangeKind.COLD_QUEUE, uow_id=uow_id, ignore_limit=True)
    return len(moves)
