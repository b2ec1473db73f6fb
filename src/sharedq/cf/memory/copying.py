"""Bulk writes and snapshots of a structure held in memory: loading and copying it whole.

Structure recovery loads a checkpoint and a log into a new structure, and a structure
checkpoint copies one while its users wait: both handle every entry of a structure at
once.  :func:`write_entries` is ``write`` for many entries in one request;
:class:`MemorySnapshot` is what ``snapshot`` returns.  Entries are immutable tuples, so
a snapshot only collects the tuples each list holds, under the structure's lock, and
nothing is copied: that keeps the time the structure is held to a pass over its lists.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from sharedq.cf import validation as v
from sharedq.cf.api import StructureSnapshot
from sharedq.cf.errors import CFReason, cf_error
from sharedq.cf.memory.structure import DEFAULT_BULK_BUDGET, ORDINAL_BASE, MemoryStructure
from sharedq.cf.types import BulkResult, BulkWrite, ListEntry, ListInfo, Position

_TAIL = Position.TAIL


def write_entries(
    s: MemoryStructure,
    user_id: int,
    writes: Sequence[BulkWrite],
    *,
    ignore_limit: bool,
    not_locked: Iterable[int],
    budget: int | None,
) -> BulkResult:
    """``ListStructure.write_entries`` on a structure whose lock the caller holds."""
    params = s.params
    v.check_budget(budget)
    elements_of = [v.check_bulk_write(w, params.list_count, params.element_size) for w in writes]
    s.check_conditions(user_id, 0, None, not_locked)
    seqs: list[int] = []
    processed = 0
    entries = s.entries
    capacity = s.capacity
    for write, elements in zip(writes[: budget or DEFAULT_BULK_BUDGET], elements_of, strict=False):
        entry_id = write.entry_id
        list_number = write.list_number
        try:
            if entry_id is not None and entry_id in entries:
                raise cf_error(CFReason.ENTRY_EXISTS, f"entry id {entry_id.hex()} is in use")
            lst = s.lists[list_number]
            if not ignore_limit and lst.limit is not None and len(lst.order) >= lst.limit:
                s.check_limit(list_number, ignore_limit)
            if (
                len(entries) >= capacity.max_entries
                or s.elements_in_use + elements > capacity.max_elements
            ):
                s.check_room(1, elements)
            seq = s.seq + 1
            if entry_id is None:
                entry_id = seq.to_bytes(12, "big")
                if entry_id in entries:
                    raise cf_error(CFReason.ENTRY_EXISTS, f"entry id {entry_id.hex()} is in use")
        except Exception as error:
            return BulkResult(len(writes), processed, tuple(seqs), (), error)
        s.seq = seq
        entry = ListEntry(
            entry_id,
            list_number,
            write.key,
            write.data,
            write.adjunct,
            write.secondary_key,
            write.version,
            elements,
        )
        s.elements_in_use += elements
        s.insert(entry, ORDINAL_BASE + seq if write.position is _TAIL else ORDINAL_BASE - seq)
        if s.touched:
            s.notify()
        seqs.append(seq)
        processed += 1
    return BulkResult(len(writes), processed, tuple(seqs))


class MemorySnapshot(StructureSnapshot):
    """The lists of a memory structure as they were: the entry tuples themselves."""

    def __init__(self, s: MemoryStructure) -> None:
        """Collect the structure's lists; the caller holds its lock."""
        super().__init__(
            s.seq,
            s.params,
            tuple(
                ListInfo(n, len(lst.order), lst.elements, lst.limit, lst.authority)
                for n, lst in enumerate(s.lists)
            ),
        )
        self._lists: list[list[ListEntry]] | None = [list(lst.order.values()) for lst in s.lists]

    def __repr__(self) -> str:
        state = "released" if self._lists is None else "held"
        return f"<MemorySnapshot {self.params.name!r} seq={self.seq} {state}>"

    def entries(self, list_number: int) -> Iterator[ListEntry]:
        if self._lists is None:
            raise cf_error(CFReason.BAD_ARGUMENT, "the snapshot was released")
        v.check_list(list_number, len(self._lists))
        return iter(self._lists[list_number])

    def release(self) -> None:
        self._lists = None
