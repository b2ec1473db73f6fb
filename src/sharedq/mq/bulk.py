"""Bulk moves and deletes by entry id, redriven until done.

Bulk requests stop after their budget of entries; each helper here is redriven from the
first entry not processed (p[235]), and treats an entry already gone or already moved as
done, which is what makes a recovery's redo safe.  Syncpoint, peer recovery and the
manager's commands all move and delete this way.
"""

from __future__ import annotations

from collections.abc import Sequence

from sharedq.cf import BulkMove, ListMismatch
from sharedq.mq.journal import ChangeKind
from sharedq.seam.access import StructureAccess
from sharedq.seam.notes import EntryMeaning


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
