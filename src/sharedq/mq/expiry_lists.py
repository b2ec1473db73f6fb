"""A manager's expiry lists: the messages its gets found expired (§5.15).

A get that finds a message expired moves it to the getting manager's expiry list in
the message's structure (expire last message); these read and empty those lists
(:meth:`QueueManager.expired_messages`, :meth:`QueueManager.purge_expired`).
"""

from __future__ import annotations

from sharedq.mq import messages as m
from sharedq.mq.bulk import bulk_delete
from sharedq.mq.core import ManagerCore
from sharedq.mq.errors import translated
from sharedq.mq.journal import ChangeKind
from sharedq.seam.access import tolerating
from sharedq.seam.notes import EntryMeaning

_LOW, _HIGH = b"\x00" * 16, b"\xff" * 16


def expired_messages(core: ManagerCore) -> list[m.Message]:
    """Messages this manager's gets found expired, on every structure it uses."""
    core.check_open()
    found = []
    with translated("read expiry lists"):
        for name, acc in core.structures.items():
            for entry in acc.scan(core.lists[name].expiry_list, _LOW, _HIGH):
                found.append(m.to_message(entry.data, entry.version, b""))
    return found


def purge_expired(core: ManagerCore) -> int:
    """Delete the messages on this manager's expiry lists; returns how many."""
    core.check_open()
    count = 0
    with translated("purge expiry lists"):
        for name, acc in core.structures.items():
            entries = list(acc.scan(core.lists[name].expiry_list, _LOW, _HIGH))
            meanings = [EntryMeaning(e.entry_id, None, *m.entry_facts(e.data)) for e in entries]
            # Purged even if the log cannot say so: rebuilt from such a log, the
            # structure has them on the expiry list again, to be purged again.
            with tolerating():
                bulk_delete(
                    acc,
                    [e.entry_id for e in entries],
                    meanings,
                    kind=ChangeKind.PURGE,
                    uow_id=None,
                )
            count += len(entries)
    return count
