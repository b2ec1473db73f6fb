"""What CQSCONN checks and clears before a CQS connects to a structure."""

from __future__ import annotations

import logging

from sharedq.cf import CouplingFacility, ListStructure
from sharedq.cqs.errors import CQSReason, cqs_error
from sharedq.cqs.pair import StructurePair
from sharedq.security import CQSSTR, Access, Security

logger = logging.getLogger("sharedq.cqs")


def authorize(security: Security, server: str, pair: StructurePair) -> None:
    """UPDATE on ``CQSSTR.<primary>``, the profile that covers the pair as one unit;
    no profile means unprotected.  ``NOT_AUTHORIZED`` and a warning otherwise (as
    RACF's ICH408I), before anything is touched."""
    if security.off:
        return
    decision = security.decide(CQSSTR, [pair.profile], Access.UPDATE)
    if not decision.allowed:
        detail = f"{server} may not connect to {pair.primary}: {decision.explain()}"
        logger.warning("%s", detail)
        raise cqs_error(CQSReason.NOT_AUTHORIZED, detail, user=decision.user, profile=pair.profile)


def connect_afresh(facility: CouplingFacility, structure: str, server: str) -> ListStructure:
    """Connect as ``server``, with nothing left of a previous incarnation.

    One that failed left its user failed-persistent, with its monitors (EMCs) and
    events, and connecting under its name picks them up, unknown to this one: a normal
    disconnect releases them, and the second connection starts with none, so that the
    client registers afresh, one EMC per queue.  (Its locks on the lock queue are
    messages, not user resources: they stay.)  No other user is needed, so the 32nd
    server of a structure can still do this.
    """
    facility.connect(structure, server).disconnect()
    return facility.connect(structure, server)
