"""A CQS stopped dead before each step of a move, a delete and a multi-part put:
after it connects again every message is whole, on exactly one queue."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cqs import CQS, Kind
from sharedq.testing import SimulatedFailure

from .conftest import MSGQ, MakeCQS
from .helpers import SUSPEND_A, TRANA, where

PARTS = [b"part 1", b"part 2", b"part 3"]
CHANGES = ("write", "move", "delete")


class Crasher:
    """A fault hook that stops the server before its ``at``-th change request."""

    def __init__(self) -> None:
        self.at: int | None = None
        self.seen = 0

    def __call__(self, request: str, structure: str, before: bool) -> None:
        if self.at is None or not before or request not in CHANGES:
            return
        self.seen += 1
        if self.seen == self.at:
            raise SimulatedFailure(f"stopped before {request} #{self.seen}")

    def arm(self, at: int | None) -> None:
        self.at, self.seen = at, 0


def restart(facility: CouplingFacility, dead: CQS, make_cqs: MakeCQS) -> CQS:
    """The dead CQS declared failed by a peer, then its next incarnation connects."""
    dead.stop_dead()
    with facility.connect(MSGQ, "INSPECT") as peer:
        [user] = [u.user_id for u in peer.users() if u.name == dead.name]
        peer.mark_failed(user)
    return make_cqs(dead.system)


def run_to(
    facility: CouplingFacility,
    make_cqs: MakeCQS,
    at: int | None,
    setup: Callable[[CQS], object],
    step: Callable[[CQS, object], object],
) -> tuple[bool, CQS]:
    """Set up, then do ``step`` stopped before change ``at``; returns whether it
    stopped, and the CQS as it is afterwards (restarted if it stopped)."""
    crasher = Crasher()
    cqs = make_cqs("IMSA", faults=crasher)
    state = setup(cqs)
    crasher.arm(at)
    try:
        step(cqs, state)
    except SimulatedFailure:
        return True, restart(facility, cqs, make_cqs)
    crasher.arm(None)
    return False, cqs


def locked_message(cqs: CQS) -> object:
    """A three-part message put and read: its lock token."""
    cqs.put(TRANA, PARTS)
    message = cqs.read(TRANA)
    assert message is not None
    return message.token


@pytest.mark.parametrize("at", [1, 2, 3, None])
def test_a_move_stopped_at_any_step(
    facility: CouplingFacility, make_cqs: MakeCQS, at: int | None
) -> None:
    stopped, cqs = run_to(facility, make_cqs, at, locked_message, lambda c, t: c.move(t, SUSPEND_A))
    lists = where(facility, MSGQ)
    if stopped and at == 1:  # before the first step: still locked by its reader
        assert lists["lock"] == [(TRANA, b"CQSIMSA")] and "ready" not in lists
        [token] = cqs.locks()
        assert cqs.browse_locked(token).parts == tuple(PARTS)
    else:  # after it, or finished at restart: on the target
        assert lists["ready"] == [(SUSPEND_A, b"part 1")] and "lock" not in lists
        assert "move" not in lists
        assert [m.parts for m in cqs.browse(SUSPEND_A)] == [tuple(PARTS)]
        # Stopped between the two steps: its next incarnation finished the move.
        assert cqs.finished[Kind.MSGQ].moves == (1 if stopped else 0)
    assert len(lists["staging"]) == 2


@pytest.mark.parametrize("at", [1, 2, 3, 4, None])
def test_a_delete_stopped_at_any_step(
    facility: CouplingFacility, make_cqs: MakeCQS, at: int | None
) -> None:
    stopped, cqs = run_to(facility, make_cqs, at, locked_message, lambda c, t: c.delete(t))
    lists = where(facility, MSGQ)
    if stopped and at == 1:  # nothing done yet: still locked, whole
        assert lists["lock"] == [(TRANA, b"CQSIMSA")] and len(lists["staging"]) == 2
    else:  # done, or finished at restart: nothing left anywhere
        assert lists == {}
        if stopped:
            assert cqs.finished[Kind.MSGQ].deletes == 1


@pytest.mark.parametrize("at", [1, 2, 3, None])
def test_a_multi_part_put_stopped_at_any_step(
    facility: CouplingFacility, make_cqs: MakeCQS, at: int | None
) -> None:
    stopped, cqs = run_to(facility, make_cqs, at, lambda c: None, lambda c, _: c.put(TRANA, PARTS))
    lists = where(facility, MSGQ)
    if stopped:  # never acknowledged: nothing of it left, its staged parts dropped
        assert lists == {}
        assert cqs.finished[Kind.MSGQ].orphans == at - 1
    else:
        assert [m.parts for m in cqs.browse(TRANA)] == [tuple(PARTS)]
