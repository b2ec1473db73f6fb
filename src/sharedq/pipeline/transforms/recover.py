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
    from pyspark.sql import Column, DataFrame, Row

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


#: ``op`` of the pseudo-record that stands for an image entry in :func:`net_changes`.
IMAGE = 0
#: Its ``seq``: below every change's.
_IMAGE_SEQ = -1
#: The columns of a change record the fold reads, with the image entry's position.
_FOLD_COLUMNS = (
    "entry_id",
    "seq",
    "op",
    "list_number",
    "at_head",
    "key",
    "secondary_key",
    "set_secondary_key",
    "data",
    "adjunct",
    "version",
    "increment_version",
    "_img_position",
)


def _image_records(image: DataFrame) -> DataFrame:
    """The image's entries (:func:`image_entries`) as pseudo-records: one per entry, op
    :data:`IMAGE`, before every change, setting the entry's key, secondary key, data,
    adjunct and version, and placing it where the image has it."""
    return image.select(
        "entry_id",
        F.lit(_IMAGE_SEQ).cast(LongType()).alias("seq"),
        F.lit(IMAGE).cast("tinyint").alias("op"),
        F.col("list_number").cast("int").alias("list_number"),
        F.lit(None).cast("boolean").alias("at_head"),
        "key",
        "secondary_key",
        F.lit(True).alias("set_secondary_key"),
        "data",
        "adjunct",
        F.col("version").cast(LongType()).alias("version"),
        F.lit(None).cast("boolean").alias("increment_version"),
        F.col("position").cast(LongType()).alias("_img_position"),
    )


def net_changes(changes: DataFrame, image: DataFrame | None = None) -> DataFrame:
    """Each entry's net change over the image and ``changes``, one row per entry id.

    ``image`` (:func:`image_entries`; ``None``: no image) enters as one pseudo-record
    per entry (op :data:`IMAGE`, seq -1) in the same fold as the change records, so that
    the image and the log meet in one shuffle, not a join.

    Columns: ``entry_id``; ``last_op`` (of the last change; :data:`IMAGE` when only the
    image has the entry); ``place`` (s, list_number, head) of its last write or move;
    ``img`` (s, list_number, position) where the image has it; ``key_rec``;
    ``skey_rec``; ``data_rec``; ``adj_rec``; ``ver_rec`` (s, v) of the last record that
    set the version (the image's counts), and ``incs``, the increments after it.  A
    struct is null when no record of its kind counts.

    Most of a queue's log is messages put, read and deleted.  The records are
    partitioned by entry id once; a window over each entry's records (the same sort
    serves it and the aggregation) finds its last record and its last version-setting
    one, and of an entry whose last record is a delete only that record goes on to the
    fold (``last_op`` 3, every other field null), so that the fold, which carries keys
    and data, sees a small share of the log.
    """
    op = F.col("op")
    records = changes.where(
        op.isin(WRITE, MOVE, DELETE, UPDATE) & F.col("entry_id").isNotNull()
    ).select(*_FOLD_COLUMNS[:-1], F.lit(None).cast(LongType()).alias("_img_position"))
    if image is not None:
        records = records.unionByName(_image_records(image))
    is_image = op == IMAGE
    versioned = (op == WRITE) | (op.isin(MOVE, UPDATE) & F.col("version").isNotNull()) | is_image
    increment = op.isin(MOVE, UPDATE) & F.col("version").isNull() & F.col("increment_version")
    by_entry = Window.partitionBy("entry_id")
    # seq * 8 + op orders an entry's records as seq does (one record per seq and entry).
    rank = F.col("seq") * 8 + op.cast(LongType())
    marked = records.select(
        *_FOLD_COLUMNS,
        F.max(rank).over(by_entry).alias("_last"),
        F.max(F.when(versioned, F.col("seq"))).over(by_entry).alias("_ver_seq"),
    ).where((F.col("_last") % 8 != DELETE) | (rank == F.col("_last")))
    placed = op.isin(WRITE, MOVE)
    skey_set = F.coalesce(F.col("set_secondary_key"), F.lit(False))
    after_version = F.col("_ver_seq").isNull() | (F.col("seq") > F.col("_ver_seq"))
    return marked.groupBy("entry_id").agg(
        # -8 % 8 is 0: IMAGE for an entry only the image has.
        (F.max("_last") % 8).cast("tinyint").alias("last_op"),
        _last(
            placed, F.col("list_number").alias("list_number"), F.col("at_head").alias("head")
        ).alias("place"),
        _last(
            is_image,
            F.col("list_number").alias("list_number"),
            F.col("_img_position").alias("position"),
        ).alias("img"),
        _last((placed & F.col("key").isNotNull()) | is_image, F.col("key").alias("v")).alias(
            "key_rec"
        ),
        _last(
            (op == WRITE) | ((op == MOVE) & skey_set) | is_image,
            F.when(skey_set, F.col("secondary_key")).alias("v"),
        ).alias("skey_rec"),
        _last(
            (op == WRITE) | ((op == UPDATE) & F.col("data").isNotNull()) | is_image,
            F.coalesce(F.col("data"), F.lit(b"")).alias("v"),
        ).alias("data_rec"),
        _last(
            (op == WRITE) | ((op == UPDATE) & F.col("adjunct").isNotNull()) | is_image,
            F.coalesce(F.col("adjunct"), F.lit(b"")).alias("v"),
        ).alias("adj_rec"),
        _last(versioned, F.coalesce(F.col("version"), F.lit(0).cast(LongType())).alias("v")).alias(
            "ver_rec"
        ),
        F.count(F.when(increment & after_version, True)).alias("incs"),
    )


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


def recovered_entries(structure: str, nets: DataFrame, *, list_size: bool = False) -> DataFrame:
    """The structure's entries after the image and the net changes, with their positions.

    One row per entry (:data:`ENTRY_COLUMNS`); ``position`` is 0-based within the list.
    ``nets`` (:func:`net_changes`, with the image) holds a row for every entry the image
    or the changes have, deleted ones included (``last_op`` 3).  ``list_size``: a last
    column, ``list_size``, the number of entries of the entry's list.
    """
    placed_at = F.col("place.s")
    head = F.coalesce(F.col("place.head"), F.lit(False))
    increments = F.coalesce(F.col("incs"), F.lit(0).cast(LongType()))
    # Equal keys: head placements (latest first), the image's order, tail placements.
    group = F.when(placed_at.isNull(), F.lit(1)).when(head, F.lit(0)).otherwise(F.lit(2))
    within = (
        F.when(placed_at.isNull(), F.col("img.position"))
        .when(head, -placed_at)
        .otherwise(placed_at)
    )
    list_number = F.coalesce(F.col("place.list_number"), F.col("img.list_number"))
    order = Window.partitionBy("list_number").orderBy("key", "_grp", "_ord")
    sizes = (
        [F.count(F.lit(1)).over(Window.partitionBy("list_number")).alias("list_size")]
        if list_size
        else []
    )
    return (
        nets.where(F.col("last_op") != DELETE)
        .select(
            F.lit(structure).alias("structure"),
            list_number.alias("list_number"),
            F.col("entry_id"),
            F.col("key_rec.v").alias("key"),
            F.col("skey_rec.v").alias("secondary_key"),
            _add_versions(F.col("ver_rec.v"), increments).alias("version"),
            F.coalesce(F.col("adj_rec.v"), F.lit(b"")).alias("adjunct"),
            F.coalesce(F.col("data_rec.v"), F.lit(b"")).alias("data"),
            group.alias("_grp"),
            within.alias("_ord"),
        )
        .select(
            "structure",
            "list_number",
            (F.row_number().over(order) - 1).cast(LongType()).alias("position"),
            "entry_id",
            "key",
            "secondary_key",
            "version",
            "adjunct",
            "data",
            *sizes,
        )
    )


def list_sizes_metric() -> Column:
    """Over :func:`recovered_entries` rows with ``list_size``: one (structure,
    list_number, entries) struct per non-empty list (an array, one item per list)."""
    return F.collect_list(
        F.when(
            F.col("position") == 0,
            F.struct("structure", "list_number", F.col("list_size").alias("entries")),
        )
    ).alias("lists")


def list_changes(changes: DataFrame) -> DataFrame:
    """The changes' effect on list controls, and the records applied, in one aggregation.

    One row per list a list-controls record or an update with ``increment_authority``
    touched (``list_number``; ``limit``, the limit the last list-controls record that
    set one set, ``-1`` for none, null when none did; ``bumps``, the authority
    increments) and one row with ``list_number`` null for the other records; each row
    with ``records``, ``first_seq`` and ``last_seq`` of its records.  At most a row
    per list and one more, whatever the log's size.  Fixed-width buffers only (no
    struct), so a hash aggregation over narrow columns.
    """
    op = F.col("op")
    bumps = F.coalesce(F.col("increment_authority"), F.lit(False))
    touches = ((op == CONTROLS) | ((op == UPDATE) & bumps)) & F.col("list_number").isNotNull()
    sets_limit = touches & (op == CONTROLS) & F.col("limit").isNotNull()
    return changes.groupBy(F.when(touches, F.col("list_number")).alias("list_number")).agg(
        F.max_by(F.col("limit"), F.when(sets_limit, F.col("seq"))).alias("limit"),
        F.count(F.when(touches & bumps, True)).alias("bumps"),
        F.count(F.lit(1)).alias("records"),
        F.min("seq").alias("first_seq"),
        F.max("seq").alias("last_seq"),
    )


def recovered_lists(
    structure: str, base: list[tuple[int, int | None, int]], touched: list[Row]
) -> list[tuple[str, int, int | None, int]]:
    """Every list's controls after the changes (:data:`LIST_COLUMNS` rows).

    ``base`` holds every list of the structure, ``(list_number, limit, authority)``, as
    the image left them (a new structure: no limit, authority 0); ``touched`` the rows
    of :func:`list_changes` (a handful: one per list touched).  List-controls records
    set the limit (``-1``: none) and add to the authority; updates may add to it too.
    """
    by_list = {int(r.list_number): r for r in touched if r.list_number is not None}
    lists = []
    for number, limit, authority in base:
        row = by_list.get(number)
        if row is not None:
            if row.limit is not None:
                limit = None if int(row.limit) == LIMIT_NONE else int(row.limit)
            authority += int(row.bumps)
        lists.append((structure, number, limit, authority))
    return lists


def targets_at_time(log: DataFrame, structures: list[str], at_time_us: int) -> DataFrame:
    """Per structure, ``structure, target_seq``: :func:`target_seq_at_time` for several
    structures in one aggregation (a structure without a change by then has no row)."""
    at = F.timestamp_micros(F.lit(at_time_us))
    return (
        log.where(
            F.col("structure").isin(structures) & (F.col("op") != NONE) & (F.col("time_us") <= at)
        )
        .groupBy("structure")
        .agg(F.max("seq").alias("target_seq"))
    )
