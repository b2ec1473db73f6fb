"""The control list of each structure, and the queue-sharing group's directory.

List 0 of every structure the queue managers use is its *control list*.  Its entries
have program-assigned ids (``X'FF' | kind | payload``, see :mod:`sharedq.mq.keys`), so
that writing one is an atomic claim: a second writer of the same id gets
``EntryExists`` and knows someone was first.  That is how list headers are allocated
without a lock (gap: the patent never says how get lists are allocated):

==========  ====================================================================
kind        entry
==========  ====================================================================
``C`` n     list ``n`` is claimed, and for what (a queue, a manager's get list,
            expiry list or descriptor list)
``G`` id    the lists of manager ``id`` in this structure
``R`` id    a recovery of failed manager ``id`` is under way in this structure,
            by the manager the entry names
==========  ====================================================================

The control list of the *administrative structure* (the one every manager of the
group connects to, which also holds the managers' descriptor lists) is in addition the
group's directory:

==========  ====================================================================
``I`` id    manager ``id``'s name;  ``N`` hash(name): that name's manager id
``S`` n     structure number ``n``'s name;  ``T`` hash(name): its number
``Q`` hash  a shared queue: its name, structure and put list
``D`` h id  queue name ``h`` is held by manager ``id``'s nonshared queue (``id``
            0: by a shared queue), so that a name is shared or nonshared, never
            both (:func:`hold_queue_name`)
==========  ====================================================================

A manager's own structure for its nonshared queues (:mod:`sharedq.mq.private_queues`)
has a control list too, and its ``Q`` entries are that manager's nonshared queues.

Names appear hashed in ids and in full in the data, which is checked.  Data is
msgpack.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, NamedTuple

import msgpack

from sharedq.cf import ById, ByKey, CFError, Compare, EntryExists, VersionMismatch
from sharedq.mq import keys
from sharedq.mq.errors import JournalFailed, MQReason, mq_error
from sharedq.mq.journal import ChangeKind
from sharedq.seam.access import StructureAccess, tolerating

#: The control list's number in every structure.
CONTROL_LIST = 0
#: Structure numbers run 1..255; 0 marks a MUSE key (p[303]).
MAX_STRUCTURE_NUMBER = 255

#: What a claimed list is used for.
USE_QUEUE = "queue"
USE_GET = "get"
USE_EXPIRY = "expiry"
USE_DESCRIPTORS = "descriptors"
#: The structure's cold queue (redbook §2.3.1): what a manager had gotten when it
#: started cold; the name its claim records.
USE_COLD = "cold"
COLD_QUEUE_NAME = "SYSTEM.COLD.QUEUE"


def _pack(value: dict[str, Any]) -> bytes:
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


def _unpack(data: bytes) -> dict[str, Any]:
    value: dict[str, Any] = msgpack.unpackb(data, raw=False)
    return value


def _write_control(
    acc: StructureAccess, entry_id: bytes, value: dict[str, Any], *, queue: str | None = None
) -> bool:
    """Write a control entry; ``False`` if its id is taken already."""
    try:
        acc.write(
            CONTROL_LIST,
            keys.control_key(entry_id),
            _pack(value),
            entry_id=entry_id,
            kind=ChangeKind.CONTROL,
            queue=queue,
        )
    except EntryExists:
        return False
    except JournalFailed:
        # Not logged: taken back (the claim is as the log knows it, absent) and failed.
        with contextlib.suppress(CFError), tolerating():
            acc.delete(ById(entry_id, CONTROL_LIST), kind=ChangeKind.CONTROL, queue=queue)
        raise
    return True


def _at(entry_id: bytes) -> ByKey:
    """A control entry's locator by key: unlike ``ById``, finds nothing quietly."""
    return ByKey(CONTROL_LIST, keys.control_key(entry_id), Compare.EQ)


def _read_control(acc: StructureAccess, entry_id: bytes) -> dict[str, Any] | None:
    entry = acc.read(_at(entry_id))
    return None if entry is None else _unpack(entry.data)


def _scan(acc: StructureAccess, kind: bytes) -> list[tuple[bytes, dict[str, Any]]]:
    low, high = keys.control_range(kind)
    return [(e.entry_id, _unpack(e.data)) for e in acc.scan(CONTROL_LIST, low, high)]


# -- list claims ---------------------------------------------------------------------------


def claims(acc: StructureAccess) -> dict[int, dict[str, Any]]:
    """Every claimed list of the structure: list number -> what it is used for."""
    return {int.from_bytes(eid[2:4], "big"): value for eid, value in _scan(acc, b"C")}


def claim_list(acc: StructureAccess, use: str, name: str, list_count: int) -> int:
    """Claim the lowest unclaimed list (1 up) for ``use`` by ``name``.

    ``NO_FREE_LIST`` when every list of the structure is claimed.
    """
    taken = claims(acc)
    for number in range(1, list_count):
        if number in taken:
            continue
        entry_id = keys.control_id(b"C", number.to_bytes(2, "big"))
        if _write_control(acc, entry_id, {"use": use, "name": name}):
            return number
    raise mq_error(
        MQReason.NO_FREE_LIST,
        f"structure {acc.name} has no unclaimed list header left ({list_count} lists)",
    )


def cold_list(acc: StructureAccess, list_count: int) -> int:
    """The structure's cold queue list, claimed the first time it is needed."""
    for number, claim in claims(acc).items():
        if claim.get("use") == USE_COLD:
            return number
    return claim_list(acc, USE_COLD, COLD_QUEUE_NAME, list_count)


def release_list(acc: StructureAccess, number: int) -> None:
    entry_id = keys.control_id(b"C", number.to_bytes(2, "big"))
    acc.delete(_at(entry_id), kind=ChangeKind.CONTROL)


# -- a manager's lists in a structure -------------------------------------------------------


class ManagerLists(NamedTuple):
    """The lists one manager owns in one structure (descriptors: admin structure only)."""

    get_list: int
    expiry_list: int
    descriptor_list: int | None


def read_manager_lists(acc: StructureAccess, qm_id: int) -> ManagerLists | None:
    value = _read_control(acc, keys.control_id(b"G", bytes((qm_id,))))
    if value is None:
        return None
    return ManagerLists(value["get"], value["expiry"], value.get("descriptors"))


def manager_lists(
    acc: StructureAccess, qm_id: int, qm_name: str, list_count: int, *, admin: bool
) -> ManagerLists:
    """This manager's lists in the structure, claimed the first time it connects."""
    found = read_manager_lists(acc, qm_id)
    if found is not None and (found.descriptor_list is not None or not admin):
        return found
    get_list = found.get_list if found else claim_list(acc, USE_GET, qm_name, list_count)
    expiry = found.expiry_list if found else claim_list(acc, USE_EXPIRY, qm_name, list_count)
    descriptors = claim_list(acc, USE_DESCRIPTORS, qm_name, list_count) if admin else None
    value = {"get": get_list, "expiry": expiry, "descriptors": descriptors, "name": qm_name}
    entry_id = keys.control_id(b"G", bytes((qm_id,)))
    if found is not None:
        # Left standing if the log cannot record it: the entry names lists that are
        # claimed.  (Replayed without it, the structure has the manager claim another
        # descriptor list at its next start: one list header lost, nothing more.)
        acc.update(ById(entry_id, CONTROL_LIST), data=_pack(value), kind=ChangeKind.CONTROL)
        return ManagerLists(get_list, expiry, descriptors)
    try:
        written = _write_control(acc, entry_id, value)
    except JournalFailed:
        # Taken back by _write_control: the lists claimed for it are released too.
        with contextlib.suppress(CFError), tolerating():
            for number in (get_list, expiry, descriptors):
                if number is not None:
                    release_list(acc, number)
        raise
    if not written:
        raise mq_error(
            MQReason.Q_MGR_NAME_ERROR,
            f"manager id {qm_id} claimed lists in {acc.name} at the same time as we did",
        )
    return ManagerLists(get_list, expiry, descriptors)


# -- the group directory (administrative structure) -----------------------------------------


def _register_pair(
    acc: StructureAccess,
    by_number: bytes,
    by_name: bytes,
    name: str,
    number: int,
    what: str,
) -> None:
    """Record ``name`` <-> ``number`` in both directions, refusing a conflict."""
    for _ in range(3):
        numbered = _read_control(acc, by_number)
        named = _read_control(acc, by_name)
        if numbered is not None and numbered["name"] != name:
            raise mq_error(
                MQReason.Q_MGR_NAME_ERROR,
                f"{what} {number} is registered to {numbered['name']!r}, not {name!r}",
            )
        if named is not None and (named["name"] != name or named["number"] != number):
            raise mq_error(
                MQReason.Q_MGR_NAME_ERROR,
                f"{what} {name!r} is registered with number {named['number']}, not {number}",
            )
        if numbered is None:
            _write_control(acc, by_number, {"name": name})
        if named is None:
            _write_control(acc, by_name, {"name": name, "number": number})
        if numbered is not None and named is not None:
            return
    raise mq_error(MQReason.Q_MGR_NAME_ERROR, f"could not register {what} {name!r}")


def register_manager(acc: StructureAccess, qm_id: int, name: str) -> None:
    """Record the manager in the group; its id and name must be its own."""
    _register_pair(
        acc,
        keys.control_id(b"I", bytes((qm_id,))),
        keys.control_id(b"N", keys.name_hash(name)),
        name,
        qm_id,
        "queue manager",
    )


def managers(acc: StructureAccess) -> dict[int, str]:
    """Every manager the group has registered: id -> name."""
    return {eid[2]: value["name"] for eid, value in _scan(acc, b"I")}


def structure_number(acc: StructureAccess, structure: str) -> int:
    """The group-wide number of a structure, assigned the first time it is seen (p[54])."""
    by_name = keys.control_id(b"T", keys.name_hash(structure))
    for _ in range(MAX_STRUCTURE_NUMBER + 1):
        known = _read_control(acc, by_name)
        if known is not None:
            number: int = known["number"]
            return number
        used = {int(eid[2]) for eid, _ in _scan(acc, b"S")}
        free = next((n for n in range(1, MAX_STRUCTURE_NUMBER + 1) if n not in used), None)
        if free is None:
            raise mq_error(MQReason.NO_FREE_LIST, "the group has numbered 255 structures")
        if not _write_control(acc, keys.control_id(b"S", bytes((free,))), {"name": structure}):
            continue
        try:
            if _write_control(acc, by_name, {"name": structure, "number": free}):
                return free
        except JournalFailed:
            # Its name entry was taken back: so is the number, or it stays taken.
            with contextlib.suppress(CFError), tolerating():
                acc.delete(
                    ById(keys.control_id(b"S", bytes((free,))), CONTROL_LIST),
                    kind=ChangeKind.CONTROL,
                )
            raise
        # Someone numbered this structure at the same moment: keep theirs.
        acc.delete(
            ById(keys.control_id(b"S", bytes((free,))), CONTROL_LIST), kind=ChangeKind.CONTROL
        )
    raise mq_error(MQReason.NO_FREE_LIST, f"could not number structure {structure}")


def structure_names(acc: StructureAccess) -> dict[int, str]:
    """Every structure the group has numbered: number -> name."""
    return {eid[2]: value["name"] for eid, value in _scan(acc, b"S")}


class QueueEntry(NamedTuple):
    """Where a shared queue lives."""

    name: str
    structure: str
    list_number: int


def queue_entry(acc: StructureAccess, name: str) -> QueueEntry | None:
    value = _read_control(acc, keys.control_id(b"Q", keys.name_hash(name)))
    if value is None or value["name"] != name:
        return None
    return QueueEntry(value["name"], value["structure"], value["list"])


def add_queue_entry(acc: StructureAccess, entry: QueueEntry) -> bool:
    """Record a queue; ``False`` if a queue of that name is recorded already."""
    value = {"name": entry.name, "structure": entry.structure, "list": entry.list_number}
    entry_id = keys.control_id(b"Q", keys.name_hash(entry.name))
    return _write_control(acc, entry_id, value, queue=entry.name)


def queue_entries(acc: StructureAccess) -> list[QueueEntry]:
    found = [QueueEntry(v["name"], v["structure"], v["list"]) for _, v in _scan(acc, b"Q")]
    return sorted(found)


#: The holder of a queue name that a shared queue holds (manager ids are 1..254).
SHARED_HOLDER = 0


def _name_hold_id(name: str, holder: int) -> bytes:
    return keys.control_id(b"D", keys.name_hash(name)[:9] + bytes((holder,)))


def hold_queue_name(acc: StructureAccess, name: str, holder: int) -> bool:
    """Record that ``holder`` (a manager id, or :data:`SHARED_HOLDER`) has a queue
    named ``name``; ``False`` if it was recorded already."""
    return _write_control(
        acc, _name_hold_id(name, holder), {"name": name, "by": holder}, queue=name
    )


def queue_name_holders(acc: StructureAccess, name: str) -> set[int]:
    """Who holds queue name ``name``: manager ids, and :data:`SHARED_HOLDER`."""
    prefix = _name_hold_id(name, 0)[:11]
    found = acc.scan(CONTROL_LIST, prefix + b"\x00" * 5, prefix + b"\xff" * 5)
    return {v["by"] for v in (_unpack(e.data) for e in found) if v["name"] == name}


def queue_names_held(acc: StructureAccess, holder: int) -> list[str]:
    """The queue names ``holder`` holds."""
    return sorted(v["name"] for _, v in _scan(acc, b"D") if v["by"] == holder)


def release_queue_name(acc: StructureAccess, name: str, holder: int) -> None:
    """Forget that ``holder`` holds ``name`` (nothing if it did not)."""
    entry_id = _name_hold_id(name, holder)
    if acc.read(_at(entry_id)) is not None:
        acc.delete(_at(entry_id), kind=ChangeKind.CONTROL, queue=name)


# -- recovery claims --------------------------------------------------------------------


def recovery_claim_holder(acc: StructureAccess, failed_id: int) -> int | None:
    value = _read_control(acc, keys.control_id(b"R", bytes((failed_id,))))
    return None if value is None else int(value["by"])


def take_recovery_claim(
    acc: StructureAccess, failed_id: int, my_id: int, holder_active: Callable[[int], bool]
) -> bool:
    """Claim the recovery of ``failed_id`` in this structure.

    ``True`` if this manager now holds the claim (it may have held it already, or
    taken it over from a recoverer that failed too: rolling recovery).  ``False`` if an
    active manager holds it.  Takeovers use version comparison, so two managers
    taking over at once cannot both win.
    """
    entry_id = keys.control_id(b"R", bytes((failed_id,)))
    for _ in range(10):
        if _write_control(acc, entry_id, {"by": my_id}):
            return True
        entry = acc.read(_at(entry_id))
        if entry is None:
            continue
        holder = int(_unpack(entry.data)["by"])
        if holder == my_id:
            return True
        if holder_active(holder):
            return False
        try:
            acc.update(
                ById(entry_id, CONTROL_LIST),
                data=_pack({"by": my_id}),
                expect_version=entry.version,
                set_version=entry.version + 1,
                kind=ChangeKind.CONTROL,
            )
        except VersionMismatch:
            continue
        return True
    return False


def release_recovery_claim(acc: StructureAccess, failed_id: int, my_id: int) -> None:
    entry_id = keys.control_id(b"R", bytes((failed_id,)))
    entry = acc.read(_at(entry_id))
    if entry is not None and int(_unpack(entry.data)["by"]) == my_id:
        # Released even if the log cannot say so: a log without this delete has the
        # claim held by this manager, which takes it back itself (or, once it has
        # failed, its recoverer does).  A recovery's outcome never hangs on it.
        with tolerating():
            acc.delete(
                ById(entry_id, CONTROL_LIST), expect_version=entry.version, kind=ChangeKind.CONTROL
            )
