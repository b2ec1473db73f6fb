"""Structure recovery data sets (SRDS): a structure pair's checkpoint, as Parquet.

A structure checkpoint copies the objects of a structure pair (primary and overflow)
while the pair is quiesced, then writes the copy in the background to the *older* of
two slots, SRDS1 and SRDS2, so that the newer one stays intact while it is written
(redbook §2.10; seed 001).  Recovery loads the newest readable SRDS, falling back to
the older one, and replays the log after the sequence number it covers.  The Spark
pipeline reads the same files to compute the same image.  This module is the one
definition of that file format, for all three.

One SRDS is one Parquet file, ``SRDS1.parquet`` or ``SRDS2.parquet`` in the pair's
``srds`` directory.  Each row is one list entry (:data:`ENTRY_SCHEMA`), in list order
within each structure and list; ``position`` is the entry's place in its list.
Recoverable objects carry their data.  For a nonrecoverable object only what seed 001
asks for is kept: its queue name and unit of work, with ``recoverable`` false and no
data; recovery does not restore it.  The file's key-value metadata ``sharedq.srds``
holds, as JSON, what is not an entry: the pair, the slot, the sequence number the copy
covers, when and by whom it was taken, the checkpoint's number, per structure its
allocation parameters and list controls (limit and authority of every list), and
where the log stood: the identity of the pair's log stream and every writer's last
lsn just before the structure was quiesced (``log``), so that recovery can check
that every record after the copy is still in the log.

A file is *valid* when it reads whole: Parquet page checksums (written and verified),
the metadata verifying against the SHA-256 digest it carries, matching the file's
slot, and the row count agreeing with it.
It is written under a hidden temporary name, synced, then renamed into place, so a
crash mid-write leaves the previous file of that slot or nothing, never half a file.

pyarrow is imported by the functions that make, write or read an SRDS, when first
called, and :data:`ENTRY_SCHEMA` is made at its first use: a server that never
checkpoints or recovers does without pyarrow (``sharedq.log``'s docstring says why).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sharedq.cf import ListEntry, StructureParams
from sharedq.errors import SharedqError
from sharedq.log.files import make_dirs, open_new
from sharedq.recovery.errors import RecoveryReason, recovery_error

if TYPE_CHECKING:
    import pyarrow as pa

#: The layout version written in every SRDS.
SRDS_FORMAT = 1
#: The two slots checkpoints alternate between.
SLOTS = (1, 2)
#: The Parquet key-value metadata key holding the checkpoint's description.
METADATA_KEY = b"sharedq.srds"
#: Versions are 8-byte unsigned in ``sharedq.cf``; Parquet and Spark have no unsigned
#: 64-bit integer, so they are stored as two's complement in int64, as in the log.
_U64 = 2**64
_I64_MAX = 2**63 - 1

if TYPE_CHECKING:
    #: The Arrow schema of an SRDS's rows (made at its first use: ``__getattr__``).
    ENTRY_SCHEMA: pa.Schema


@cache
def entry_schema() -> pa.Schema:
    """:data:`ENTRY_SCHEMA` (imports pyarrow at the first call)."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("structure", pa.string(), nullable=False),
            pa.field("list_number", pa.int32(), nullable=False),
            pa.field("position", pa.int64(), nullable=False),
            pa.field("entry_id", pa.binary(), nullable=False),
            pa.field("key", pa.binary(), nullable=False),
            pa.field("secondary_key", pa.binary(), nullable=True),
            pa.field("version", pa.int64(), nullable=False),
            pa.field("elements", pa.int32(), nullable=False),
            pa.field("adjunct", pa.binary(), nullable=False),
            pa.field("data", pa.binary(), nullable=True),
            pa.field("recoverable", pa.bool_(), nullable=False),
            pa.field("queue", pa.binary(), nullable=True),
            pa.field("uow", pa.binary(), nullable=True),
        ]
    )


def __getattr__(name: str) -> Any:
    """Make :data:`ENTRY_SCHEMA` at its first use (the module docstring says why)."""
    if name == "ENTRY_SCHEMA":
        return entry_schema()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def version_to_i64(version: int) -> int:
    """An unsigned 64-bit version as the signed value stored in Parquet."""
    return version - _U64 if version > _I64_MAX else version


def version_from_i64(stored: int) -> int:
    """The unsigned version back from its stored signed value."""
    return stored + _U64 if stored < 0 else stored


@dataclass(frozen=True)
class ListControls:
    """A list's controls at the checkpoint: its limit (``None``: none) and authority."""

    list_number: int
    limit: int | None
    authority: int


@dataclass(frozen=True)
class StructureImage:
    """One structure of the pair as checkpointed: how to allocate it and its lists."""

    name: str
    params: StructureParams
    seq: int
    lists: tuple[ListControls, ...]
    entry_count: int


@dataclass(frozen=True)
class EntryRow:
    """One entry to checkpoint, with what the layer above knows of it.

    ``recoverable`` is decided by the client (a queue manager: persistent messages and
    its own control objects are recoverable, nonpersistent messages are not).  The
    queue name is bytes, as in the log: a CQS queue name is 16 raw bytes, an MQ queue
    name its UTF-8 encoding.
    """

    structure: str
    entry: ListEntry
    position: int
    recoverable: bool
    queue: bytes | None = None
    uow: bytes | None = None


@dataclass(frozen=True)
class SrdsImage:
    """A checkpoint of a structure pair: its description and its entries as Arrow rows."""

    pair: str
    slot: int
    seq: int
    taken_at_us: int
    master: str
    checkpoint_id: int
    structures: dict[str, StructureImage]
    entries: pa.Table
    #: The identity of the log stream the pair's changes went to ("" if unknown).
    log_stream: str = ""
    #: Every writer's last lsn in the log just before the copy (``None``: not recorded).
    positions: dict[str, int] | None = None

    def entries_of(self, structure: str) -> pa.Table:
        """The rows of one structure, in list order."""
        import pyarrow.compute as pc

        mask = pc.equal(self.entries["structure"], structure)
        return self.entries.filter(mask)


@dataclass(frozen=True)
class SlotStatus:
    """What is in one SRDS slot: valid with the seq it covers, or why it is not usable."""

    slot: int
    path: Path
    valid: bool
    seq: int | None = None
    checkpoint_id: int | None = None
    problem: str | None = None


def srds_path(directory: str | os.PathLike[str], slot: int) -> Path:
    if type(slot) is not int or slot not in SLOTS:  # True == 1, but names no file
        raise recovery_error(RecoveryReason.BAD_ARGUMENT, f"SRDS slot {slot!r} is not 1 or 2")
    return _path(directory, "an SRDS directory") / f"SRDS{slot}.parquet"


def _path(path: object, what: str) -> Path:
    if not isinstance(path, str | os.PathLike):
        raise recovery_error(
            RecoveryReason.BAD_ARGUMENT, f"{what} must be a path, not {type(path).__name__}"
        )
    return Path(path)


def rows_to_table(rows: Iterable[EntryRow]) -> pa.Table:
    """Arrow rows for entries; nonrecoverable entries lose their data, as seed 001 says."""
    import pyarrow as pa

    columns: dict[str, list[Any]] = {name: [] for name in entry_schema().names}
    for row in rows:
        entry = row.entry
        columns["structure"].append(row.structure)
        columns["list_number"].append(entry.list_number)
        columns["position"].append(row.position)
        columns["entry_id"].append(entry.entry_id)
        columns["key"].append(entry.key)
        columns["secondary_key"].append(entry.secondary_key)
        columns["version"].append(version_to_i64(entry.version))
        columns["elements"].append(entry.elements)
        columns["adjunct"].append(entry.adjunct)
        columns["data"].append(entry.data if row.recoverable else None)
        columns["recoverable"].append(row.recoverable)
        columns["queue"].append(row.queue)
        columns["uow"].append(row.uow)
    return pa.Table.from_pydict(columns, schema=entry_schema())


def table_to_entries(table: pa.Table) -> Iterable[ListEntry]:
    """The recoverable entries of a table of rows, as ``ListEntry`` values, in row order."""
    recoverable = table.column("recoverable").to_pylist()
    columns = [
        table.column(name).to_pylist()
        for name in (
            "entry_id",
            "list_number",
            "key",
            "data",
            "adjunct",
            "secondary_key",
            "version",
            "elements",
        )
    ]
    for keep, fields in zip(recoverable, zip(*columns, strict=True), strict=True):
        if not keep:
            continue
        entry_id, list_number, key, data, adjunct, skey, version, elements = fields
        yield ListEntry(
            entry_id, list_number, key, data, adjunct, skey, version_from_i64(version), elements
        )


def write_srds(directory: str | os.PathLike[str], image: SrdsImage) -> Path:
    """Write a checkpoint into its slot: temporary name, synced, renamed into place."""
    if image.entries.schema != entry_schema():
        raise recovery_error(
            RecoveryReason.BAD_ARGUMENT, "SRDS entries do not have the SRDS entry schema"
        )
    path = srds_path(directory, image.slot)
    make_dirs(path.parent)
    description = {
        "format": SRDS_FORMAT,
        "pair": image.pair,
        "slot": image.slot,
        "seq": image.seq,
        "taken_at_us": image.taken_at_us,
        "master": image.master,
        "checkpoint_id": image.checkpoint_id,
        "rows": image.entries.num_rows,
        "structures": {
            name: {
                "params": asdict(structure.params),
                "seq": structure.seq,
                "entry_count": structure.entry_count,
                "lists": [[c.list_number, c.limit, c.authority] for c in structure.lists],
            }
            for name, structure in image.structures.items()
        },
        "log": {"stream": image.log_stream, "positions": image.positions},
    }
    description["digest"] = _digest(description)
    table = image.entries.replace_schema_metadata({METADATA_KEY: json.dumps(description)})
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    import pyarrow.parquet as pq

    try:
        with open_new(tmp) as out:  # 0600: pyarrow, given the path, makes it 0644
            pq.write_table(table, out, write_page_checksum=True, compression="zstd")
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise recovery_error(
            RecoveryReason.SRDS_WRITE_FAILED, f"cannot write {path}: {exc}", path=str(path)
        ) from exc
    return path


def read_srds(path: str | os.PathLike[str]) -> SrdsImage:
    """Read a whole SRDS, verifying it; ``SRDS_UNREADABLE`` names what is wrong."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = _path(path, "an SRDS")
    try:
        table = pq.read_table(path, page_checksum_verification=True)
    except FileNotFoundError:
        raise recovery_error(
            RecoveryReason.SRDS_UNREADABLE, f"{path} does not exist", path=str(path)
        ) from None
    except (OSError, pa.ArrowException) as exc:
        raise recovery_error(
            RecoveryReason.SRDS_UNREADABLE, f"{path} cannot be read: {exc}", path=str(path)
        ) from None
    try:
        return _decode(path, table)
    except SharedqError:
        raise
    except Exception as exc:  # a damaged footer can fail anywhere in decoding
        raise recovery_error(
            RecoveryReason.SRDS_UNREADABLE,
            f"{path} is damaged: {type(exc).__name__}: {exc}",
            path=str(path),
        ) from None


def _decode(path: Path, table: pa.Table) -> SrdsImage:
    description = _description(path, table.schema.metadata)
    if table.num_rows != description["rows"]:
        raise recovery_error(
            RecoveryReason.SRDS_UNREADABLE,
            f"{path} holds {table.num_rows} rows, its description says {description['rows']}",
            path=str(path),
        )
    entries = table.replace_schema_metadata(None)
    if not entries.schema.equals(entry_schema()):
        raise recovery_error(
            RecoveryReason.SRDS_UNREADABLE,
            f"{path} does not have the SRDS entry schema",
            path=str(path),
        )
    structures = {
        name: StructureImage(
            name=name,
            params=StructureParams(**info["params"]),
            seq=int(info["seq"]),
            lists=tuple(ListControls(n, limit, authority) for n, limit, authority in info["lists"]),
            entry_count=int(info["entry_count"]),
        )
        for name, info in description["structures"].items()
    }
    log = description.get("log") or {}
    positions = log.get("positions")
    return SrdsImage(
        pair=description["pair"],
        slot=int(description["slot"]),
        seq=int(description["seq"]),
        taken_at_us=int(description["taken_at_us"]),
        master=description["master"],
        checkpoint_id=int(description["checkpoint_id"]),
        structures=structures,
        entries=entries,
        log_stream=str(log.get("stream") or ""),
        positions=None if positions is None else {str(k): int(v) for k, v in positions.items()},
    )


def slot_status(directory: str | os.PathLike[str]) -> list[SlotStatus]:
    """Both slots: valid or not, and the seq each covers."""
    statuses = []
    for slot in SLOTS:
        path = srds_path(directory, slot)
        if not path.exists():
            statuses.append(SlotStatus(slot, path, False, problem="empty"))
            continue
        try:
            image = read_srds(path)
        except Exception as exc:  # every reason a file is unusable counts the same here
            statuses.append(SlotStatus(slot, path, False, problem=str(exc)))
            continue
        statuses.append(SlotStatus(slot, path, True, image.seq, image.checkpoint_id))
    return statuses


def target_slot(statuses: Sequence[SlotStatus]) -> int:
    """The slot the next checkpoint writes: an unusable one, else the older valid one."""
    unusable = [s.slot for s in statuses if not s.valid]
    if unusable:
        return unusable[0]
    return min(statuses, key=lambda s: (s.checkpoint_id or 0, s.seq or 0)).slot


def newest_readable(
    directory: str | os.PathLike[str],
) -> tuple[SrdsImage | None, list[SlotStatus]]:
    """The newest SRDS that reads whole, and the status of both slots.

    The newest is tried first; when it cannot be read the older one is used, as the
    redbook says (§2.10).  ``None`` when neither can be read (or none was written).
    """
    statuses = slot_status(directory)
    for status in sorted(
        (s for s in statuses if s.valid),
        key=lambda s: (s.checkpoint_id or 0, s.seq or 0),
        reverse=True,
    ):
        try:
            return read_srds(status.path), statuses
        except Exception:  # changed under us since the status was taken: try the other
            continue
    return None, statuses


def _digest(description: dict[str, Any]) -> str:
    body = {k: v for k, v in description.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def describe(path: Path, metadata: dict[bytes, bytes] | None) -> dict[str, Any]:
    """An SRDS file's description from its footer metadata, verified (``SRDS_UNREADABLE``)."""
    return _description(path, metadata)


def _description(path: Path, metadata: dict[bytes, bytes] | None) -> dict[str, Any]:
    raw = (metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise recovery_error(
            RecoveryReason.SRDS_UNREADABLE, f"{path} has no SRDS description", path=str(path)
        )
    try:
        description: dict[str, Any] = json.loads(raw)
    except ValueError:
        raise recovery_error(
            RecoveryReason.SRDS_UNREADABLE, f"{path} has a damaged description", path=str(path)
        ) from None
    if not isinstance(description, dict) or description.get("digest") != _digest(description):
        raise recovery_error(
            RecoveryReason.SRDS_UNREADABLE,
            f"{path} has a damaged description (its digest does not match)",
            path=str(path),
        )
    if description.get("format") != SRDS_FORMAT:
        raise recovery_error(
            RecoveryReason.SRDS_UNREADABLE,
            f"{path} has format {description.get('format')!r}, not {SRDS_FORMAT}",
            path=str(path),
        )
    expected_slot = (
        1 if path.name == "SRDS1.parquet" else 2 if path.name == "SRDS2.parquet" else None
    )
    if expected_slot is not None and description.get("slot") != expected_slot:
        raise recovery_error(
            RecoveryReason.SRDS_UNREADABLE,
            f"{path} says it is slot {description.get('slot')}",
            path=str(path),
        )
    return description


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
