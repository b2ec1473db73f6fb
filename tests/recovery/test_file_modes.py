"""Everything sharedq writes under a recovery root is its owner's only: files 0600,
directories 0700, whatever the umask.

The root holds every persistent message body (staging segments, log data sets), every
structure's contents (SRDS) and what recovery trusts (state files, checkpoints).  The
test runs under umask 000, where a file made with the default mode would be
world-writable, and walks both log roots after a group has done all it writes files
for: work, structure and system checkpoints, log deletion, offload to data sets and a
structure copy (``tests/log/test_file_modes.py`` sets a torn segment tail aside).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from sharedq.log.layout import WRITER_STATE_FILE
from sharedq.mq import QueueManager
from sharedq.testing import files as files_private

from .conftest import ADMIN, APP, Group, params


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    with files_private.permissive_umask():
        yield


def modes(root: Path) -> dict[str, str]:
    """Every path under ``root`` whose mode is not the owner's only."""
    return files_private.not_private(root, relative_to=root.parent)


def files(root: Path) -> set[str]:
    return {name for _, _, names in os.walk(root) for name in names}


def work(qm: QueueManager, count: int) -> None:
    orders = qm.open("ORDERS")
    for n in range(count):
        orders.put(b"x" * 2000 + str(n).encode(), persistent=True)
    with qm.unit_of_work() as uow:
        for _ in range(count // 2):
            orders.get(uow=uow)


def test_every_file_is_0600_and_every_directory_0700(
    memory_group: Group, tmp_path: Path, permissive_umask: None
) -> None:
    group = memory_group
    dual = tmp_path / "dual"
    settings = group.settings(dual_log_root=dual, strchkpt=None)
    qm1 = group.start(1, recovery=settings)
    qm2 = group.start(2, recovery=settings)
    qm1.define_queue("ORDERS", structure=APP)
    work(qm1, 40)
    work(qm2, 40)
    qm1.checkpoint()
    qm2.system_checkpoint()
    work(qm2, 40)
    qm2.checkpoint()  # the second SRDS slot; the log behind both is deleted
    for pair in qm1.recovery_log.pairs.values() if qm1.recovery_log else ():
        assert pair.writer is not None
        pair.writer.offload()  # log data sets
    qm1.copy_structure(params(APP))
    work(qm1, 10)

    written = files(group.root) | files(dual)
    for expected in (
        "STREAM",
        "RETENTION",
        WRITER_STATE_FILE,
        ".lock",
        "SRDS1.parquet",
        "SRDS2.parquet",
        "QM1.json",
        "RECOVERY.lock",
    ):
        assert expected in written, expected
    assert any(name.endswith(".parquet") and ".L" in name for name in written)  # data sets
    assert any(name.endswith(".seg") for name in written)
    assert modes(group.root) == {}
    assert modes(dual) == {}
    assert ADMIN in {p.name for p in group.root.iterdir()}


def test_a_root_the_operator_made_keeps_its_mode(
    memory_group: Group, permissive_umask: None
) -> None:
    """What exists already is the operator's: only what sharedq makes is narrowed."""
    group = memory_group
    group.root.mkdir(mode=0o750)
    os.chmod(group.root, 0o750)
    qm = group.start(1)
    qm.define_queue("ORDERS")
    work(qm, 4)
    qm.checkpoint()
    assert stat.S_IMODE(group.root.stat().st_mode) == 0o750
    inside = modes(group.root)
    assert inside == {"recovery": "0750 (want 0700)"}
