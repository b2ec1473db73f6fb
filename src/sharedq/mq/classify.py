"""Which of a structure's entries are recoverable, seen from the queue manager.

A structure checkpoint copies recoverable objects with their data and of the others
keeps only the queue name and unit of work (seed 001); a rebuilt structure must equal
the lost one in its recoverable objects.  What is recoverable is the client's call:
for the queue manager, every entry is, except nonpersistent messages (they are not
logged either).  Messages are the entries on the lists claimed for queues, get lists
and expiry lists, other than a queue's control entry (LHQC); the control list names
each claimed list and what it is for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

import msgpack

from sharedq.cf import ListEntry
from sharedq.mq import keys
from sharedq.mq.directory import CONTROL_LIST, USE_COLD, USE_EXPIRY, USE_GET, USE_QUEUE
from sharedq.mq.messages import adjunct_put_list, message_facts
from sharedq.recovery.control import ControlArea
from sharedq.recovery.restore import StructureContents

_MESSAGE_LISTS = frozenset({USE_QUEUE, USE_GET, USE_EXPIRY, USE_COLD})
#: The recovery machinery's entries on the control list (never recoverable).
_MACHINERY = ControlArea(list_number=CONTROL_LIST)
_CLAIM_LOW, _CLAIM_HIGH = keys.control_range(b"C")


class EntryClass(NamedTuple):
    """What a checkpoint records of an entry: whether it is recoverable, its queue, UOW."""

    recoverable: bool
    queue: bytes | None
    uow: bytes | None


class ListRole(NamedTuple):
    """What a claimed list is used for, and by whom (a queue's or a manager's name)."""

    use: str
    name: str


def list_roles(control_entries: Iterable[ListEntry]) -> dict[int, ListRole]:
    """The claimed lists of a structure, from the entries of its control list."""
    roles: dict[int, ListRole] = {}
    for entry in control_entries:
        if entry.list_number != CONTROL_LIST or not _CLAIM_LOW <= entry.key <= _CLAIM_HIGH:
            continue
        value = msgpack.unpackb(entry.data, raw=False)
        roles[int.from_bytes(entry.entry_id[2:4], "big")] = ListRole(value["use"], value["name"])
    return roles


def classify(entry: ListEntry, roles: Mapping[int, ListRole]) -> EntryClass:
    """Whether ``entry`` is recoverable, and the queue and UOW a checkpoint records."""
    role = roles.get(entry.list_number)
    if role is None or role.use not in _MESSAGE_LISTS or entry.key == keys.LHQC_KEY:
        return EntryClass(not _MACHINERY.is_machinery(entry), None, None)
    persistent = message_facts(entry.data)[0]
    queue: bytes | None = role.name.encode() if role.use == USE_QUEUE else None
    if role.use == USE_COLD:  # the queue it came from
        origin = roles.get(adjunct_put_list(entry.adjunct))
        queue = origin.name.encode() if origin is not None else None
    uow = None
    if role.use == USE_QUEUE and entry.key[0] == keys.UNCOMMITTED_MARK:
        uow = entry.version.to_bytes(8, "big")  # an uncommitted put's version is its UOW id
    return EntryClass(persistent, queue, uow)


def recoverable_contents(contents: StructureContents) -> StructureContents:
    """A structure's contents restricted to its recoverable objects: what a structure
    recovered from its checkpoint and log holds (and what tests compare)."""
    roles = list_roles(contents.lists.get(CONTROL_LIST, ()))
    keep = {
        entry.entry_id
        for entries in contents.lists.values()
        for entry in entries
        if classify(entry, roles).recoverable
    }
    return contents.only(keep)
