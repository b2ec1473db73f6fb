"""The ``recover`` job's transformations: a structure's image at a point, as DataFrames.

These reproduce, with Spark SQL over DataFrames only, what structure recovery does in
process (:mod:`sharedq.recovery.restore`: load the SRDS, then
:func:`sharedq.recovery.replay.replay`, which folds the log into each entry's *net* change):

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
UDF runs and nothing is collected.  The fold runs in two passes: the first
(:func:`live_entries`) reads three narrow columns of every record and keeps
fixed-width values only, so that Spark aggregates it in a hash table: which entries
the log leaves, and since which write their records count; the second
(:func:`net_changes`) reads the records of those entries only (a broadcast join where
they are read) and folds them, one aggregation per entry id.  One aggregation over
every record did both before: its structs of binary values made Spark sort every
task's records, data and all, before aggregating them, most of the job's time; a
queue's log is mostly consumed messages, which the first pass drops for a few numbers
each.  One window per list places the entries.  The fold and the placement are written
in Spark SQL: one statement is analysed in one call, where the same plan built column
by column took thousands of calls through Py4J, most of a second of driver time per run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from sharedq.log.records import LIMIT_NONE, ChangeOp

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Row

WRITE, MOVE, DELETE, UPDATE, CONTROLS, NONE = (
    int(ChangeOp.WRITE),
    int(ChangeOp.MOVE),
    int(ChangeOp.DELETE),
    int(ChangeOp.UPDATE),
    int(ChangeOp.LIST_CONTROLS),
    int(ChangeOp.NONE),
)
_U64 = 2**64
_MAX_VERSION = 2**64 - 1
_I64_MAX = 2**63 - 1
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
    changes (``op`` :attr:`~sharedq.log.records.ChangeOp.NONE`) are dropped.
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


#: ``op`` of the pseudo-record that stands for an image entry in the fold.
IMAGE = 0
#: The fold finds an entry's last op as ``max(seq * span + op) % span``: every op it
#: reads (the image's and the four entry changes) is below the span.
_OP_SPAN = 8
assert max(IMAGE, WRITE, MOVE, DELETE, UPDATE) < _OP_SPAN

#: The change records the fold reads, and the image's entries as pseudo-records: one
#: per entry, op IMAGE, seq -1 (before every change), setting the entry's key,
#: secondary key, data, adjunct and version, and placing it where the image has it.
#: The SQL takes its op numbers from :class:`~sharedq.log.records.ChangeOp`
#: (``{{changes}}`` and the like stay placeholders for ``spark.sql``).
_RECORDS = f"""
  SELECT entry_id, seq, op, list_number, at_head, key, secondary_key, set_secondary_key,
         data, adjunct, version, increment_version, CAST(NULL AS BIGINT) AS img_position
  FROM {{changes}} WHERE op IN ({WRITE}, {MOVE}, {DELETE}, {UPDATE}) AND entry_id IS NOT NULL
"""
_IMAGE_RECORDS = f"""
  UNION ALL
  SELECT entry_id, -1L, CAST({IMAGE} AS TINYINT), list_number, CAST(NULL AS BOOLEAN), key,
         secondary_key, true, data, adjunct, version, CAST(NULL AS BOOLEAN), position
  FROM {{image}}
"""


def _records(changes: DataFrame, image: DataFrame | None) -> tuple[str, dict[str, Any]]:
    """The fold's input as SQL text, and the DataFrames it names."""
    if image is None:
        return _RECORDS, {"changes": changes}
    return _RECORDS + _IMAGE_RECORDS, {"changes": changes, "image": image}


#: The first pass: which entries the log leaves in the structure, and since when their
#: records count.  It reads three narrow columns of every record (no key, no data) and
#: keeps fixed-width values only, so Spark aggregates it in a hash table, partially in
#: each task before the shuffle.  An entry is live when its last record is not a
#: delete; ``since`` is the seq of its last write (-1: the image's entry, not written
#: again; null: neither, every record of it counts).  A write makes an entry anew, so
#: no record before ``since`` decides anything of it.
_LIVE = f"""
SELECT entry_id, MAX(CASE WHEN op IN ({IMAGE}, {WRITE}) THEN seq END) AS since
FROM (
  SELECT entry_id, seq, op FROM {{changes}}
  WHERE op IN ({WRITE}, {MOVE}, {DELETE}, {UPDATE}) AND entry_id IS NOT NULL
  {{image_ids}}
)
GROUP BY entry_id
HAVING MAX(seq * {_OP_SPAN} + op) % {_OP_SPAN} != {DELETE}
"""
_IMAGE_IDS = f"UNION ALL SELECT entry_id, -1L, CAST({IMAGE} AS TINYINT) FROM {{image}}"


def live_entries(changes: DataFrame, image: DataFrame | None = None) -> DataFrame:
    """The entries alive after the image and ``changes``: ``entry_id``, ``since``.

    One row per entry whose last record (the image's entry counting as a record at
    seq -1) is not a delete; ``since`` is the seq of its last write, -1 when that is the
    image's entry, null when neither is among the records.  Consumed messages (most of
    a queue's log) end here: the second pass reads the records of these entries only.
    """
    frames: dict[str, Any] = {"changes": changes}
    image_ids = ""
    if image is not None:
        frames["image"] = image
        image_ids = _IMAGE_IDS
    return changes.sparkSession.sql(_LIVE.replace("{image_ids}", image_ids), **frames)


#: The second pass: one aggregation per live entry over its records since its last
#: write.  Every "last record of a kind" is the ``max`` of a struct led by the seq (a
#: delete counts as the last record of every kind and blanks the key, data and
#: adjunct: an entry deleted and written again); ``inc_seqs`` collects the seqs of the
#: version increments (a move or update without a version that increments it: a
#: backout's count) among them, those after the last version-setting record count.
#: ``{live}`` joins the records to the live entries: broadcast when they are few
#: (``{hint}``), so that the log's records are filtered where they are read and only
#: the live entries' records reach the shuffle.
_FOLD = f"""
WITH kept AS (
  SELECT {{hint}} r.* FROM ({{records}}) r
  JOIN {{live}} l ON r.entry_id = l.entry_id AND r.seq >= coalesce(l.since, -2L)
),
flagged AS (
  SELECT *, coalesce(set_secondary_key, false) AS skey_set, op = {DELETE} AS gone FROM kept
)
SELECT entry_id,
  CAST(MAX(seq * {_OP_SPAN} + op) % {_OP_SPAN} AS TINYINT) AS last_op,
  MAX(CASE WHEN op IN ({WRITE}, {MOVE}) THEN struct(seq AS s, list_number, at_head AS head) END)
    AS place,
  MAX(CASE WHEN op = {IMAGE} THEN struct(list_number, img_position AS position) END) AS img,
  MAX(CASE WHEN (op IN ({WRITE}, {MOVE}) AND key IS NOT NULL) OR op = {IMAGE} OR gone
      THEN struct(seq AS s, key AS v) END).v AS key,
  MAX(CASE WHEN op IN ({IMAGE}, {WRITE}) OR (op = {MOVE} AND skey_set) OR gone
      THEN struct(seq AS s, CASE WHEN skey_set AND NOT gone THEN secondary_key END AS v) END).v
    AS secondary_key,
  MAX(CASE WHEN op IN ({IMAGE}, {WRITE}) OR (op = {UPDATE} AND data IS NOT NULL) OR gone
      THEN struct(seq AS s, CASE WHEN NOT gone THEN coalesce(data, X'') END AS v) END).v
    AS data,
  MAX(CASE WHEN op IN ({IMAGE}, {WRITE}) OR (op = {UPDATE} AND adjunct IS NOT NULL) OR gone
      THEN struct(seq AS s, CASE WHEN NOT gone THEN coalesce(adjunct, X'') END AS v) END).v
    AS adjunct,
  MAX(CASE WHEN op IN ({IMAGE}, {WRITE}) OR (op IN ({MOVE}, {UPDATE}) AND version IS NOT NULL)
      THEN struct(seq AS s, coalesce(version, 0L) AS v) END) AS ver,
  collect_list(CASE WHEN op IN ({MOVE}, {UPDATE}) AND version IS NULL AND increment_version
      THEN seq END) AS inc_seqs
FROM flagged GROUP BY entry_id
"""


def net_changes(
    changes: DataFrame, image: DataFrame | None, live: DataFrame, *, broadcast: bool = True
) -> DataFrame:
    """Each live entry's net change over the image and ``changes``, one row per entry.

    ``live`` is :func:`live_entries` of the same image and changes, materialised by the
    caller (so that this pass reads it instead of running the first pass again).
    ``broadcast``: ship it to every task (the default), else shuffle the records to
    meet it (for very many live entries).  ``image`` (:func:`image_entries`; ``None``:
    no image) enters as one pseudo-record per entry (op :data:`IMAGE`, seq -1) among
    the change records.

    Columns: ``entry_id``; ``last_op`` (of its last record; :data:`IMAGE` when only the
    image has the entry); ``place`` (s, list_number, head) of its last write or move;
    ``img`` (list_number, position) where the image has it; ``key``; ``secondary_key``;
    ``data``; ``adjunct``; ``ver`` (s, v) of its last record that set the version;
    ``inc_seqs``, the seqs of its version increments.  ``place``, ``img`` and ``ver``
    are null when no record of the kind counts.
    """
    records, frames = _records(changes, image)
    hint = "/*+ BROADCAST(l) */" if broadcast else "/*+ SHUFFLE_HASH(l) */"
    sql = _FOLD.replace("{records}", records).replace("{hint}", hint)
    return changes.sparkSession.sql(sql, live=live, **frames)


def _add_versions(version: str, increments: str) -> str:
    """``version + increments`` (SQL) on the unsigned 64-bit versions stored as int64.

    Saturates at 2**64-1, as ``move_entries`` does; entries without increments (all
    but a few) keep their value untouched.
    """
    unsigned = (
        f"CASE WHEN {version} < 0 THEN CAST({version} AS DECIMAL(21, 0)) + {_U64} "
        f"ELSE CAST({version} AS DECIMAL(21, 0)) END"
    )
    total = f"least({unsigned} + {increments}, {_MAX_VERSION})"
    signed = f"CASE WHEN {total} > {_I64_MAX} THEN {total} - {_U64} ELSE {total} END"
    return f"CASE WHEN {increments} = 0 THEN {version} ELSE CAST({signed} AS BIGINT) END"


#: Within a list, entries sort by key, then: head placements after the image (latest
#: first), the image's entries not placed again (in SRDS order), tail placements.
_ENTRIES = f"""
WITH counted AS (
  SELECT *, size(filter(inc_seqs, s -> s > coalesce(ver.s, -2L))) AS incs
  FROM {{nets}} WHERE last_op != {DELETE}
),
placed AS (
  SELECT coalesce(place.list_number, img.list_number) AS list_number, entry_id, key,
    secondary_key, {_add_versions("ver.v", "incs")} AS version, adjunct, data,
    CASE WHEN place.s IS NULL THEN 1 WHEN coalesce(place.head, false) THEN 0 ELSE 2 END
      AS grp,
    CASE WHEN place.s IS NULL THEN img.position
         WHEN coalesce(place.head, false) THEN -place.s ELSE place.s END AS ord
  FROM counted
)
SELECT CAST(:structure AS STRING) AS structure, list_number,
  CAST(row_number() OVER (PARTITION BY list_number ORDER BY key, grp, ord) - 1 AS BIGINT)
    AS position,
  entry_id, key, secondary_key, version, adjunct, data
  {{sizes}}
FROM placed
"""


def recovered_entries(structure: str, nets: DataFrame, *, list_size: bool = False) -> DataFrame:
    """The structure's entries after the image and the net changes, with their positions.

    One row per entry (:data:`ENTRY_COLUMNS`); ``position`` is 0-based within the list.
    ``nets`` (:func:`net_changes`) holds a row for every live entry.  ``list_size``: a
    last column, ``list_size``, the number of entries of the entry's list.
    """
    sizes = ", COUNT(1) OVER (PARTITION BY list_number) AS list_size" if list_size else ""
    return nets.sparkSession.sql(
        _ENTRIES.replace("{sizes}", sizes), args={"structure": structure}, nets=nets
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


def _touches() -> Column:
    """Whether a change record changes list controls: a list-controls record, or an
    update that increments the list's authority."""
    op = F.col("op")
    bumps = F.coalesce(F.col("increment_authority"), F.lit(False))
    return ((op == CONTROLS) | ((op == UPDATE) & bumps)) & F.col("list_number").isNotNull()


def applied_metrics() -> list[Column]:
    """Over a structure's change records (:func:`select_changes`): how many
    (``records``), the first and last seq, and how many change list controls
    (``touches``).  Fixed-width aggregates, observed while the fold reads the records."""
    return [
        F.count(F.lit(1)).alias("records"),
        F.min("seq").alias("first_seq"),
        F.max("seq").alias("last_seq"),
        F.count(F.when(_touches(), True)).alias("touches"),
    ]


def list_changes(changes: DataFrame) -> DataFrame:
    """The changes' effect on list controls: one row per list a list-controls record or
    an update with ``increment_authority`` touched.

    ``list_number``; ``limit``, the limit the last list-controls record that set one
    set, ``-1`` for none, null when none did; ``bumps``, the authority increments.  At
    most a row per list, whatever the log's size.
    """
    op = F.col("op")
    sets_limit = (op == CONTROLS) & F.col("limit").isNotNull()
    return (
        changes.where(_touches())
        .groupBy("list_number")
        .agg(
            F.max_by(F.col("limit"), F.when(sets_limit, F.col("seq"))).alias("limit"),
            F.count(F.when(F.coalesce(F.col("increment_authority"), F.lit(False)), True)).alias(
                "bumps"
            ),
        )
    )


def recovered_lists(
    structure: str, base: list[tuple[int, int | None, int]], touched: list[Row]
) -> list[tuple[str, int, int | None, int]]:
    """Every list's controls after the changes (:data:`LIST_COLUMNS` rows).

    ``base`` holds every list of the structure, ``(list_number, limit, authority)``, as
    the image left them (a new structure: no limit, authority 0); ``touched`` the rows
    of :func:`list_changes` (one per list touched).  List-controls records
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
