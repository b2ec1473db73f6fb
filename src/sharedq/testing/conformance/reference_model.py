"""A deliberately naive model of one list structure, for the stateful check.

Plain Python lists scanned linearly: slow, obviously right, and written from the
interface's docstrings rather than from any backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sharedq.cf import CFReason, ListEntry, Position


@dataclass
class ModelEntry:
    entry_id: bytes
    list_number: int
    key: bytes
    data: bytes
    adjunct: bytes
    secondary_key: bytes | None
    version: int

    def elements(self, element_size: int) -> int:
        return -(-len(self.data) // element_size)

    def as_entry(self, element_size: int) -> ListEntry:
        return ListEntry(
            self.entry_id,
            self.list_number,
            self.key,
            self.data,
            self.adjunct,
            self.secondary_key,
            self.version,
            self.elements(element_size),
        )


class ModelError(Exception):
    def __init__(self, reason: CFReason) -> None:
        super().__init__(reason.name)
        self.reason = reason


@dataclass
class StructureModel:
    list_count: int
    max_entries: int
    max_elements: int
    element_size: int = 256
    lists: dict[int, list[ModelEntry]] = field(default_factory=dict)
    limits: dict[int, int | None] = field(default_factory=dict)
    authority: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for n in range(self.list_count):
            self.lists[n] = []
            self.limits[n] = None
            self.authority[n] = 0

    # -- queries ----------------------------------------------------------------------

    def all_entries(self) -> list[ModelEntry]:
        return [e for n in range(self.list_count) for e in self.lists[n]]

    def find(self, entry_id: bytes) -> ModelEntry | None:
        return next((e for e in self.all_entries() if e.entry_id == entry_id), None)

    def elements_in_use(self) -> int:
        return sum(e.elements(self.element_size) for e in self.all_entries())

    def snapshot(self, list_number: int) -> list[ListEntry]:
        return [e.as_entry(self.element_size) for e in self.lists[list_number]]

    # -- placement ---------------------------------------------------------------------

    def _insert(self, entry: ModelEntry, position: Position) -> None:
        entries = self.lists[entry.list_number]
        if position is Position.TAIL:
            at = len(entries)
            while at > 0 and entries[at - 1].key > entry.key:
                at -= 1
        else:
            at = 0
            while at < len(entries) and entries[at].key < entry.key:
                at += 1
        entries.insert(at, entry)

    def _check_limit(self, list_number: int, ignore_limit: bool) -> None:
        limit = self.limits[list_number]
        if not ignore_limit and limit is not None and len(self.lists[list_number]) >= limit:
            raise ModelError(CFReason.LIST_FULL)

    # -- requests ----------------------------------------------------------------------

    def write(self, entry: ModelEntry, position: Position, ignore_limit: bool) -> ListEntry:
        if self.find(entry.entry_id) is not None:
            raise ModelError(CFReason.ENTRY_EXISTS)
        self._check_limit(entry.list_number, ignore_limit)
        if len(self.all_entries()) + 1 > self.max_entries:
            raise ModelError(CFReason.STRUCTURE_FULL)
        if self.elements_in_use() + entry.elements(self.element_size) > self.max_elements:
            raise ModelError(CFReason.STRUCTURE_FULL)
        self._insert(entry, position)
        return entry.as_entry(self.element_size)

    def head(self, list_number: int) -> ModelEntry | None:
        entries = self.lists[list_number]
        return entries[0] if entries else None

    def move(
        self,
        entry: ModelEntry,
        to_list: int,
        new_key: bytes | None,
        increment_version: bool,
        ignore_limit: bool,
        position: Position = Position.TAIL,
    ) -> ListEntry:
        if to_list != entry.list_number:
            self._check_limit(to_list, ignore_limit)
        self.lists[entry.list_number].remove(entry)
        entry.list_number = to_list
        if new_key is not None:
            entry.key = new_key
        if increment_version:
            entry.version += 1
        self._insert(entry, position)
        return entry.as_entry(self.element_size)

    def delete(self, entry: ModelEntry) -> ListEntry:
        self.lists[entry.list_number].remove(entry)
        return entry.as_entry(self.element_size)

    def update_data(self, entry: ModelEntry, data: bytes) -> ListEntry:
        grow = -(-len(data) // self.element_size) - entry.elements(self.element_size)
        if grow > 0 and self.elements_in_use() + grow > self.max_elements:
            raise ModelError(CFReason.STRUCTURE_FULL)
        entry.data = data
        return entry.as_entry(self.element_size)

    def clone(self) -> StructureModel:
        copy = replace(self, lists={}, limits=dict(self.limits), authority=dict(self.authority))
        copy.lists = {n: [replace(e) for e in es] for n, es in self.lists.items()}
        return copy
