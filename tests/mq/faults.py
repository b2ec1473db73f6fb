"""Fault hooks: stop a manager dead between two structure requests.

A manager's every structure request passes its fault hook before (and, for changes,
after) it runs.  :class:`CrashAt` counts those points and, at the chosen one, either
raises :class:`SimulatedFailure` (in-process tests: the manager object is abandoned,
as a dead process would be) or kills the process with SIGKILL (``kill=True``: the
multi-process tests run the same scenarios in worker processes).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

from sharedq.testing import SimulatedFailure

Predicate = Callable[[str, str, bool], bool]


class CrashAt:
    """Fail at the ``nth`` point (1-based) that ``when`` accepts, once armed.

    ``when(request, structure, before)`` selects the points that count (all of them by
    default).  ``points`` counts every point seen while armed, so a first run with
    ``nth=None`` measures how many points a workload has.
    """

    def __init__(
        self,
        nth: int | None = None,
        *,
        when: Predicate | None = None,
        kill: bool = False,
        armed: bool = True,
    ) -> None:
        self.nth = nth
        self.when = when
        self.kill = kill
        self.armed = armed
        self.points = 0
        self.fired = False
        self.trace: list[tuple[str, str, bool]] = []

    def arm(self, nth: int | None = None, when: Predicate | None = None) -> None:
        self.armed = True
        self.points = 0
        if nth is not None:
            self.nth = nth
        if when is not None:
            self.when = when

    def __call__(self, request: str, structure: str, before: bool) -> None:
        if self.fired:
            # A dead manager makes no further request, not even from a ``finally``.
            raise SimulatedFailure(f"the manager is dead ({request} after the failure)")
        if not self.armed:
            return
        if self.when is not None and not self.when(request, structure, before):
            return
        self.points += 1
        self.trace.append((request, structure, before))
        if self.nth is not None and self.points >= self.nth:
            self.fired = True
            if self.kill:
                os.kill(os.getpid(), signal.SIGKILL)
            raise SimulatedFailure(f"simulated failure at point {self.points}: {request}")


def changes_only(request: str, structure: str, before: bool) -> bool:
    """Points before each request that changes a structure (reads are not distinct)."""
    return before and request in {
        "write",
        "move",
        "delete",
        "update",
        "move_entries",
        "delete_entries",
        "set_list_controls",
    }


def after_request(name: str) -> Predicate:
    def match(request: str, structure: str, before: bool) -> bool:
        return request == name and not before

    return match
