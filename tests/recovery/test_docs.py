"""The example in docs/recovery.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "block", re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "recovery.md").read_text(), re.S)
)
def test_example_runs(block: str, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(block, "<example>", "exec"), {})
    assert "b'order 1'" in capsys.readouterr().out
