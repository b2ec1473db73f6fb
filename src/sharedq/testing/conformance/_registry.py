"""The checks' registry, the arguments the runner builds for them, and ``raises``.

A check is a plain function whose parameters name what it needs: ``facility`` (a fresh
:class:`~sharedq.cf.CouplingFacility`), ``make_structure`` (creates a structure on it
and returns its name) and ``struct`` (a connection, as user ``U1``, to a fresh
structure of 8 lists); any other parameter is given by one of the check's cases.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Generic, TypeVar, overload

from sharedq.cf import CouplingFacility, ListStructure, StructureParams

#: The arguments the runner makes itself, by parameter name.
FIXTURES = ("facility", "make_structure", "struct")

#: ``make_structure(**overrides)``: create a fresh structure and return its name; the
#: keywords go to :meth:`StructureParams.for_capacity
#: <sharedq.cf.StructureParams.for_capacity>` (8 lists, 200 entries and 800 elements
#: unless overridden).
MakeStructure = Callable[..., str]

#: The structures' names, ``T1``, ``T2``, ...: unique in a process, so that checks
#: sharing a store never collide.
_names = itertools.count(1)


@dataclass(frozen=True)
class Check:
    """One conformance check: a function, and the case arguments it is run with.

    ``name`` is ``<group>.<function>`` (the group is the module: ``entries``,
    ``conditions``, ...), with ``[<case>]`` appended for a check run once per case.
    """

    name: str
    function: Callable[..., None]
    arguments: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    #: Long-running (the stateful check): sharedq's suite marks it ``slow``.
    slow: bool = False

    def __repr__(self) -> str:
        return f"<Check {self.name}>"

    @property
    def fixtures(self) -> tuple[str, ...]:
        """Which of :data:`FIXTURES` the function takes."""
        parameters = inspect.signature(self.function).parameters
        return tuple(name for name in FIXTURES if name in parameters)


#: Every check, in the order the modules define them (see ``__init__``).
REGISTERED: list[Check] = []

F = TypeVar("F", bound=Callable[..., None])


@overload
def check(function: F) -> F: ...


@overload
def check(
    *, cases: Mapping[str, Mapping[str, object]] | None = None, slow: bool = False
) -> Callable[[F], F]: ...


def check(
    function: F | None = None,
    *,
    cases: Mapping[str, Mapping[str, object]] | None = None,
    slow: bool = False,
) -> F | Callable[[F], F]:
    """Register a function as a check (once per case, if ``cases`` maps case ids to
    arguments); the function itself is returned unchanged."""

    def register(fn: F) -> F:
        group = fn.__module__.rpartition(".")[2]
        parameters = set(inspect.signature(fn).parameters) - set(FIXTURES)
        for case, arguments in (cases or {"": {}}).items():
            if set(arguments) != parameters:
                raise TypeError(f"{fn.__name__}[{case}]: arguments {sorted(arguments)}")
            name = f"{group}.{fn.__name__}" + (f"[{case}]" if case else "")
            REGISTERED.append(Check(name, fn, MappingProxyType(dict(arguments)), slow))
        return fn

    return register if function is None else register(function)


# -- the arguments -----------------------------------------------------------------------


def structure_maker(facility: CouplingFacility) -> MakeStructure:
    """``make_structure`` for ``facility`` (see :data:`MakeStructure`)."""

    def make(**overrides: Any) -> str:
        name = f"T{next(_names)}"
        options: dict[str, Any] = {"list_count": 8, "entries": 200, "elements": 800}
        options.update(overrides)
        facility.create(StructureParams.for_capacity(name, **options))
        return name

    return make


@contextmanager
def connected_structure(
    facility: CouplingFacility, make_structure: MakeStructure
) -> Iterator[ListStructure]:
    """``struct``: a connection, as user ``U1``, to a fresh structure of 8 lists;
    disconnected afterwards unless the check did that already."""
    conn = facility.connect(make_structure(), "U1")
    try:
        yield conn
    finally:
        if conn.connected:
            conn.disconnect()


@contextmanager
def arguments_for(check: Check, facility: CouplingFacility) -> Iterator[dict[str, object]]:
    """The arguments to call ``check.function`` with, on ``facility``; what they hold
    (the ``struct`` connection) is released when the block ends."""
    values: dict[str, object] = dict(check.arguments)
    wanted = check.fixtures
    make = structure_maker(facility)
    if "facility" in wanted:
        values["facility"] = facility
    if "make_structure" in wanted:
        values["make_structure"] = make
    if "struct" in wanted:
        with connected_structure(facility, make) as conn:
            values["struct"] = conn
            yield values
    else:
        yield values


# -- raises ------------------------------------------------------------------------------

E = TypeVar("E", bound=BaseException)


class Raised(Generic[E]):
    """What :func:`raises` caught: ``value`` is the exception."""

    value: E


@contextmanager
def raises(kind: type[E]) -> Iterator[Raised[E]]:
    """Like ``pytest.raises``, without pytest: the block must raise ``kind`` (or a
    subclass), which is caught and kept in ``.value``; any other exception passes
    through, and no exception is an ``AssertionError``."""
    raised: Raised[E] = Raised()
    try:
        yield raised
    except kind as exc:
        raised.value = exc
        return
    raise AssertionError(f"DID NOT RAISE {kind.__name__}")
