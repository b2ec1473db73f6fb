"""What CQSCONN checks and clears before a CQS connects to a structure."""

from __future__ import annotations

import logging

from sharedq.cf import CouplingFacility
from sharedq.cf.types import UserState
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


def release_failed_self(facility: CouplingFacility, structure: str, server: str) -> None:
    """A previous incarnation that failed left its user failed-persistent, with its
    monitors (EMCs) and events: release them, so that this one starts with none and its
    client registers afresh (its locks on the lock queue are messages, not user
    resources: they stay)."""
    with facility.connect(structure, f"{server}.RESTART") as helper:
        for user in helper.users():
            if user.name == server and user.state is UserState.FAILED:
                helper.cleanup_user(user.user_id)
