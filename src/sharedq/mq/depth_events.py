"""Queue depth events: when they happen, and how a queue's event switches toggle.

Detection (spec §10.2 QD-1) runs at put and get time, on the depth the put or get
itself reports: the entries on the queue's put list after it, less the LHQC
(``Change.entries``; QD-11).  That is the count the list limit (max depth + 1)
enforces, so an uncommitted put counts from the moment it is written, and a get in
syncpoint (its message moved to the manager's get list) has lowered it already; an
event fires at the put or get that crosses, never at commit or backout.  A put or get
that crosses no limit makes no request for events: only the crossing one pays.

* High: a put makes ``depth * 100 >= QDEPTHHI * max_depth`` with QDPHIEV enabled.
* Low: a get (or a message a get found expired) makes ``depth * 100 <= QDEPTHLO *
  max_depth`` with QDPLOEV enabled.
* Full: a put refused for the list limit (``QueueFull``) with QDPMAXEV enabled.

Toggling (QD-2): High disables QDPHIEV and enables QDPLOEV and QDPMAXEV; Low disables
QDPLOEV and enables QDPHIEV and QDPMAXEV; Full enables QDPLOEV and disables QDPMAXEV
(our decision: otherwise every refused put on a full queue would be another event).

A shared queue (QD-3, QD-9) is toggled whatever the detecting manager's PERFMEV, with
the LHQC protocol: a rewrite conditioned on the list authority the manager read the
definition under.  The manager whose rewrite succeeds is the event's *coordinator*;
one that loses re-reads the definition, finds the switch off and has no event
(QD-T8).  The same rewrite records the event as pending (``PendingEvent``: CorrelId,
kind, coordinator), which the coordinator clears once it has broadcast it
(:mod:`sharedq.mq.event_broadcast`).  A nonshared queue (``Disposition.QMGR``) is
toggled only when the manager's PERFMEV is enabled, and has no broadcast.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from sharedq.cf import AuthorityMismatch, CFError
from sharedq.mq.core import ManagerCore
from sharedq.mq.definitions import DepthEvents, Disposition, PendingEvent, QueueState
from sharedq.mq.errors import JournalFailed
from sharedq.seam.access import tolerating

logger = logging.getLogger("sharedq.mq")

HIGH, LOW, FULL = "high", "low", "full"


def toggled(events: DepthEvents, kind: str) -> DepthEvents:
    """The switches after an event of ``kind`` (QD-2)."""
    if kind == HIGH:
        return replace(events, high_enabled=False, low_enabled=True, full_enabled=True)
    if kind == LOW:
        return replace(events, high_enabled=True, low_enabled=False, full_enabled=True)
    return replace(events, low_enabled=True, full_enabled=False)


def enabled(events: DepthEvents, kind: str) -> bool:
    """Whether an event of ``kind`` is switched on."""
    if kind == HIGH:
        return events.high_enabled
    if kind == LOW:
        return events.low_enabled
    return events.full_enabled


def crosses(events: DepthEvents, kind: str, depth: int, max_depth: int) -> bool:
    """Whether ``depth`` meets the limit of ``kind`` (limits are per cent of max depth)."""
    if kind == HIGH:
        return depth * 100 >= events.high_limit * max_depth
    if kind == LOW:
        return depth * 100 <= events.low_limit * max_depth
    return True


def after_put(core: ManagerCore, queue: QueueState, entries: int | None) -> None:
    """A put by this manager succeeded; its put list holds ``entries`` (``None``: the
    structure did not say, and a count is read only if a High event is enabled)."""
    depth = None if entries is None else entries - 1
    queue.stats.put(depth)
    if queue.definition.depth_events.high_enabled:
        _check(core, queue, HIGH, depth)


def after_get(core: ManagerCore, queue: QueueState, entries: int | None) -> None:
    """A get by this manager moved a message off the put list (gotten or found
    expired); the list holds ``entries`` after it."""
    depth = None if entries is None else entries - 1
    queue.stats.got(depth)
    if queue.definition.depth_events.low_enabled:
        _check(core, queue, LOW, depth)


def _check(core: ManagerCore, queue: QueueState, kind: str, depth: int | None) -> None:
    if depth is None:
        depth = _depth(queue)
    definition = queue.definition
    if crosses(definition.depth_events, kind, depth, definition.max_depth):
        detected(core, queue, kind, depth)


def after_batch(core: ManagerCore, queue: QueueState, puts: int, gets: int) -> None:
    """A batch (``put_many``, ``get_many``) changed the depth: its count is read (one
    request) only when an event the batch could cross is enabled."""
    stats = queue.stats
    stats.enqueues += puts
    stats.dequeues += gets
    definition = queue.definition
    events = definition.depth_events
    if not ((puts and events.high_enabled) or (gets and events.low_enabled)):
        return
    depth = _depth(queue)
    stats.high_depth = max(stats.high_depth, depth)
    for kind in (HIGH, LOW):
        if enabled(events, kind) and crosses(events, kind, depth, definition.max_depth):
            detected(core, queue, kind, depth)
            return


def queue_full(core: ManagerCore, queue: QueueState) -> None:
    """A put was refused: the queue is at its maximum depth."""
    if queue.definition.depth_events.full_enabled:
        detected(core, queue, FULL, queue.definition.max_depth)


def _depth(queue: QueueState) -> int:
    return int(queue.acc.list_info(queue.put_list).entries) - 1


def detected(core: ManagerCore, queue: QueueState, kind: str, depth: int) -> PendingEvent | None:
    """An event crossed: toggle the queue, and hand the event on if we coordinate it.

    Returns the event, or ``None`` when there is none: another manager toggled the
    queue first, or it is a nonshared queue and PERFMEV is disabled.  A failure to
    reach the structure is logged and leaves the put or get that detected it as it
    was: an event is never the reason an application's call fails.
    """
    shared = queue.definition.disposition is Disposition.SHARED
    if not shared and not core.performance_events:
        return None  # QD-9: a nonshared queue's switches stay until PERFMEV is enabled
    try:
        return _toggle(core, queue, kind, depth, shared)
    except (CFError, JournalFailed) as error:
        logger.warning("%s: %s event on %s not raised: %s", core.name, kind, queue.name, error)
        return None


def _toggle(
    core: ManagerCore, queue: QueueState, kind: str, depth: int, shared: bool
) -> PendingEvent | None:
    for _ in range(100):
        definition = queue.definition
        events = definition.depth_events
        if not enabled(events, kind) or not crosses(events, kind, depth, definition.max_depth):
            return None
        correl = core.correl_ids.new(core.stamps.stamp())
        event = PendingEvent(correl, kind, core.name, core.clock.now_s(), depth)
        new = replace(
            definition,
            depth_events=toggled(events, kind),
            pending_event=event if shared else None,
        )
        try:
            # Stands even if the log cannot record it: the switches are advisory, and
            # a structure rebuilt without it has the event enabled again.
            with tolerating():
                queue.rewrite(new)
        except AuthorityMismatch:
            queue.refresh()  # changed meanwhile: toggled by another manager, or altered
            continue
        queue.refresh()
        sink = core.event_sink
        if sink is not None:
            sink(queue, event)
        return event
    return None
