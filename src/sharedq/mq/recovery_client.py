"""The queue manager's side of its recovery log (``sharedq.seam.recovery_log``).

A server's recovery log asks it two things: which entries of a structure are
recoverable (its persistent messages and its own control objects are; nonpersistent
messages are not: :mod:`sharedq.mq.classify`), and who it is, for its restart state and
its shutdown record.  Its log records name the queue manager's changes under the
payload key ``"mq"``, and read a message's facts from the queue manager's message
header (:class:`~sharedq.mq.logjournal.LogJournal`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sharedq.cf import ListEntry
from sharedq.mq.classify import classify, list_roles
from sharedq.recovery.structure_checkpoint import Classifier


class ManagerClient:
    """What a queue manager tells its recovery log."""

    def __init__(self, name: str, qm_id: int) -> None:
        self._name = name
        self._qm_id = qm_id

    def classifier(self, structure: str, control_entries: Sequence[ListEntry]) -> Classifier:
        roles = list_roles(control_entries)

        def of(entry: ListEntry) -> tuple[bool, bytes | None, bytes | None]:
            found = classify(entry, roles)
            return found.recoverable, found.queue, found.uow

        return of

    def identity(self) -> dict[str, Any]:
        return {"qmgr": self._name, "qm_id": self._qm_id}
