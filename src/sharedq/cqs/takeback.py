"""Taking back a change the log could not record (``JOURNAL_FAILED``).

A CQS request changes the structure first and logs the change after; when the log
cannot take the record (full, failing), the change is undone, so that the client may
simply try again later and the structure never holds what the log does not know:

* a move, unlock or one-step of a delete that moved the message: it goes back to
  where it was, with the lock it had (the queue's head for a message that was ready);
* a one-part delete: the message is written again where it was, under the same entry
  id, with the same lock, so that the client's token still names it;
* the later steps of a multi-part delete (its staged parts, then part 1 from the delete
  queue) are not taken back: the message is already on its way out and partly gone, so
  the delete is finished instead (its failures tolerated) and the error says it was.

Each undo is itself a logged change (``read`` for a message back on the lock queue,
``unlock`` for one back on its ready queue, ``put`` for a message written again); when
the log takes it no more than the change it undoes, the two are missing together and
structure recovery, which knows neither, agrees with the structure.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass

from sharedq.cf import ById, CFError, Position
from sharedq.cqs.errors import CQSJournalFailed
from sharedq.cqs.journal import Request
from sharedq.cqs.layout import Private
from sharedq.cqs.messages import unpack, uow_in
from sharedq.cqs.names import text
from sharedq.cqs.site import Site
from sharedq.seam.access import FromEntry, tolerating

_OWN_UOW = FromEntry(uow_in)


@dataclass(frozen=True)
class Origin:
    """Where a message was before the change to take back: its queue, and whose lock
    it was on the lock queue (``owner`` and ``version``), or ``None`` for a message
    that was ready on its queue."""

    queue: bytes
    owner: bytes | None = None
    version: int = 0


def move_back(site: Site, failure: CQSJournalFailed, origin: Origin) -> None:
    """Undo a move whose record failed: the entry back to ``origin``."""
    entry = failure.entry
    if entry is None:
        return
    locked = origin.owner is not None
    header = Private.LOCK.header(origin.queue) if locked else site.layout.header(origin.queue)
    with tolerating(), suppress(CFError):
        site.acc.move(
            ById(entry.entry_id, entry.list_number),
            header,
            new_key=origin.queue,
            new_secondary_key=origin.owner,
            set_version=origin.version,
            position=Position.HEAD,
            kind=site.means(Request.READ if locked else Request.UNLOCK),
            queue=text(origin.queue),
            uow=_OWN_UOW,
        )


def write_back(site: Site, failure: CQSJournalFailed) -> None:
    """Undo a delete whose record failed: the entry written again, as it was."""
    gone = failure.entry
    if gone is None or not gone.data:
        return
    prefix, _ = unpack(gone.data)
    with tolerating(), suppress(CFError):
        site.acc.write(
            gone.list_number,
            gone.key,
            gone.data,
            secondary_key=gone.secondary_key,
            entry_id=gone.entry_id,
            version=gone.version,
            position=Position.HEAD,
            kind=site.means(Request.PUT),
            queue=text(gone.key),
            uow=prefix.uow,
            persistent=prefix.recoverable,
        )
