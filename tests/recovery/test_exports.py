"""``sharedq.recovery`` exports what it lists; its modules stay small and never reach
into a backend (its errors, with every layer's, are ``tests/test_errors.py``'s)."""

from __future__ import annotations

import ast
from pathlib import Path

import sharedq
import sharedq.recovery

PACKAGE = Path(sharedq.recovery.__file__).parent


def test_recovery_exports_what_it_lists() -> None:
    for name in sharedq.recovery.__all__:
        assert hasattr(sharedq.recovery, name), name
    for required in (
        "PairRecovery",
        "RecoverySettings",
        "RecoveryClient",
        "CheckpointResult",
        "replay",
        "apply_record",
        "ReplayResult",
    ):
        assert required in sharedq.recovery.__all__


def test_modules_stay_small_and_on_the_cf_interface() -> None:
    """Small modules that never reach into a backend (the layer order, and so no import
    of ``sharedq.mq``, is ``tests/test_layers.py``'s)."""
    for path in PACKAGE.glob("*.py"):
        assert len(path.read_text()) < 25_000, path.name
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(("sharedq.cf.memory", "sharedq.cf.redis"))
