"""A log real CQSs wrote through one structure overflow and back.

Two CQSs (IMSA, IMSB) with recovery settings share the pair ``OVFP01`` (a primary of
exactly 1,000 data elements of 512 bytes that cannot alter larger) and ``OVFP02`` (its
overflow structure), ``OVFLWMAX`` 70.  A message of :data:`UNIT_BODY` bytes takes ten
elements, one per cent.  IMSA puts 30 messages to A, 20 to B, 10 to C, 10 to D: the
put that crosses 70 % starts the overflow process (alter refused), which moves A
(relative target, 56 %) to the overflow structure.  IMSB then drains A; fifteen
minutes later (a :class:`~sharedq.testing.ManualClock`) the scan returns A, and the
pair leaves overflow mode.  The same flow with no overflow structure and a threshold
never reached is the log without overflow.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sharedq.cf.memory import MemoryFacility
from sharedq.cf.params import StructureParams
from sharedq.cqs import CQS, Kind, StructurePair, make_name
from sharedq.cqs.overflow import OverflowOptions
from sharedq.recovery import RecoverySettings
from sharedq.testing import ManualClock

PRIMARY, OVERFLOW = "OVFP01", "OVFP02"
UNIT_BODY = 10 * 512 - 62  # with the CQS's 62-byte prefix: ten elements
A, B, C, D = (make_name(1, f"TRAN{x}") for x in "ABCD")
#: Messages put to each queue.
FILL = {A: 30, B: 20, C: 10, D: 10}


@dataclass(frozen=True)
class OverflowFlow:
    """The recovery root, and what the CQSs saw (microseconds of the shared clock)."""

    root: Path
    overflowed: bool
    entered_us: int | None = None
    returned_us: int | None = None


def write_overflow_log(root: Path, *, overflow: bool = True) -> OverflowFlow:
    """Run the flow above (``overflow=False``: OVFLWMAX 90, no overflow structure)."""
    facility = MemoryFacility()
    facility.create(
        StructureParams.for_capacity(
            PRIMARY,
            list_count=192,
            entries=1400,
            elements=1000,
            element_size=512,
            growth=1.0,
            lock_count=16,
        )
    )
    clock = ManualClock(tick_s=0.000_01)
    settings = RecoverySettings(root)
    pair = StructurePair(PRIMARY, OVERFLOW if overflow else None, ovflwmax=70 if overflow else 90)
    times: dict[str, int] = {}

    def notify(structure: str, event: str, queues: tuple[bytes, ...]) -> None:
        times.setdefault(event, clock.now_us())

    def start(system: str, **kw: object) -> CQS:
        options = OverflowOptions(check_every=1, refresh_s=0.0, **kw)  # type: ignore[arg-type]
        return CQS(
            facility,
            f"CQS{system}",
            system=system,
            msgq=pair,
            recovery=settings,
            clock=clock,
            overflow=options,
        ).connect()

    a, b = start("IMSA", notify=notify), start("IMSB")
    for queue, count in FILL.items():
        for _ in range(count):
            a.put(queue, b"x" * UNIT_BODY)
    while (message := b.read(A)) is not None:
        assert message.token is not None
        b.delete(message.token)
    clock.advance_s(15 * 60)
    a.overflow[Kind.MSGQ].scan()
    a.put(A, b"back in the primary")
    b.disconnect()
    a.disconnect()
    return OverflowFlow(root, overflow, times.get("overflow"), times.get("returned"))
