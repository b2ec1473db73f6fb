"""ETO dynamic LTERMs (redbook §9.11, seed Chapter 9), as a mixin of :class:`IMS`.

A user signs on from a node with no static definition: the IMS creates an LTERM whose
name defaults to the userid, or what the signon exit (DFSSGNX0, a callable given a
:class:`Signon`) returns; the exit may reject the signon by returning ``None``.  The
MSGQ LTERM ready queue is registered at signon, the EMHQ one at the user's first Fast
Path input (:mod:`sharedq.ims.fastpath`); both are deregistered at signoff and when
the IMS shuts down.  Output for the LTERM while nobody is signed on stays on the shared
queue, and the next signon with that LTERM name, on any IMS of the group, gets it.

Uniqueness across the group is not enforced (§9.10: the user's responsibility): the
same user signed on to two IMSs has the same LTERM on both, and either may deliver its
output.  Within one IMS a name can be active once (one control block per name):
a second signon giving an active name, or a static resource's name, is refused with
``LTERM_ACTIVE``; an exit such as :func:`ims_suffix` makes names unique per IMS.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from sharedq.ims.definitions import Lterm, SystemDefinition, check_name
from sharedq.ims.errors import IMSReason, InvalidIMSRequest, ims_error
from sharedq.ims.fastpath import FastPath
from sharedq.ims.output import Outputs
from sharedq.ims.terminal import Session, Terminal


@dataclass(frozen=True)
class Signon:
    """What the signon exit is given: the user, the node, this IMS, the default LTERM
    name (the userid) and the dynamic LTERM names active on this IMS now."""

    userid: str
    node: str
    imsid: str
    lterm: str
    active: frozenset[str]


#: A signon exit (DFSSGNX0): the LTERM name to create, or ``None`` to reject.
SignonExit = Callable[[Signon], "str | None"]


def ims_suffix(signon: Signon) -> str:
    """An exit giving IMS-specific names (§9.4's first cure): the userid's first seven
    characters and the IMSID's last, so USERA on IMSA is ``USERAA``, on IMSB ``USERAB``."""
    return signon.userid[:7] + signon.imsid[-1]


class ETO:
    """``signon`` of an IMS system; its signoff is :meth:`IMS.logoff`."""

    imsid: str
    definition: SystemDefinition
    fastpath: FastPath | None
    _lock: threading.Condition
    _outputs: Outputs
    _dynamic: dict[str, Terminal | None]

    def _check_started(self) -> None:
        raise NotImplementedError

    def signon(self, userid: str, *, node: str, exit: SignonExit | None = None) -> Terminal:
        """A user signs on from ``node``: a dynamic LTERM (the userid, or the exit's
        name) is created and its MSGQ LTERM ready queue registered; output waiting for
        it is delivered.  ``SIGNON_REJECTED`` if the exit says no; ``LTERM_ACTIVE`` if
        the name is active here or is a static resource's; ``NODE_IN_SESSION``."""
        self._check_started()
        check_name(userid, "userid")
        check_name(node, "node")
        if self.definition.lterms_of(node):
            raise ims_error(IMSReason.BAD_ARGUMENT, f"{node} is a static node: logon")
        with self._lock:
            active = frozenset(self._dynamic)
        name: str | None = userid
        if exit is not None:
            name = exit(Signon(userid, node, self.imsid, userid, active))
            if name is None:
                raise ims_error(IMSReason.SIGNON_REJECTED, f"{userid} on {node}: exit rejected")
            try:
                check_name(name, "LTERM")
            except InvalidIMSRequest as error:
                raise ims_error(IMSReason.BAD_ARGUMENT, f"signon exit: {error}") from error
        assert name is not None
        if self.definition.lterm(name) or self.definition.transaction(name):
            raise ims_error(IMSReason.LTERM_ACTIVE, f"{name} is a static resource here")
        with self._lock:
            if name in self._dynamic:
                raise ims_error(IMSReason.LTERM_ACTIVE, f"{self.imsid}: LTERM {name} is active")
            self._dynamic[name] = None  # reserved
        terminal = Terminal(self._session(), node, [Lterm(name, node)], user=userid)
        try:
            self._outputs.logon(terminal)
        except BaseException:
            with self._lock:
                del self._dynamic[name]
            raise
        with self._lock:
            self._dynamic[name] = terminal
        return terminal

    def _session(self) -> Session:
        raise NotImplementedError

    def dynamic_lterms(self) -> dict[str, str]:
        """The dynamic LTERMs signed on here: LTERM -> userid."""
        with self._lock:
            return {n: t.user or "" for n, t in self._dynamic.items() if t is not None}

    def _signed_off(self, terminal: Terminal) -> None:
        """After a logoff: the dynamic LTERMs freed, the EMHQ LTERM queues deregistered."""
        with self._lock:
            for name in terminal.lterms:
                if self._dynamic.get(name) is terminal:
                    del self._dynamic[name]
        if self.fastpath is not None:
            for name in terminal.lterms:
                self.fastpath.release_lterm(name)
