"""The example in docs/recovery.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _runnable_blocks() -> list[str]:
    """The page's python blocks but those marked as excerpts (tests/test_doc_blocks.py)."""
    text = (ROOT / "docs" / "recovery.md").read_text()
    return re.findall(r"(?<!<!-- excerpt -->\n)```python\n(.*?)```", text, re.S)


@pytest.mark.parametrize("block", _runnable_blocks())
def test_example_runs(block: str, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(block, "<example>", "exec"), {})
    assert "b'order 1'" in capsys.readouterr().out
