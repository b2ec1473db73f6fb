"""An IMS that fails in process, and the system declaring its CQS's connections failed.

:meth:`sharedq.ims.IMS.stop_dead` models an IMS whose process is killed (redbook §6.1):
nothing more reaches the structures from it, its regions abandon their work with no sync
point and no backout (the messages they held stay on the lock queue, locked by its CQS),
nothing is deregistered, and its terminals simply lose their session.  On z/OS the
system ends the address space's connections at that instant (they become
failed-persistent, their locks kept); in one process the model does the same with
:func:`declare_failed`, as a peer would, so that the IMS's next incarnation (an ``IMS``
made again with the same definition) can connect its CQS under the same name and
``start(restart="emergency")`` or ``"cold"``.
"""

from __future__ import annotations

import contextlib

from sharedq.cf import CFError, CouplingFacility
from sharedq.cf.types import UserState


def declare_failed(facility: CouplingFacility, user: str, structures: list[str]) -> int:
    """Mark the active connections named ``user`` to ``structures`` failed (as the system
    does when a process ends, or a peer when it learns the process died).  Structures
    missing are skipped.  Returns how many connections were marked."""
    marked = 0
    for structure in structures:
        if not facility.exists(structure):
            continue
        with facility.connect(structure, f"RM{user}"[:16]) as peer:
            for info in peer.users():
                if info.name == user and info.state is UserState.ACTIVE:
                    with contextlib.suppress(CFError):
                        peer.mark_failed(info.user_id)
                        marked += 1
    return marked
