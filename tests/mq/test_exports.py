"""``sharedq.mq`` exports what it lists and stays on the ``sharedq.cf`` interface (its
errors, with every layer's, are ``tests/test_errors.py``'s)."""

from __future__ import annotations

import ast
from pathlib import Path

import sharedq
import sharedq.mq

PACKAGE = Path(sharedq.mq.__file__).parent


def test_mq_exports_what_it_lists() -> None:
    for name in sharedq.mq.__all__:
        assert hasattr(sharedq.mq, name), name
    for required in ("QueueManager", "UnitOfWork", "Message", "Queue", "MQReason", "Journal"):
        assert required in sharedq.mq.__all__


def test_mq_uses_only_the_cf_interface() -> None:
    """No module of sharedq.mq imports a backend: it runs on any of them."""
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("sharedq.cf.memory"), path.name
                assert not node.module.startswith("sharedq.cf.redis"), path.name


def test_modules_stay_small() -> None:
    for path in PACKAGE.glob("*.py"):
        assert len(path.read_text()) < 25_000, path.name
