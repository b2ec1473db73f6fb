"""The sizes ``StructureParams`` computes, with no backend involved.

What a backend does with them (structure full, statistics, alter) is the conformance
suite's (``sharedq.testing.conformance.accounting``, run by ``test_conformance.py``).
"""

from __future__ import annotations

import pytest

from sharedq.cf import InvalidRequest, StructureParams, capacity_of


def test_for_capacity_gives_exactly_the_counts_asked_for() -> None:
    for entries, elements in ((10, 20), (7, 0), (100, 333), (1, 255)):
        capacity = capacity_of(
            StructureParams.for_capacity("X", list_count=2, entries=entries, elements=elements)
        )
        assert (capacity.max_entries, capacity.max_elements) == (entries, elements)


def test_emc_area_is_a_share_of_the_structure() -> None:
    params = StructureParams.for_capacity("X", list_count=2, entries=100, elements=100)
    capacity = capacity_of(params)
    assert params.emc_percent == 20
    assert capacity.max_emcs == params.size * 20 // 100 // 64
    bigger = capacity_of(params.altered(emc_percent=40))
    assert bigger.max_emcs > capacity.max_emcs
    assert bigger.max_elements < capacity.max_elements  # the space comes from elements


def test_the_patents_element_size_vectors() -> None:
    """Patent §5.2: 64K fits 16 x 4096 and 128 x 512 elements, not 256 x 256."""
    from sharedq.cf.validation import elements_for

    assert elements_for(b"\0" * 65536, 4096) == 16
    assert elements_for(b"\0" * 65536, 512) == 128
    assert elements_for(b"\0" * 65280, 256) == 255
    with pytest.raises(InvalidRequest):
        elements_for(b"\0" * 65536, 256)
