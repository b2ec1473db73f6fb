"""Bad input to the log: names, durability settings, an empty directory.

Each is ``InvalidLogRequest`` with its reason (``BAD_NAME``, ``BAD_CONFIG``,
``BAD_ARGUMENT``) and a message naming the problem, raised before anything is written:
the records a stream held before are all still there, and nothing appears where an
empty or escaping name would have put it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sharedq.log import (
    Durability,
    DurabilityMode,
    InvalidLogRequest,
    LogConfig,
    LogStream,
)

from .helpers import MakeStream, three_puts

KNOWN = "every_record, every_commit, interval_ms=N, duplex_ms=N or duplex_ms=N,replicas=R"


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize(
    ("writer", "structure", "words"),
    [
        ("../QM1", None, "writer name '../QM1' starts with '.'"),
        ("QM1\n", None, "writer name 'QM1\\n' has characters not allowed"),
        ("QM/1", None, "not allowed: '/'"),
        ("ÄQM", None, "outside ASCII"),
        ("_QM1", None, "starts with '_'"),
        ("QM2", "..", "structure name '..' names a directory"),
        ("QM2", "S1\n", "structure name 'S1\\n'"),
    ],
)
def test_a_bad_writer_or_structure_name_writes_nothing(
    make_stream: MakeStream, tmp_path: Path, writer: str, structure: str | None, words: str
) -> None:
    stream = three_puts(make_stream)
    before = _tree(tmp_path)
    with pytest.raises(InvalidLogRequest) as info:
        stream.writer(writer, structure=structure)
    assert info.value.reason.name == "BAD_NAME" and info.value.reason_code == 3003
    assert words in str(info.value)
    assert _tree(tmp_path) == before
    assert [r.data for r in stream.records()] == [b"kept"] * 3


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: Durability.parse("fast"), "durability 'fast' is not one of"),
        (lambda: Durability.parse("interval_ms=0"), "interval_ms >= 1"),
        (lambda: Durability.parse(None), "durability is a name"),
        (lambda: Durability("every_record"), "durability mode 'every_record' is not one of"),
        (lambda: Durability(DurabilityMode.EVERY_RECORD, 5), "interval_ms applies only"),
        (lambda: LogConfig(durability="every_commit"), "durability must be a Durability"),
    ],
)
def test_an_unknown_durability_is_refused_with_the_names_it_could_be(make: Any, words: str) -> None:
    with pytest.raises(InvalidLogRequest) as info:
        make()
    assert info.value.reason.name == "BAD_CONFIG" and info.value.reason_code == 3001
    assert words in str(info.value)


def test_the_known_names_are_listed() -> None:
    for name in ("fast", "sometimes", "every-commit"):
        with pytest.raises(InvalidLogRequest) as info:
            Durability.parse(name)
        assert KNOWN in str(info.value)
    assert Durability.parse(" EVERY_COMMIT ") == Durability.every_commit()


def test_an_empty_directory_is_not_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidLogRequest) as info:
        LogStream("", name="S1.LOG")
    assert info.value.reason.name == "BAD_ARGUMENT" and info.value.reason_code == 3004
    assert "directory is empty" in str(info.value)
    assert list(tmp_path.iterdir()) == []
