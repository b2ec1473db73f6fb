"""``sharedq.security`` exports what it lists, and stands on ``sharedq.errors`` alone, so
that every server (the queue manager, the Common Queue Server) can use it."""

from __future__ import annotations

import ast
from pathlib import Path

import sharedq.security


def test_security_exports_what_it_lists() -> None:
    for name in sharedq.security.__all__:
        assert hasattr(sharedq.security, name), name
    for required in ("Authorizer", "FileProfiles", "SecuritySettings", "ALLOW_ALL", "Access"):
        assert required in sharedq.security.__all__


def test_security_imports_nothing_of_sharedq_but_errors() -> None:
    for path in Path(sharedq.security.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                module = node.module
                if module.startswith("sharedq"):
                    assert module.startswith(("sharedq.security", "sharedq.errors")), path.name
