"""A queue manager's own structure, where its nonshared queues live (QSGDISP(QMGR)).

A nonshared queue is reachable by the manager that defined it and by no other
(spec §10.1, ``QSGDISP``; seed 004, "Differences between shared and nonshared
queues").  Rather than a second implementation of queues, each manager has a list
structure of its own, in a memory facility of its own that no other manager can
connect to, laid out as the group's structures are: a control list whose ``Q``
entries are the manager's nonshared queues, a put list per queue with its LHQC, the
manager's get and expiry lists.  It is connected through the same path as a shared
structure (:func:`sharedq.mq.starting.connect`, one
:class:`~sharedq.seam.access.StructureAccess`), so every code path of the queue
manager (units of work, browse, get-wait, max depth, depth events) runs unchanged
on it, and a unit of work may span shared and nonshared queues.

The structure is made at the manager's first nonshared queue: a manager that
defines none has no structure of its own, and nothing in its start changes.  Where
its messages go when the manager stops:

* without recovery settings the structure lives as long as the manager object: a
  new incarnation starts with no nonshared queues (and a journal given to the
  manager instead of recovery settings is told nothing of them);
* with recovery settings it is a structure pair of its own, logged to its own log
  stream and checkpointed to its own SRDSs under ``<root>/<structure name>/``, which
  only this manager writes.  A new incarnation (after a close, or a SIGKILL) finds
  that pair, makes the structure (empty) as it starts, and structure recovery
  rebuilds it from its SRDS and log, as it rebuilds any lost structure: persistent
  messages are back, nonpersistent ones are gone (as on MQ's page sets), and so are
  uncommitted changes, which restart backs out.

The structure is named :func:`private_structure_name` (``@PRIVATE.<id>``) and is
numbered in the group's directory like any structure, so that a unit's descriptors
can name it.
"""

from __future__ import annotations

from sharedq.cf import CouplingFacility, StructureParams, open_facility
from sharedq.mq import directory, starting
from sharedq.mq.core import ManagerCore
from sharedq.mq.sizing import structure_params
from sharedq.recovery.settings import RecoverySettings
from sharedq.seam.access import StructureAccess
from sharedq.seam.notes import NO_JOURNAL
from sharedq.seam.recovery_log import RecoveryLog

#: How every manager's own structure is named: the prefix, then its id.
PRIVATE_PREFIX = "@PRIVATE."
#: Nonshared queues a manager's own structure is sized for, and messages on them in
#: all (its facility is in memory: the size is a limit, not an allocation).
PRIVATE_QUEUES = 256
PRIVATE_MESSAGES = 200_000


def private_structure_name(qm_id: int) -> str:
    """The name of manager ``qm_id``'s own structure (unique in the group)."""
    return f"{PRIVATE_PREFIX}{qm_id:03d}"


def is_private(structure: str) -> bool:
    """Whether ``structure`` is some manager's own structure (not for shared queues)."""
    return structure.startswith(PRIVATE_PREFIX)


def default_params(qm_id: int) -> StructureParams:
    """The size of a manager's own structure."""
    return structure_params(
        private_structure_name(qm_id),
        queues=PRIVATE_QUEUES,
        managers=1,
        messages=PRIVATE_MESSAGES,
    )


class PrivateStore:
    """A manager's own structure and its facility, which only it reaches.

    Made at the manager's first nonshared queue, so that a manager that has none
    pays nothing for them (no structure, no requests, no log).  A manager whose
    previous incarnation had some (its recovery root has the structure's pair) makes
    it as it starts instead, before its recovery log (which logs the structure as a
    pair of its own: :attr:`own`) and its restart (which backs out what that
    incarnation left in it).
    """

    def __init__(self, qm_id: int, recovery: RecoverySettings | None) -> None:
        self.name = private_structure_name(qm_id)
        self.facility: CouplingFacility | None = None
        self._log: RecoveryLog | None = None
        if recovery is not None and (recovery.root / self.name).is_dir():
            self.facility = self._create(qm_id)

    def __repr__(self) -> str:
        return f"<PrivateStore {self.name} {'made' if self.facility else 'not made'}>"

    def _create(self, qm_id: int) -> CouplingFacility:
        facility = open_facility("memory://")  # a new one: nobody else's
        facility.create(default_params(qm_id))
        return facility

    @property
    def own(self) -> dict[str, CouplingFacility]:
        """For ``RecoveryLog(own=...)``: the structure and its facility, if made at
        start."""
        return {} if self.facility is None else {self.name: self.facility}

    def start(self, core: ManagerCore, log: RecoveryLog | None) -> None:
        """At the manager's start, after the administrative structure: connect to the
        structure if it was made (its log rebuilds it), and let go of the names of
        nonshared queues that are no more."""
        self._log = log
        defined: set[str] = set()
        if self.facility is not None:
            acc = self._connect(core, self.facility)
            defined = {entry.name for entry in directory.queue_entries(acc)}
        for name in directory.queue_names_held(core.admin, core.qm_id):
            if name not in defined:
                # Its queue is gone (no recovery settings, or a structure started
                # empty): the name is free for a shared queue again.
                directory.release_queue_name(core.admin, name, core.qm_id)

    def ensure(self, core: ManagerCore) -> StructureAccess:
        """The manager's access to its own structure, made and connected the first
        time (with a recovery log, a new pair of it)."""
        with core.lock:
            if core.private is not None:
                return core.private
            self.facility = self._create(core.qm_id)
            log = self._log
            if log is not None:
                log.add_own(self.name, self.facility)
            acc = self._connect(core, self.facility)
            if log is not None:
                log.started_own(self.name)
            return acc

    def _connect(self, core: ManagerCore, facility: CouplingFacility) -> StructureAccess:
        acc = starting.connect(core, self._log, self.name, facility)
        if self._log is None:
            # Nothing outlives the manager: a journal given instead of recovery
            # settings hears of the group's structures only.
            acc.journal = NO_JOURNAL
        acc.number = directory.structure_number(core.admin, self.name)
        starting.claim_lists(core, acc, admin=False)
        core.private = acc
        return acc
