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

from sharedq import names
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
#: The largest structure size accepted, in bytes (1 TiB): a structure lives in one
#: process's or one server's memory, so a larger size is a typo rather than a plan.
MAX_STRUCTURE_BYTES = 1 << 40
#: The most lock-table entries a structure may have (a million; sharedq uses 16).
MAX_LOCK_COUNT = 1 << 20


@dataclass(frozen=True)
class StructureParams:
    """How to allocate a structure.

    Attributes:
        name: the structure's name, 1 to 16 characters of ``A-Z a-z 0-9 _ $ # @ .``
            starting with a letter, a digit or ``$ # @``, as in a CFRM policy
            (:data:`sharedq.names.STRUCTURE`).
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
        can enlarge the structure later (overflow processing tries that first): a
        finite number of at least 1.  The counts are refused here, before any
        arithmetic on them, so that a negative or fractional count is named as such
        rather than surfacing as an odd size; the result is then checked as
        :func:`validate_params` checks what a facility is asked to create.
        """
        for what, value, low in (("entries", entries, 1), ("elements", elements, 0)):
            if not _is_int(value) or value < low:
                raise cf_error(
                    CFReason.BAD_STRUCTURE_PARAMS,
                    f"{what} {value!r} must be a whole number of at least {low}",
                )
        if (
            isinstance(growth, bool)
            or not isinstance(growth, int | float)
            or not math.isfinite(growth)
            or growth < 1
        ):
            raise cf_error(
                CFReason.BAD_STRUCTURE_PARAMS,
                f"growth {growth!r} must be a finite number of at least 1 (a multiple of the size)",
            )
        if element_size not in ELEMENT_SIZES or not _is_int(element_size):
            raise cf_error(
                CFReason.BAD_ELEMENT_SIZE,
                f"element size {element_size!r} is not one of {ELEMENT_SIZES}",
            )
        if not _is_int(emc_percent) or not 0 <= emc_percent <= MAX_EMC_PERCENT:
            raise cf_error(
                CFReason.BAD_STRUCTURE_PARAMS,
                f"emc_percent {emc_percent!r} must be 0..{MAX_EMC_PERCENT}",
            )
        divisor = math.gcd(entries, elements) if elements else entries
        entry_ratio, element_ratio = entries // divisor, elements // divisor
        body = entries * ENTRY_CONTROL_BYTES + elements * element_size
        size = _storage_for(body, emc_percent)
        params = cls(
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
        validate_params(params)
        return params

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
    """Check a structure's parameters; return its capacity or raise ``InvalidRequest``.

    Every backend calls it before it creates or alters anything, so that a name or a
    size is refused alike everywhere.  The name must keep :data:`sharedq.names.STRUCTURE`
    because it becomes a directory under the recovery root; every count must be a
    whole number (a ``bool`` or a ``float`` is refused, not rounded) and the size at
    most :data:`MAX_STRUCTURE_BYTES`.
    """
    problem = names.STRUCTURE.problem(params.name)
    if problem is not None:
        raise cf_error(CFReason.BAD_STRUCTURE_PARAMS, problem)
    for what in ("list_count", "size", "entry_ratio", "element_ratio", "lock_count"):
        value = getattr(params, what)
        if not _is_int(value):
            raise cf_error(
                CFReason.BAD_STRUCTURE_PARAMS, f"{what} {value!r} must be a whole number"
            )
    for what, value in (("size", params.size), ("max_size", params.max_size)):
        if value is not None and not (_is_int(value) and 0 < value <= MAX_STRUCTURE_BYTES):
            raise cf_error(
                CFReason.BAD_STRUCTURE_PARAMS,
                f"{what} {value!r} must be a whole number of bytes, 1..{MAX_STRUCTURE_BYTES}",
            )
    if params.element_size not in ELEMENT_SIZES or not _is_int(params.element_size):
        raise cf_error(
            CFReason.BAD_ELEMENT_SIZE,
            f"element size {params.element_size} is not one of {ELEMENT_SIZES}",
        )
    if not 1 <= params.list_count <= MAX_LIST_COUNT:
        raise cf_error(
            CFReason.BAD_STRUCTURE_PARAMS,
            f"list_count {params.list_count} must be 1..{MAX_LIST_COUNT}",
        )
    if not _is_int(params.emc_percent) or not 0 <= params.emc_percent <= MAX_EMC_PERCENT:
        raise cf_error(
            CFReason.BAD_STRUCTURE_PARAMS,
            f"emc_percent {params.emc_percent} must be 0..{MAX_EMC_PERCENT}",
        )
    if params.entry_ratio < 1 or params.element_ratio < 0:
        raise cf_error(
            CFReason.BAD_STRUCTURE_PARAMS,
            f"entry:element ratio {params.entry_ratio}:{params.element_ratio} must be >= 1:0",
        )
    if not 1 <= params.lock_count <= MAX_LOCK_COUNT:
        raise cf_error(
            CFReason.BAD_STRUCTURE_PARAMS,
            f"lock_count {params.lock_count} must be 1..{MAX_LOCK_COUNT}",
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


def _is_int(value: object) -> bool:
    """Whether ``value`` is a whole number (``True`` is not one, though Python says so)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _storage_for(body_bytes: int, emc_percent: int) -> int:
    """The smallest size whose non-EMC share holds ``body_bytes``."""
    size = math.ceil(body_bytes * 100 / (100 - emc_percent))
    while size - size * emc_percent // 100 < body_bytes:
        size += 1
    return size
