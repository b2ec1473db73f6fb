"""Structure overflow as it really happened, from the OVERFLOW records (type 44) of the log.

A CQS logs one OVERFLOW record to its pair's stream, under the primary's name, at each
step of overflow processing (``sharedq.cqs.overflow``; docs/cqs.md *Overflow*): its
payload holds ``event`` (``"overflow"``: the queues named entered overflow;
``"altered"``: the structure was altered larger instead; ``"returned"``: the scan
gave the queues named back to the primary; ``"normal"``: the pair left overflow
mode, the queues named with it), ``queues`` and the primary's ``elements`` and
``max_elements`` after the step.  The records are few (a handful per overflow), so
they are read onto the driver and folded in order here; the usage they are set
against (how much the whole pair held) is a window over the capacity job's deltas.

Why the *pair's* usage: a queue that moves to the overflow structure leaves the
primary, so the primary's own count drops at the very moment demand was highest;
the sum over the primary and its overflow structure is what a primary without
overflow would have had to hold (a move changes it by nothing).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql import Window
from pyspark.sql import functions as F

from sharedq.log.records import RecordType, unpack_payload

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Columns of the ``capacity/overflow_events`` table.
EVENT_COLUMNS = (
    "structure",
    "seq",
    "time",
    "system",
    "event",
    "queues",
    "elements",
    "max_elements",
    "pair_elements",
)


@dataclass(frozen=True)
class OverflowEvent:
    """One OVERFLOW record, decoded; ``pair_elements`` is filled in by :func:`pair_usage_at`."""

    structure: str
    seq: int
    time: dt.datetime
    system: str
    event: str
    queues: tuple[str, ...]
    elements: int
    max_elements: int
    pair_elements: int | None = None


@dataclass
class Interval:
    """A queue's stay in overflow, or a pair's overflow mode (``queue`` ``None``)."""

    structure: str
    queue: str | None
    entered: dt.datetime
    entered_seq: int
    left: dt.datetime | None = None
    left_seq: int | None = None
    #: The pair's elements in use when it entered (see the module's docstring).
    pair_elements: int | None = None
    max_elements: int = 0
    queues: list[str] = field(default_factory=list)

    @property
    def percent(self) -> float | None:
        """The pair's usage at entry as a share of the primary's elements."""
        if self.pair_elements is None or self.max_elements <= 0:
            return None
        return 100.0 * self.pair_elements / self.max_elements


def overflow_events(log: DataFrame) -> list[OverflowEvent]:
    """The OVERFLOW records of the log in the order they were written.

    Ordered by time, then ``seq`` (an event record carries the ``seq`` of the last
    change of its structure, so several share one).  A payload this job cannot read
    is skipped: it says nothing about overflow.
    """
    rows = (
        log.where((F.col("type") == int(RecordType.OVERFLOW)) & F.col("payload").isNotNull())
        .select("structure", "seq", "time_us", "payload")
        .collect()
    )
    found = []
    for row in rows:
        try:
            value: Any = unpack_payload(bytes(row.payload))
        except Exception:  # an unreadable payload says nothing about overflow
            continue
        if not isinstance(value, dict) or not isinstance(value.get("event"), str):
            continue
        found.append(
            OverflowEvent(
                row.structure,
                int(row.seq),
                row.time_us,
                str(value.get("system", "")),
                value["event"],
                tuple(str(q) for q in value.get("queues") or ()),
                int(value.get("elements") or 0),
                int(value.get("max_elements") or 0),
            )
        )
    return sorted(found, key=lambda e: (e.time, e.seq))


def intervals(events: list[OverflowEvent]) -> tuple[list[Interval], list[Interval]]:
    """Each queue's stays in overflow and each pair's overflow mode intervals.

    ``"overflow"`` opens the pair's mode (when not open) and a stay for each queue
    named that is not already in overflow (a master that took over names them all
    again); ``"returned"`` closes the stays of the queues named; ``"normal"`` closes
    the mode and every stay still open (without an overflow structure the queues
    leave with the mode).  What is still open at the end of the log has no ``left``.
    """
    stays: list[Interval] = []
    modes: list[Interval] = []
    open_stays: dict[tuple[str, str], Interval] = {}
    open_modes: dict[str, Interval] = {}
    for e in events:
        if e.event == "overflow":
            mode = open_modes.get(e.structure)
            if mode is None:
                mode = Interval(
                    e.structure, None, e.time, e.seq, None, None, e.pair_elements, e.max_elements
                )
                open_modes[e.structure] = mode
                modes.append(mode)
            for queue in e.queues:
                if (e.structure, queue) in open_stays:
                    continue
                stay = Interval(
                    e.structure, queue, e.time, e.seq, None, None, e.pair_elements, e.max_elements
                )
                open_stays[(e.structure, queue)] = stay
                stays.append(stay)
                mode.queues.append(queue)
        elif e.event in ("returned", "normal"):
            names = (
                e.queues
                if e.event == "returned"
                else tuple(q for (s, q) in open_stays if s == e.structure)
            )
            for queue in names:
                closed = open_stays.pop((e.structure, queue), None)
                if closed is not None:
                    closed.left, closed.left_seq = e.time, e.seq
            if e.event == "normal" and e.structure in open_modes:
                mode = open_modes.pop(e.structure)
                mode.left, mode.left_seq = e.time, e.seq
    return stays, modes


def pair_demand(deltas: DataFrame, pairs: DataFrame) -> DataFrame:
    """The elements in use in each pair (primary plus overflow structure) over time.

    ``deltas``: :func:`sharedq.pipeline.transforms.capacity.usage_deltas`;
    ``pairs``: ``structure, pair`` (each structure and the primary of its pair).
    Returns ``pair, time, elements`` after each instant that changed it.  The two
    structures number their records apart, so the order is time (then structure and
    ``seq``, which only break ties).
    """
    per_time = (
        deltas.join(F.broadcast(pairs), "structure")
        .groupBy("pair", "time")
        .agg(F.sum("d_elements").alias("d_elements"))
    )
    running = (
        Window.partitionBy("pair")
        .orderBy("time")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return per_time.select(
        "pair", "time", F.sum("d_elements").over(running).cast("long").alias("elements")
    )


def pair_usage_at(demand: DataFrame, events: list[OverflowEvent]) -> list[OverflowEvent]:
    """Each event with ``pair_elements``: its pair's elements in use at its time (the
    last change at or before it; 0 before the first)."""
    if not events:
        return []
    spark = demand.sparkSession
    asked = spark.createDataFrame(
        [(i, e.structure, e.time) for i, e in enumerate(events)],
        "i int, pair string, time timestamp",
    )
    rows = (
        asked.alias("a")
        .join(
            demand.alias("d"),
            (F.col("a.pair") == F.col("d.pair")) & (F.col("d.time") <= F.col("a.time")),
            "left",
        )
        .groupBy("a.i")
        .agg(F.max_by(F.col("d.elements"), F.col("d.time")).alias("elements"))
        .collect()
    )
    found = {int(r.i): int(r.elements or 0) for r in rows}
    return [
        OverflowEvent(**{**e.__dict__, "pair_elements": found.get(i, 0)})
        for i, e in enumerate(events)
    ]


def would_overflow(
    demand: DataFrame, pair: str, limit_elements: float, relief_elements: float
) -> list[tuple[dt.datetime, int]]:
    """When a pair's demand would have started overflow processing under a threshold.

    The rule: demand (the pair's elements in use) reaching ``limit_elements``
    (OVFLWMAX per cent of the structure's elements) starts a process; the next one
    counts only after demand fell to ``relief_elements`` (what the process relieves
    to, 0.8 x OVFLWMAX) or below and reached the limit again.  Returns ``(time,
    elements)`` of each start, in time order.
    """
    rows = (
        demand.where(
            (F.col("pair") == pair)
            & ((F.col("elements") >= limit_elements) | (F.col("elements") <= relief_elements))
        )
        .orderBy("time")
        .select("time", "elements", (F.col("elements") >= limit_elements).alias("over"))
        .withColumn("before", F.lag("over").over(Window.partitionBy(F.lit(1)).orderBy("time")))
        .where(F.col("over") & (F.col("before").isNull() | ~F.col("before")))
        .select("time", "elements")
        .collect()
    )
    return [(r.time, int(r.elements)) for r in rows]
