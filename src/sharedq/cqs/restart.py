"""What a CQS finishes when it connects again after it stopped in the middle of work.

A request of several steps leaves, at any instant, every message whole on exactly one
queue; what is left to do is found on the private queues, marked with the CQS's name
(the secondary key), and finished at :meth:`~sharedq.cqs.CQS.connect`:

* a message on the move queue goes on to its target, the queue its key names;
* a message on the delete queue is deleted, with its staged parts;
* staged parts of a multi-part put that never put its part 1 (parts under a staging
  name of this client's system that no part 1 names) are deleted: the put failed, and
  the client was never told it succeeded.

The last needs a pass over every message entry of the structure, once, at connect.
"""

from __future__ import annotations

from dataclasses import dataclass

from sharedq.cf import ListEntry
from sharedq.cf.types import HIGHEST_KEY, LOWEST_KEY
from sharedq.cqs import requests
from sharedq.cqs.layout import LIST_COUNT, Private
from sharedq.cqs.messages import PREFIX_LENGTH, unpack
from sharedq.cqs.site import Site


@dataclass(frozen=True)
class Finished:
    """What a CQS finished at connect: moves, deletes, orphaned staged parts dropped."""

    moves: int = 0
    deletes: int = 0
    orphans: int = 0


def finish_interrupted(site: Site) -> Finished:
    """Finish this CQS's interrupted moves and deletes, and drop its orphaned parts."""
    moves = deletes = 0
    for header in Private.MOVE.headers():
        for entry in _own(site, header):
            requests.finish_move(site, entry.entry_id, header, entry.key)
            moves += 1
    for header in Private.DELETE.headers():
        for entry in _own(site, header):
            requests.finish_delete(site, entry)
            deletes += 1
    return Finished(moves, deletes, _drop_orphans(site))


def _own(site: Site, header: int) -> list[ListEntry]:
    with requests.translated("look for interrupted work"):
        return [
            e
            for e in site.acc.scan(header, LOWEST_KEY, HIGHEST_KEY)
            if e.secondary_key == site.owner
        ]


def _drop_orphans(site: Site) -> int:
    system = site.system.encode("ascii").ljust(4, b" ")
    named: set[bytes] = set()
    parts: list[ListEntry] = []
    with requests.translated("look for orphaned parts"):
        for number in range(Private.CONTROL.count, LIST_COUNT):
            for entry in site.acc.scan(number, LOWEST_KEY, HIGHEST_KEY):
                if len(entry.data) < PREFIX_LENGTH:
                    continue
                prefix, _ = unpack(entry.data)
                if prefix.part == 0 and prefix.staging is not None:
                    named.add(prefix.staging)
                elif prefix.part > 0 and entry.key[9:13] == system:
                    parts.append(entry)
    orphans = [p for p in parts if p.key not in named]
    with requests.translated("drop an orphaned part"):
        for part in orphans:
            requests.remove(site, part, unpack(part.data)[0])
    return len(orphans)
