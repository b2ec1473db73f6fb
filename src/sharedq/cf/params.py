"""What a structure is made of, and how its storage divides into entries, elements and EMCs.

A coupling facility sizes a list structure by storage, not by counts: the operator
gives a size and an entry-to-element ratio, the facility sets aside the event monitor
control (EMC) area (20 % by default, at most 50 %), and what remains becomes list
entry controls and data elements in that ratio.  Raising the EMC share takes the space
from entries and elements; an alter can grow the structure up to the maximum size set
when it was created.  sharedq keeps that model so that capacity planning (the
pipeline's ``capacity`` job, overflow thresholds) reasons in the units the seeds use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from sharedq.cf.errors import CFReason, cf_error

#: Storage taken by one list entry's controls: key, entry id, version, adjunct, links.
ENTRY_CONTROL_BYTES = 256
#: Storage taken by one event monitor control (redbook §2.2.4: 64 bytes each).
EMC_BYTES = 64
#: The list element sizes a coupling facility offers.
ELEMENT_SIZES = (256, 512, 1024, 2048, 4096)
#: The EMC share of a structure when none is given, in per cent (redbook §2.2.4).
DEFAULT_EMC_PERCENT = 20
#: The largest EMC share an alter may set, in per cent (redbook §2.2.4).
MAX_EMC_PERCENT = 50
#: Lock-table entries in a structure when none is given.
DEFAULT_LOCK_COUNT = 16
#: The most list headers one structure may have.
MAX_LIST_COUNT = 4096


@dataclass(frozen=True)
class StructureParams:
    """How to allocate a structure.

    Attributes:
        name: the structure's name, 1 to 16 characters of ``A-Z 0-9 _ $ # @ .``, as
            in a CFRM policy.
        list_count: the number of list headers; lists are numbered ``0 .. list_count-1``.
        size: storage in bytes (the CFRM ``INITSIZE``).
        entry_ratio, element_ratio: the entry-to-element ratio the storage is cut in.
        element_size: bytes per data element: 256, 512, 1024, 2048 or 4096.
        emc_percent: the share of the storage set aside for EMCs, 0 to 50.
        max_size: the most storage an alter may give the structure (the CFRM ``SIZE``);
            by default the structure cannot grow.
        lock_count: the number of lock-table entries.
    """

    name: str
    list_count: int
    size: int
    entry_ratio: int = 1
    element_ratio: int = 1
    element_size: int = 256
    emc_percent: int = DEFAULT_EMC_PERCENT
    max_size: int | None = None
    lock_count: int = DEFAULT_LOCK_COUNT

    @classmethod
    def for_capacity(
        cls,
        name: str,
        *,
        list_count: int,
        entries: int,
        elements: int,
        element_size: int = 256,
        emc_percent: int = DEFAULT_EMC_PERCENT,
        growth: float = 1.0,
        lock_count: int = DEFAULT_LOCK_COUNT,
    ) -> StructureParams:
        """Parameters for a structure that holds exactly ``entries`` and ``elements``.

        ``growth`` sets ``max_size`` as a multiple of the initial size, so that an alter
        can enlarge the structure later (overflow processing tries that first).
        """
        if entries < 1 or elements < 0:
            raise cf_error(
                CFReason.BAD_STRUCTURE_PARAMS,
                f"a structure needs at least one entry and no negative elements "
                f"(entries={entries}, elements={elements})",
            )
        divisor = math.gcd(entries, elements) if elements else entries
        entry_ratio, element_ratio = entries // divisor, elements // divisor
        body = entries * ENTRY_CONTROL_BYTES + elements * element_size
        size = _storage_for(body, emc_percent)
        return cls(
            name=name,
            list_count=list_count,
            size=size,
            entry_ratio=entry_ratio,
            element_ratio=element_ratio,
            element_size=element_size,
            emc_percent=emc_percent,
            max_size=max(size, math.ceil(size * growth)),
            lock_count=lock_count,
        )

    @property
    def effective_max_size(self) -> int:
        return self.size if self.max_size is None else self.max_size

    def altered(
        self, *, size: int | None = None, emc_percent: int | None = None
    ) -> StructureParams:
        """These parameters after an alter to a new size and/or EMC share."""
        return replace(
            self,
            size=self.size if size is None else size,
            emc_percent=self.emc_percent if emc_percent is None else emc_percent,
        )


@dataclass(frozen=True)
class Capacity:
    """The counts a structure's storage gives."""

    max_entries: int
    max_elements: int
    max_emcs: int


def capacity_of(params: StructureParams) -> Capacity:
    """Divide a structure's storage into EMCs, entry controls and elements."""
    emc_bytes = params.size * params.emc_percent // 100
    body = params.size - emc_bytes
    unit = params.entry_ratio * ENTRY_CONTROL_BYTES + params.element_ratio * params.element_size
    units = body // unit
    return Capacity(
        max_entries=units * params.entry_ratio,
        max_elements=units * params.element_ratio,
        max_emcs=emc_bytes // EMC_BYTES,
    )


def validate_params(params: StructureParams) -> Capacity:
    """Check a structure's parameters; return its capacity or raise ``InvalidRequest``."""
    name = params.name
    if not (1 <= len(name) <= 16) or not all(c.isalnum() or c in "_$#@." for c in name):
        raise cf_error(
            CFReason.BAD_STRUCTURE_PARAMS,
            f"structure name {name!r} must be 1-16 characters of letters, digits, _ $ # @ .",
        )
    if params.element_size not in ELEMENT_SIZES:
        raise cf_error(
            CFReason.BAD_ELEMENT_SIZE,
            f"element size {params.element_size} is not one of {ELEMENT_SIZES}",
        )
    if not 1 <= params.list_count <= MAX_LIST_COUNT:
        raise cf_error(
            CFReason.BAD_STRUCTURE_PARAMS,
            f"list_count {params.list_count} must be 1..{MAX_LIST_COUNT}",
        )
    if not 0 <= params.emc_percent <= MAX_EMC_PERCENT:
        raise cf_error(
            CFReason.BAD_STRUCTURE_PARAMS,
            f"emc_percent {params.emc_percent} must be 0..{MAX_EMC_PERCENT}",
        )
    if params.entry_ratio < 1 or params.element_ratio < 0:
        raise cf_error(
            CFReason.BAD_STRUCTURE_PARAMS,
            f"entry:element ratio {params.entry_ratio}:{params.element_ratio} must be >= 1:0",
        )
    if params.lock_count < 1:
        raise cf_error(
            CFReason.BAD_STRUCTURE_PARAMS, f"lock_count {params.lock_count} must be >= 1"
        )
    if params.max_size is not None and params.max_size < params.size:
        raise cf_error(
            CFReason.BAD_STRUCTURE_PARAMS,
            f"max_size {params.max_size} is below the initial size {params.size}",
        )
    capacity = capacity_of(params)
    if capacity.max_entries < 1:
        raise cf_error(
            CFReason.BAD_STRUCTURE_PARAMS,
            f"size {params.size} bytes is too small to hold a single list entry",
        )
    return capacity


def _storage_for(body_bytes: int, emc_percent: int) -> int:
    """The smallest size whose non-EMC share holds ``body_bytes``."""
    size = math.ceil(body_bytes * 100 / (100 - emc_percent))
    while size - size * emc_percent // 100 < body_bytes:
        size += 1
    return size
