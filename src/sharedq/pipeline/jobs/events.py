"""``sharedq pipeline events``: queue depth events, each queue's depth around them, and
the messages of each event grouped by CorrelId.

Writes ``<output>/events/depth`` (a queue's committed depth after every change that
moved it), ``events/events`` (one row per DEPTH_EVENT record, with the committed depth
in the log at that record) and ``events/groups`` (one row per CorrelId: the event's
type, queue and coordinator, its n messages and their managers, summed enqueue and
dequeue counts), and a summary.  The figures count events per type and per queue and
list the groups (up to :data:`FIGURE_GROUPS`).
"""

from __future__ import annotations

from typing import Any

from sharedq.pipeline.job import JobContext, JobResult, write_table
from sharedq.pipeline.jobs.track import message_table
from sharedq.pipeline.transforms.events import (
    EVENT_TYPES,
    depth_at_changes,
    depth_event_records,
    depth_series,
    event_anchors,
    event_groups,
    event_rows,
)
from sharedq.pipeline.transforms.messages import message_events
from sharedq.pipeline.transforms.statistics import depth_changes, opening_depths

#: Groups listed in the figures (and so in a report's JSON); the table has them all.
FIGURE_GROUPS = 50


def run(ctx: JobContext, *, no_srds: bool = False, limit: int = 20, **_: Any) -> JobResult:
    """Queue depth events: each queue's depth over time with every event marked, and the
    event messages of each CorrelId grouped (type, queue, coordinator, managers)."""
    out = ctx.job_dir("events")
    log = ctx.log()
    messages = message_table(ctx, no_srds=no_srds)
    ctx.step("following each queue's depth")
    changes = message_events(log)
    records = depth_event_records(log).cache()
    at_changes = depth_at_changes(
        depth_changes(changes, messages), opening_depths(messages), event_anchors(records)
    ).cache()
    tables = {"depth": write_table(depth_series(at_changes), out / "depth")}
    ctx.step("marking the depth events")
    events = event_rows(records, at_changes).cache()
    tables["events"] = write_table(events, out / "events")
    ctx.step("grouping event messages by CorrelId")
    groups = event_groups(events).cache()
    tables["groups"] = write_table(groups, out / "groups")
    ctx.step("summarising")
    group_rows = groups.orderBy("time", "correl_id").collect()
    for frame in (groups, events, at_changes, records):
        frame.unpersist()
    record_count = sum(int(g.records) for g in group_rows)
    figures: dict[str, Any] = {
        "records": record_count,
        "groups": len(group_rows),
        "groups_per_type": {t: sum(1 for g in group_rows if g.event == t) for t in EVENT_TYPES},
        "messages": sum(int(g.messages) for g in group_rows),
        "event_groups": [_group_figure(g) for g in group_rows[:FIGURE_GROUPS]],
    }
    summary = _summary(record_count, group_rows, limit)
    return JobResult("events", summary, tables=tables, figures=figures)


def _group_figure(row: Any) -> dict[str, Any]:
    return {
        "correl_id": row.correl_id,
        "time": row.time.isoformat() if row.time is not None else None,
        "event": row.event,
        "structure": row.structure,
        "queue": row.queue,
        "coordinator": row.coordinator,
        "messages": int(row.messages),
        "managers": list(row.managers or []),
        "enqueues": int(row.enqueues),
        "dequeues": int(row.dequeues),
        "depth": row.depth,
        "log_depth": row.log_depth,
    }


def _summary(records: int, groups: list[Any], limit: int) -> str:
    lines = ["queue depth events", ""]
    if not groups:
        lines.append(f"no depth events ({records} DEPTH_EVENT records)")
        return "\n".join(lines)
    counts = ", ".join(f"{t} {sum(1 for g in groups if g.event == t)}" for t in EVENT_TYPES)
    messages = sum(int(g.messages) for g in groups)
    lines.append(
        f"events: {len(groups)} ({counts}); event messages: {messages}; records: {records}"
    )
    lines += ["", "events per queue"]
    lines.append(f"{'structure':<10} {'queue':<24} {'high':>5} {'low':>5} {'full':>5}")
    per_queue: dict[tuple[str, str], dict[str, int]] = {}
    for g in groups:
        tally = per_queue.setdefault((g.structure, g.queue or "?"), dict.fromkeys(EVENT_TYPES, 0))
        if g.event in tally:
            tally[g.event] += 1
    for (structure, queue), tally in sorted(per_queue.items()):
        lines.append(
            f"{structure:<10} {queue:<24} {tally['high']:>5} {tally['low']:>5} {tally['full']:>5}"
        )
    lines += ["", "events by CorrelId (n = event messages issued)"]
    lines.append(
        f"{'time':<12} {'event':<5} {'queue':<16} {'coordinator':<11} {'n':>2}"
        f" {'enq':>5} {'deq':>5} {'depth':>5} {'log':>5}  managers"
    )
    for g in groups[:limit]:
        when = g.time.strftime("%H:%M:%S.%f")[:12] if g.time is not None else "?"
        lines.append(
            f"{when:<12} {g.event or '?':<5} {g.queue or '?':<16} {g.coordinator or '?':<11}"
            f" {g.messages:>2} {g.enqueues:>5} {g.dequeues:>5} {_int(g.depth):>5}"
            f" {_int(g.log_depth):>5}  {', '.join(g.managers or []) or '-'}"
        )
    if len(groups) > limit:
        lines.append(f"... and {len(groups) - limit} more (events/groups)")
    return "\n".join(lines)


def _int(value: int | None) -> str:
    return "-" if value is None else str(value)
