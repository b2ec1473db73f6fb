"""The life of every message, its latencies, the stuck ones, and the balance sheet.

A message is followed by its ``entry_id`` within its structure: the put writes the
entry and every later change (commit, get, backout, expiry, cold queue, removal) names
the same id, while ``message_id`` is what the application sees and is reported with it.
A backed-out put's message never became visible; a message gotten and backed out goes
back to its queue with its backout count + 1 (one ``backout-gets`` record each time).

The log may not reach back to the structure's start: retention drops the records a
structure checkpoint (SRDS) already holds.  Messages already on a queue when the log
starts are its *opening balance*: taken from that SRDS image when the job has it
(:func:`opening_messages`), and otherwise inferred from messages whose first record in
the log is neither their put nor the backout of their uncommitted put (a manager logs
a change after making it, so one killed in between leaves a put in the structure that
the log never saw, and a peer backs it out).  A message that was queued at the log's start and never
touched after is only visible in the image.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sharedq.pipeline.transforms.messages import (
    BACKOUT_GETS,
    BACKOUT_LAST,
    BACKOUT_PUTS,
    COLD_QUEUE,
    COMMIT_GETS,
    COMMIT_PUTS,
    EXPIRE,
    GET,
    GET_COMMITS,
    PURGE,
    PUT,
    PUT_COMMITS,
    REQUEUE,
    SYNC_GET,
    SYNC_PUT,
    millis_between,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: What became of a message, from its last change in the log.
OUTCOME_OF_LAST_KIND: dict[str, str] = {
    PUT: "uncommitted",
    SYNC_PUT: "queued",
    COMMIT_PUTS: "queued",
    GET: "locked",
    SYNC_GET: "consumed",
    COMMIT_GETS: "consumed",
    BACKOUT_PUTS: "backed-out-put",
    BACKOUT_GETS: "queued",
    BACKOUT_LAST: "queued",
    EXPIRE: "expired",
    PURGE: "expired",
    COLD_QUEUE: "cold",
    REQUEUE: "queued",
}
#: Outcomes of a message that is still on its queue (committed, not removed); a locked
#: message is gotten by a unit of work that has not ended.
STILL_QUEUED = ("queued", "locked")
#: An opening message's state in the image: which outcome it has if the log never
#: touches it.
OPENING_STATES = ("queued", "locked", "uncommitted")

#: Columns of the per-message table, in order (the report's contract first).
MESSAGE_COLUMNS = (
    "structure",
    "queue",
    "message_id",
    "put_by",
    "put_time",
    "got_by",
    "got_time",
    "committed_time",
    "outcome",
    "backouts",
    "put_to_get_ms",
    "put_to_commit_ms",
    "entry_id",
    "priority",
    "put_committed_time",
    "first_get_time",
    "gets",
    "opening",
    "put_commits",
    "get_commits",
    "expires",
    "colds",
    "requeues",
    "last_time",
    "own_unit",
)


def _count(condition: Column) -> Column:
    from pyspark.sql import functions as F

    return F.count(F.when(condition, True))


def _kind_in(*kinds: str) -> Column:
    from pyspark.sql import functions as F

    return F.col("kind").isin(*kinds)


def opening_messages(entries: DataFrame, roles: DataFrame) -> DataFrame:
    """The messages a structure image (SRDS entries) holds, as an opening balance.

    ``entries`` are SRDS rows (``structure, list_number, entry_id, key, adjunct, ...``);
    ``roles`` says what each claimed list is for (``structure, list_number, use, name``,
    use ``queue`` or ``get``, from the control list).  A committed message on a queue's
    list is ``queued``, an uncommitted put there ``uncommitted``; a message on a
    manager's get list is ``locked`` and belongs to the queue its adjunct names.
    The queue's control entry (the LHQC, key ``X'FF'...``) is not a message.
    """
    from pyspark.sql import functions as F

    first = F.conv(F.hex(F.substring("key", 1, 1)), 16, 10).cast("int")
    home = F.conv(F.hex(F.substring("adjunct", 1, 2)), 16, 10).cast("int")
    on_lists = entries.join(roles, ["structure", "list_number"])
    queues = roles.where(F.col("use") == "queue").select(
        "structure", F.col("list_number").alias("home_list"), F.col("name").alias("home")
    )
    located = (
        on_lists.where(F.col("use").isin("queue", "get") & (first != 0xFF))
        .withColumn("home_list", home)
        .join(queues, ["structure", "home_list"], "left")
    )
    return located.select(
        "structure",
        "entry_id",
        F.when(F.col("use") == "queue", F.col("name")).otherwise(F.col("home")).alias("queue"),
        F.substring("adjunct", 3, 24).alias("message_id"),
        F.when(F.col("use") == "get", F.lit("locked"))
        .when(first <= 0x09, F.lit("queued"))
        .otherwise(F.lit("uncommitted"))
        .alias("state"),
    )


def message_lives(events: DataFrame, opening: DataFrame | None = None) -> DataFrame:
    """One row per message: who put and got it, when, what became of it.

    ``events`` come from :func:`sharedq.pipeline.transforms.messages.message_events`;
    ``opening`` (optional) from :func:`opening_messages`.  ``got_by``/``got_time`` are
    the last get's (the one that removed the message when it was consumed);
    ``committed_time`` is when that get was committed; ``put_to_get_ms`` and
    ``put_to_commit_ms`` measure from the put record to them, and are null when the put
    is not in the log.  ``opening`` is true for a message already committed on its
    queue when the log starts.  ``put_commits`` / ``get_commits`` count the message's
    committed put and committed removal (the flows of the balance sheet); a message put
    and gotten in one unit of work counts one of each.
    """
    from pyspark.sql import functions as F

    order = F.struct("seq", "lsn")
    is_get = F.col("kind") == GET
    aggregated = events.groupBy("structure", "entry_id").agg(
        F.max("queue").alias("queue"),
        F.max("message_id").alias("message_id"),
        F.max("priority").alias("priority"),
        F.max(F.when(F.col("kind") == PUT, F.col("writer"))).alias("put_by"),
        F.min(F.when(F.col("kind") == PUT, F.col("time"))).alias("put_time"),
        F.min(F.when(_kind_in(*PUT_COMMITS), F.col("time"))).alias("put_committed_time"),
        F.max_by(F.col("writer"), F.when(is_get, order)).alias("got_by"),
        F.max_by(F.col("time"), F.when(is_get, order)).alias("got_time"),
        F.min(F.when(is_get, F.col("time"))).alias("first_get_time"),
        F.max(F.when(_kind_in(*GET_COMMITS), F.col("time"))).alias("committed_time"),
        _count(is_get).alias("gets"),
        _count(F.col("kind") == BACKOUT_GETS).alias("backouts"),
        _count(F.col("kind") == PUT).alias("puts"),
        _count(_kind_in(*PUT_COMMITS)).alias("put_commit_records"),
        _count(_kind_in(*GET_COMMITS)).alias("get_commits"),
        _count(F.col("kind") == EXPIRE).alias("expires"),
        _count(F.col("kind") == COLD_QUEUE).alias("colds"),
        _count(F.col("kind") == REQUEUE).alias("requeues"),
        _count(F.col("kind") == BACKOUT_PUTS).alias("backed_out_puts"),
        F.min_by(F.col("kind"), order).alias("first_kind"),
        F.max_by(F.col("kind"), order).alias("last_kind"),
        F.max("time").alias("last_time"),
    )
    outcome = F.lit(None).cast("string")
    for kind, name in OUTCOME_OF_LAST_KIND.items():
        outcome = F.when(F.col("last_kind") == kind, F.lit(name)).otherwise(outcome)
    if opening is None:
        lives = aggregated.withColumn("state", F.lit(None).cast("string"))
    else:
        lives = aggregated.join(
            opening.withColumnRenamed("queue", "opening_queue").withColumnRenamed(
                "message_id", "opening_message_id"
            ),
            ["structure", "entry_id"],
            "full",
        )
        lives = lives.withColumn("queue", F.coalesce("queue", "opening_queue")).withColumn(
            "message_id", F.coalesce("message_id", "opening_message_id")
        )
    zero = F.lit(0).cast("long")
    lives = lives.fillna(
        0,
        subset=[
            "gets",
            "backouts",
            "puts",
            "put_commit_records",
            "get_commits",
            "expires",
            "colds",
            "requeues",
            "backed_out_puts",
        ],
    )
    # A put gotten in its own unit of work is removed at commit without ever taking
    # its committed key: it was put and consumed, committed, all at once.
    own_unit = (F.col("puts") > 0) & (F.col("put_commit_records") == 0) & (F.col("get_commits") > 0)
    # Not in the image, or no image: a message the log touches without its put was
    # there before the log, unless its first touch is a backout of an uncommitted put.
    # A manager logs a change after making it: killed in between, its last put is in
    # the structure and not in the log; a peer backs it out, and it was never committed.
    opening_flag = F.when(
        F.col("state").isNotNull(), F.col("state").isin("queued", "locked")
    ).otherwise(
        (F.col("puts") == 0)
        & (F.col("put_commit_records") == 0)
        & F.col("first_kind").isNotNull()
        & (F.col("first_kind") != BACKOUT_PUTS)
    )
    lives = (
        lives.withColumn("outcome", F.coalesce(outcome, F.col("state")))
        .withColumn("opening", opening_flag)
        .withColumn("own_unit", own_unit)
        .withColumn(
            "put_commits",
            F.col("put_commit_records") + F.when(own_unit, F.lit(1).cast("long")).otherwise(zero),
        )
        .withColumn(
            "put_to_get_ms",
            F.when(
                F.col("outcome") == "consumed", millis_between(F.col("put_time"), F.col("got_time"))
            ),
        )
        .withColumn(
            "put_to_commit_ms",
            F.when(
                F.col("outcome") == "consumed",
                millis_between(F.col("put_time"), F.col("committed_time")),
            ),
        )
        .withColumn("message_id", F.lower(F.hex("message_id")))
        .withColumn("backouts", F.col("backouts").cast("int"))
        .withColumn("gets", F.col("gets").cast("int"))
    )
    return lives.select(*MESSAGE_COLUMNS)


def latency(messages: DataFrame) -> DataFrame:
    """Percentiles (p50, p90, p99, ms) of put→get and put→commit of consumed messages.

    One row per queue (``scope = "queue"``), per server that got the messages
    (``scope = "server"``, the server of the last get) and one for everything
    (``scope = "all"``); ``count`` is the number of consumed messages whose put is in
    the log.  Approximate percentiles (``percentile_approx``) keep it one pass.
    """
    from pyspark.sql import functions as F

    measured = messages.where(F.col("put_to_get_ms").isNotNull())
    percents = [0.5, 0.9, 0.99]

    def figures() -> list[Column]:
        cols: list[Column] = [F.count("*").alias("count")]
        for prefix, column in (("get", "put_to_get_ms"), ("commit", "put_to_commit_ms")):
            quantiles = F.percentile_approx(column, percents, 10_000)
            for index, name in enumerate(("p50", "p90", "p99")):
                cols.append(quantiles[index].alias(f"{prefix}_{name}_ms"))
        return cols

    by_queue = measured.groupBy(F.lit("queue").alias("scope"), F.col("queue").alias("name"))
    by_server = measured.groupBy(F.lit("server").alias("scope"), F.col("got_by").alias("name"))
    total = measured.groupBy(F.lit("all").alias("scope"), F.lit("all").alias("name"))
    return (
        by_queue.agg(*figures())
        .unionByName(by_server.agg(*figures()))
        .unionByName(total.agg(*figures()))
        .withColumn("count", F.col("count").cast("long"))
    )


def stuck_messages(
    messages: DataFrame, log_end: Column, held_ms: float, waiting_ms: float, backouts: int
) -> DataFrame:
    """The messages that look stuck at the end of the log (``log_end``, a timestamp).

    Reasons: ``locked`` (gotten by a unit of work that had not ended), ``in-doubt`` (put
    by a unit of work that had neither committed nor backed out), ``never-gotten``
    (committed and waiting longer than ``waiting_ms`` without any get), ``held-long``
    (consumed, but held longer than ``held_ms`` between get and commit) and
    ``backed-out`` (backed out ``backouts`` times or more: a poison message?).
    ``since`` is when the condition started, ``age_ms`` how long it lasted.
    """
    from pyspark.sql import functions as F

    columns = ["structure", "queue", "message_id", "entry_id", "outcome", "backouts"]
    rows = [
        (F.col("outcome") == "locked", "locked", F.col("got_time"), log_end, F.col("got_by")),
        (
            F.col("outcome") == "uncommitted",
            "in-doubt",
            F.col("put_time"),
            log_end,
            F.col("put_by"),
        ),
        (
            (F.col("outcome") == "queued") & (F.col("gets") == 0),
            "never-gotten",
            F.coalesce("put_committed_time", "put_time"),
            log_end,
            F.col("put_by"),
        ),
        (
            F.col("outcome") == "consumed",
            "held-long",
            F.col("got_time"),
            F.col("committed_time"),
            F.col("got_by"),
        ),
        (
            F.col("backouts") >= backouts,
            "backed-out",
            F.col("first_get_time"),
            F.coalesce("committed_time", log_end),
            F.col("got_by"),
        ),
    ]
    thresholds = {"never-gotten": waiting_ms, "held-long": held_ms}
    frames = []
    for condition, reason, since, until, by in rows:
        age = millis_between(since, until)
        keep = condition
        if reason in thresholds:
            keep = keep & (age > thresholds[reason])
        frames.append(
            messages.where(keep).select(
                *columns,
                F.lit(reason).alias("reason"),
                since.alias("since"),
                age.alias("age_ms"),
                by.alias("server"),
            )
        )
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def balance_sheet(messages: DataFrame) -> DataFrame:
    """Per queue: what came in equals what went out plus what is still there.

    ``opening + put_committed = got_committed + still_queued + expired + cold_queued``,
    with the flows counted from the records (committed puts, committed removals, moves
    to the expiry list, to the cold queue less those requeued) and the stock from each
    message's last state (``still_queued``: committed, no committed removal by the end
    of the log; ``locked`` counts those of them gotten by a unit still open).
    ``balanced`` is whether the two sides agree; a log that lost or repeated a record
    does not.  Backed-out and uncommitted puts are shown but are in neither side.
    """
    from pyspark.sql import functions as F

    def total(column: str) -> Column:
        return F.sum(F.col(column)).cast("long")

    sheet = messages.groupBy("structure", "queue").agg(
        _count(F.col("opening")).cast("long").alias("opening"),
        total("put_commits").alias("put_committed"),
        total("get_commits").alias("got_committed"),
        _count(F.col("outcome").isin(*STILL_QUEUED)).cast("long").alias("still_queued"),
        total("expires").alias("expired"),
        (total("colds") - total("requeues")).alias("cold_queued"),
        _count(F.col("outcome") == "locked").cast("long").alias("locked"),
        _count(F.col("outcome") == "backed-out-put").cast("long").alias("backed_out_puts"),
        _count(F.col("outcome") == "uncommitted").cast("long").alias("uncommitted_puts"),
    )
    return with_balanced(sheet)


#: The balance sheet's columns: opening and put_committed in; the other four out.
BALANCE_SHEET = (
    "opening",
    "put_committed",
    "got_committed",
    "still_queued",
    "expired",
    "cold_queued",
)
BALANCE_FIGURES = (
    *BALANCE_SHEET,
    "locked",
    "backed_out_puts",
    "uncommitted_puts",
)


def with_balanced(sheet: DataFrame) -> DataFrame:
    """Add ``balanced``: ``opening + put_committed == got + still + expired + cold``."""
    from pyspark.sql import functions as F

    came = F.col("opening") + F.col("put_committed")
    went = F.col("got_committed") + F.col("still_queued") + F.col("expired") + F.col("cold_queued")
    return sheet.withColumn("balanced", came == went)


def balance_total(sheet: DataFrame) -> DataFrame:
    """The balance sheet summed over every queue (one row, ``queue = "(total)"``)."""
    from pyspark.sql import functions as F

    summed = sheet.groupBy().agg(
        *[F.coalesce(F.sum(c), F.lit(0)).cast("long").alias(c) for c in BALANCE_FIGURES]
    )
    return with_balanced(summed.select(F.lit("(total)").alias("queue"), *BALANCE_FIGURES))
