"""The list-structure conformance suite on every backend, and its runner.

Each check of :data:`sharedq.testing.conformance.CHECKS` is one test per backend
(``test_check[<backend>-<group>.<check>]``), run by the runner's own
:func:`~sharedq.testing.conformance.run_check`; third-party backends run the same
checks with :func:`sharedq.testing.check_list_structure`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

import sharedq.testing
from sharedq.cf import CouplingFacility, StructureParams, StructureStats
from sharedq.cf.memory import MemoryFacility
from sharedq.testing.conformance import (
    CHECKS,
    FIXTURES,
    Check,
    ConformanceFailure,
    FacilityFactory,
    check_list_structure,
    run_check,
)


@pytest.mark.parametrize(
    "check",
    [
        pytest.param(check, id=check.name, marks=[pytest.mark.slow] if check.slow else [])
        for check in CHECKS
    ],
)
def test_check(make_facility: FacilityFactory, check: Check) -> None:
    run_check(check, make_facility)


# -- the suite and its runner --------------------------------------------------------------


def test_the_suite_is_whole() -> None:
    """Every group of checks is there, each check once, with what it needs."""
    names = [check.name for check in CHECKS]
    assert len(names) == len(set(names))
    groups = {name.partition(".")[0] for name in names}
    assert groups == {
        "accounting",
        "bulk",
        "conditions",
        "copying",
        "entries",
        "errors",
        "monitoring",
        "moves",
        "sequence",
        "stateful",
        "taking",
        "threads",
        "users",
        "write_and_rekey",
    }
    assert [check.name for check in CHECKS if check.slow] == [
        "stateful.backend_matches_the_reference_model"
    ]
    assert all(check.fixtures and set(check.fixtures) <= set(FIXTURES) for check in CHECKS)
    assert sharedq.testing.check_list_structure is check_list_structure


class _Counting:
    """A factory of memory facilities that counts how many were opened and closed."""

    def __init__(self) -> None:
        self.opened = self.closed = 0

    @contextmanager
    def __call__(self) -> Iterator[CouplingFacility]:
        self.opened += 1
        try:
            with MemoryFacility() as facility:
                yield facility
        finally:
            self.closed += 1


def test_the_runner_passes_a_conforming_backend_giving_each_check_a_fresh_facility() -> None:
    fast = [check for check in CHECKS if not check.slow]
    factory = _Counting()
    check_list_structure(factory, checks=fast)
    assert factory.opened == factory.closed == len(fast)
    check_list_structure(MemoryFacility, checks=fast[:3])  # a facility class will do


class _NoFloor(MemoryFacility):
    """A broken backend: a new structure's numbering ignores ``sequence_floor``."""

    def create(self, params: StructureParams, *, sequence_floor: int = 0) -> StructureStats:
        return super().create(params)


FLOOR = "sequence.sequence_floor_continues_an_old_numbering"


def test_the_runner_names_every_failed_check_after_running_them_all() -> None:
    sequence = [check for check in CHECKS if check.name.startswith("sequence.")]
    assert FLOOR in [check.name for check in sequence] and len(sequence) > 2
    with pytest.raises(AssertionError) as info:
        check_list_structure(_NoFloor, checks=sequence)
    failure = info.value
    assert isinstance(failure, ConformanceFailure)
    assert [name for name, _ in failure.failures] == [FLOOR]
    assert f"1 of {len(sequence)} list-structure conformance checks failed" in str(failure)
    assert FLOOR in str(failure)
    assert isinstance(failure.__cause__, AssertionError)


def test_fail_fast_stops_at_the_first_failure() -> None:
    chosen = [check for check in CHECKS if check.name == FLOOR] * 2
    factory = _Counting()

    class Broken(_Counting):
        @contextmanager
        def __call__(self) -> Iterator[CouplingFacility]:
            self.opened += 1
            with _NoFloor() as facility:
                yield facility

    broken = Broken()
    with pytest.raises(ConformanceFailure) as info:
        check_list_structure(broken, checks=chosen, fail_fast=True)
    assert broken.opened == 1 and len(info.value.failures) == 1
    check_list_structure(factory, checks=chosen[:1])
    assert factory.opened == 1


def test_run_check_raises_what_the_check_raised_naming_the_check() -> None:
    (floor,) = [check for check in CHECKS if check.name == FLOOR]
    with pytest.raises(AssertionError) as info:
        run_check(floor, _NoFloor)
    assert not isinstance(info.value, ConformanceFailure)
    assert f"in list-structure conformance check {FLOOR}" in info.value.__notes__
