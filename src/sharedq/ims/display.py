"""``/DISPLAY QCNT LTERM|TRAN MSGAGE n``: queue counts from the shared queues (§7.4, §9.12).

With shared queues the ETO dead-letter queue does not exist: IMS cannot see how many
messages wait for an LTERM or how old they are in its own storage.  The replacement is
this display, read from the structure (CQSBROWSE): for each queue with messages, the
total, how many are older than ``MSGAGE`` days (all of them with ``MSGAGE 0``) and the
put times of the oldest and newest, as ``yyddd/hhmmss`` (Figure 60).  A queue is shown
only if it has at least one aged message, so ``MSGAGE n`` with the former dead-letter
limit lists the dead letters: output for LTERMs that nobody logged on to take.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from sharedq.cqs import CQSError, CQSService
from sharedq.ims import queues
from sharedq.ims.errors import IMSReason, ims_error

DAY_US = 86_400 * 1_000_000


@dataclass(frozen=True)
class QcntRow:
    """One line of the display: ``QUEUENAME QCNT-TOTAL QCNT-AGED TSTMP-OLD TSTMP-NEW``."""

    queue_name: str
    total: int
    aged: int
    oldest: str
    newest: str


def stamp(us: int) -> str:
    """A put time as the display writes it: ``yyddd/hhmmss`` (UTC)."""
    t = time.gmtime(us // 1_000_000)
    return f"{t.tm_year % 100:02}{t.tm_yday:03}/{t.tm_hour:02}{t.tm_min:02}{t.tm_sec:02}"


def qcnt(cqs: CQSService, names: Iterable[tuple[str, bytes]], msgage_days: int) -> list[QcntRow]:
    """The rows for the queues ``names`` (resource name, queue name), in name order."""
    if type(msgage_days) is not int or not 0 <= msgage_days <= 365:
        raise ims_error(IMSReason.BAD_ARGUMENT, f"MSGAGE {msgage_days!r}: 0 to 365 days")
    now = cqs.clock.now_us()
    rows = []
    for name, queue in sorted(set(names)):
        try:
            puts = [m.put_us for m in cqs.browse(queue)]
        except CQSError as error:
            raise ims_error(IMSReason.QUEUE_ERROR, f"/DISPLAY QCNT {name}: {error}") from error
        aged = sum(1 for put in puts if msgage_days == 0 or now - put > msgage_days * DAY_US)
        if aged:
            rows.append(QcntRow(name, len(puts), aged, stamp(min(puts)), stamp(max(puts))))
    return rows


def lterm_queues(names: Iterable[str]) -> list[tuple[str, bytes]]:
    """The LTERM ready queues of ``names``."""
    return [(name, queues.lterm_ready(name)) for name in names]
