"""sharedq's layers hold (``DESIGN.md`` §2): no module imports a layer above its own, and
no import cycle anywhere.

Every module under ``src/sharedq`` is read with :mod:`ast`, and *every* import counts:
at the top, inside functions, under ``if TYPE_CHECKING:``, in ``try`` blocks, and
``importlib.import_module`` (or ``__import__``) of a literal name.  An import only for
types is still a dependency, and a lazy import inside a function only hides a cycle
from the interpreter, not from the reader.  (A name computed at run time, as the
report job's ``import_module(f"sharedq.pipeline.jobs.{name}")``, cannot be read.)

The layers, lowest first (:data:`LAYERS`)::

    errors, clock -> cf, security -> log -> recovery -> seam -> mq, cqs -> ims -> pipeline
        -> demo -> cli

A module may import its own package (its top-level package under ``sharedq``: all of
``sharedq.cf``, backends included, is one package) and packages of lower layers.
Packages on the same layer (``mq`` and ``cqs``) are peers and import neither each
other: what both need goes below them, into the server seam.  ``seam``, ``cqs`` and
``ims`` are checked as soon as they appear; a package that is in no layer fails
until it is given one.  ``clock`` (the one ``Clock`` and the one way to wait,
``retry_until``) is a peer of ``errors`` at the bottom: every layer reads the time
and waits through it, and it imports neither ``errors`` nor anything else of sharedq.
The special cases:

* ``sharedq/__init__.py`` (the root) runs before any ``sharedq.*`` module, so it may
  import ``sharedq.errors`` only (a higher import would load a layer into every user
  of any lower one); every module may import the root (``from sharedq import
  __version__``).
* ``sharedq/__main__.py`` (``python -m sharedq``) is above ``cli``: it may import any
  package, and no module imports it.
* ``sharedq.testing`` (test seams for users' tests and ours) stands beside the order,
  above all of it: it may import any package but ``__main__``, and no other package may
  import it, so that shipping code never depends on a test seam.

A cycle is any strongly connected set of modules; for each, the test reports the
modules and the shortest cycle through each of them, with the line of every import.
An import names a module (``from a.b import c`` names ``a.b.c`` when that is a module,
else ``a.b``); the parent packages Python imports first are not counted as imports.

The checker is tried first on a small made-up package with an upward import, a peer
import, a cycle and the special cases, so that a pass means something.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from textwrap import dedent

import pytest

import sharedq

#: The layers, lowest first; a layer of several packages holds peers.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "clock", "names"),  # clock: the one Clock and retry_until; names: name rules
    ("cf", "security"),  # security: the authorization hook, on errors alone
    ("log",),
    ("recovery",),
    ("seam",),  # the server seam: what every server (mq, cqs) shares
    ("mq", "cqs"),
    ("ims",),
    ("pipeline",),
    ("demo",),
    ("cli",),
)
#: The package's root module (``__init__.py``), as a package name.
ROOT = "(root)"
MAIN = "__main__"
TESTING = "testing"

SRC = Path(sharedq.__file__).resolve().parent


# -- reading the imports -------------------------------------------------------------------


@dataclass(frozen=True)
class Edge:
    """One import: ``source`` (a module) imports ``target`` (a dotted name) at ``line``.

    ``module`` is the module ``target`` names, when it is one of the package's modules.
    """

    source: str
    target: str
    line: int
    module: str | None


@dataclass(frozen=True)
class Graph:
    """A package's modules, every import between them, and their other imports."""

    package: str
    modules: frozenset[str]
    edges: tuple[Edge, ...]
    #: Imports of anything outside the package (``module`` is ``None``).
    others: tuple[Edge, ...] = ()


def read_graph(package_dir: Path) -> Graph:
    """Every import of one package's modules (a directory; its name is the package's)."""
    package = package_dir.name
    files: dict[str, tuple[Path, bool]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        files[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    modules = frozenset(files)
    edges: list[Edge] = []
    others: list[Edge] = []
    for name, (path, is_package) in files.items():
        here = name if is_package else name.rpartition(".")[0]
        for target, line in _imports(ast.parse(path.read_text(), str(path)), here, modules):
            if target == package or target.startswith(package + "."):
                module = target if target in modules else None
                if module != name:
                    edges.append(Edge(name, target, line, module))
            else:
                others.append(Edge(name, target, line, None))
    # (one import of several names is one edge)
    return Graph(package, modules, tuple(dict.fromkeys(edges)), tuple(dict.fromkeys(others)))


def _imports(tree: ast.AST, here: str, modules: frozenset[str]) -> Iterable[tuple[str, int]]:
    """(dotted name, line) of every import anywhere in ``tree``; ``here`` is the package
    relative imports start from."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                yield (submodule if submodule in modules else module), node.lineno
        elif isinstance(node, ast.Call) and node.args:
            function = node.func
            called = function.attr if isinstance(function, ast.Attribute) else None
            if isinstance(function, ast.Name):
                called = function.id
            name = node.args[0].value if isinstance(node.args[0], ast.Constant) else None
            # (a relative name, resolved against a package given apart, is not read)
            if (
                called in ("import_module", "__import__")
                and isinstance(name, str)
                and name[:1] != "."
            ):
                yield name, node.lineno


# -- the layer order -----------------------------------------------------------------------


def package_of(module: str) -> str:
    """The top-level package under the root that ``module`` belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def layer_violations(graph: Graph, layers: Sequence[Sequence[str]] = LAYERS) -> list[str]:
    """Every import against the layer order, as ``source:line imports target: why``."""
    rank = {package: n for n, layer in enumerate(layers) for package in layer}
    found = []
    for edge in graph.edges:
        source, target = package_of(edge.source), package_of(edge.target)
        why = _why_not(source, target, rank, layers)
        if why:
            found.append(f"{edge.source}:{edge.line} imports {edge.target}: {why}")
    return found


def _why_not(
    source: str, target: str, rank: dict[str, int], layers: Sequence[Sequence[str]]
) -> str | None:
    """Why package ``source`` may not import package ``target``; ``None`` if it may."""
    bottom = layers[0][0]
    if source == target:
        return None
    if target == MAIN:
        return "nothing imports the entry point"
    if target == TESTING:
        return "only tests and test seams import the test seams"
    if source == TESTING or target == ROOT:
        return None
    if source == ROOT:
        return None if target == bottom else f"the root package may import {bottom} only"
    for package in (source, target):
        if package not in rank and package != MAIN:
            return f"package {package!r} is in no layer: place it in LAYERS (tests/test_layers.py)"
    if source == MAIN or rank[target] < rank[source]:
        return None
    if rank[target] == rank[source]:
        return f"{target} and {source} are peers on one layer; what both need goes below them"
    return f"{target} is a higher layer than {source}"


# -- cycles ----------------------------------------------------------------------------------


def import_cycles(graph: Graph) -> list[tuple[list[str], list[str]]]:
    """Each set of modules that import each other in a circle: (its modules, the
    shortest cycle through each of them as ``a:line -> b:line -> a``)."""
    lines: dict[tuple[str, str], int] = {}
    succ: dict[str, set[str]] = {m: set() for m in graph.modules}
    for edge in graph.edges:
        if edge.module is not None:
            succ[edge.source].add(edge.module)
            step = (edge.source, edge.module)
            lines[step] = min(lines.get(step, edge.line), edge.line)
    found = []
    for members in _strongly_connected(succ):
        if len(members) < 2:
            continue
        inside = set(members)
        paths: list[str] = []
        seen: set[frozenset[tuple[str, str]]] = set()
        for start in sorted(members):
            path = _shortest_cycle(start, succ, inside)
            steps = frozenset(pairwise(path))
            if steps not in seen:
                seen.add(steps)
                shown = " -> ".join(f"{a}:{lines[a, b]}" for a, b in pairwise(path))
                paths.append(f"{shown} -> {path[-1]}")
        found.append((sorted(members), paths))
    return sorted(found)


def _strongly_connected(succ: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, without recursion."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(succ):
        if root in index:
            continue
        work = [(root, iter(sorted(succ[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    found.append(component)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(succ[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def _shortest_cycle(start: str, succ: dict[str, set[str]], inside: set[str]) -> list[str]:
    """The shortest path from ``start`` back to it within ``inside`` (breadth first)."""
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(succ[node] & inside):
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if child not in came_from:
                came_from[child] = node
                queue.append(child)
    raise AssertionError(f"{start} is on no cycle")  # pragma: no cover (a component has one)


def _report(cycles: list[tuple[list[str], list[str]]]) -> str:
    return "\n".join(
        f"import cycle among {len(members)} modules: {', '.join(members)}\n    "
        + "\n    ".join(paths)
        for members, paths in cycles
    )


# -- sharedq ---------------------------------------------------------------------------------

GRAPH = read_graph(SRC)
#: Each top-level package (and module) under sharedq, the root and ``__main__`` included.
PACKAGES = sorted({package_of(module) for module in GRAPH.modules})


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_follow_the_layer_order(package: str) -> None:
    found = [
        violation
        for violation in layer_violations(GRAPH)
        if package_of(violation.partition(":")[0]) == package
    ]
    if found:
        pytest.fail("imports against the layer order:\n" + "\n".join(found), pytrace=False)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle(package: str) -> None:
    cycles = [
        (members, paths)
        for members, paths in import_cycles(GRAPH)
        if any(package_of(module) == package for module in members)
    ]
    if cycles:
        pytest.fail(_report(cycles), pytrace=False)


def test_only_the_cli_uses_click() -> None:
    """Commands and their options live in ``sharedq.cli``; the layers below are plain
    functions (the pipeline's jobs included)."""
    found = [
        f"{edge.source}:{edge.line} imports {edge.target}"
        for edge in GRAPH.others
        if edge.target.split(".")[0] == "click" and package_of(edge.source) != "cli"
    ]
    assert not found


def test_the_benchmarks_do_not_import_the_tests() -> None:
    """What benchmarks share with tests is a test seam (``sharedq.testing``), not a test
    module."""
    bench = read_graph(SRC.parent.parent / "bench")
    found = [
        f"{edge.source}:{edge.line} imports {edge.target}"
        for edge in bench.others
        if edge.target.split(".")[0] == "tests"
    ]
    assert bench.modules and not found


def test_every_package_is_read() -> None:
    """The checker sees what is there: the layers' packages and their modules."""
    assert {"errors", "clock", "cf", "log", "recovery", "pipeline", "demo", "cli"} <= set(PACKAGES)
    for module in ("sharedq.cf.redis.connection", "sharedq.recovery.pair", "sharedq.cli.main"):
        assert module in GRAPH.modules
    assert any(e.source == "sharedq.cli.main" and e.module == "sharedq" for e in GRAPH.edges)
    assert any(e.source == "sharedq.cli.walk" and e.target == "click" for e in GRAPH.others)


# -- the checker, on a package made up to break every rule ----------------------------------

TOY = {
    "__init__.py": "from toy.errors import ToyError\n",
    "__main__.py": "from toy.cli.main import main\n",
    "errors.py": "class ToyError(Exception): ...\n",
    "cf/__init__.py": "",
    "cf/api.py": """
        from typing import TYPE_CHECKING

        from toy.errors import ToyError

        if TYPE_CHECKING:
            from toy.mq.queue import Queue  # an upward import, for types only
        """,
    "mq/__init__.py": "from .queue import Queue\n",
    "mq/queue.py": """
        from toy import cf
        from toy.cf.api import ToyError
        from . import manager  # relative: toy.mq.manager

        class Queue: ...
        """,
    "mq/manager.py": """
        def open_queue():
            from .queue import Queue  # inside a function: still a cycle queue -> manager

            return Queue()
        """,
    "cqs/__init__.py": "from toy.mq import Queue  # a peer\n",
    "cli/__init__.py": "",
    "cli/main.py": """
        import toy
        import toy.mq.queue
        from toy.testing import seam  # shipping code on a test seam

        def main(): ...
        """,
    "testing/__init__.py": "",
    "testing/seam.py": "from toy.mq.manager import open_queue  # a seam may import any layer\n",
    "extra/__init__.py": "from toy.errors import ToyError\n",  # in no layer
    "cf/backend.py": """
        import importlib

        def load():
            return importlib.import_module("toy.cli.main")  # by name: still an import
        """,
}
TOY_LAYERS = (("errors",), ("cf",), ("mq", "cqs"), ("cli",))


def test_the_checker_finds_upward_imports_peers_the_special_cases_and_cycles(
    tmp_path: Path,
) -> None:
    for name, text in TOY.items():
        path = tmp_path / "toy" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dedent(text).lstrip())
    graph = read_graph(tmp_path / "toy")
    assert graph.package == "toy"
    assert graph.modules >= {"toy", "toy.__main__", "toy.mq.queue", "toy.testing.seam"}

    assert sorted(layer_violations(graph, TOY_LAYERS)) == [
        "toy.cf.api:6 imports toy.mq.queue: mq is a higher layer than cf",
        "toy.cf.backend:4 imports toy.cli.main: cli is a higher layer than cf",
        "toy.cli.main:3 imports toy.testing.seam: only tests and test seams import the test seams",
        "toy.cqs:1 imports toy.mq: mq and cqs are peers on one layer; what both need goes "
        "below them",
        "toy.extra:1 imports toy.errors: package 'extra' is in no layer: place it in LAYERS "
        "(tests/test_layers.py)",
    ]

    cycles = import_cycles(graph)
    assert cycles == [
        (
            ["toy.cf.api", "toy.mq.manager", "toy.mq.queue"],
            [
                "toy.cf.api:6 -> toy.mq.queue:2 -> toy.cf.api",
                "toy.mq.manager:2 -> toy.mq.queue:3 -> toy.mq.manager",
            ],
        ),
    ]
    report = _report(cycles)
    assert "import cycle among 3 modules" in report
    assert "toy.mq.manager:2 -> toy.mq.queue:3 -> toy.mq.manager" in report


def test_the_checker_lets_the_root_and_the_entry_point_be() -> None:
    """The root may import the bottom layer and be imported by all; ``__main__`` may
    import anything; nothing else may import ``__main__`` or a higher root import."""
    rank = {package: n for n, layer in enumerate(LAYERS) for package in layer}
    assert _why_not(ROOT, "errors", rank, LAYERS) is None
    assert _why_not("cli", ROOT, rank, LAYERS) is None
    assert _why_not("errors", ROOT, rank, LAYERS) is None  # (it would be a cycle)
    assert _why_not(MAIN, "cli", rank, LAYERS) is None
    assert _why_not(TESTING, "mq", rank, LAYERS) is None
    assert _why_not(ROOT, "cf", rank, LAYERS) == "the root package may import errors only"
    assert _why_not("cli", MAIN, rank, LAYERS) == "nothing imports the entry point"
    assert _why_not("seam", "recovery", rank, LAYERS) is None
    assert _why_not("recovery", "seam", rank, LAYERS) == "seam is a higher layer than recovery"
    assert _why_not("cqs", "ims", rank, LAYERS) == "ims is a higher layer than cqs"
