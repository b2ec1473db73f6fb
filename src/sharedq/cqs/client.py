"""The CQS's side of its recovery log (``sharedq.seam.recovery_log.ServerClient``).

Which entries of a CQS structure a structure checkpoint keeps: every message entry
whose prefix says recoverable, wherever it is (ready, staging, lock, move, delete and
cold queues); not the recovery machinery's control entries, which recovery rewrites.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sharedq.cf import ListEntry
from sharedq.cqs.layout import Private
from sharedq.cqs.messages import PREFIX_LENGTH, unpack
from sharedq.recovery import StructureContents
from sharedq.recovery.structure_checkpoint import Classifier


class CQSClient:
    """What a CQS tells its recovery log."""

    def __init__(self, name: str, system: str) -> None:
        self._name = name
        self._system = system

    def classifier(self, structure: str, control_entries: Sequence[ListEntry]) -> Classifier:
        def of(entry: ListEntry) -> tuple[bool, bytes | None, bytes | None]:
            if entry.list_number == Private.CONTROL.first or len(entry.data) < PREFIX_LENGTH:
                return False, None, None
            prefix, _ = unpack(entry.data)
            return prefix.recoverable, entry.key, prefix.uow

        return of

    def identity(self) -> dict[str, Any]:
        return {"cqs": self._name, "system": self._system}


def recoverable_contents(found: StructureContents) -> StructureContents:
    """A CQS structure's contents restricted to what structure recovery brings back:
    the recoverable messages (what tests compare a recovered structure by)."""
    classify = CQSClient("-", "-").classifier("-", ())
    keep = {e.entry_id for entries in found.lists.values() for e in entries if classify(e)[0]}
    return found.only(keep)
