"""The queue manager's checks of what callers give it: names, waits, lifetimes, ids.

Each is made before anything is looked at, and raises :class:`InvalidArgument`
(``BAD_ARGUMENT``, 2906, or MQ's own reason for the argument where it has one:
``EXPIRY_ERROR`` 2013), naming the argument and what it may be.  Names follow the one
rule per kind of :mod:`sharedq.names`, so that a name this layer accepts is one the
list structures, the log and recovery accept too.

The bounds (``docs/queue-manager.md``, "Names and limits"):

* a get's ``wait`` is ``None`` or 0 (no wait) or a finite number of seconds up to
  :data:`MAX_WAIT_SECONDS`, a day.  There is no unlimited wait (MQ's
  ``MQWI_UNLIMITED``): a consumer that waits for ever loops on a long wait, and so
  notices a stopped manager or an inhibited queue at least once a day.
* a put's ``expiry`` is ``None`` (unlimited) or a finite number of seconds above 0,
  in tenths, below the header's unlimited value (about 13.6 years).
* a unit of work's id is :data:`UOW_ID_LENGTH` bytes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from sharedq import names
from sharedq.cf import CouplingFacility
from sharedq.clock import is_clock
from sharedq.mq.errors import MQReason, mq_error
from sharedq.recovery.settings import RecoverySettings
from sharedq.security import SecuritySettings

#: The longest a get waits for a message, in seconds: a day.
MAX_WAIT_SECONDS = 86_400.0
#: The length of a unit of work's id: the manager's id byte and seven of a stamp.
UOW_ID_LENGTH = 8


def check_name(rule: names.NameRule, name: object, kind: str, *, new: bool = False) -> str:
    """``name`` if it keeps ``rule`` (called ``kind`` in the message), else ``BAD_ARGUMENT``."""
    problem = rule.problem(name, new=new, kind=kind)
    if problem is not None:
        raise mq_error(MQReason.BAD_ARGUMENT, problem)
    assert isinstance(name, str)
    return name


def check_manager_name(name: object) -> str:
    """A queue manager's name: a server name (its log writer's and checkpoint file's)."""
    return check_name(names.SERVER, name, "queue-manager name")


def check_structure_name(name: object) -> str:
    """A structure's name (its pair's recovery directory is named after it)."""
    return check_name(names.STRUCTURE, name, "structure name")


def check_structures(admin: object, structures: object) -> list[str]:
    """The administrative structure's name, then the others' as a list (read once).

    ``structures`` is a collection of names: one name given alone (a ``str``, whose
    letters would each be taken for a structure) or no collection is refused.
    """
    check_structure_name(admin)
    if isinstance(structures, str | bytes) or not isinstance(structures, Iterable):
        raise mq_error(
            MQReason.BAD_ARGUMENT,
            f"structures {structures!r} must be a collection of structure names",
        )
    found = list(structures)
    for name in found:
        check_structure_name(name)
    return found


def check_settings(
    facility: object, recovery: object, security: object, clock: object, faults: object
) -> None:
    """A queue manager's facility; its recovery and security settings, clock and fault
    hook, or ``None``."""
    for what, value, kind in (
        ("facility", facility, CouplingFacility),
        ("recovery", recovery, RecoverySettings),
        ("security", security, SecuritySettings),
    ):
        if not isinstance(value, kind) and (value is not None or what == "facility"):
            nothing = "" if what == "facility" else " or None"
            raise mq_error(
                MQReason.BAD_ARGUMENT,
                f"{what} must be a {kind.__name__}{nothing}, not {type(value).__name__}",
            )
    if clock is not None and not is_clock(clock):
        raise mq_error(MQReason.BAD_ARGUMENT, f"clock {clock!r} is not a Clock")
    if faults is not None and not callable(faults):
        raise mq_error(MQReason.BAD_ARGUMENT, f"faults {faults!r} is not a function")


def is_seconds(value: object, low: float, high: float) -> bool:
    """Whether ``value`` is a finite number (not a ``bool``) in ``low..high``."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and low <= value <= high
    )


def check_wait(wait: object, what: str = "wait") -> float | None:
    """A get's wait: ``None`` or seconds in ``0..MAX_WAIT_SECONDS``.

    ``nan`` would make the wait never end and ``inf`` or a huge number overflow the
    timer, so both are refused with the bound named.
    """
    return None if wait is None else check_seconds(wait, what, "None or ")


def check_seconds(value: object, what: str, or_else: str = "") -> float:
    """Seconds in ``0..MAX_WAIT_SECONDS``, finite (see :func:`check_wait`)."""
    if not is_seconds(value, 0.0, MAX_WAIT_SECONDS):
        raise mq_error(
            MQReason.BAD_ARGUMENT,
            f"{what} {value!r} must be {or_else}seconds from 0 to {MAX_WAIT_SECONDS:g} (a day)",
        )
    assert isinstance(value, int | float)
    return float(value)


def check_uow_id(uow_id: object) -> bytes:
    """A unit of work's id as :attr:`UnitOfWork.uow_id` gives it: ``UOW_ID_LENGTH`` bytes."""
    if not isinstance(uow_id, bytes) or len(uow_id) != UOW_ID_LENGTH:
        shown = f"{len(uow_id)} bytes" if isinstance(uow_id, bytes) else type(uow_id).__name__
        raise mq_error(
            MQReason.BAD_ARGUMENT,
            f"a unit of work's id is {UOW_ID_LENGTH} bytes (uow.uow_id), not {shown}",
        )
    return uow_id


def check_bool(value: object, what: str) -> bool:
    """``value`` if it is a ``bool``: a truthy string must not commit a unit of work."""
    if not isinstance(value, bool):
        raise mq_error(MQReason.BAD_ARGUMENT, f"{what} must be True or False, not {value!r}")
    return value
