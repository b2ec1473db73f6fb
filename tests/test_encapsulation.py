"""Nothing reaches into another object's private attributes from outside.

A private attribute (``obj._name``) is its class's business: a caller that sets one
(the demo once stopped a manager dead by setting its ``_closed``) or a test or benchmark
that reads one (``qm._state``) breaks when the class is reshaped, and hides that the
public API lacks something.  So:

* no module of ``src``, ``bench`` or ``tests`` assigns to a private attribute of
  anything but ``self`` or ``cls``;
* ``bench`` and ``tests`` read no private attribute of anything but ``self`` or
  ``cls``, apart from the public API that happens to start with ``_``: named tuples'
  ``_fields`` and ``_replace``, ``os._exit`` (a child process dying as if killed) and
  ``sys._current_frames``.

Inside ``src`` a class's own package may read its private attributes (a reader and its
plan, a client and its connection epochs); the layer test keeps other packages away
from all but public modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Names that start with ``_`` and are public API all the same.
PUBLIC_ANYWAY = frozenset({"_fields", "_replace", "_asdict", "_make", "_exit", "_current_frames"})


def private_reaches(source: str, *, reads: bool) -> list[str]:
    """``obj._name`` uses in ``source`` on anything but ``self``/``cls``: every store,
    and with ``reads`` every load too (``line: expression``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or name.startswith("__") or name in PUBLIC_ANYWAY:
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        if isinstance(node.ctx, ast.Store | ast.Del) or reads:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def _scan(folder: str, *, reads: bool) -> dict[str, list[str]]:
    found = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        hits = private_reaches(path.read_text(encoding="utf-8"), reads=reads)
        if hits:
            found[str(path.relative_to(ROOT))] = hits
    return found


def test_no_module_sets_another_objects_private_attributes() -> None:
    for folder in ("src", "bench", "tests"):
        assert _scan(folder, reads=False) == {}, folder


def test_tests_and_benchmarks_read_no_private_attributes() -> None:
    for folder in ("bench", "tests"):
        assert _scan(folder, reads=True) == {}, folder


def test_the_checker_finds_what_it_must_and_lets_the_rest_be() -> None:
    source = (
        "qm._closed = True\n"  # a store from outside: found
        "x = qm._state('Q')\n"  # a read from outside: found with reads
        "self._seen = 1\n"  # the object's own: let be
        "row = rec._replace(a=1)\n"  # named tuple API: let be
        "y = qm.__class__\n"  # dunder: let be
    )
    assert private_reaches(source, reads=False) == ["1: qm._closed"]
    assert private_reaches(source, reads=True) == ["1: qm._closed", "2: qm._state"]
