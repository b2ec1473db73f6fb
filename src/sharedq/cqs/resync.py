"""A client's restart: what becomes of the messages it held on the lock queue.

A client (an IMS) that failed leaves the messages it was processing on the lock
queue, locked by its CQS, processable by no one (redbook §4.3, spec §5):

* **emergency restart** (:func:`resync`): the client says which units of work it
  completed; their messages are deleted, and every other message it held goes back to
  the head of its queue to be processed again;
* **cold start** (:func:`to_cold_queue`): every message it held moves to the cold
  queue, where it stays until an operator requeues it (or the structure is deleted);
  the client is told which (it writes an X'6740' record per message).  A CQS that
  starts cold does the same for its client.

Each message moves in one logged request (``UNLOCK`` for a requeue, ``MOVE`` tagged
``cold`` for the cold queue, ``DELETE`` records for a delete), so a CQS stopped halfway
is resynced again from what the structure holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sharedq.cf import ById
from sharedq.cf.types import HIGHEST_KEY, LOWEST_KEY
from sharedq.cqs import requests
from sharedq.cqs.journal import Request
from sharedq.cqs.layout import Private
from sharedq.cqs.message import Message
from sharedq.cqs.messages import unpack
from sharedq.cqs.names import text
from sharedq.cqs.site import LockToken, Site


@dataclass
class Resynced:
    """What a resync did: the messages deleted and those given back to their queues."""

    deleted: list[Message] = field(default_factory=list)
    requeued: list[Message] = field(default_factory=list)


def held(site: Site, owner: bytes | None = None) -> list[LockToken]:
    """The messages ``owner`` (this CQS by default) holds on the lock queue."""
    who = owner or site.owner
    found = []
    with requests.translated("list locks"):
        for header in Private.LOCK.headers():
            for entry in site.acc.scan(header, LOWEST_KEY, HIGHEST_KEY):
                if entry.secondary_key == who:
                    staged = unpack(entry.data)[0].staging is not None
                    found.append(LockToken(site.kind, entry.key, entry.entry_id, staged))
    return found


def resync(site: Site, done: Iterable[bytes]) -> Resynced:
    """Emergency restart: delete the messages of the units in ``done``, requeue the rest."""
    completed = set(done)
    report = Resynced()
    for token in held(site):
        message = requests.whole(site, requests.locked_entry(site, token, force=False), token)
        if bytes(message.uow) in completed:
            requests.delete(site, token)
            report.deleted.append(message)
        else:
            requests.unlock(site, token, to_queue=None, first=True, force=False)
            report.requeued.append(message)
    return report


def to_cold_queue(site: Site) -> list[Message]:
    """Cold start: every message this CQS holds moves to the cold queue (kept under
    its queue name and this CQS's name); returns them, for the client to record."""
    moved = []
    for token in held(site):
        entry = requests.locked_entry(site, token, force=False)
        message = requests.whole(site, entry, None)
        with requests.translated(f"move {text(token.queue)} to the cold queue"):
            site.acc.move(
                ById(token.entry_id, entry.list_number),
                Private.COLD.header(token.queue),
                set_version=0,
                kind=site.means(Request.COLD),
                queue=text(token.queue),
                uow=requests.OWN_UOW,
            )
        moved.append(message)
    return moved


def cold_queue(site: Site) -> list[Message]:
    """The messages on the cold queue, whole (for an operator, or a requeuer)."""
    found = []
    with requests.translated("browse the cold queue"):
        for header in Private.COLD.headers():
            for entry in site.acc.scan(header, LOWEST_KEY, HIGHEST_KEY):
                found.append(requests.whole(site, entry, None))
    return found
