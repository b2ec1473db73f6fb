"""Per queue and interval, and per server: how much work, and how evenly it is shared.

Queue figures count records: ``puts`` (put records, committed or not), ``gets`` (get
records, whatever became of them), ``backouts`` (puts and gets backed out).  ``depth``
is the number of committed messages on the queue at the end of each interval: the
opening depth, plus the committed puts, less the committed removals (gets committed,
expiries, moves to the cold queue; a requeue adds back), cumulated over the intervals.
A message put and gotten in one unit of work never adds to the depth.

Server figures say how the work was shared: the servers of a queue-sharing group pull
work from shared queues, so a balanced group has each server getting about the same
number of messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sharedq.pipeline.transforms.messages import (
    BACKOUT_GETS,
    BACKOUT_PUTS,
    COLD_QUEUE,
    EXPIRE,
    GET,
    GET_COMMITS,
    PUT,
    PUT_COMMITS,
    REQUEUE,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def _count(condition: Column) -> Column:
    from pyspark.sql import functions as F

    return F.count(F.when(condition, True)).cast("long")


def interval_start(time: Column, seconds: float) -> Column:
    """The start of the ``seconds``-long interval ``time`` falls in (from the epoch)."""
    from pyspark.sql import functions as F

    step = round(seconds * 1_000_000)
    return F.timestamp_micros(F.floor(F.unix_micros(time) / F.lit(step)) * F.lit(step))


def depth_changes(events: DataFrame, messages: DataFrame) -> DataFrame:
    """``events`` with ``own_unit_put`` and ``depth_change``: what each change does to
    its queue's committed depth (+1, -1 or 0).

    The one rule for the depth, shared by ``stats`` (per interval) and ``events`` (at
    each change): a committed put or a requeue adds one; a committed removal (get,
    expiry, move to the cold queue) takes one away, unless the message was put and
    gotten in one unit of work (it never took its committed key, so was never counted).
    ``messages`` come from ``message_lives`` (its ``own_unit``).
    """
    from pyspark.sql import functions as F

    units = messages.select("structure", "entry_id", "own_unit")
    keyed = events.join(units, ["structure", "entry_id"], "left")
    own_unit_put = F.col("kind").isin(*GET_COMMITS) & F.coalesce(F.col("own_unit"), F.lit(False))
    was_visible = ~own_unit_put
    delta = (
        F.when(F.col("kind").isin(*PUT_COMMITS, REQUEUE), F.lit(1))
        .when(F.col("kind").isin(*GET_COMMITS, EXPIRE, COLD_QUEUE) & was_visible, F.lit(-1))
        .otherwise(F.lit(0))
    )
    return keyed.withColumn("own_unit_put", own_unit_put).withColumn("depth_change", delta)


def opening_depths(messages: DataFrame) -> DataFrame:
    """Per queue, the committed messages on it when the log starts: ``opening_depth``."""
    from pyspark.sql import functions as F

    return messages.groupBy("structure", "queue").agg(
        _count(F.col("opening")).alias("opening_depth")
    )


def queue_intervals(events: DataFrame, messages: DataFrame, seconds: float = 1.0) -> DataFrame:
    """One row per queue and interval: ``puts, gets, backouts, depth`` and the flows.

    ``events`` come from ``message_events``, ``messages`` from ``message_lives`` (which
    says which messages were on their queue when the log starts, and which were put and
    gotten in one unit of work).  Every interval from the first record's to the last
    one's is present for every queue, including those with no record (depth carried).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keyed = depth_changes(events, messages)
    own_unit_put = F.col("own_unit_put")
    bucketed = keyed.withColumn("interval_start", interval_start(F.col("time"), seconds))
    counted = bucketed.groupBy("structure", "queue", "interval_start").agg(
        _count(F.col("kind") == PUT).alias("puts"),
        _count(F.col("kind") == GET).alias("gets"),
        _count(F.col("kind").isin(BACKOUT_PUTS, BACKOUT_GETS)).alias("backouts"),
        (_count(F.col("kind").isin(*PUT_COMMITS)) + _count(own_unit_put)).alias("committed_puts"),
        _count(F.col("kind").isin(*GET_COMMITS)).alias("committed_gets"),
        F.sum("depth_change").cast("long").alias("depth_change"),
    )
    step = round(seconds * 1_000_000)
    span = bucketed.agg(
        F.min("interval_start").alias("first"), F.max("interval_start").alias("last")
    )
    grid = span.select(
        F.explode(
            F.sequence(F.unix_micros("first"), F.unix_micros("last"), F.lit(step).cast("long"))
        ).alias("micros")
    ).select(F.timestamp_micros("micros").alias("interval_start"))
    queues = messages.select("structure", "queue").where(F.col("queue").isNotNull()).distinct()
    opening = opening_depths(messages)
    full = (
        queues.crossJoin(grid)
        .join(counted, ["structure", "queue", "interval_start"], "left")
        .join(opening, ["structure", "queue"], "left")
        .fillna(
            0,
            subset=[
                "puts",
                "gets",
                "backouts",
                "committed_puts",
                "committed_gets",
                "depth_change",
                "opening_depth",
            ],
        )
    )
    running = (
        Window.partitionBy("structure", "queue")
        .orderBy("interval_start")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return full.withColumn(
        "depth", (F.col("opening_depth") + F.sum("depth_change").over(running)).cast("long")
    ).select(
        "structure",
        "queue",
        "interval_start",
        "puts",
        "gets",
        "backouts",
        "depth",
        "committed_puts",
        "committed_gets",
    )


def server_shares(events: DataFrame, log: DataFrame | None = None) -> DataFrame:
    """One row per server: ``puts, gets, commits, backouts`` and its shares of the total.

    ``commits`` and ``backouts`` count units of work (distinct UOW ids whose commit or
    backout the server wrote, out-of-syncpoint operations counted one each); a peer that
    recovered a failed server's units is credited with them, since it did that work.
    ``log`` (optional) adds the servers that wrote records but touched no message, so
    that an idle server shows up with zero.
    """
    from pyspark.sql import functions as F

    commit_kinds = F.col("kind").isin("commit-puts", "commit-gets")
    backout_kinds = F.col("kind").isin(BACKOUT_PUTS, BACKOUT_GETS)
    per_server = events.groupBy(F.col("writer").alias("server")).agg(
        _count(F.col("kind") == PUT).alias("puts"),
        _count(F.col("kind") == GET).alias("gets"),
        (
            F.countDistinct(F.when(commit_kinds, F.col("uow")))
            + _count(F.col("kind").isin("sync-put", "sync-get"))
        )
        .cast("long")
        .alias("commits"),
        F.countDistinct(F.when(backout_kinds, F.col("uow"))).cast("long").alias("backouts"),
    )
    if log is not None:
        writers = log.select(F.col("writer").alias("server")).distinct()
        per_server = writers.join(per_server, "server", "left").fillna(
            0, subset=["puts", "gets", "commits", "backouts"]
        )
    totals = per_server.agg(F.sum("puts").alias("all_puts"), F.sum("gets").alias("all_gets"))

    def share(column: str, total: str) -> Column:
        return F.when(F.col(total) > 0, F.col(column) / F.col(total)).otherwise(F.lit(0.0))

    return (
        per_server.crossJoin(totals)
        .withColumn("share_of_gets", share("gets", "all_gets"))
        .withColumn("share_of_puts", share("puts", "all_puts"))
        .select("server", "puts", "gets", "commits", "backouts", "share_of_gets", "share_of_puts")
    )


def get_balance(servers: DataFrame) -> DataFrame:
    """How evenly the gets are spread (one row): ``max_over_mean`` (1.0 is perfectly
    even) and ``coefficient_of_variation`` (population standard deviation / mean)."""
    from pyspark.sql import functions as F

    return servers.agg(
        F.count("*").alias("servers"),
        F.sum("gets").cast("long").alias("gets"),
        F.when(F.mean("gets") > 0, F.max("gets") / F.mean("gets")).alias("max_over_mean"),
        F.when(F.mean("gets") > 0, F.stddev_pop("gets") / F.mean("gets")).alias(
            "coefficient_of_variation"
        ),
    )
