"""UOW descriptors (eUOWDs) and multi-structure summaries (MUSEs), §5.19-§5.20.

At commit, prepare and backout a unit of work writes, to its manager's descriptor list
in the administrative structure, what a peer needs to finish it: per structure it
touched, the queues and operations (a "flattened" TRQS/TROP list, gap U6), in parts
of at most 4096 bytes keyed ``structure | UOW id | 000000 | part``.  Part 0 records the
number of parts, so that a set cut short by a failure is recognised (p[274]).

Status.  A unit that touched one structure keeps its status in the adjunct of that
structure's part 0; one that touched several keeps it in a MUSE, keyed
``00 | UOW id | 00..``, written before any eUOWD and deleted after the last, and every
eUOWD names the MUSE.  Every status change is a version-compared update, so that a
recovering peer and a restarting owner cannot both decide (p[307]).

Protocol (gap U1; the patent's p[305] was stripped):

1. multi-structure: write the MUSE with the status and each structure's part count;
2. write each structure's parts in ascending structure order, part 0 first;
3. change the status only after every part is written (so a set that is not complete
   was never anything but its first status: see :func:`is_complete`);
4. when the outcome is carried out, delete each structure's parts, last part first
   (LIFO), then the MUSE.

Part layout: a header, then records ``Q`` (a queue: put list, index type) each followed
by its ``O`` records (an operation: kind, persistence, entry id, key, message id,
secondary key).  A queue whose operations run over a part boundary is named again at
the top of the next part.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import msgpack

from sharedq.cf import ById, CFError, ListEntry, VersionMismatch
from sharedq.mq import keys
from sharedq.mq.errors import JournalFailed, MQReason, mq_error
from sharedq.mq.journal import ChangeKind
from sharedq.mq.units import Status, Trop, TropKind, UnitState, Written
from sharedq.seam.access import StructureAccess, tolerating
from sharedq.seam.notes import EntryMeaning

#: The most bytes one descriptor part holds (p[269]).
DESCRIPTOR_SIZE = 4096

# magic, format, part, parts, structure number, UOW id, MUSE key, owner id, get list
_HEADER = struct.Struct(">2sBHHB8s16sBH")
_MAGIC = b"eU"
_FORMAT = 1
_QUEUE = struct.Struct(">cHB")
_OP = struct.Struct(">cBB12s16s24sB")
_PERSISTENT = 0x01
_INDEX_CODES = {"none": 0, "msg-id": 1, "correl-id": 2}


class OpRecord(NamedTuple):
    """One operation as a descriptor holds it."""

    kind: TropKind
    persistent: bool
    entry_id: bytes
    key: bytes
    msg_id: bytes
    secondary: bytes | None


class QueueRecord(NamedTuple):
    put_list: int
    index_code: int
    ops: tuple[OpRecord, ...]


# -- encoding ---------------------------------------------------------------------------


def _op_bytes(trop: Trop) -> bytes:
    secondary = trop.secondary or b""
    flags = _PERSISTENT if trop.persistent else 0
    return (
        _OP.pack(b"O", int(trop.kind), flags, trop.entry_id, trop.key, trop.msg_id, len(secondary))
        + secondary
    )


def encode_parts(
    structure_number: int,
    uow_id: bytes,
    muse: bytes,
    owner_id: int,
    get_list: int,
    queues: Sequence[tuple[int, int, Sequence[Trop]]],
) -> list[bytes]:
    """The parts for one structure: ``queues`` is ``(put list, index code, trops)``."""
    bodies: list[bytearray] = [bytearray()]
    room = DESCRIPTOR_SIZE - _HEADER.size
    for put_list, index, trops in queues:
        queue_record = _QUEUE.pack(b"Q", put_list, index)
        if len(bodies[-1]) + len(queue_record) + _OP.size + 32 > room:
            bodies.append(bytearray())
        bodies[-1] += queue_record
        for trop in trops:
            op = _op_bytes(trop)
            if len(bodies[-1]) + len(op) > room:
                bodies.append(bytearray(queue_record))
            bodies[-1] += op
    count = len(bodies)
    return [
        _HEADER.pack(
            _MAGIC, _FORMAT, part, count, structure_number, uow_id, muse, owner_id, get_list
        )
        + bytes(body)
        for part, body in enumerate(bodies)
    ]


class Part(NamedTuple):
    """One decoded descriptor part."""

    number: int
    parts: int
    structure_number: int
    uow_id: bytes
    muse: bytes
    owner_id: int
    get_list: int
    queues: tuple[QueueRecord, ...]


def decode_part(data: bytes) -> Part:
    magic, fmt, part, parts, number, uow_id, muse, owner, get_list = _HEADER.unpack_from(data)
    if magic != _MAGIC or fmt != _FORMAT:
        raise mq_error(MQReason.UNEXPECTED_ERROR, "not a UOW descriptor")
    offset = _HEADER.size
    queues: list[QueueRecord] = []
    current: tuple[int, int] | None = None
    ops: list[OpRecord] = []
    while offset < len(data):
        tag = data[offset : offset + 1]
        if tag == b"Q":
            if current is not None:
                queues.append(QueueRecord(current[0], current[1], tuple(ops)))
            _, put_list, index = _QUEUE.unpack_from(data, offset)
            current, ops = (put_list, index), []
            offset += _QUEUE.size
        elif tag == b"O":
            _, kind, flags, entry_id, key, msg_id, length = _OP.unpack_from(data, offset)
            offset += _OP.size
            secondary = data[offset : offset + length] if length else None
            offset += length
            ops.append(
                OpRecord(
                    TropKind(kind), bool(flags & _PERSISTENT), entry_id, key, msg_id, secondary
                )
            )
        else:
            raise mq_error(MQReason.UNEXPECTED_ERROR, f"bad descriptor record {tag!r}")
    if current is not None:
        queues.append(QueueRecord(current[0], current[1], tuple(ops)))
    return Part(part, parts, number, uow_id, muse, owner, get_list, tuple(queues))


# -- writing, updating, deleting (the owner) ----------------------------------------------


def write(admin: StructureAccess, descriptor_list: int, uow: UnitState, status: Status) -> Written:
    """Write the unit's descriptors with ``status``; on failure delete what was written.

    The caller has made sure the unit has operations.  Raises what the structure
    raised (``StructureFull`` when the administrative structure has no room), or
    ``JournalFailed`` when the log could not record a part (deleted too).
    """
    stamps = uow.stamps
    uow_id = uow.uow_id
    numbers = sorted(uow.structures)
    multi = len(numbers) > 1
    muse = keys.muse_key(uow_id) if multi else keys.NO_MUSE
    owner = uow.stamps.qm_id
    encoded: dict[int, list[bytes]] = {}
    for number in numbers:
        per_structure = uow.structures[number]
        queues = [
            (put_list, _INDEX_CODES[t.queue.index.value], t.ordered())
            for put_list, t in per_structure.items()
        ]
        get_list = next(iter(per_structure.values())).queue.get_list
        encoded[number] = encode_parts(number, uow_id, muse, owner, get_list, queues)
    written: list[bytes] = []
    result = Written(status, {}, b"")
    try:
        if multi:
            muse_id = stamps.entry_id()
            summary = msgpack.packb(
                {"structures": {str(n): len(p) for n, p in encoded.items()}, "owner": owner},
                use_bin_type=True,
            )
            admin.write(
                descriptor_list,
                muse,
                summary,
                entry_id=muse_id,
                adjunct=bytes((status,)),
                kind=ChangeKind.DESCRIPTOR,
                uow=uow_id,
                reserve=True,
            )
            written.append(muse_id)
            result.muse_id = result.status_id = muse_id
        for number in numbers:
            ids: list[bytes] = []
            for part, data in enumerate(encoded[number]):
                entry_id = stamps.entry_id()
                admin.write(
                    descriptor_list,
                    keys.euowd_key(number, uow_id, part),
                    data,
                    entry_id=entry_id,
                    adjunct=bytes((status,)) if part == 0 else b"",
                    kind=ChangeKind.DESCRIPTOR,
                    uow=uow_id,
                    reserve=True,
                )
                written.append(entry_id)
                ids.append(entry_id)
            result.parts[number] = ids
    except Exception as error:
        if isinstance(error, JournalFailed) and error.entry is not None:
            written.append(error.entry.entry_id)  # written, but the log could not say so
        if written:
            # A set left half written (the structure refusing the deletes too) is read
            # as cut short by a failure: recovery backs the unit out.
            with contextlib.suppress(CFError), tolerating():
                delete_structure(admin, uow_id, written)
        raise
    if not multi:
        result.status_id = result.parts[numbers[0]][0]
    return result


def set_status(admin: StructureAccess, uow: UnitState, written: Written, status: Status) -> None:
    """Change the recorded status, comparing versions (the only writer wins).

    ``JournalFailed``: changed all the same (a status change is never undone: see
    :mod:`sharedq.mq.syncpoint`), and ``written`` says so.
    """
    try:
        admin.update(
            ById(written.status_id),
            adjunct=bytes((status,)),
            expect_version=written.status_version,
            set_version=written.status_version + 1,
            kind=ChangeKind.DESCRIPTOR,
            uow=uow.uow_id,
        )
    except JournalFailed:
        written.status_version += 1
        written.status = status
        raise
    written.status_version += 1
    written.status = status


def delete_structure(admin: StructureAccess, uow_id: bytes, ids: Sequence[bytes]) -> None:
    """Delete entries written in order ``ids``, last first (LIFO, p[292]); absent ones
    are fine."""
    pending = list(reversed(ids))
    while pending:
        result = admin.delete_entries(
            pending,
            missing_ok=True,
            kind=ChangeKind.DESCRIPTOR,
            uow=uow_id,
            meanings=[EntryMeaning(i, None, None, None) for i in pending],
        )
        if result.error is not None:  # pragma: no cover - missing_ok leaves no error
            raise result.error
        pending = pending[result.processed :]


def delete_muse(admin: StructureAccess, uow_id: bytes, muse_id: bytes) -> None:
    delete_structure(admin, uow_id, [muse_id])


# -- reading (recovery and restart) -------------------------------------------------------


@dataclass
class UowRecord:
    """Everything one manager's descriptor list says about one unit of work."""

    uow_id: bytes
    muse: ListEntry | None = None
    #: structure number -> part number -> entry
    parts: dict[int, dict[int, ListEntry]] = field(default_factory=dict)

    @property
    def multi(self) -> bool:
        if self.muse is not None:
            return True
        return any(
            decode_part(entry.data).muse != keys.NO_MUSE
            for per in self.parts.values()
            for entry in per.values()
        )

    def status_entry(self) -> ListEntry | None:
        """The entry whose adjunct holds the status, if it was written."""
        if self.muse is not None:
            return self.muse
        if self.multi:
            return None  # eUOWDs naming a MUSE that is gone: the unit finished
        for per in self.parts.values():
            if 0 in per:
                return per[0]
        return None

    def status(self) -> Status | None:
        entry = self.status_entry()
        if entry is None or not entry.adjunct:
            return None
        return Status(entry.adjunct[0])

    def expected_parts(self) -> dict[int, int]:
        """structure number -> part count, as far as what is left records it."""
        expected: dict[int, int] = {}
        if self.muse is not None:
            summary = msgpack.unpackb(self.muse.data, raw=False)
            expected.update({int(n): c for n, c in summary["structures"].items()})
        for number, per in self.parts.items():
            if 0 in per:
                expected[number] = decode_part(per[0].data).parts
        return expected

    def is_complete(self) -> bool:
        """Whether every part the unit meant to write exists.

        Statuses change only once every part is written, and only "in commit" and
        "in abort" units lose parts to a peer's clean-up, so an incomplete set of
        "begin commit", "in prepare" or first-written "in abort" means the writer
        failed while writing: the unit never got further.
        """
        expected = self.expected_parts()
        if not expected:
            return False
        return all(len(self.parts.get(number, {})) == count for number, count in expected.items())

    def ops(self, structure_number: int) -> tuple[int | None, list[QueueRecord]]:
        """The get list and queue records of one structure (what its parts hold)."""
        get_list: int | None = None
        queues: list[QueueRecord] = []
        for _, entry in sorted(self.parts.get(structure_number, {}).items()):
            part = decode_part(entry.data)
            get_list = part.get_list
            queues.extend(part.queues)
        return get_list, queues

    def all_entry_ids(self, structure_number: int) -> list[bytes]:
        return [e.entry_id for _, e in sorted(self.parts.get(structure_number, {}).items())]


def load(admin: StructureAccess, descriptor_list: int) -> dict[bytes, UowRecord]:
    """Every unit of work a descriptor list records, by UOW id."""
    records: dict[bytes, UowRecord] = {}
    for entry in admin.scan(descriptor_list, keys.COMMITTED_LOW, b"\xff" * 16):
        number, uow_id, part = keys.parse_descriptor_key(entry.key)
        record = records.get(uow_id)
        if record is None:
            record = records[uow_id] = UowRecord(uow_id)
        if number == 0:
            record.muse = entry
        else:
            record.parts.setdefault(number, {})[part] = entry
    return records


def change_status(admin: StructureAccess, entry: ListEntry, status: Status) -> bool:
    """A recoverer's version-compared status change; ``False`` if someone else won."""
    try:
        admin.update(
            ById(entry.entry_id),
            adjunct=bytes((status,)),
            expect_version=entry.version,
            set_version=entry.version + 1,
            kind=ChangeKind.DESCRIPTOR,
            uow=keys.parse_descriptor_key(entry.key)[1],
        )
    except VersionMismatch:
        return False
    return True


def delete_record_structure(admin: StructureAccess, record: UowRecord, number: int) -> None:
    """Delete one structure's parts of a recorded unit, then the MUSE if none are left."""
    delete_structure(admin, record.uow_id, record.all_entry_ids(number))
    record.parts.pop(number, None)
    if record.muse is not None and not remaining_parts(admin, record, number):
        delete_muse(admin, record.uow_id, record.muse.entry_id)


def remaining_parts(admin: StructureAccess, record: UowRecord, done: int) -> Iterable[int]:
    """Structures still holding parts of the unit, re-read (another peer may be
    recovering them at the same moment; the last one to finish deletes the MUSE)."""
    from sharedq.cf import ByKey, Compare

    found = []
    for number in record.expected_parts():
        if number == done:
            continue
        descriptor_list = record.muse.list_number if record.muse is not None else None
        if descriptor_list is None:
            continue
        for part in range(record.expected_parts()[number]):
            key = keys.euowd_key(number, record.uow_id, part)
            if admin.read(ByKey(descriptor_list, key, Compare.EQ)) is not None:
                found.append(number)
                break
    return found
