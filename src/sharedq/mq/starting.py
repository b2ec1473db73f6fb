"""Connecting a queue manager to its structures, and its restart.

What a manager does when it starts, and again when it reconnects after a structure
was lost: for each structure, structure recovery first if it needs it (its recovery
log), then the connection, through a :class:`~sharedq.seam.access.StructureAccess`, and
the lists it claims there (its get and expiry lists; on the administrative structure
its descriptor list too).  Then *restart* (§5.21): the units of work its previous
incarnation left are finished by peer recovery of itself, and prepared ones are kept
in doubt, rebuilt in memory to be resolved.
"""

from __future__ import annotations

from sharedq.cf import CouplingFacility
from sharedq.cf.types import MAX_ELEMENTS_PER_ENTRY, MAX_ENTRY_BYTES
from sharedq.mq import descriptors as d
from sharedq.mq import directory, peer_recovery
from sharedq.mq import messages as m
from sharedq.mq.core import ManagerCore
from sharedq.mq.errors import journal_failed, translated
from sharedq.mq.peer_recovery import PeerRecoveryReport
from sharedq.mq.units import Status, Trop, UowState, Written
from sharedq.mq.uow import UnitOfWork
from sharedq.seam.access import StructureAccess
from sharedq.seam.recovery_log import RecoveryLog


def connect(
    core: ManagerCore,
    log: RecoveryLog | None,
    structure: str,
    facility: CouplingFacility | None = None,
) -> StructureAccess:
    """Connect to a structure (recovering it first when it needs it).

    ``facility``: where it is, if not in the group's facility (the manager's own
    structure for its nonshared queues: :mod:`sharedq.mq.private_queues`).
    """
    if log is not None:
        log.prepare(structure)
    conn = (facility or core.facility).connect(structure, core.name)
    acc = StructureAccess(conn, 0, core.journal, journal_failed, core.faults, m.message_facts)
    if log is not None:
        log.attach(acc)
    core.structures[structure] = acc
    stats = conn.statistics()
    core.list_counts[structure] = stats.list_count
    entry_bytes = min(MAX_ELEMENTS_PER_ENTRY * stats.element_size, MAX_ENTRY_BYTES)
    core.entry_limits[structure] = entry_bytes - m.header_length(core.name)
    return acc


def claim_lists(core: ManagerCore, acc: StructureAccess, *, admin: bool) -> None:
    """Claim this manager's lists in a structure (or find them claimed already)."""
    core.lists[acc.name] = directory.manager_lists(
        acc, core.qm_id, core.name, core.list_counts[acc.name], admin=admin
    )


def restart(core: ManagerCore, log: RecoveryLog | None, wait: float) -> PeerRecoveryReport:
    """Finish what this manager's previous incarnation left (§5.21, restart).

    With a recovery log the restart is warm (its log from its last system
    checkpoint decides "begin commit" units) or cold (asked for, or its log was
    deleted: the messages it had gotten go to the cold queue).
    """
    report = PeerRecoveryReport(core.name)
    warm = True
    if log is not None:
        with translated("restart"):
            warm, report.start_reason = log.decide_restart()
        report.start = "warm" if warm else "cold"
    kept: dict[bytes, d.UowRecord] = {}
    for acc in core.structures.values():
        with translated("restart"):
            for record in peer_recovery.recover_structure(
                core, acc, core.qm_id, core.name, report, owner=True, wait=wait, cold=not warm
            ):
                kept[record.uow_id] = record
    for record in kept.values():
        _rebuild(core, record)
    return report


def _rebuild(core: ManagerCore, record: d.UowRecord) -> None:
    """A prepared unit of the previous incarnation, back in memory to be resolved."""
    uow = UnitOfWork(core, None)
    uow.restore_id(record.uow_id)
    uow.state = UowState.PREPARED
    numbers = {acc.number: acc for acc in core.structures.values()}
    for number in record.parts:
        acc = numbers.get(number)
        if acc is None:
            continue  # resolvable once the manager connects to that structure
        _, queues = record.ops(number)
        claims = directory.claims(acc)
        for queue_record in queues:
            state = core.state(claims[queue_record.put_list]["name"])
            trqs = uow.trqs_for(state)
            for op in queue_record.ops:
                trqs.trops.append(
                    Trop(
                        op.kind,
                        op.entry_id,
                        op.key,
                        op.persistent,
                        op.msg_id,
                        op.secondary,
                        None,
                        trqs,
                    )
                )
    status = record.status_entry()
    assert status is not None
    uow.descriptors = Written(
        Status.IN_PREPARE,
        {n: record.all_entry_ids(n) for n in record.parts},
        status.entry_id,
        status.version,
        record.muse.entry_id if record.muse is not None else None,
    )
    core.recovered[record.uow_id] = uow
