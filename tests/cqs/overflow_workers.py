"""The process of the SIGKILL test of an overflow master (``test_overflow_sigkill``)."""

from __future__ import annotations

import os
import signal

from sharedq.cf.redis import RedisFacility
from sharedq.cqs import CQS, Kind, StructurePair
from sharedq.cqs.overflow import OverflowOptions

PRIMARY, OVERFLOW = "OVFQ01", "OVFQ02"


def doomed_master(url: str, point: str, nth: int) -> None:
    """Connect as CQSIMSA and run the overflow process; SIGKILL this process the
    ``nth`` time the process reaches ``point``."""
    seen: dict[str, int] = {}

    def fault(at: str) -> None:
        seen[at] = seen.get(at, 0) + 1
        if at == point and seen[at] == nth:
            os.kill(os.getpid(), signal.SIGKILL)

    facility = RedisFacility.from_url(url)
    cqs = CQS(
        facility,
        "CQSIMSA",
        system="IMSA",
        msgq=StructurePair(PRIMARY, OVERFLOW),
        overflow=OverflowOptions(check_every=10**6, faults=fault),
    ).connect()
    cqs.overflow[Kind.MSGQ].check()
    raise AssertionError(f"not killed: {point} #{nth} never reached ({seen})")
