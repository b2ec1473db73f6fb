"""Crash tests: the victim dies at every structure request of a workload.

For each point ``k`` of the workload (every structure request, before it runs and,
for changes, after), a fresh group runs the scenario with the victim stopped dead at
``k``; a peer declares it failed and recovers it, the victim restarts and resolves
what is left, and :func:`recover_and_check` counts every message.  The same
scenarios run with managers in separate processes on Redis, killed with SIGKILL, in
``test_crash_processes.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mq.crash_harness import (
    APP,
    Scenario,
    count_points,
    recover_and_check,
    run_in_process,
)
from tests.mq.faults import CrashAt

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("seed", "held"), [(11, 0), (12, 0), (13, 0), (21, 2)])
def test_victim_killed_at_every_request(seed: int, held: int) -> None:
    """With ``held`` units prepared and left in doubt before the crash: each stays in
    doubt through peer recovery and ends as the coordinator decides at restart."""
    scenario = Scenario.generate(seed, held=held)
    total = count_points(scenario)
    assert total > 100
    outcomes = {"uncertain": 0, "decided": 0}
    for k in range(1, total + 1):
        lines, facility = run_in_process(scenario, CrashAt(k))
        try:
            verdict = recover_and_check(facility, scenario, lines)
        except AssertionError as error:
            raise AssertionError(f"seed {seed}, killed at point {k}/{total}: {error}") from None
        outcomes["uncertain"] += bool(verdict["uncertain"])
        outcomes["decided"] += len(verdict["decided"])
    assert outcomes["uncertain"] > total // 2  # most points fall inside some unit
    assert outcomes["decided"] > (total * held) // 2  # held units were in doubt


@pytest.mark.parametrize(("seed", "held"), [(11, 0), (21, 2)])
def test_batched_victim_killed_at_every_request(seed: int, held: int) -> None:
    """Units that get in batches (``get_many``: one request a queue), commit and back
    out batches: the victim dies at every request, before and after, and every message
    is counted."""
    scenario = Scenario.generate(seed, held=held, batched=True)
    total = count_points(scenario)
    assert total < count_points(Scenario.generate(seed, held=held))  # batches are fewer
    for k in range(1, total + 1):
        lines, facility = run_in_process(scenario, CrashAt(k))
        try:
            recover_and_check(facility, scenario, lines)
        except AssertionError as error:
            raise AssertionError(f"seed {seed}, killed at point {k}/{total}: {error}") from None


@pytest.mark.parametrize("victim_point", [85, 117, 260, 296, 329])
def test_peer_killed_at_every_request_of_its_recovery(victim_point: int) -> None:
    """Rolling recovery: the peer dies at each point of its recovery in turn; a second
    peer recovers both, and the count still holds.  The victim's points (seed 11) leave
    a multi-structure unit "in commit" part-done (85), a single-structure one likewise
    (117), a multi-structure descriptor set half written (260), a unit in "begin
    commit" (296), and one "in commit" with its first queue done (329).  (The points
    count requests: a get out of syncpoint became one, a take, which moved them.)"""
    scenario = Scenario.generate(11)
    lines, facility = run_in_process(scenario, CrashAt(victim_point))
    counter = CrashAt()
    recover_and_check(facility, scenario, lines, peer_faults=counter)
    total = counter.points
    assert total > 10
    for k in range(1, total + 1):
        lines, facility = run_in_process(scenario, CrashAt(victim_point))
        try:
            recover_and_check(facility, scenario, lines, peer_faults=CrashAt(k))
        except AssertionError as error:
            raise AssertionError(f"peer killed at {k}/{total}: {error}") from None


def test_workload_without_a_crash_counts_right() -> None:
    scenario = Scenario.generate(5)
    lines, facility = run_in_process(scenario, CrashAt(None))
    verdict = recover_and_check(facility, scenario, lines)
    assert verdict["uncertain"] == []


def test_check_catches_a_lost_message() -> None:
    """The count is not vacuous: a message deleted behind the managers' backs fails it."""
    scenario = Scenario.generate(6)
    lines, facility = run_in_process(scenario, CrashAt(None))
    with facility.connect(APP, "VANDAL") as vandal:
        from sharedq.mq import keys

        for number in range(1, 10):
            entry = next(iter(vandal.scan(number, keys.COMMITTED_LOW, keys.COMMITTED_HIGH)), None)
            if entry is not None:
                from sharedq.cf import ById

                vandal.delete(ById(entry.entry_id))
                break
    with pytest.raises(AssertionError, match="missing"):
        recover_and_check(facility, scenario, lines)


def test_worker_process_kills_itself_at_the_requested_request(tmp_path: Path) -> None:
    """The multi-process entry point: SIGKILL at request K, the record flushed so far."""
    record = tmp_path / "record.jsonl"
    command = [
        sys.executable,
        "-m",
        "tests.mq.crash_harness",
        "worker",
        "--facility",
        "memory://",
        "--seed",
        "7",
        "--record",
        str(record),
        "--setup",
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    complete = record.read_text().splitlines()
    record.unlink()
    killed = subprocess.run(
        [*command, "--kill-at", "60"], cwd=ROOT, capture_output=True, timeout=120
    )
    assert killed.returncode == -signal.SIGKILL
    partial = record.read_text().splitlines()
    assert 0 < len(partial) < len(complete)
    assert partial == complete[: len(partial)]
    assert os.name == "posix"
