"""A queue manager under duplex durability, its machine crashed and its structures
lost, for real.

QM1 (a process of its own, ``duplex_workers.put_and_die``) logs under
``Durability.duplex``: each commit returns once its records are written to the
segment (the page cache) and pushed to the logging structure, Redis B; the sync
interval is longer than the test, so only segment rolls sync and each structure's log
ends in records that were only pushed.  Its workload: persistent puts, a structure
checkpoint, units of work across both structures, one backed out, committed gets.  It
is SIGKILLed, then the test plays the machine crash that would follow: every byte of
both logs' segments after the last synced record reads as zeros, and the machine's
boot id changes.  Redis A, which held both structures, is SIGKILLed and started
empty.  A manager connecting (QM1 again: its log writers, reopening, copy back; or
its peer QM2: its read of the logs copies back for the dead writer) rebuilds both
structures from the SRDS and the logs; the test compares them object for object with
what QM1 left, and counts every message: each committed put is there exactly once,
nothing gotten or backed out reappears.

(The CQS's tests, ``tests/cqs/test_duplex.py``, also play the losses the logging
structure reports and refuses: both copies lost, the logging structure down.)
"""

from __future__ import annotations

import json
import multiprocessing
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sharedq.cf import CouplingFacility, open_facility
from sharedq.mq import QueueManager
from sharedq.recovery import PairLayout
from sharedq.testing.redis_server import RedisServer
from tests.cqs.test_duplex import crash_machine
from tests.mq.helpers import drain
from tests.recovery.helpers import snapshot

from . import duplex_workers as doomed
from .duplex_workers import ADMIN, APP, GOTTEN, NOTES, ORDERS, PUTS, STRUCTURES, UNITS


@dataclass
class Rig:
    """Redis A (the structures), Redis B (the logging structure), the recovery root
    and this test's machine (its boot id file)."""

    structures: RedisServer
    logging: RedisServer
    facility: CouplingFacility
    url: str
    root: Path
    boot: Path

    def manager(self, qm_id: int) -> QueueManager:
        settings = doomed.settings(self.root, self.logging.url)
        return QueueManager(
            self.facility, f"QM{qm_id}", qm_id, admin=ADMIN, structures=[APP], recovery=settings
        )


@pytest.fixture
def rig(
    redis_servers: Callable[..., RedisServer],
    tmp_path: Path,
    boot: Path,
) -> Iterator[Rig]:
    """Two private Redis servers, both structures on A, and the machine's boot id file
    (this process's and the doomed manager's)."""
    structures, logging = redis_servers(), redis_servers()
    url = f"{structures.url}?lease=2&retry=2"
    facility = open_facility(url)
    for name in STRUCTURES:
        facility.create(doomed.structure_params(name))
    yield Rig(structures, logging, facility, url, tmp_path / "recovery", boot)
    facility.close()


def run_doomed(rig: Rig) -> dict[str, dict[str, int]]:
    """QM1's life to its SIGKILL; where each of its log writers stood when it died."""
    report = rig.root.parent / "doomed.json"
    process = multiprocessing.get_context("spawn").Process(
        target=doomed.put_and_die,
        args=(rig.url, str(rig.root), rig.logging.url, str(rig.boot), str(report)),
    )
    process.start()
    process.join(timeout=120)
    assert process.exitcode == -signal.SIGKILL
    where: dict[str, dict[str, int]] = json.loads(report.read_text())
    return where


def committed() -> dict[str, list[bytes]]:
    """Each queue's messages, in order, as QM1 left them: its orders less the ones it
    got, its units' orders and notes; nothing of the unit it backed out."""
    return {
        ORDERS: [doomed.order(n) for n in range(GOTTEN, PUTS)]
        + [doomed.unit_order(n) for n in range(UNITS)],
        NOTES: [doomed.note(n) for n in range(UNITS)],
    }


@pytest.mark.parametrize("recoverer", [1, 2])
def test_a_machine_crash_and_lost_structures_lose_no_committed_message(
    rig: Rig, recoverer: int
) -> None:
    where = run_doomed(rig)
    before = snapshot(rig.facility, STRUCTURES)
    for structure in STRUCTURES:
        durable, last = where[structure]["durable"], where[structure]["last"]
        assert 0 < durable < last  # rolled and synced; the tail only pushed
        log = PairLayout(rig.root, structure).log
        assert crash_machine(log, durable, rig.boot) == last - durable
    rig.structures.restart()  # SIGKILL, and back empty: both structures are lost
    assert not any(rig.facility.exists(name) for name in STRUCTURES)

    qm = rig.manager(recoverer)
    try:
        assert qm.recovery_log is not None
        outcomes = {
            o.structure: o for pair in qm.recovery_log.pairs.values() for o in pair.outcomes
        }
        assert {name: outcomes[name].action for name in STRUCTURES} == {
            ADMIN: "recovered-from-log",  # no checkpoint of it: its log alone
            APP: "recovered",  # the SRDS, then the log after it
        }
        for outcome in outcomes.values():
            assert outcome.log is not None and outcome.log.clean and not outcome.log.lost
        expected = committed()
        assert {q: [m.body for m in qm.open(q).browser()] for q in expected} == expected
        after = snapshot(rig.facility, STRUCTURES)
        for name in STRUCTURES:  # object for object, but for a peer's own registration
            known = {e.entry_id for entries in before[name].lists.values() for e in entries}
            assert after[name].only(known) == before[name]
            newcomers = [
                (number, e) for number, entries in after[name].lists.items()
                for e in entries if e.entry_id not in known
            ]  # fmt: skip
            assert all(number == 0 and b"QM2" in e.data for number, e in newcomers)
            assert bool(newcomers) is (recoverer == 2)
        assert {q: [m.body for m in drain(qm, q)] for q in expected} == expected
    finally:
        qm.close()
