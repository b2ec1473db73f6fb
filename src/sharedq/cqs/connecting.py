"""What CQSCONN checks and clears before a CQS connects to a structure."""

from __future__ import annotations

import contextlib
import logging

from sharedq.cf import CouplingFacility, ListStructure, StructureExists
from sharedq.cqs.errors import CQSReason, cqs_error
from sharedq.cqs.layout import structure_params
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


def members(pair: StructurePair) -> list[str]:
    """The pair's structures, primary first.  The overflow structure is connected with
    the primary and has its layout (192 lists); no queue moves there yet (overflow
    processing, issue 18), yet it is logged to the pair's stream, checkpointed to the
    pair's SRDS, recovered and copied with it, so that the pair is one unit."""
    return [pair.primary] if pair.overflow is None else [pair.primary, pair.overflow]


def allocate_overflow(facility: CouplingFacility, pair: StructurePair, server: str) -> None:
    """Allocate the pair's overflow structure if it is missing while its primary is
    there: with the primary's layout and capacity (``structure_params``).  When both
    are missing (lost together), neither is made here: structure recovery rebuilds
    both from the pair's SRDS and log, or says why it cannot."""
    if pair.overflow is None or facility.exists(pair.overflow):
        return
    if not facility.exists(pair.primary):
        return
    with facility.connect(pair.primary, server) as primary:
        stats = primary.statistics()
    messages = max(1, stats.max_entries - 64)
    with contextlib.suppress(StructureExists):  # another CQS made it meanwhile
        facility.create(structure_params(pair.overflow, messages=messages))
    logger.info("overflow structure %s of %s allocated", pair.overflow, pair.primary)


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
