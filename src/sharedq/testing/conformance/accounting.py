"""Structure sizes, structure full, statistics and alter."""

from __future__ import annotations

from typing import Any

from sharedq.cf import (
    AlterRejected,
    CouplingFacility,
    Head,
    InvalidRequest,
    StructureExists,
    StructureFull,
    StructureParams,
)
from sharedq.cf.params import ELEMENT_SIZES
from sharedq.testing.conformance._registry import MakeStructure, check, raises
from sharedq.testing.conformance.helpers import key


@check
def structure_full_on_entries_changes_nothing(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    user = facility.connect(make_structure(entries=3, elements=30), "U")
    for n in range(3):
        user.write(n, key(n))
    before = user.statistics()
    with raises(StructureFull) as info:
        user.write(0, key(9))
    assert info.value.reason_code == 1040
    assert user.statistics() == before


@check
def structure_full_on_elements_changes_nothing(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    user = facility.connect(make_structure(entries=10, elements=4), "U")
    entry = user.write(0, key(1), b"x" * 256 * 3).entry
    with raises(StructureFull):
        user.write(0, key(2), b"x" * 257)
    with raises(StructureFull):
        user.update(Head(0), data=b"x" * 256 * 5)
    assert user.statistics().elements == 3
    user.write(0, key(3), b"x" * 256)
    assert user.statistics().elements == 4 == user.statistics().max_elements
    assert user.read(Head(0)) == entry


@check
def deletes_give_the_room_back(facility: CouplingFacility, make_structure: MakeStructure) -> None:
    user = facility.connect(make_structure(entries=2, elements=2), "U")
    user.write(0, key(1), b"a")
    user.write(0, key(2), b"b")
    with raises(StructureFull):
        user.write(0, key(3))
    user.delete(Head(0))
    user.write(0, key(3), b"c")


@check
def statistics_report_maximum_and_in_use(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    user = facility.connect(make_structure(entries=50, elements=60), "U")
    user.write(0, key(1), b"x" * 600)
    user.monitor_list(0)
    stats = user.statistics()
    assert (stats.max_entries, stats.entries) == (50, 1)
    assert (stats.max_elements, stats.elements) == (60, 3)
    assert stats.emcs == 1 and stats.max_emcs > 0
    assert stats.users == 1 and stats.list_count == 8 and stats.element_size == 256
    assert stats.seq > 0


@check
def alter_grows_within_the_maximum_size(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    user = facility.connect(make_structure(entries=10, elements=10, growth=2.0), "U")
    stats = user.statistics()
    grown = user.alter(size=stats.max_size)
    assert grown.max_entries == 20 and grown.max_elements == 20
    with raises(AlterRejected) as info:
        user.alter(size=stats.max_size + 1)
    assert info.value.reason_name == "ALTER_REJECTED"
    assert user.statistics() == grown


@check
def alter_emc_share(facility: CouplingFacility, make_structure: MakeStructure) -> None:
    user = facility.connect(make_structure(entries=100, elements=100), "U")
    before = user.statistics()
    after = user.alter(emc_percent=45)
    assert after.emc_percent == 45
    assert after.max_emcs > before.max_emcs
    assert after.size == before.size
    with raises(InvalidRequest):
        user.alter(emc_percent=51)
    assert user.statistics().emc_percent == 45


@check
def alter_cannot_shrink_below_what_is_in_use(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    user = facility.connect(make_structure(entries=10, elements=10), "U")
    for n in range(8):
        user.write(0, key(n), b"x")
    with raises(AlterRejected):
        user.alter(size=user.statistics().size // 2)
    assert user.statistics().max_entries == 10


@check(cases={str(size): {"element_size": size} for size in ELEMENT_SIZES})
def every_element_size_and_its_largest_entry(
    facility: CouplingFacility, make_structure: MakeStructure, element_size: int
) -> None:
    user = facility.connect(
        make_structure(entries=4, elements=1024, element_size=element_size), "U"
    )
    largest = min(255 * element_size, 65536)
    entry = user.write(0, key(1), b"z" * largest).entry
    assert entry.elements == largest // element_size
    with raises(InvalidRequest) as info:
        user.write(0, key(2), b"z" * (largest + 1))
    assert info.value.reason_name == "DATA_TOO_LARGE"


_BAD_PARAMS: list[tuple[dict[str, Any], str]] = [
    ({"element_size": 300}, "BAD_ELEMENT_SIZE"),
    ({"list_count": 0}, "BAD_STRUCTURE_PARAMS"),
    ({"emc_percent": 60}, "BAD_STRUCTURE_PARAMS"),
    ({"name": "bad name!"}, "BAD_STRUCTURE_PARAMS"),
    # sharedq.names.STRUCTURE: the name becomes a directory under the recovery root.
    ({"name": ".."}, "BAD_STRUCTURE_PARAMS"),
    ({"name": "QSG1\n"}, "BAD_STRUCTURE_PARAMS"),
    ({"name": "QSGÄ"}, "BAD_STRUCTURE_PARAMS"),
    ({"name": "Q" * 17}, "BAD_STRUCTURE_PARAMS"),
    ({"size": -100_000}, "BAD_STRUCTURE_PARAMS"),
    ({"list_count": 4.0}, "BAD_STRUCTURE_PARAMS"),
    ({"lock_count": True}, "BAD_STRUCTURE_PARAMS"),
    ({"size": 10}, "BAD_STRUCTURE_PARAMS"),
    ({"max_size": 1}, "BAD_STRUCTURE_PARAMS"),
]


@check(
    cases={
        ",".join(f"{k}={v!r}" for k, v in overrides.items()): {
            "overrides": overrides,
            "reason": reason,
        }
        for overrides, reason in _BAD_PARAMS
    }
)
def bad_structure_parameters_are_refused(
    facility: CouplingFacility, overrides: dict[str, Any], reason: str
) -> None:
    base = StructureParams(name="GOOD", list_count=4, size=100_000)
    params = StructureParams(**{**base.__dict__, **overrides})
    with raises(InvalidRequest) as info:
        facility.create(params)
    assert info.value.reason_name == reason
    assert not facility.exists(params.name)


@check
def structure_names_are_unique(facility: CouplingFacility) -> None:
    params = StructureParams(name="ONCE", list_count=4, size=100_000)
    facility.create(params)
    with raises(StructureExists):
        facility.create(params)
    assert facility.structure_names().count("ONCE") == 1
