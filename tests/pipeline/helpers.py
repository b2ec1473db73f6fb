"""Helpers shared by the pipeline's tests."""

from __future__ import annotations

from sharedq.recovery import StructureContents
from sharedq.recovery.srds import version_to_i64


def entry_rows(name: str, contents: StructureContents) -> list[tuple[object, ...]]:
    """The rows the ``recover`` job's ``entries`` table holds for ``contents``."""
    return [
        (
            name,
            number,
            position,
            e.entry_id,
            e.key,
            e.secondary_key,
            version_to_i64(e.version),
            e.adjunct,
            e.data,
        )
        for number, entries in contents.lists.items()
        for position, e in enumerate(entries)
    ]


def list_rows(name: str, contents: StructureContents) -> list[tuple[object, ...]]:
    """The rows the ``recover`` job's ``lists`` table holds for ``contents``."""
    return [(name, c.list_number, c.limit, c.authority) for c in contents.controls.values()]
