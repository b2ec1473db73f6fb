"""A journal that records every note a manager gives it, for the tests to look at."""

from __future__ import annotations

from typing import Any

from sharedq.mq import ChangeKind
from sharedq.seam import (
    BulkMoveNote,
    BulkNote,
    ChangeNote,
    ControlsNote,
    DeleteNote,
    Journal,
    MoveNote,
    UpdateNote,
    WriteNote,
)

#: The structure request each note stands for.
_REQUESTS = {
    WriteNote: "write",
    MoveNote: "move",
    DeleteNote: "delete",
    UpdateNote: "update",
    ControlsNote: "set_list_controls",
}


class Recording(Journal):
    """Keeps each note as a dict: its kind, structure, request, seqs and what it was
    about."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def changed(self, note: ChangeNote) -> None:
        if isinstance(note, ControlsNote):
            seq, entry_id = note.seq, None
        else:
            seq, entry_id = note.change.seq, note.change.entry.entry_id
        about = note.about
        self.records.append(
            {
                "kind": note.meaning,
                "structure": note.structure,
                "request": _REQUESTS[type(note)],
                "seqs": [seq],
                "id": entry_id,
                "queue": about.queue,
                "uow": about.uow_id,
                "persistent": about.persistent,
                "msg_id": about.msg_id,
            }
        )

    def bulk_changed(self, note: BulkNote) -> None:
        moved = isinstance(note, BulkMoveNote)
        self.records.append(
            {
                "kind": note.meaning,
                "structure": note.structure,
                "request": "move_entries" if moved else "delete_entries",
                "seqs": list(note.result.seqs),
                "uow": note.uow_id,
                "entries": list(note.entries),
                "items": list(note.moves if isinstance(note, BulkMoveNote) else note.entry_ids),
            }
        )

    def kinds(self) -> list[ChangeKind]:
        return [r["kind"] for r in self.records]
