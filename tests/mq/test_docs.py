"""The examples in docs/queue-manager.md and the README run as written, and print
the order they put.  (Those that name a Redis server, ``redis.example.com``, run in
tests/test_doc_blocks.py, which gives them a private one.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _python_blocks(path: Path) -> list[str]:
    found = re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)
    return [block for block in found if "redis.example.com" not in block]


@pytest.mark.parametrize(
    "block",
    [b for b in _python_blocks(ROOT / "README.md") if "sharedq.mq" in b]
    + _python_blocks(ROOT / "docs" / "queue-manager.md"),
)
def test_example_runs(block: str, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(block, "<example>", "exec"), {})
    assert "order 1" in capsys.readouterr().out
