"""Who may do what on a queue manager: its checks against ``sharedq.security``.

A manager given ``security=SecuritySettings(...)`` asks, before it acts (so that a
refusal changes nothing):

=============================  ========  ===========================  =======
action                         class     profile                      access
=============================  ========  ===========================  =======
connect to structure S         CQSSTR    ``CQSSTR.S``                 UPDATE
copy or delete structure S     CQSSTR    ``CQSSTR.S``                 ALTER
open queue Q to browse         MQQUEUE   ``<hlq>.Q``                  READ
open queue Q to put or get     MQQUEUE   ``<hlq>.Q``                  UPDATE
define or alter queue Q        MQQUEUE   ``<hlq>.Q``                  ALTER
declare peer P failed          MQADMIN   ``<hlq>.DECLARE.P``          CONTROL
resolve an in-doubt unit       MQADMIN   ``<hlq>.RESOLVE.INDOUBT``    CONTROL
read the cold queues           MQADMIN   ``<hlq>.COLDQ``              READ
requeue cold-queue messages    MQADMIN   ``<hlq>.COLDQ``              CONTROL
=============================  ========  ===========================  =======

``<hlq>`` is the manager's name, then the group's (``qsg``): as MQ, the first name
a profile covers decides.  A refusal is ``NotAuthorized`` (2035), and a warning on the
``sharedq.mq`` logger.  The queue handle
remembers what it was opened for (:class:`OpenFor`, MQ's open options), and refuses
anything else (2036, 2037, 2039); so a put checks one flag, not the profiles.
"""

from __future__ import annotations

import logging
from enum import Flag, auto

from sharedq.mq.errors import MQReason, mq_error
from sharedq.security import (
    CQSSTR,
    MQADMIN,
    MQQUEUE,
    SECURITY_OFF,
    Access,
    ResourceClass,
    Security,
    SecuritySettings,
)

logger = logging.getLogger("sharedq.mq")


class OpenFor(Flag):
    """What a queue handle is opened for (MQ's MQOO_OUTPUT, MQOO_INPUT_*, MQOO_BROWSE)."""

    PUT = auto()
    GET = auto()
    BROWSE = auto()
    ALL = PUT | GET | BROWSE

    def describe(self) -> str:
        return ", ".join(str(f.name).lower() for f in _EACH if f in self) or "nothing"


_EACH = (OpenFor.PUT, OpenFor.GET, OpenFor.BROWSE)
#: The access each intent needs (MQ: MQOO_OUTPUT and MQOO_INPUT_* UPDATE, MQOO_BROWSE READ).
OPEN_ACCESS = {OpenFor.PUT: Access.UPDATE, OpenFor.GET: Access.UPDATE, OpenFor.BROWSE: Access.READ}


class Guard:
    """A queue manager's checks (see the module); with no settings, none is made."""

    def __init__(self, settings: SecuritySettings | None, qmgr: str, qsg: str) -> None:
        self.security: Security = SECURITY_OFF if settings is None else settings.security()
        self.qmgr = qmgr
        self.qsg = qsg if settings is None or settings.qsg is None else settings.qsg
        # The high-level qualifiers of MQ profiles: the manager's first, as MQ does.
        self._hlqs = tuple(dict.fromkeys((qmgr, self.qsg)))

    @classmethod
    def off(cls) -> Guard:
        return cls(None, "-", "-")

    def __repr__(self) -> str:
        return f"<Guard {self.qmgr} qsg={self.qsg} {self.security!r}>"

    @property
    def user(self) -> str:
        return self.security.user

    # -- the checks ---------------------------------------------------------------------

    def connect(self, *structures: str) -> None:
        """May the manager connect to each of ``structures`` (CQSSTR UPDATE)?"""
        for structure in structures:
            self._require(CQSSTR, [f"CQSSTR.{structure}"], Access.UPDATE, f"connect to {structure}")

    def alter_structure(self, structure: str, action: str) -> None:
        """May the manager copy (or delete) ``structure`` (CQSSTR ALTER)?"""
        self._require(CQSSTR, [f"CQSSTR.{structure}"], Access.ALTER, f"{action} {structure}")

    def open(self, queue: str, intent: OpenFor) -> None:
        """May the manager open ``queue`` for ``intent``?  The highest access any part
        needs is checked, once, as MQ does at MQOPEN."""
        if not isinstance(intent, OpenFor) or not intent & OpenFor.ALL:
            raise mq_error(
                MQReason.BAD_ARGUMENT, f"open {queue!r} for {intent!r}: give OpenFor.PUT, ..."
            )
        access = max(OPEN_ACCESS[f] for f in _EACH if f in intent)
        self._queue(queue, access, f"open {queue} for {intent.describe()}")

    def define(self, queue: str, action: str = "define") -> None:
        """May the manager define or alter ``queue`` (MQQUEUE ALTER)?"""
        self._queue(queue, Access.ALTER, f"{action} {queue}")

    def admin(self, action: str, access: Access, what: str) -> None:
        """May the manager do operator ``action`` (``DECLARE.QM2``, ``COLDQ``...)?"""
        names = [f"{hlq}.{action}" for hlq in self._hlqs]
        self._require(MQADMIN, names, access, what)

    def _queue(self, queue: str, access: Access, what: str) -> None:
        if self.security.off:
            return
        self._require(MQQUEUE, [f"{hlq}.{queue}" for hlq in self._hlqs], access, what)

    def _require(
        self, resource_class: ResourceClass, names: list[str], access: Access, what: str
    ) -> None:
        if self.security.off:
            return
        decision = self.security.decide(resource_class, names, access)
        if not decision.allowed:
            detail = f"{self.qmgr} refuses to {what}: {decision.explain()}"
            logger.warning("%s", detail)  # for the operator, as RACF's ICH408I
            raise mq_error(
                MQReason.NOT_AUTHORIZED,
                detail,
                user=decision.user,
                resource_class=resource_class.name,
                profile=decision.resource,
                access=access.name,
            )
