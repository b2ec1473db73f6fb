"""Master election for a group-wide function: the redbook's control-queue protocol.

Structure checkpoint and structure copy are each performed by one server, the
function's *master* (redbook §2.2.3): obtain the control lock, look at the function's
control entry; if it names a live master the function is being performed already;
otherwise write your name, release the lock and perform it.  "If the master fails for
any reason, another takes over the role of master and either continues or aborts the
task": a function entry naming a user that is no longer active is taken over.

Locks held by a user that failed (its process died: a lease lapsed, or a peer marked
it failed) are released by cleaning that user up, which anyone waiting for the lock
does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from sharedq.cf import CFError, ListStructure, LockHeld, UserState
from sharedq.clock import Clock, retry_until
from sharedq.recovery import control
from sharedq.recovery.control import ControlArea
from sharedq.recovery.errors import RecoveryReason, recovery_error

logger = logging.getLogger("sharedq.recovery")

#: The state of a function entry nobody is performing.
IDLE = "idle"
#: First and longest pause between attempts to take a held lock-table entry, in seconds.
LOCK_FIRST_PAUSE, LOCK_LONGEST_PAUSE = 0.001, 0.05


@dataclass(frozen=True)
class FunctionState:
    """A function's control entry: its master (while it runs) and its history."""

    master: str | None = None
    user_id: int | None = None
    phase: str = IDLE
    generation: int = 0
    info: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, value: dict[str, Any] | None) -> FunctionState:
        if value is None:
            return cls()
        return cls(
            value.get("master"),
            value.get("uid"),
            value.get("phase", IDLE),
            int(value.get("generation", 0)),
            dict(value.get("info") or {}),
        )

    def value(self) -> dict[str, Any]:
        return {
            "master": self.master,
            "uid": self.user_id,
            "phase": self.phase,
            "generation": self.generation,
            "info": self.info,
        }


@dataclass(frozen=True)
class Claim:
    """The outcome of an election: ``won``, or the live master that performs it already."""

    won: bool
    state: FunctionState
    #: The failed master whose function this server took over, if any.
    took_over: str | None = None


def read_function(conn: ListStructure, area: ControlArea, kind: bytes) -> FunctionState:
    found = control.read(conn, area, kind)
    return FunctionState.of(None if found is None else found[1])


def alive(conn: ListStructure, user_id: int | None, name: str | None) -> bool:
    """Whether the user is connected and active under that name."""
    if user_id is None:
        return False
    return any(
        u.user_id == user_id and u.name == name and u.state is UserState.ACTIVE
        for u in conn.users()
    )


def claim(
    conn: ListStructure, area: ControlArea, kind: bytes, *, timeout: float, clock: Clock
) -> Claim:
    """Become the function's master unless a live one performs it already (waiting up
    to ``timeout`` seconds on ``clock`` for the control lock)."""
    with control_lock(conn, area, timeout=timeout, clock=clock):
        found = control.read(conn, area, kind)
        state = FunctionState.of(None if found is None else found[1])
        mine = state.user_id == conn.user_id and state.master == conn.user_name
        if state.master is not None and not mine and alive(conn, state.user_id, state.master):
            return Claim(False, state)
        took_over = state.master if state.master is not None and not mine else None
        claimed = FunctionState(
            conn.user_name, conn.user_id, "claimed", state.generation, state.info
        )
        control.put(conn, area, kind, b"", claimed.value())
    if took_over:
        # Failing over is the design working: INFO (the failure is its owner's to report).
        logger.info(
            "%s takes over %s from %s, which failed", conn.user_name, kind.decode(), took_over
        )
    return Claim(True, claimed, took_over)


def set_phase(conn: ListStructure, area: ControlArea, kind: bytes, phase: str) -> None:
    """Record how far the master got (for operators and a master that takes over)."""
    found = control.read(conn, area, kind)
    state = FunctionState.of(None if found is None else found[1])
    if state.user_id == conn.user_id:
        control.put(conn, area, kind, b"", {**state.value(), "phase": phase})


def signal(conn: ListStructure, area: ControlArea, kind: bytes, info: dict[str, Any]) -> int:
    """Count one more generation of the function (its work is done): every server
    watching the entry sees it.  Returns the new generation."""
    found = control.read(conn, area, kind)
    state = FunctionState.of(None if found is None else found[1])
    done = FunctionState(state.master, state.user_id, "signalled", state.generation + 1, info)
    control.put(conn, area, kind, b"", done.value())
    return done.generation


def finish(
    conn: ListStructure,
    area: ControlArea,
    kind: bytes,
    *,
    completed: bool,
    info: dict[str, Any] | None = None,
) -> FunctionState:
    """Give up the master role (``completed``: after :func:`signal`, or a function
    that counts no generations)."""
    found = control.read(conn, area, kind)
    state = FunctionState.of(None if found is None else found[1])
    done = FunctionState(
        None, None, IDLE, state.generation, info if info is not None else state.info
    )
    control.put(conn, area, kind, b"", done.value())
    return done


# -- locks --------------------------------------------------------------------------


@contextmanager
def control_lock(
    conn: ListStructure, area: ControlArea, *, timeout: float, clock: Clock
) -> Iterator[None]:
    acquire(conn, area.control_lock, timeout=timeout, clock=clock)
    try:
        yield
    finally:
        with suppress(CFError):
            conn.unlock(area.control_lock)


def acquire(
    conn: ListStructure,
    lock_number: int,
    *,
    timeout: float,
    clock: Clock,
    on_failed_holder: Callable[[str], None] | None = None,
) -> None:
    """Take a lock-table entry, waiting for its holder; a failed holder is cleaned up.

    Waits up to ``timeout`` seconds on ``clock`` (``RECOVERY_TIMEOUT`` after that); a
    holder found failed is cleaned up and the lock tried again at once.
    """
    holder: object = None

    def taken() -> bool:
        nonlocal holder
        while True:
            try:
                conn.lock(lock_number)
                return True
            except LockHeld as exc:
                holder = exc.context.get("holder")
            if not (isinstance(holder, int) and release_if_failed(conn, holder, on_failed_holder)):
                return False

    if not retry_until(
        taken,
        timeout_s=timeout,
        first_pause_s=LOCK_FIRST_PAUSE,
        longest_pause_s=LOCK_LONGEST_PAUSE,
        clock=clock,
    ):
        raise recovery_error(
            RecoveryReason.RECOVERY_TIMEOUT,
            f"lock {lock_number} of {conn.structure_name} has been held by user "
            f"{holder} for more than {timeout:g} s",
        )


def release_if_failed(
    conn: ListStructure, user_id: int, on_failed: Callable[[str], None] | None = None
) -> bool:
    """Clean up a failed user (releasing its locks); ``True`` if it was failed."""
    for user in conn.users():
        if user.user_id == user_id and user.state is UserState.FAILED:
            with suppress(CFError):  # another waiter may have cleaned it up first
                conn.cleanup_user(user_id)
            logger.info(  # handled: the lock is free again
                "user %d (%s) of %s failed holding a lock: cleaned up",
                user_id,
                user.name,
                conn.structure_name,
            )
            if on_failed is not None:
                on_failed(user.name)
            return True
    return False
