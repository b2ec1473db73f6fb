"""Fixtures for the checkpoint and recovery tests: a group of managers that can lose
its structures for real.

``group`` runs each test once per backend:

* memory: one ``MemoryFacility``; losing a structure is ``facility.delete(name,
  force=True)``;
* redis: a private ``redis-server`` of the test's own; losing the structures is killing
  it with SIGKILL and starting it again, empty (every structure is lost).

Every manager of a test shares one recovery root (``tmp_path``) and one clock.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from sharedq.cf import CouplingFacility, open_facility
from sharedq.cf.memory import MemoryFacility
from sharedq.log import LogConfig
from sharedq.mq import QueueManager, structure_params
from sharedq.recovery import RecoverySettings
from sharedq.testing import ManualClock, SimulatedFailure
from sharedq.testing.redis_server import RedisServer

ADMIN = "RADMIN"
APP = "RAPP"
STRUCTURES = (ADMIN, APP)
#: The backends every destruction test runs on.
BACKENDS = ["memory", "redis"]
#: Small log segments, so that deletion and log-full tests see files come and go.
SMALL_LOG = LogConfig(staging_bytes=1 << 20, segment_bytes=64 << 10)


def params(name: str) -> Any:
    return structure_params(name, queues=8, managers=4, messages=3000, message_bytes=256)


@dataclass
class Group:
    """A queue-sharing group under test: its facility, recovery root and managers."""

    backend: str
    facility: CouplingFacility
    root: Path
    clock: ManualClock
    server: RedisServer | None = None
    url: str = ""
    managers: list[QueueManager] = field(default_factory=list)

    def settings(self, **overrides: Any) -> RecoverySettings:
        base = RecoverySettings(
            self.root, poll_seconds=0.05, max_wait_seconds=30, log_config=SMALL_LOG
        )
        return replace(base, **overrides)

    def start(self, qm_id: int, name: str | None = None, **options: Any) -> QueueManager:
        """A manager with a recovery log (``QM<id>`` by default)."""
        options.setdefault("recovery", self.settings())
        options.setdefault("clock", self.clock)
        qm = QueueManager(
            self.facility, name or f"QM{qm_id}", qm_id, admin=ADMIN, structures=[APP], **options
        )
        self.managers.append(qm)
        return qm

    def lose(self, *names: str) -> None:
        """Destroy structures for real: deleted (memory), or the server killed (Redis)."""
        if self.server is not None:
            self.server.restart()  # SIGKILL, then a new, empty server on the same port
        else:
            for name in names or STRUCTURES:
                self.facility.delete(name, force=True)

    def kill(self, qm: QueueManager) -> None:
        """A manager dies: its connections fail, its log writers let go, nothing more."""
        view = qm.view()
        users = {structure: view.user_id(structure) for structure in view.structures}
        qm.stop_dead()
        for structure, user_id in users.items():
            with contextlib.suppress(Exception):
                peer = self.facility.connect(structure, "KILLER")
                with peer:
                    peer.mark_failed(user_id)


@contextlib.contextmanager
def _group(backend: str, root: Path, servers: Callable[..., RedisServer] | None) -> Iterator[Group]:
    server = None
    url = ""
    if backend == "redis":
        assert servers is not None
        server = servers()
        url = f"{server.url}?lease=2&retry=2"
        facility: CouplingFacility = open_facility(url)
    else:
        facility = MemoryFacility()
    for name in STRUCTURES:
        facility.create(params(name))
    found = Group(backend, facility, root / "recovery", ManualClock(tick_s=1e-5), server, url)
    try:
        yield found
    finally:
        for qm in found.managers:
            with contextlib.suppress(Exception, SimulatedFailure):
                qm.close()
        facility.close()


@pytest.fixture(params=BACKENDS)
def group(
    request: pytest.FixtureRequest, tmp_path: Path, redis_servers: Callable[..., RedisServer]
) -> Iterator[Group]:
    """The group, once per backend."""
    with _group(request.param, tmp_path, redis_servers) as found:
        yield found


@pytest.fixture
def memory_group(tmp_path: Path) -> Iterator[Group]:
    """The group on the memory backend only (logic no backend changes)."""
    with _group("memory", tmp_path, None) as found:
        yield found


@pytest.fixture
def redis_group(tmp_path: Path, redis_servers: Callable[..., RedisServer]) -> Iterator[Group]:
    """The group on a private Redis server only (managers in processes of their own)."""
    with _group("redis", tmp_path, redis_servers) as found:
        yield found
