"""Snapshots of a structure on Redis: its lists copied on the server, entries on write.

A structure checkpoint holds every user of the structure while it copies it (redbook
§2.10: "quiesced while the recoverable data objects are written to a data space").  On
Redis that copy is one function (``snapshot.lua``): it copies the lists' sorted sets
with ``COPY`` (the server's C code), into keys beside the structure in its slot, and
registers the snapshot.  Entry records and data are not copied then: a request that
later changes or deletes an entry first keeps its old record and data for every
registered snapshot (``keep_old`` in ``common.lua``, copy on write), so the time the
structure is held is the lists' copy, not the entries' bytes.  Reading the snapshot
(``snapshot_read.lua``, a page per call: the kept record and data, else the live ones)
and dropping it (``snapshot_drop.lua``, ``UNLINK``) hold nobody up.

A snapshot lives :data:`SNAPSHOT_TTL_MS` unless dropped, so that one whose reader died
does not stay (nor does copying on write for it); deleting the structure deletes its
snapshots too.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any

from sharedq.cf import validation as v
from sharedq.cf.api import StructureSnapshot
from sharedq.cf.errors import CFReason, cf_error
from sharedq.cf.params import StructureParams
from sharedq.cf.redis import codec, scripts
from sharedq.cf.types import ListEntry, ListInfo

#: How long a copy lives unless dropped, in milliseconds (an hour).
SNAPSHOT_TTL_MS = 3_600_000
#: Entries read per function call: large pages, since nobody waits for the reading.
READ_PAGE = 1024
# A list's controls as the meta hash packs them: elements, monitors, limit + 1, authority.
_CONTROLS = struct.Struct(">QQQQ")
#: How a snapshot calls a function on its structure: ``run(function, args)``, over the
#: connection that took it (so that once that connection is lost, so is the snapshot).
Runner = Callable[[scripts.Function, list[Any]], Any]


class RedisSnapshot(StructureSnapshot):
    """A copy of a structure kept on its server until released."""

    def __init__(self, name: str, run: Runner, reader: bytes, reply: list[Any]) -> None:
        """``reply`` is ``snapshot.lua``'s; ``reader`` the header of the taker's reads."""
        snapshot_id, seq, allocation, lists = reply
        lc, es, lk, er, elr, size, max_size, emcp = (int(x) for x in allocation)
        params = StructureParams(
            name=name,
            list_count=lc,
            size=size,
            entry_ratio=er,
            element_ratio=elr,
            element_size=es,
            emc_percent=emcp,
            max_size=max_size,
            lock_count=lk,
        )
        infos = []
        for number, (count, raw) in enumerate(lists):
            elements, _, limit, authority = _CONTROLS.unpack(raw)
            infos.append(
                ListInfo(number, int(count), elements, None if limit == 0 else limit - 1, authority)
            )
        super().__init__(int(seq), params, tuple(infos))
        self._name = name
        self._run = run
        self._reader = reader
        self._id = int(snapshot_id)
        self._released = False

    def __repr__(self) -> str:
        state = "released" if self._released else "held"
        return f"<RedisSnapshot {self._name!r} #{self._id} seq={self.seq} {state}>"

    def entries(self, list_number: int) -> Iterator[ListEntry]:
        if self._released:
            raise cf_error(CFReason.BAD_ARGUMENT, "the snapshot was released")
        v.check_list(list_number, len(self.lists))
        return self._pages(list_number)

    def _pages(self, list_number: int) -> Iterator[ListEntry]:
        after = b""
        while True:
            page: list[bytes] = self._run(
                scripts.SNAPSHOT_READ, [self._reader, self._id, list_number, after, READ_PAGE]
            )
            yield from map(codec.entry_of, page[::2], page[1::2])
            if len(page) < 2 * READ_PAGE:
                return
            after = codec.member_of(page[-2])

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        self._run(scripts.SNAPSHOT_DROP, [self._reader, self._id])


def take(name: str, run: Runner, *, changer: bytes, reader: bytes) -> RedisSnapshot:
    """Copy structure ``name`` on its server (``ListStructure.snapshot``).

    ``run`` calls a function on the structure over the taker's connection; ``changer``
    is the header of this request (with its request id), ``reader`` that of the reads
    and the drop that follow.
    """
    reply = run(scripts.SNAPSHOT, [changer, SNAPSHOT_TTL_MS])
    return RedisSnapshot(name, run, reader, reply)
