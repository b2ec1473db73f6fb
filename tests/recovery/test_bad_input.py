"""Bad input to recovery: settings, roots and pair names, refused before any file.

``RecoverySettings``, ``PairLayout``, ``check_pair`` and ``accept_loss`` each raise
``InvalidRecoveryRequest`` (``BAD_ARGUMENT``, 3501) naming the problem, and nothing is
written: not in the working directory (where an empty root would point), not above
the root (where ``..`` would), and a pair's log and its accepted losses stay as they
were.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from sharedq.cf import open_facility
from sharedq.mq import QueueManager, structure_params
from sharedq.recovery import InvalidRecoveryRequest, RecoverySettings, accept_loss, check_pair
from sharedq.recovery.layout import PairLayout


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"root": ""}, "the recovery root is empty"),
        ({"root": None}, "the recovery root must be a path, not NoneType"),
        ({"dual_log_root": ""}, "dual_log_root is empty"),
        ({"poll_seconds": math.nan}, "poll_seconds nan"),
        ({"max_wait_seconds": math.inf}, "max_wait_seconds inf"),
        ({"max_wait_seconds": 0}, "max_wait_seconds 0"),
        ({"syschkpt": True}, "syschkpt True"),
        ({"near_full_percent": 50.5}, "near_full_percent 50.5"),
        ({"durability": "fast"}, "durability 'fast' is not a Durability"),
        ({"durability": "every_commit"}, "every_record, every_commit, interval_ms=N"),
        ({"max_log_bytes": -1}, "max_bytes (-1)"),
    ],
)
def test_recovery_settings_are_checked_when_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: dict[str, Any], words: str
) -> None:
    monkeypatch.chdir(tmp_path)  # an empty root would have been here
    with pytest.raises(InvalidRecoveryRequest) as caught:
        RecoverySettings(**{"root": tmp_path / "root", **settings})
    assert caught.value.reason.name == "BAD_ARGUMENT" and caught.value.reason_code == 3501
    assert words in str(caught.value)
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def logged(tmp_path: Path) -> Path:
    """A recovery root with one pair, QSGADMIN, whose log holds a put."""
    root = tmp_path / "root"
    facility = open_facility("memory://")
    facility.create(structure_params("QSGADMIN", queues=4, managers=2, messages=100))
    with QueueManager(facility, "QM1", 1, admin="QSGADMIN", recovery=RecoverySettings(root)) as qm:
        qm.define_queue("Q")
        qm.open("Q").put(b"kept", persistent=True)
    return root


@pytest.mark.parametrize(
    ("root", "pair", "words"),
    [
        ("", "QSGADMIN", "the recovery root is empty"),
        (None, "QSGADMIN", "must be a path"),
        ("ROOT", "..", "pair name '..' names a directory"),
        ("ROOT", ".", "pair name '.' names a directory"),
        ("ROOT", "../root", "pair name '../root' starts with '.'"),
        ("ROOT", "QSGADMIN\n", "pair name 'QSGADMIN\\n' has characters not allowed"),
        ("ROOT", "QSGÄ", "outside ASCII"),
    ],
)
def test_check_and_accept_loss_refuse_a_bad_root_or_pair(
    logged: Path, monkeypatch: pytest.MonkeyPatch, root: Any, pair: str, words: str
) -> None:
    monkeypatch.chdir(logged / "QSGADMIN")  # where an empty root would look
    root = logged if root == "ROOT" else root
    before = _tree(logged.parent)
    for call in (check_pair, accept_loss):
        with pytest.raises(InvalidRecoveryRequest) as caught:
            call(root, pair)
        assert caught.value.reason.name == "BAD_ARGUMENT" and caught.value.reason_code == 3501
        assert words in str(caught.value)
    assert _tree(logged.parent) == before
    assert check_pair(logged, "QSGADMIN").gaps == []  # the pair's log is as it was


def test_a_checkpoint_file_is_named_by_a_server_name(tmp_path: Path) -> None:
    layout = PairLayout(tmp_path, "QSG1")
    assert layout.checkpoint_file("QM1") == tmp_path / "QSG1" / "checkpoints" / "QM1.json"
    for server in ("../QM1", "QM1\n", "_QM1", ""):
        with pytest.raises(InvalidRecoveryRequest) as caught:
            layout.checkpoint_file(server)
        shown = repr(server) if server else "server name is empty"
        assert shown in str(caught.value) and "server names are" in str(caught.value)
    assert list(tmp_path.iterdir()) == []
