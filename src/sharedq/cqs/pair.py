"""A structure pair: a primary structure and an optional overflow structure.

The seed treats the two as one unit for security (``CQSSTR.<primary>`` covers both),
logging (one log stream, named after the primary) and recovery.  This part of the CQS
uses the primary only; the overflow slot is named here so that configuration, security
and the log stream already see the pair (overflow processing is the next issue).
"""

from __future__ import annotations

from dataclasses import dataclass

from sharedq import names
from sharedq.cqs.errors import CQSReason, cqs_error
from sharedq.cqs.layout import Kind
from sharedq.cqs.overflow_select import Target


@dataclass(frozen=True)
class StructurePair:
    """The MSGQ or EMHQ structures of a shared-queues group."""

    primary: str
    overflow: str | None = None
    kind: Kind = Kind.MSGQ
    #: OVFLWMAX: per cent of the primary's data elements in use that starts overflow
    #: processing (seed 000; CQSSGxxx).
    ovflwmax: int = 70
    #: Which reading of "20 % below the threshold" ends selection (patent §8.2).
    target: Target = Target.RELATIVE

    def __post_init__(self) -> None:
        for name in (self.primary, self.overflow):
            if name is None:
                continue
            problem = names.STRUCTURE.problem(name)
            if problem is not None:
                raise cqs_error(CQSReason.BAD_ARGUMENT, problem)
        if self.overflow == self.primary:
            raise cqs_error(
                CQSReason.BAD_ARGUMENT, f"overflow structure {self.overflow} is the primary"
            )
        if type(self.ovflwmax) is not int or not 1 <= self.ovflwmax <= 100:
            raise cqs_error(CQSReason.BAD_ARGUMENT, f"OVFLWMAX {self.ovflwmax!r}: 1 to 100")
        if not isinstance(self.target, Target):
            raise cqs_error(CQSReason.BAD_ARGUMENT, f"target {self.target!r}: a Target")
        if not isinstance(self.kind, Kind):
            raise cqs_error(CQSReason.BAD_ARGUMENT, f"kind {self.kind!r}: Kind.MSGQ or Kind.EMHQ")

    @property
    def profile(self) -> str:
        """The security profile that covers the pair (redbook §2.12)."""
        return f"CQSSTR.{self.primary}"
