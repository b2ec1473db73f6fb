"""Running the checks against a backend: one check, or all of them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager

from sharedq.cf import CouplingFacility
from sharedq.testing.conformance._registry import REGISTERED, Check, arguments_for

#: What the runner takes: called once per check, it returns a fresh facility (or a
#: context manager that gives one and cleans up after it).  A ``CouplingFacility`` is
#: itself a context manager that closes it, so a class such as ``MemoryFacility`` will
#: do.  Each must start with no structures: a new facility, or one on a store the
#: previous one's exit emptied (some checks use fixed structure names).
FacilityFactory = Callable[[], AbstractContextManager[CouplingFacility]]


class ConformanceFailure(AssertionError):
    """Checks failed; ``failures`` holds each one's name and exception, in order.

    The message names every failed check; the first failure's exception is the
    ``__cause__``.
    """

    def __init__(self, failures: list[tuple[str, BaseException]], ran: int) -> None:
        self.failures = tuple(failures)
        lines = [f"{name}: {_describe(exc)}" for name, exc in failures]
        super().__init__(
            f"{len(failures)} of {ran} list-structure conformance checks failed:\n  "
            + "\n  ".join(lines)
        )


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def run_check(check: Check, make_facility: FacilityFactory) -> None:
    """Run one check on a fresh facility from ``make_facility``.

    Whatever the check raises (an ``AssertionError``, or an unexpected exception from
    the backend) propagates unchanged, with a note naming the check.
    """
    try:
        with make_facility() as facility, arguments_for(check, facility) as arguments:
            check.function(**arguments)
    except Exception as exc:
        exc.add_note(f"in list-structure conformance check {check.name}")
        raise


def check_list_structure(
    make_facility: FacilityFactory,
    *,
    checks: Iterable[Check] | None = None,
    fail_fast: bool = False,
) -> None:
    """Run the list-structure conformance suite against a backend.

    ``make_facility`` is called once for each check and must give a fresh facility
    (see :data:`FacilityFactory`): ``check_list_structure(MemoryFacility)``, or for a
    store that outlives its handles a context manager factory that empties the store
    after each check.  ``checks`` selects some of :data:`CHECKS` (by default all of
    them; ``[c for c in CHECKS if not c.slow]`` leaves out the long stateful check).

    Every check is run, and if any fails a :class:`ConformanceFailure` (an
    ``AssertionError``) names each failed check; with ``fail_fast`` the first failure
    raises at once.  A failure is any ``Exception`` a check raises.
    """
    chosen = tuple(REGISTERED if checks is None else checks)
    failures: list[tuple[str, BaseException]] = []
    for check in chosen:
        try:
            run_check(check, make_facility)
        except Exception as exc:
            failures.append((check.name, exc))
            if fail_fast:
                raise ConformanceFailure(failures, len(chosen)) from exc
    if failures:
        raise ConformanceFailure(failures, len(chosen)) from failures[0][1]
