"""Room on the overflow structure (redbook §1.13, §2.8): when it is full, only its queues
are affected, and the primary goes on.

The overflow process moves a queue whole (a queue is never split between the two
structures), so before it records a queue it asks whether the whole queue, staged
parts included, fits in what the overflow structure has free; a queue that does not
stays in the primary, where its puts go on, and the process moves the ones that fit.
The count is made under the quiesce, but the overflow structure is not quiesced (puts
to queues already there go on), so a write of a move can still find it full: the
message then goes back to the head of its queue on the primary, a multi-part one with
the parts it had moved (:mod:`sharedq.cqs.overflow_parts`), and the moves stop
(:class:`NoRoom`), to be finished by the next scan when there is room.
"""

from __future__ import annotations

from collections.abc import Iterable

from sharedq.cf.errors import ListFull, StructureFull
from sharedq.cf.types import ById, Position
from sharedq.cqs.journal import Request
from sharedq.cqs.messages import unpack
from sharedq.cqs.names import text
from sharedq.cqs.site import Site

#: The list-structure errors that say the overflow structure has no room for a write.
FULL = (StructureFull, ListFull)


class NoRoom(Exception):
    """A move stopped because the overflow structure is full: not an error of the
    request that ran the check (its own change was made), so never raised past
    :mod:`sharedq.cqs.overflow`.  ``moved``: the messages moved before it stopped."""

    def __init__(self, moved: int) -> None:
        super().__init__(f"overflow structure full after {moved} moved")
        self.moved = moved


def need(site: Site, queue: bytes, element_size: int) -> tuple[int, int]:
    """The entries and data elements ``queue`` takes on ``site``, its messages' staged
    parts included, counted in elements of ``element_size`` (the overflow structure's,
    which may differ from the primary's)."""
    entries = elements = 0
    header = site.layout.header(queue)
    for entry in site.acc.scan(header, queue, queue):
        entries += 1
        elements += -(-len(entry.data) // element_size)
        prefix, _ = unpack(entry.data)
        if prefix.staging is not None:
            more = need(site, prefix.staging, element_size)
            entries, elements = entries + more[0], elements + more[1]
    return entries, elements


def fitting(
    primary: Site, overflow: Site, queues: Iterable[bytes]
) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """``queues`` split into those that fit on the overflow structure together, in the
    order given (largest first), and those that do not: a queue that does not fit is
    passed over, and a smaller one after it may still fit.  One request for the
    overflow structure's counts, one scan per queue."""
    stats = overflow.acc.conn.statistics()
    free_entries = stats.max_entries - stats.entries
    free_elements = stats.max_elements - stats.elements
    fit: list[bytes] = []
    left: list[bytes] = []
    for queue in queues:
        entries, elements = need(primary, queue, stats.element_size)
        if entries <= free_entries and elements <= free_elements:
            fit.append(queue)
            free_entries -= entries
            free_elements -= elements
        else:
            left.append(queue)
    return tuple(fit), tuple(left)


def move_back(primary: Site, entry_id: bytes, via: int, queue: bytes, uow: bytes) -> None:
    """A message of the primary's move queue whose write to the overflow structure
    found no room: back to the head of its queue on the primary, where it came from
    (the head: the messages after it are still there, those before it moved), logged
    as a move."""
    primary.acc.move(
        ById(entry_id, via),
        primary.layout.header(queue),
        new_key=queue,
        new_secondary_key=None,
        position=Position.HEAD,
        kind=primary.means(Request.MOVE),
        queue=text(queue),
        uow=uow,
    )
