"""How an IMS comes back after a failure: emergency restart or cold start (§6.1-6.2).

An IMS that fails (killed, not shut down) leaves the messages it was processing on
the lock queue, locked by its CQS, where no one else may process them.  When it starts
again it tells its CQS what became of them (CQSRSYNC), then registers interest again:

* ``"emergency"``: every message its CQS holds goes back to the head of its queue and
  is processed again, once.  This model's IMS keeps no log of its own, so it reports
  no unit of work as completed: a program's sync point puts its output and then deletes
  its input, and an IMS killed between the two would process that input twice (the
  window is two CQS requests wide; IMS's own log closes it);
* ``"cold"``: every message its CQS holds moves to the cold queue, where it stays
  until an operator requeues it; the IMS records one :class:`ColdMessage` for each
  (the X'6740' log record of IMS) in :attr:`Restarted.cold`, and logs it as a warning;
* ``"normal"``: nothing is asked of the CQS (a start after a clean shutdown).

An IMS with Fast Path has its CQS on the EMHQ too: the EMHQ messages its IFP regions
were processing (read from a program ready queue, locked by its CQS) are resynchronized
the same way, counted apart (:attr:`Restarted.emhq_requeued`; a cold start's records
name the PSB, the inputting LTERM and the input's data).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Literal, get_args

from sharedq.cqs import CQSError, CQSService, Kind
from sharedq.ims import messages, queues
from sharedq.ims.errors import IMSReason, ims_error

logger = logging.getLogger("sharedq.ims")

Restart = Literal["normal", "emergency", "cold"]


@dataclass(frozen=True)
class ColdMessage:
    """An X'6740'-like record: one message a cold start left on the cold queue."""

    queue: str
    uow: str
    source: str
    first_segment: bytes


@dataclass
class Restarted:
    """What a start did with the messages a failed incarnation left locked."""

    mode: Restart
    requeued: int = 0
    deleted: int = 0
    cold: list[ColdMessage] = field(default_factory=list)
    #: Fast Path messages (EMHQ) an emergency restart put back on their queues.
    emhq_requeued: int = 0


def check_mode(mode: object) -> Restart:
    """``mode`` if it is a restart mode, else ``BAD_ARGUMENT``."""
    for known in get_args(Restart):
        if mode == known:
            return known  # type: ignore[no-any-return]
    raise ims_error(IMSReason.BAD_ARGUMENT, f"restart {mode!r}: normal, emergency or cold")


def resynchronize(cqs: CQSService, imsid: str, mode: Restart) -> Restarted:
    """CQSRSYNC for the restart ``mode`` (the CQS is connected, nothing registered),
    on the MSGQ and, when the CQS has one, on the EMHQ."""
    report = Restarted(mode)
    emhq = Kind.EMHQ in cqs.pairs
    try:
        if mode == "emergency":
            done = cqs.resync(())
            report.requeued, report.deleted = len(done.requeued), len(done.deleted)
            if emhq:
                report.emhq_requeued = len(cqs.resync((), kind=Kind.EMHQ).requeued)
        elif mode == "cold":
            for message in cqs.cold_start_client():
                report.cold.append(_record(message.queue, message.uow, message.body))
            for message in cqs.cold_start_client(kind=Kind.EMHQ) if emhq else ():
                report.cold.append(_fp_record(message.queue, message.uow, message.body))
    except CQSError as error:
        raise ims_error(IMSReason.QUEUE_ERROR, f"{imsid} {mode} restart: {error}") from error
    for record in report.cold:
        logger.warning("%s: X'6740' %s to the cold queue: %r", imsid, record.queue, record)
    return report


def _fp_record(queue: bytes, uow: object, body: bytes) -> ColdMessage:
    """A Fast Path input (LTERM, routing code, data: :mod:`sharedq.ims.fastpath`)."""
    source = body[:8].decode("ascii", "replace").rstrip()
    return ColdMessage(queues.resource(queue), str(uow), source, body[16:])


def _record(queue: bytes, uow: object, body: bytes) -> ColdMessage:
    name = queues.resource(queue)
    try:
        decoded = messages.decode(body)
        source, first = decoded.source, decoded.segments[0]
    except Exception:  # not an IMS full-function message: kept whole
        source, first = "", body
    return ColdMessage(name, str(uow), source, first)
