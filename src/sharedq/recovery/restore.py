"""Rebuild a structure from a checkpoint image and the log after it.

This is the core of structure recovery (redbook §6.1.3.2): repopulate a new structure
from the SRDS, then apply every log update since the SRDS was taken; or, when no
structure checkpoint was ever taken, apply the whole log to an empty structure.  It
is kept apart from the decision of *when* to recover (the decision table, the master,
the waiting servers) so that the Spark pipeline's ``recover`` job can be checked
against exactly the computation the servers run.

Only recoverable objects come back: an SRDS row of a nonrecoverable object has no
data and is skipped, and nonrecoverable changes were never logged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sharedq.cf import (
    BulkWrite,
    CouplingFacility,
    ListEntry,
    ListStructure,
    StructureParams,
)
from sharedq.log import LogRecord
from sharedq.recovery.replay import replay
from sharedq.recovery.srds import ListControls, SrdsImage, table_to_entries

#: The user name recovery connects under.
RECOVERY_USER = "SHAREDQ.RECOVERY"
#: Entries per bulk write when loading an image.
LOAD_BATCH = 1024


@dataclass(frozen=True)
class StructureContents:
    """A structure's lists as requests see them: entries in order, and list controls.

    Two structures are the same, object for object, when their contents are equal:
    the same entries (id, key, data, adjunct, secondary key, version) on the same lists
    in the same order, and the same limit and authority on every list.
    """

    lists: dict[int, tuple[ListEntry, ...]]
    controls: dict[int, ListControls]

    def only(self, keep: set[bytes]) -> StructureContents:
        """The same contents restricted to the entries whose ids are in ``keep``."""
        return StructureContents(
            {
                n: tuple(e for e in entries if e.entry_id in keep)
                for n, entries in self.lists.items()
            },
            self.controls,
        )


@dataclass(frozen=True)
class RebuildResult:
    """What a rebuild did: entries loaded from the image, log records read and requests made."""

    loaded: int
    records: int
    requests: int
    image_seq: int | None
    last_seq: int | None


def contents(conn: ListStructure) -> StructureContents:
    """Read every list of a structure, with its controls."""
    list_count = conn.statistics().list_count
    lists: dict[int, tuple[ListEntry, ...]] = {}
    controls: dict[int, ListControls] = {}
    for number in range(list_count):
        lists[number] = tuple(conn.scan(number))
        info = conn.list_info(number)
        controls[number] = ListControls(number, info.limit, info.authority)
    return StructureContents(lists, controls)


def load_image(conn: ListStructure, image: SrdsImage, structure: str) -> int:
    """Put one structure's checkpointed lists onto an empty structure; returns the entries.

    Entries are written in list order at the tail of their sublists, so equal keys keep
    their order; the list limits are set after the entries, and ignored while loading,
    because a checkpoint may legitimately hold more than a limit (a backout ignores it).
    """
    loaded = 0
    batch: list[BulkWrite] = []
    for entry in table_to_entries(image.entries_of(structure)):
        batch.append(
            BulkWrite(
                entry.list_number,
                entry.key,
                entry.data,
                entry.adjunct,
                entry.secondary_key,
                entry.entry_id,
                entry.version,
            )
        )
        if len(batch) >= LOAD_BATCH:
            loaded += write_all(conn, batch)
    loaded += write_all(conn, batch)
    for controls in image.structures[structure].lists:
        set_controls(conn, controls)
    return loaded


def write_all(conn: ListStructure, writes: list[BulkWrite]) -> int:
    """Write every entry of ``writes`` (redriving as the budget asks), limits ignored.

    Empties the list and returns how many were written; an entry that cannot be written
    (its id in use, no room) is an error: the structure does not match what is loaded.
    """
    done = 0
    while done < len(writes):
        result = conn.write_entries(writes[done:], ignore_limit=True, budget=len(writes) - done)
        if result.error is not None:
            raise result.error
        done += result.processed
    writes.clear()
    return done


def set_controls(conn: ListStructure, controls: ListControls) -> None:
    """Give a list the limit and authority it had."""
    info = conn.list_info(controls.list_number)
    if info.limit != controls.limit:
        conn.set_list_controls(controls.list_number, limit=controls.limit)
    for _ in range(controls.authority - info.authority):
        conn.set_list_controls(controls.list_number, increment_authority=True)


def rebuild(
    facility: CouplingFacility,
    params: StructureParams,
    *,
    image: SrdsImage | None,
    records: Iterable[LogRecord],
    sequence_floor: int,
) -> RebuildResult:
    """Allocate ``params.name`` afresh and bring it to the state the image and log describe.

    ``records`` are the log records after the image's seq (all of them when there is no
    image), in log order; records about other structures are ignored.  The new
    structure numbers its changes from ``sequence_floor``, which must be at least the
    highest seq in the log, so that the log stays in order after recovery.
    """
    facility.create(params, sequence_floor=sequence_floor)
    with facility.connect(params.name, RECOVERY_USER) as conn:
        loaded = load_image(conn, image, params.name) if image is not None else 0
        result = replay(conn, records, structure_name=params.name)
    return RebuildResult(
        loaded=loaded,
        records=result.records,
        requests=result.requests,
        image_seq=None if image is None else image.structures[params.name].seq,
        last_seq=result.last_seq,
    )
