"""One rule per kind of name (:mod:`sharedq.names`), and every layer applying it alike.

The rules are checked on their own first (full match, ASCII, no ``.``/``..``, the
reserved ``SYSTEM.`` prefix), then through each layer that takes a name of the kind:
what the rule accepts every layer accepts, and what it refuses every layer refuses
with its own bad-argument error and the rule's own words.  Every name the tests, the
docs and the demo use is kept valid.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sharedq import names
from sharedq.cf import InvalidRequest, StructureParams
from sharedq.cf.params import validate_params
from sharedq.log import InvalidLogRequest, LogStream
from sharedq.log.layout import check_writer_name
from sharedq.recovery import InvalidRecoveryRequest
from sharedq.recovery.layout import PairLayout

ROOT = Path(__file__).resolve().parents[1]

#: Names the code, tests and docs use, by kind: they stay valid.
IN_USE = {
    names.STRUCTURE: [
        "QSG1",
        "QSGADMIN",
        "APP1",
        "APP2",
        "TINY",
        "SMAPP",
        "BENCH",
        "WALK",
        "CADMIN",
        "CAPP",
        "QSG1MSGQ",
        "REBUILT",
        "GOOD",
        "ONCE",
        "T1",
        "SM12",
        "X",
        "S1.LOG",
        "Q#1",
        "$SYS",
        "@A",
        "a.b",
    ],
    names.SERVER: ["QM1", "QM254", "BENCH3", "C1", "BQM", "OTHER", "QM1.RESTART", "w-1", "a@b$c"],
    names.QUEUE: ["Q", "ORDERS", "Q2", "BYCORREL", "APP.IN/1", "%x", "_Q", "SYSTEM.COLD.QUEUE"],
    names.STREAM: ["S1.LOG", "QSGADMIN.LOG", "QSG1.MSGQ.LOG", "BENCH.LOG", "OTHER"],
}

#: Names no rule accepts, and a word of what each rule says of them.
REFUSED_BY_ALL = {
    ".": "names a directory",
    "..": "names a directory",
    "": "is empty",
    "QM1\n": "not allowed: '\\n'",
    "QM 1": "not allowed: ' '",
    "ÄPP": "outside ASCII",
    "APP1ﬁ": "outside ASCII",  # NFKC would make it APP1fi
    "../x": "starts with '.'",
    "x\x00": "not allowed: '\\x00'",
}


@pytest.mark.parametrize(
    "rule", [names.STRUCTURE, names.SERVER, names.QUEUE, names.STREAM], ids=lambda r: r.kind
)
def test_names_in_use_are_valid(rule: names.NameRule) -> None:
    for name in IN_USE[rule]:
        assert rule.problem(name) is None, name


@pytest.mark.parametrize(
    "rule", [names.STRUCTURE, names.SERVER, names.QUEUE, names.STREAM], ids=lambda r: r.kind
)
@pytest.mark.parametrize("name", sorted(REFUSED_BY_ALL))
def test_what_no_rule_accepts_is_named(rule: names.NameRule, name: str) -> None:
    if rule is names.QUEUE and name == "../x":
        # MQ object names may hold '.' and '/', and may start with either: a queue
        # name is never a path.  It is refused for its '..' elsewhere, not here.
        assert rule.problem(name) is None
        return
    problem = rule.problem(name)
    assert problem is not None
    assert REFUSED_BY_ALL[name] in problem, problem
    assert problem.startswith(f"{rule.kind} ")
    assert f"{rule.kind}s are {rule.described}" in problem


def test_a_name_is_a_string() -> None:
    for rule in (names.STRUCTURE, names.SERVER, names.QUEUE, names.STREAM):
        assert rule.problem(None) == (
            f"{rule.kind} must be a string, not NoneType; {rule.kind}s are {rule.described}"
        )
        assert rule.problem(b"QM1") is not None


def test_lengths() -> None:
    assert names.STRUCTURE.is_valid("Q" * 16) and not names.STRUCTURE.is_valid("Q" * 17)
    assert names.SERVER.is_valid("Q" * 48) and not names.SERVER.is_valid("Q" * 49)
    assert names.QUEUE.is_valid("Q" * 48) and not names.QUEUE.is_valid("Q" * 49)
    assert names.STREAM.is_valid("Q" * 64) and not names.STREAM.is_valid("Q" * 65)
    assert "has 17 characters, more than 16" in str(names.STRUCTURE.problem("Q" * 17))


def test_first_characters() -> None:
    # Spark skips files named _x or .x: no server (log writer) name starts so.
    for name in ("_QM1", ".QM1", "-QM1", "$QM1"):
        assert not names.SERVER.is_valid(name), name
    assert names.STRUCTURE.is_valid("$QM1") and not names.STRUCTURE.is_valid("_QM1")


def test_the_system_prefix_is_reserved_for_what_is_defined() -> None:
    assert names.QUEUE.is_valid("SYSTEM.COLD.QUEUE")  # a filter may name it
    problem = names.QUEUE.problem("SYSTEM.COLD.QUEUE", new=True)
    assert problem is not None and "SYSTEM." in problem and "cannot be defined" in problem
    assert names.QUEUE.problem("SYSTEM.ANYTHING", new=True) is not None
    assert names.QUEUE.problem("SYSTEMS.Q", new=True) is None  # only the prefix with its dot


def test_kind_can_be_named_by_the_caller() -> None:
    problem = names.SERVER.problem("../x", kind="queue-manager name")
    assert problem is not None and problem.startswith("queue-manager name '../x'")


@given(st.text(max_size=20))
def test_the_checks_are_the_pattern(text: str) -> None:
    """Whatever the messages say, acceptance is exactly a full match of the pattern."""
    for rule in (names.STRUCTURE, names.SERVER, names.QUEUE, names.STREAM):
        matched = rule.pattern.fullmatch(text) is not None and text not in (".", "..")
        assert rule.is_valid(text) == matched, (rule.kind, text)
        assert rule.pattern.fullmatch(text + "\n") is None  # fullmatch, not match


# -- every layer asks the same rule --------------------------------------------------------


def _cf_accepts(name: str) -> bool:
    try:
        validate_params(StructureParams(name, list_count=2, size=100_000))
    except InvalidRequest as exc:
        assert exc.reason.name == "BAD_STRUCTURE_PARAMS"
        assert exc.detail == names.STRUCTURE.problem(name)
        return False
    return True


def _pair_accepts(name: str, root: Path) -> bool:
    try:
        PairLayout(root, name)
    except InvalidRecoveryRequest as exc:
        assert exc.reason.name == "BAD_ARGUMENT"
        assert exc.detail == names.STRUCTURE.problem(name, kind="pair name")
        return False
    return True


def _checkpoint_accepts(name: str, root: Path) -> bool:
    try:
        PairLayout(root, "QSG1").checkpoint_file(name)
    except InvalidRecoveryRequest as exc:
        assert exc.detail == names.SERVER.problem(name)
        return False
    return True


def _writer_accepts(name: str) -> bool:
    try:
        check_writer_name(name)
    except InvalidLogRequest as exc:
        assert exc.reason.name == "BAD_NAME"
        assert exc.detail == names.SERVER.problem(name, kind="writer name")
        return False
    return True


CANDIDATES = sorted(
    {*REFUSED_BY_ALL, *(n for group in IN_USE.values() for n in group), "Q" * 17, "_X", "x#y"}
)


@pytest.mark.parametrize("name", CANDIDATES)
def test_structures_and_pairs_take_the_same_names(name: str, tmp_path: Path) -> None:
    expected = names.STRUCTURE.is_valid(name)
    assert _cf_accepts(name) == expected
    assert _pair_accepts(name, tmp_path) == expected
    assert not (tmp_path.parent / "srds").exists()  # nothing written above the root


@pytest.mark.parametrize("name", CANDIDATES)
def test_writers_and_checkpoint_files_take_the_same_names(name: str, tmp_path: Path) -> None:
    expected = names.SERVER.is_valid(name)
    assert _writer_accepts(name) == expected
    assert _checkpoint_accepts(name, tmp_path) == expected


def test_a_stream_refuses_bad_names_before_it_writes(tmp_path: Path) -> None:
    for name, structure in (("..", None), ("S1.LOG\n", None), ("S1.LOG", ".."), ("S1.LOG", "Ä")):
        with pytest.raises(InvalidLogRequest) as info:
            LogStream(tmp_path / "log", name=name, structure=structure)
        assert info.value.reason.name == "BAD_NAME"
        assert repr(name if structure is None else structure) in info.value.detail
    assert not (tmp_path / "log").exists()


def test_the_docs_state_the_rules() -> None:
    """docs/list-structures.md and docs/queue-manager.md say what the rules say."""
    structures = (ROOT / "docs" / "list-structures.md").read_text()
    managers = (ROOT / "docs" / "queue-manager.md").read_text()
    for rule, text in (
        (names.STRUCTURE, structures),
        (names.STRUCTURE, managers),
        (names.SERVER, managers),
        (names.QUEUE, managers),
    ):
        assert re.sub(r"\s+", " ", rule.described) in re.sub(r"\s+", " ", text), rule.kind
