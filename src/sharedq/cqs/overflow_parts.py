"""A message's move to the overflow structure, whole or not at all (redbook §2.5, §2.8).

A multi-part message is part 1 on its queue, naming a staging queue of its own that
holds parts 2..n.  The overflow process moves part 1 to the primary's move queue
*first* (secondary key ``MOVING``): from then on no reader can take the message, and a
master that takes over finds it there and finishes it.  Then its staged parts go to
the same staging queue on the overflow structure, in order, then part 1.

The overflow structure is not quiesced during the process (puts to queues already in
it go on), so any of those writes can find it full.  The parts already written then
go back to the staging queue on the primary, at its head, last first, so that they
are in their original order before the parts that never left, and part 1 goes back
to the head of its queue: the message is whole on the primary, read whole and in
order, and the next scan with room moves it.  Each step is logged: a write to one
structure, then the delete on the other.

Every step is made so that a master stopped between two of them leaves what the next
one can finish: a part is written before it is deleted where it came from, and a
part found on both structures (the same part number of the same staging queue) is
deleted from the side it is leaving, never written twice.  The structures hold no
copy of a part other than those.
"""

from __future__ import annotations

from collections.abc import Callable

from sharedq.cf.types import HIGHEST_KEY, LOWEST_KEY, ById, ByKey, ListEntry, Position
from sharedq.cqs.journal import Request
from sharedq.cqs.layout import LIST_COUNT, Private
from sharedq.cqs.messages import PREFIX_LENGTH, unpack
from sharedq.cqs.names import text
from sharedq.cqs.site import Site

Fault = Callable[[str], None]
#: Where a reader may hold a message it read from its queue, under the same key.
_HELD = (Private.LOCK, Private.DELETE)


def write_whole(
    primary: Site, overflow: Site, entry: ListEntry, *, look: bool, fault: Fault
) -> None:
    """Part 1 ``entry`` (on the primary's move queue) and its staged parts to the
    overflow structure; the list structure's full error when there is no room (what
    was written stays: :func:`take_back`).  ``look``: a dead master's move, whose
    part 1 may be written already (:func:`_written`)."""
    prefix, _ = unpack(entry.data)
    carried = 0
    if prefix.staging is not None:
        carried = carry(primary, overflow, prefix.staging, fault)
    if look and not carried and _written(overflow, entry):
        return
    overflow.acc.write(
        overflow.layout.header(entry.key),
        entry.key,
        entry.data,
        kind=overflow.means(Request.PUT),
        queue=text(entry.key),
        uow=prefix.uow,
        persistent=prefix.recoverable,
    )


def _written(overflow: Site, entry: ListEntry) -> bool:
    """Whether a dead master wrote part 1 ``entry`` to the overflow structure before it
    stopped.  The same bytes (put time and unit of work included) on its queue there,
    ready, locked by a reader or being deleted, say so.  A multi-part message says so
    exactly: part 1 is written only once its parts are all over, and its staging queue
    is its own, so it was written if its parts are gone (read and deleted there) or
    if any entry of the structure names them (read and moved to another queue).  A
    one-part message read and deleted, or moved, there meanwhile cannot be told from
    one never written: it is written again (docs/cqs.md, "Not done")."""
    key, acc = entry.key, overflow.acc
    for header in (overflow.layout.header(key), *(p.header(key) for p in _HELD)):
        if any(e.data == entry.data for e in acc.scan(header, key, key)):
            return True
    staging = unpack(entry.data)[0].staging
    if staging is None:
        return False
    if not _numbers(overflow, staging):
        return True
    for number in range(Private.CONTROL.count, LIST_COUNT):
        for found in acc.scan(number, LOWEST_KEY, HIGHEST_KEY):
            if len(found.data) >= PREFIX_LENGTH:
                head = unpack(found.data)[0]
                if head.part == 0 and head.staging == staging:
                    return True
    return False


def carry(primary: Site, overflow: Site, staging: bytes, fault: Fault) -> int:
    """The staged parts still on the primary to the tail of the same staging queue on
    the overflow structure, first first (those a dead master moved are there already,
    before them); returns how many were written."""
    there = _numbers(overflow, staging)
    header, written = primary.layout.header(staging), 0
    while (part := primary.acc.read(ByKey(header, staging))) is not None:
        prefix, _ = unpack(part.data)
        if prefix.part not in there:
            overflow.acc.write(
                overflow.layout.header(staging),
                staging,
                part.data,
                kind=overflow.means(Request.PUT),
                queue=text(staging),
                uow=prefix.uow,
                persistent=prefix.recoverable,
            )
            written += 1
            fault("part-written")
        _delete(primary, part, header)
    return written


def take_back(primary: Site, overflow: Site, staging: bytes, fault: Fault) -> int:
    """The staged parts on the overflow structure back to the head of the same staging
    queue on the primary, last first, so that they precede, in order, the parts that
    never left; logged as moves.  Returns how many were written back.  Raises the list
    structure's full error if the primary has no room either (possible only outside
    the quiesce, another CQS having filled what the parts left free)."""
    there = _numbers(primary, staging)
    header = overflow.layout.header(staging)
    back = 0
    for part in reversed(list(overflow.acc.scan(header, staging, staging))):
        prefix, _ = unpack(part.data)
        if prefix.part not in there:
            primary.acc.write(
                primary.layout.header(staging),
                staging,
                part.data,
                position=Position.HEAD,
                kind=primary.means(Request.MOVE),
                queue=text(staging),
                uow=prefix.uow,
                persistent=prefix.recoverable,
            )
            back += 1
            fault("part-back")
        _delete(overflow, part, header)
    return back


def _numbers(site: Site, staging: bytes) -> set[int]:
    """The part numbers of ``staging``'s parts on ``site`` (one scan)."""
    header = site.layout.header(staging)
    return {unpack(e.data)[0].part for e in site.acc.scan(header, staging, staging)}


def _delete(site: Site, part: ListEntry, header: int) -> None:
    prefix, _ = unpack(part.data)
    site.acc.delete(
        ById(part.entry_id, header),
        kind=site.means(Request.DELETE),
        queue=text(part.key),
        uow=prefix.uow,
        data_wanted=False,
    )
