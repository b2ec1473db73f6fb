"""Which queues overflow: the target usage and the selection (seed 000, patent §8).

Pure arithmetic, no structure access, so that every reading of the seed's rule is
tested on its own numbers (OV-T3, OV-T8) as well as through a real overflow process.

"Stops selecting once enough queues are selected that primary-structure usage would
fall 20 % below the overflow threshold" has three readings (patent §8.2), a
:class:`Target` each; the default is the relative one.  "Below" is inclusive (``<=``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

#: At most this many queues per overflow process (redbook §2.8.1, OV-12).
MAX_QUEUES = 512


class Target(Enum):
    """How far usage must fall before selection stops."""

    #: 20 % below the threshold, relative: ``0.8 * T`` (the default).
    RELATIVE = "relative"
    #: 20 percentage points below: ``T - 20``.
    ABSOLUTE = "absolute"
    #: V6: usage drops by at least 20 % of itself: ``0.8 * current``.
    DROP = "drop"

    def percent(self, threshold: float, current: float) -> float:
        """The usage (per cent of the structure) selection aims at."""
        if self is Target.RELATIVE:
            return 0.8 * threshold
        if self is Target.ABSOLUTE:
            return threshold - 20.0
        return 0.8 * current


@dataclass(frozen=True)
class Selection:
    """The candidates in the order chosen, and the usage they would leave (per cent)."""

    queues: tuple[bytes, ...]
    target: float
    left: float


def select(
    used: int,
    capacity: int,
    sizes: Mapping[bytes, int],
    *,
    threshold: float,
    target: Target = Target.RELATIVE,
    limit: int = MAX_QUEUES,
    exclude: frozenset[bytes] = frozenset(),
) -> Selection:
    """Queues by elements used, largest first (ties by name, so every CQS agrees), one
    at a time with usage rechecked, until usage would be at or below the target or
    ``limit`` queues are chosen.  ``exclude``: queues already in overflow."""
    goal = target.percent(threshold, 100.0 * used / capacity)
    order = sorted((q for q in sizes if q not in exclude), key=lambda q: (-sizes[q], q))
    chosen: list[bytes] = []
    left = used
    for queue in order:
        if 100.0 * left / capacity <= goal or len(chosen) >= limit:
            break
        chosen.append(queue)
        left -= sizes[queue]
    return Selection(tuple(chosen), goal, 100.0 * left / capacity)
