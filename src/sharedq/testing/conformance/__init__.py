"""The list-structure conformance suite, for any backend of :mod:`sharedq.cf`.

The contract of a backend is :class:`sharedq.cf.ListStructure` and
:class:`sharedq.cf.CouplingFacility` (their docstrings); this suite is what checks a
backend keeps it.  sharedq's own backends (``memory``, ``redis`` on a server and on a
cluster) run it in ``tests/cf``; a third-party backend runs the same checks::

    from sharedq.testing import check_list_structure

    def test_my_backend_conforms():
        check_list_structure(MyFacility)  # any callable giving a fresh facility

``make_facility`` is called once per check and must give a facility with no
structures on it; a ``CouplingFacility`` is a context manager that closes it, and
for a store that outlives its handles pass a factory of context managers that empty
the store afterwards (see :data:`FacilityFactory`)::

    @contextlib.contextmanager
    def fresh_facility():
        with MyFacility.from_url(URL) as facility:
            yield facility
        flush_my_store(URL)

    check_list_structure(fresh_facility)

:func:`check_list_structure` runs every check and then raises
:class:`ConformanceFailure` (an ``AssertionError``) naming each one that failed, or
with ``fail_fast=True`` at the first.  To get one test per check from pytest, as
sharedq does, parametrise over :data:`CHECKS` and call :func:`run_check`::

    @pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.name)
    def test_conformance(check):
        run_check(check, MyFacility)

A check is a plain function of ``facility`` (a fresh facility), ``make_structure``
(creates a structure of 8 lists and returns its name; keywords override
:meth:`StructureParams.for_capacity <sharedq.cf.StructureParams.for_capacity>`) and
``struct`` (a connection, as user ``U1``, to a fresh structure), whichever it names,
and of its case's arguments; the runner builds them and releases them afterwards.
Checks are named ``<group>.<what it checks>[<case>]``: ``entries.``, ``moves.``,
``conditions.``, ``bulk.``, ``copying.``, ``monitoring.``, ``users.``,
``sequence.``, ``accounting.``, ``errors.``, ``write_and_rekey.``, ``taking.`` (``take``
and ``wait_for_event``), ``threads.``, and
``stateful.backend_matches_the_reference_model``, random request sequences compared
with a naive model of a structure, which is long (its ``slow`` is true).

Dependencies: the checks use no test framework (``raises`` here stands in for
``pytest.raises``); the stateful check needs hypothesis, installed by the ``testing``
extra (``pip install sharedq[testing]``; ``sharedq[dev]`` includes it) and imported
only when that check runs.  Under pytest, call
``pytest.register_assert_rewrite("sharedq.testing.conformance")`` in a ``conftest.py``
before importing this package to have failed assertions show their values.
"""

from sharedq.testing.conformance import (
    accounting,
    bulk,
    conditions,
    copying,
    entries,
    errors,
    monitoring,
    moves,
    sequence,
    stateful,
    taking,
    threads,
    users,
    write_and_rekey,
)
from sharedq.testing.conformance._registry import (
    FIXTURES,
    REGISTERED,
    Check,
    MakeStructure,
    Raised,
    arguments_for,
    connected_structure,
    raises,
    structure_maker,
)
from sharedq.testing.conformance._runner import (
    ConformanceFailure,
    FacilityFactory,
    check_list_structure,
    run_check,
)

#: The check modules, one per group, in the order their checks run.
GROUPS = (
    accounting,
    bulk,
    conditions,
    copying,
    entries,
    errors,
    monitoring,
    moves,
    sequence,
    stateful,
    taking,
    threads,
    users,
    write_and_rekey,
)

#: Every check: the groups in :data:`GROUPS` order, each group's checks in the order
#: its module defines them (what :func:`check_list_structure` runs by default).
CHECKS: tuple[Check, ...] = tuple(REGISTERED)

__all__ = [
    "CHECKS",
    "FIXTURES",
    "GROUPS",
    "Check",
    "ConformanceFailure",
    "FacilityFactory",
    "MakeStructure",
    "Raised",
    "arguments_for",
    "check_list_structure",
    "connected_structure",
    "raises",
    "run_check",
    "structure_maker",
]
