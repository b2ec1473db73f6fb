"""Requests that cross the two structures of a pair in overflow (issue 18's gaps).

A ``move`` or ``unlock(to_queue=...)`` between a queue in overflow and one in the
primary cannot be one list request: the structures are separate.  It goes through the
*source* structure's move queue, in three logged steps:

1. the message to the source's move queue, keyed by its target, its secondary key
   :func:`crossing` of this CQS (not its plain name: a plain one would be finished
   inside the source structure at restart, and could then be doubled);
2. written to the target's queue in the structure the table routes the target to;
3. deleted from the move queue.

A CQS stopped between the steps finishes its own crossings when it connects again
(:func:`finish_crossings`): step 2 is done only when the same bytes (put time and unit
of work included) are not on the target queue already, so nothing is lost or doubled.

A read that misses is asked again of the other structure (:func:`read_missed`): a CQS
that had not read the table yet routes to the primary a queue that just moved, and a
late CQS's put may sit on the primary of a queue in overflow until the next scan.
"""

from __future__ import annotations

from contextlib import nullcontext

from sharedq.cf import ById, ByKey, NoSuchEntry, Position
from sharedq.cf.errors import ListMismatch
from sharedq.cf.types import HIGHEST_KEY, LOWEST_KEY
from sharedq.cqs import requests, takeback
from sharedq.cqs.errors import CQSError, CQSJournalFailed, CQSReason, cqs_error
from sharedq.cqs.journal import Request
from sharedq.cqs.layout import Private
from sharedq.cqs.message import Message, QueueCounts
from sharedq.cqs.messages import unpack
from sharedq.cqs.names import text
from sharedq.cqs.overflow import Overflow
from sharedq.cqs.requests import OWN_UOW
from sharedq.cqs.site import LockToken, Site
from sharedq.cqs.takeback import Origin

#: What a crossing's secondary key on the move queue starts with (the CQS's name follows).
CROSSING = b"*CROSS."


def crossing(owner: bytes) -> bytes:
    """The secondary key of this CQS's crossings on a move queue."""
    return (CROSSING + owner)[:32]


def other(flow: Overflow, site: Site) -> Site | None:
    """The pair's other structure (``None`` without an overflow structure)."""
    if flow.overflow is None:
        return None
    return flow.primary if site.acc is flow.overflow.acc else flow.overflow


def crosses(flow: Overflow | None, site: Site, target: bytes) -> bool:
    """Whether a move from ``site`` to ``target`` goes to the other structure."""
    if flow is None or flow.overflow is None:
        return False
    return flow.site(target).acc is not site.acc


def read_missed(flow: Overflow | None, site: Site, queue: bytes) -> Message | None:
    """A read found ``queue`` empty on ``site``: with an overflow structure, read the
    table again (one request) and, while the pair is in overflow mode, read the other
    structure too.  Costs two requests on a miss of a pair in overflow mode, one
    otherwise; nothing without an overflow structure."""
    if flow is None or flow.overflow is None:
        return None
    flow.refresh()
    if not flow.table.mode:
        return None
    there = other(flow, site)
    assert there is not None
    return requests.read(there, queue)


def cross(
    flow: Overflow,
    source: Site,
    locator: ById,
    source_queue: bytes,
    target: bytes,
    *,
    locked: LockToken | None = None,
    first: bool = False,
) -> bytes:
    """Move one message to ``target`` in the other structure of the pair, in the
    three steps above; returns its entry id there (each structure's ids are its own).
    ``first``: at the head of the target (an unlock's default), else at the tail."""
    entry = source.acc.read(locator)
    if entry is not None and unpack(entry.data)[0].staging is not None:
        raise cqs_error(
            CQSReason.QUEUE_IN_OVERFLOW,
            f"a multi-part message of {text(source_queue)} cannot move to {text(target)}: "
            f"they are in different structures of {flow.name}",
        )
    via = Private.MOVE.header(target)
    origin = Origin(source_queue)
    if locked is not None:
        origin = Origin(source_queue, source.owner, source.lock_version)
    with requests.translated(f"move {text(source_queue)} to {text(target)}"):
        guard = requests.holding(source, locked, force=False) if locked else nullcontext(None)
        try:
            with guard as version:
                staged = source.acc.move(
                    locator,
                    via,
                    new_key=target,
                    new_secondary_key=crossing(source.owner),
                    expect_version=version,
                    kind=source.means(Request.MOVE_STEP),
                    queue=text(source_queue),
                    uow=OWN_UOW,
                )
        except CQSJournalFailed as failure:  # step 1 taken back; later steps finish
            takeback.move_back(source, failure, origin)
            raise
        assert staged is not None
        done = arrive(flow, source, staged.entry.entry_id, via, first=first, look=False)
    assert done is not None
    return done


def arrive(
    flow: Overflow, source: Site, entry_id: bytes, via: int, *, first: bool, look: bool
) -> bytes | None:
    """Steps 2 and 3 of a crossing: to the structure the table routes its target to
    (the source itself if the target went back meanwhile), then off the move queue.
    ``look``: finishing a stopped crossing, so the copy may be there already."""
    entry = source.acc.read(ById(entry_id, via))
    if entry is None:
        return None
    dest = flow.site(entry.key)
    if dest.acc is source.acc:
        return requests.finish_move(source, entry_id, via, entry.key).entry.entry_id
    prefix, _ = unpack(entry.data)
    header = dest.layout.header(entry.key)
    found = None
    if look:
        found = next(
            (e for e in dest.acc.scan(header, entry.key, entry.key) if e.data == entry.data),
            None,
        )
    if found is None:
        found = dest.acc.write(
            header,
            entry.key,
            entry.data,
            position=Position.HEAD if first else Position.TAIL,
            kind=dest.means(Request.MOVE),
            queue=text(entry.key),
            uow=prefix.uow,
            persistent=prefix.recoverable,
        ).entry
    source.acc.delete(
        ById(entry_id, via),
        kind=source.means(Request.DELETE),
        queue=text(entry.key),
        uow=prefix.uow,
        data_wanted=False,
    )
    return found.entry_id


def finish_crossings(flow: Overflow, owner: bytes) -> int:
    """At connect: this CQS's crossings stopped between steps, on either structure,
    finished (the table read first); and its plain moves inside the overflow structure
    (restart finishes those of the primary only).  Returns how many."""
    if flow.overflow is None:
        return 0
    flow.refresh()
    mark, done = crossing(owner), 0
    for site, marks in ((flow.primary, {mark}), (flow.overflow, {mark, owner})):
        for via in Private.MOVE.headers():
            for entry in site.acc.scan(via, LOWEST_KEY, HIGHEST_KEY):
                if entry.secondary_key in marks:
                    arrive(flow, site, entry.entry_id, via, first=False, look=True)
                    done += 1
    return done


def first_of(site: Site, queue: bytes) -> ById | None:
    """The locator of ``queue``'s first message on ``site`` (``None``: empty)."""
    header = site.layout.header(queue)
    with requests.translated(f"move from {text(queue)}"):
        entry = site.acc.read(ByKey(header, queue))
    return None if entry is None else ById(entry.entry_id, header)


def holders(flow: Overflow | None, site: Site, queue: bytes) -> list[Site]:
    """Where a browse or query of ``queue`` looks: the structure it is routed to
    (``site``), then, while the pair is in overflow mode as this CQS last read the
    table, the other one (a late put may sit there until the next scan).  The order
    is the order reads take messages in."""
    if flow is None or flow.overflow is None or not flow.table.mode:
        return [site]
    there = other(flow, site)
    assert there is not None
    return [site, there]


def merged(counts: list[QueueCounts]) -> QueueCounts:
    """One queue's counts from the structures that hold it, as one."""
    ages = [c.oldest_age_s for c in counts if c.oldest_age_s is not None]
    return QueueCounts(
        counts[0].queue,
        sum(c.ready for c in counts),
        sum(c.locked for c in counts),
        max(ages) if ages else None,
    )


def cross_first(flow: Overflow, site: Site, queue: bytes, target: bytes) -> bytes | None:
    """A move of ``queue``'s first message to ``target`` in the other structure;
    ``None`` when the queue is empty.  Another reader that takes the first message
    meanwhile is not an error: the next one is tried."""
    while (head := first_of(site, queue)) is not None:
        try:
            return cross(flow, site, head, queue, target)
        except (NoSuchEntry, ListMismatch):
            continue
        except CQSError as error:
            if not isinstance(error.__cause__, NoSuchEntry | ListMismatch):
                raise
    return None
