"""Sizing rules: a structure for the measured peaks, and where overflow should start.

Pure Python, kept apart from the capacity job that measures the peaks with Spark, so
that the rules (redbook §5.8.1.1, §6.5.3; seeds 000 and 001) can be read, tested and
changed in one place.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sharedq.cf.params import DEFAULT_EMC_PERCENT, StructureParams, capacity_of
from sharedq.pipeline.errors import PipelineReason, pipeline_error

if TYPE_CHECKING:  # sources brings pyarrow, which the CLI's option defaults must not
    from sharedq.pipeline.sources import PairInput

#: The headroom, in per cent of the peaks, when none is given.
DEFAULT_HEADROOM = 30.0
#: Seed 000: overflow processing selects queues until usage is 20 % below the
#: threshold, and (without an overflow structure) leaves overflow mode there.  The
#: relative reading (``0.8 x threshold``), the design default of the spec.
OVERFLOW_RELIEF = 0.20
#: The element size assumed for a structure whose parameters appear nowhere.
_FALLBACK_ELEMENT_SIZE = 256


@dataclass(frozen=True)
class Base:
    """Where one structure's count starts: an SRDS image, or nothing (the log is whole)."""

    structure: str
    params: dict[str, Any] | None
    base_seq: int = -1
    base_time_us: int | None = None
    srds_slot: int | None = None
    pair: PairInput | None = None
    warning: str | None = None

    @property
    def element_size(self) -> int:
        if self.params and self.params.get("element_size"):
            return int(self.params["element_size"])
        return _FALLBACK_ELEMENT_SIZE


@dataclass
class Recommendation:
    """One structure's measured peaks and the allocation recommended for them."""

    structure: str
    peak_entries: int
    peak_entries_time: dt.datetime | None
    peak_elements: int
    peak_elements_time: dt.datetime | None
    final_entries: int
    final_elements: int
    avg_entry_bytes: float | None
    avg_message_bytes: float | None
    puts: int
    element_size: int
    headroom_percent: float
    entries: int
    elements: int
    params: StructureParams
    peak_percent: float
    overflow_threshold: int
    relief_percent: float
    base: str
    current: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)


def overflow_threshold(peak_percent: float) -> tuple[int, float]:
    """The ``OVFLWMAX`` to set, and the usage overflow processing brings it back to.

    ``peak_percent`` is the observed peak as a share of the recommended structure:
    the larger of its entry and element shares, ``100 / (1 + headroom)`` for both.
    The seeds' rules that place the threshold:

    - overflow processing is costly (a quiesce, queue selection, a structure checkpoint
      every time: redbook §6.5.3, seed 001), so normal peaks must stay below the
      threshold;
    - once it starts, CQS first tries a structure alter, then moves or closes the
      largest queues while puts keep arriving (seed 000, OV-1 to OV-8), so the
      structure needs room left above the threshold;
    - usage counts data elements (``OVFLWMAX``, redbook §2.8 and §5.9.2.3); a structure
      is full when either entries or elements run out (§2.8.3), so the larger share is
      used.

    The threshold splits the headroom in two, half for growth beyond the observed peak
    and half for overflow processing to act in: ``T = ceil((peak% + 100) / 2)``, at most
    100.  Overflow processing then relieves usage to ``T x (1 - 0.20)`` (seed 000, "20 %
    below the overflow threshold", relative reading).
    """
    threshold = min(100, math.ceil((peak_percent + 100.0) / 2.0 - 1e-9))
    return threshold, round(threshold * (1.0 - OVERFLOW_RELIEF), 1)


def recommend(
    structure: str,
    peak: dict[str, Any],
    sizes: dict[str, Any] | None,
    base: Base,
    headroom_percent: float,
) -> Recommendation:
    """Turn one structure's peaks into a ``StructureParams`` and an overflow threshold."""
    factor = 1.0 + headroom_percent / 100.0
    entries = max(1, math.ceil(peak["peak_entries"] * factor - 1e-9))
    elements = max(0, math.ceil(peak["peak_elements"] * factor - 1e-9))
    params = base.params or {}
    size = int(params.get("size") or 0)
    max_size = int(params.get("max_size") or size or 0)
    growth = max(1.0, max_size / size) if size else 1.0
    list_count = int(params.get("list_count") or 1)
    recommended = StructureParams.for_capacity(
        structure,
        list_count=list_count,
        entries=entries,
        elements=elements,
        element_size=base.element_size,
        emc_percent=int(params.get("emc_percent", DEFAULT_EMC_PERCENT)),
        growth=growth,
        lock_count=int(params.get("lock_count") or 16),
    )
    capacity = capacity_of(recommended)
    shares = [100.0 * peak["peak_entries"] / capacity.max_entries]
    if capacity.max_elements:
        shares.append(100.0 * peak["peak_elements"] / capacity.max_elements)
    peak_percent = max(shares)
    threshold, relief = overflow_threshold(peak_percent)
    warnings = [base.warning] if base.warning else []
    if threshold - peak_percent < 10:
        warnings.append(
            f"only {threshold - peak_percent:.1f} points between the peak and the threshold: "
            "overflow processing would start at small bursts; raise --headroom"
        )
    if not base.params:
        warnings.append(
            f"no structure parameters in the log or SRDS: element size "
            f"{base.element_size} and one list assumed"
        )
    current = None
    if base.params:
        now = capacity_of(StructureParams(**base.params))
        current = {
            "size": int(base.params["size"]),
            "max_entries": now.max_entries,
            "max_elements": now.max_elements,
            "peak_entries_percent": round(100.0 * peak["peak_entries"] / now.max_entries, 2),
            "peak_elements_percent": (
                round(100.0 * peak["peak_elements"] / now.max_elements, 2)
                if now.max_elements
                else None
            ),
        }
    sized = sizes or {}
    base_text = (
        f"SRDS{base.srds_slot} at seq {base.base_seq}"
        if base.srds_slot is not None
        else "the structure's start (the log is whole)"
        if base.warning is None
        else "the log's first record"
    )
    return Recommendation(
        structure=structure,
        peak_entries=int(peak["peak_entries"]),
        peak_entries_time=peak["peak_entries_time"],
        peak_elements=int(peak["peak_elements"]),
        peak_elements_time=peak["peak_elements_time"],
        final_entries=int(peak["final_entries"]),
        final_elements=int(peak["final_elements"]),
        avg_entry_bytes=sized.get("avg_entry_bytes"),
        avg_message_bytes=sized.get("avg_message_bytes"),
        puts=int(sized.get("puts") or 0),
        element_size=base.element_size,
        headroom_percent=headroom_percent,
        entries=entries,
        elements=elements,
        params=recommended,
        peak_percent=round(peak_percent, 2),
        overflow_threshold=threshold,
        relief_percent=relief,
        base=base_text,
        current=current,
        warnings=warnings,
    )


def check_headroom(headroom: float) -> None:
    """``BAD_ARGUMENT`` unless the headroom is a finite per cent of at least zero."""
    if not (isinstance(headroom, int | float) and math.isfinite(headroom) and headroom >= 0):
        raise pipeline_error(
            PipelineReason.BAD_ARGUMENT,
            f"--headroom {headroom}: must be a percentage of at least 0",
        )
