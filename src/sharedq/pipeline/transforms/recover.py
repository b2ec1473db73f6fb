"""The ``recover`` job's transformations: a structure's image at a point, as DataFrames.

These reproduce, with DataFrame operations only, what structure recovery does in
process (:mod:`sharedq.recovery.restore`: load the SRDS, then
:func:`sharedq.log.replay.replay`, which folds the log into each entry's *net* change):

* per entry, only the records at or after its last write count (a write makes the
  entry anew); it exists when its last record is not a delete (an entry without
  records exists when the image has it);
* its list, key and placement come from its last write or move (a move without a key
  keeps the key); its secondary key from the last write, or move that set one; its
  data and adjunct from the last write, or update that gave one; its version from the
  last write, move or update that set one, plus the later ``increment_version``
  records (saturating at 2**64-1), else the image's plus every increment;
* within a list, entries sort by key (unsigned bytes, as Spark sorts binary), and
  within equal keys: the entries placed at the head after the image (latest first),
  then the image's entries that were not placed again (in their SRDS order), then the
  entries placed at the tail (in seq order).  A sublist puts an entry at the head before
  every entry of its key present then, at the tail after them, so the final order
  depends only on each entry's last placement: the claim replay's fold rests on.

Each function takes and returns DataFrames; reading the log and the SRDS, choosing
the image and writing are the job's (:mod:`sharedq.pipeline.jobs.recover`).  No Python
UDF runs and nothing is collected: the fold is one hash-partitioned aggregation per
entry id.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, LongType

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

WRITE, MOVE, DELETE, UPDATE, CONTROLS, NONE = 1, 2, 3, 4, 5, 127
#: ``limit`` of a list-controls record meaning "no limit".
LIMIT_NONE = -1
_U64 = Decimal(2**64)
_MAX_VERSION = Decimal(2**64 - 1)
_I64_MAX = Decimal(2**63 - 1)
#: The columns of the ``entries`` table, in order.
ENTRY_COLUMNS = (
    "structure",
    "list_number",
    "position",
    "entry_id",
    "key",
    "secondary_key",
    "version",
    "adjunct",
    "data",
)
#: The columns of the ``lists`` table, in order.
LIST_COLUMNS = ("structure", "list_number", "limit", "authority")


def select_changes(
    log: DataFrame, structure: str, *, after_seq: int | None, upto_seq: int | None
) -> DataFrame:
    """The structure's change records replay applies: ``after_seq < seq <= upto_seq``.

    ``after_seq`` is the seq the image covers (``None``: no image, from the start);
    ``upto_seq`` the target (``None``: the end of the log).  Records that are not
    changes (``op`` 127) are dropped.
    """
    condition = (F.col("structure") == structure) & (F.col("op") != NONE)
    if after_seq is not None:
        condition &= F.col("seq") > after_seq
    if upto_seq is not None:
        condition &= F.col("seq") <= upto_seq
    return log.where(condition)


def target_seq_at_time(log: DataFrame, structure: str, at_time_us: int) -> DataFrame:
    """One row, ``target_seq``: the highest seq of a change logged at or before the time.

    Null when the structure had no change by then.  Replay applies a prefix of the
    structure's changes, so a time stands for that seq.
    """
    at = F.timestamp_micros(F.lit(at_time_us))
    return log.where(
        (F.col("structure") == structure) & (F.col("op") != NONE) & (F.col("time_us") <= at)
    ).agg(F.max("seq").alias("target_seq"))


def image_entries(srds_rows: DataFrame, structure: str) -> DataFrame:
    """The recoverable rows of one structure of an SRDS (the others have no data)."""
    return srds_rows.where((F.col("structure") == structure) & F.col("recoverable")).select(
        "entry_id",
        "list_number",
        "position",
        "key",
        "secondary_key",
        "version",
        "adjunct",
        "data",
    )


def _last(condition: Column, *fields: Column) -> Column:
    """The named fields of the latest record (highest seq) that meets ``condition``."""
    return F.max(F.when(condition, F.struct(F.col("seq").alias("s"), *fields)))


def net_changes(changes: DataFrame) -> DataFrame:
    """Each entry's net change over ``changes``, one row per entry id.

    Columns: ``entry_id``; ``last_op``; ``place`` (seq, list_number, at_head) of its
    last write or move; ``key_rec``; ``skey_rec``; ``data_rec``; ``adj_rec``;
    ``ver_rec`` (seq, v) of the last record that set the version, and ``incs``, the
    increments after it.  A struct is null when no record of its kind counts.
    """
    op = F.col("op")
    versioned = (op == WRITE) | (op.isin(MOVE, UPDATE) & F.col("version").isNotNull())
    increment = op.isin(MOVE, UPDATE) & F.col("version").isNull() & F.col("increment_version")
    # The seq of the entry's last version-setting record on every record, so that the
    # increments after it are counted in the same aggregation (a window over the
    # records of one entry: after live_changes, a small share of the log).
    entries = changes.where(
        op.isin(WRITE, MOVE, DELETE, UPDATE) & F.col("entry_id").isNotNull()
    ).withColumn(
        "_ver_seq", F.max(F.when(versioned, F.col("seq"))).over(Window.partitionBy("entry_id"))
    )
    placed = op.isin(WRITE, MOVE)
    skey_set = F.coalesce(F.col("set_secondary_key"), F.lit(False))
    after_version = F.col("_ver_seq").isNull() | (F.col("seq") > F.col("_ver_seq"))
    return entries.groupBy("entry_id").agg(
        _last(F.lit(True), op.alias("op")).getField("op").alias("last_op"),
        _last(
            placed, F.col("list_number").alias("list_number"), F.col("at_head").alias("head")
        ).alias("place"),
        _last(placed & F.col("key").isNotNull(), F.col("key").alias("v")).alias("key_rec"),
        _last(
            (op == WRITE) | ((op == MOVE) & skey_set),
            F.when(skey_set, F.col("secondary_key")).alias("v"),
        ).alias("skey_rec"),
        _last(
            (op == WRITE) | ((op == UPDATE) & F.col("data").isNotNull()),
            F.coalesce(F.col("data"), F.lit(b"")).alias("v"),
        ).alias("data_rec"),
        _last(
            (op == WRITE) | ((op == UPDATE) & F.col("adjunct").isNotNull()),
            F.coalesce(F.col("adjunct"), F.lit(b"")).alias("v"),
        ).alias("adj_rec"),
        _last(versioned, F.coalesce(F.col("version"), F.lit(0).cast(LongType())).alias("v")).alias(
            "ver_rec"
        ),
        F.count(F.when(increment & after_version, True)).alias("incs"),
    )


def live_changes(changes: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Split the entries' changes: those of entries that exist at the end, and the ids
    of those whose last record is a delete.

    Most of a queue's log is messages put, read and deleted: one narrow aggregation
    (entry id, seq and op only, fixed-width buffers, so a hash aggregation) finds them,
    and only the records of the surviving entries, a small share, go through the full
    fold of :func:`net_changes`, which carries keys and data.
    """
    op = F.col("op")
    entries = changes.where(op.isin(WRITE, MOVE, DELETE, UPDATE) & F.col("entry_id").isNotNull())
    last = entries.groupBy("entry_id").agg(
        (F.max(F.col("seq") * 8 + op.cast(LongType())) % 8).alias("last_op")
    )
    survivors = last.where(F.col("last_op") != DELETE).select("entry_id")
    gone = last.where(F.col("last_op") == DELETE).select("entry_id")
    return entries.join(survivors, "entry_id", "left_semi"), gone


def _add_versions(version: Column, increments: Column) -> Column:
    """``version + increments`` on the unsigned 64-bit versions stored as signed int64.

    Saturates at 2**64-1, as ``move_entries`` does; entries without increments (all
    but a few) keep their value untouched.
    """
    wide = DecimalType(21, 0)
    unsigned = F.when(version < 0, version.cast(wide) + F.lit(_U64)).otherwise(version.cast(wide))
    total = F.least(unsigned + increments.cast(wide), F.lit(_MAX_VERSION).cast(wide))
    signed = F.when(total > F.lit(_I64_MAX), total - F.lit(_U64)).otherwise(total)
    return F.when(increments == 0, version).otherwise(signed.cast(LongType()))


def recovered_entries(
    structure: str, nets: DataFrame, image: DataFrame | None, gone: DataFrame | None = None
) -> DataFrame:
    """The structure's entries after the image and the net changes, with their positions.

    One row per entry (:data:`ENTRY_COLUMNS`); ``position`` is 0-based within the list.
    ``gone`` (from :func:`live_changes`) are ids deleted by the changes; ``nets`` may
    then hold only the surviving entries.
    """
    if image is not None and gone is not None:
        image = image.join(gone, "entry_id", "left_anti")
    if image is None:
        joined = nets.select(
            "*",
            *(
                F.lit(None).cast(t).alias(f"img_{c}")
                for c, t in (
                    ("present", "boolean"),
                    ("list_number", "int"),
                    ("position", "long"),
                    ("key", "binary"),
                    ("secondary_key", "binary"),
                    ("version", "long"),
                    ("adjunct", "binary"),
                    ("data", "binary"),
                )
            ),
        )
    else:
        img = image.select(
            "entry_id",
            F.lit(True).alias("img_present"),
            *(
                F.col(c).alias(f"img_{c}")
                for c in (
                    "list_number",
                    "position",
                    "key",
                    "secondary_key",
                    "version",
                    "adjunct",
                    "data",
                )
            ),
        )
        joined = img.join(nets, "entry_id", "full_outer")
    has_net = F.col("last_op").isNotNull()
    present = F.when(has_net, F.col("last_op") != DELETE).otherwise(
        F.coalesce(F.col("img_present"), F.lit(False))
    )
    placed_at = F.col("place.s")
    head = F.coalesce(F.col("place.head"), F.lit(False))
    base_version = F.coalesce(F.col("ver_rec.v"), F.col("img_version"))
    increments = F.coalesce(F.col("incs"), F.lit(0).cast(LongType()))
    result = joined.where(present).select(
        F.lit(structure).alias("structure"),
        F.coalesce(F.col("place.list_number"), F.col("img_list_number")).alias("list_number"),
        F.col("entry_id"),
        F.coalesce(F.col("key_rec.v"), F.col("img_key")).alias("key"),
        F.when(F.col("skey_rec").isNotNull(), F.col("skey_rec.v"))
        .otherwise(F.col("img_secondary_key"))
        .alias("secondary_key"),
        _add_versions(base_version, increments).alias("version"),
        F.coalesce(F.col("adj_rec.v"), F.col("img_adjunct"), F.lit(b"")).alias("adjunct"),
        F.coalesce(F.col("data_rec.v"), F.col("img_data"), F.lit(b"")).alias("data"),
        # Equal keys: head placements (latest first), the image's order, tail placements.
        F.when(placed_at.isNull(), F.lit(1)).when(head, F.lit(0)).otherwise(F.lit(2)).alias("_grp"),
        F.when(placed_at.isNull(), F.col("img_position"))
        .when(head, -placed_at)
        .otherwise(placed_at)
        .alias("_ord"),
    )
    order = Window.partitionBy("list_number").orderBy("key", "_grp", "_ord")
    return result.select(
        "structure",
        "list_number",
        (F.row_number().over(order) - 1).cast(LongType()).alias("position"),
        "entry_id",
        "key",
        "secondary_key",
        "version",
        "adjunct",
        "data",
    )


def recovered_lists(structure: str, changes: DataFrame, base: DataFrame) -> DataFrame:
    """Every list's controls after the changes (:data:`LIST_COLUMNS`).

    ``base`` holds every list of the structure, ``list_number, limit, authority``, as
    the image left them (a new structure: no limit, authority 0).  List-controls records
    set the limit (``-1``: none) and add to the authority; updates may add to it too.
    """
    op = F.col("op")
    bumps = F.coalesce(F.col("increment_authority"), F.lit(False))
    touched = (
        changes.where(
            ((op == CONTROLS) | ((op == UPDATE) & bumps)) & F.col("list_number").isNotNull()
        )
        .groupBy("list_number")
        .agg(
            _last((op == CONTROLS) & F.col("limit").isNotNull(), F.col("limit").alias("v")).alias(
                "limit_rec"
            ),
            F.count(F.when(bumps, True)).alias("bumps"),
        )
    )
    joined = base.join(touched, "list_number", "left")
    limit = (
        F.when(F.col("limit_rec").isNull(), F.col("limit"))
        .when(F.col("limit_rec.v") == LIMIT_NONE, F.lit(None))
        .otherwise(F.col("limit_rec.v"))
    )
    return joined.select(
        F.lit(structure).alias("structure"),
        F.col("list_number").cast("int"),
        limit.cast(LongType()).alias("limit"),
        (F.col("authority") + F.coalesce(F.col("bumps"), F.lit(0)))
        .cast(LongType())
        .alias("authority"),
    )


def applied(changes: DataFrame) -> DataFrame:
    """One row: the records applied, and the first and last seq among them."""
    return changes.agg(
        F.count("*").alias("records"),
        F.min("seq").alias("first_seq"),
        F.max("seq").alias("last_seq"),
    )
