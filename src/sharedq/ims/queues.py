"""The CQS queues an IMS uses, by name (redbook §1.7-1.8, §2.4).

Transaction ready (type 1: any IMS may process), transaction serial (type 4, with the
IMSID: only the IMS that put it), LTERM ready (type 5).  Staging queues (2 and 6) are
the CQS's to name and fill: an IMS never registers on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sharedq.cqs import Uow, make_name

TRANSACTION_READY = 1
TRANSACTION_SUSPEND = 3
TRANSACTION_SERIAL = 4
LTERM_READY = 5


def transaction_ready(code: str) -> bytes:
    return make_name(TRANSACTION_READY, code)


def transaction_suspend(code: str) -> bytes:
    return make_name(TRANSACTION_SUSPEND, code)


def transaction_serial(code: str, imsid: str) -> bytes:
    return make_name(TRANSACTION_SERIAL, code, imsid)


def lterm_ready(lterm: str) -> bytes:
    return make_name(LTERM_READY, lterm)


def resource(queue: bytes) -> str:
    """The resource name in a queue name (a transaction code or LTERM)."""
    return queue[1:9].decode("ascii").rstrip()


@dataclass(frozen=True)
class Routed:
    """Where an input went: ``local`` (lock queue, processed here), ``global`` (the
    transaction ready queue) or ``serial`` (this IMS's serial queue); its unit of work
    and how many queue buffers it took; ``response``: the transaction is response
    mode (the terminal is held until the reply comes)."""

    routing: Literal["local", "global", "serial"]
    uow: Uow
    buffers: int
    response: bool = False
