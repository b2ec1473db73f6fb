"""Crash scenarios: a scripted workload, a record of what it was told, and the count.

The same code serves two ways of dying:

* in-process (memory backend, ``tests/mq/test_crash.py``): the victim manager runs
  the workload with a ``CrashAt(k)`` fault hook that raises ``SimulatedFailure`` at
  its k-th structure request; the manager object is abandoned, declared failed, and a
  peer recovers it;
* in separate processes (a backend shared by processes): ``python -m
  tests.mq.crash_harness worker --facility URL --seed S --record FILE [--kill-at K]``
  runs the workload in a worker that kills itself with SIGKILL at request K (or is
  killed by its parent at any moment); the parent then calls :func:`recover_and_check`
  with the same URL, seed and record file.

The worker records, in a line-buffered file, what each call returned *after* it
returned: a line is in the file only if the application saw the call succeed.  The
check then counts every message: each message put in a committed unit (or out of
syncpoint, completed) is on its queue or was gotten in a committed unit, exactly
once; nothing uncommitted is visible; the one unit the crash interrupted happened
entirely or not at all.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from sharedq.cf import HIGHEST_KEY, LOWEST_KEY, CouplingFacility, UserState, open_facility
from sharedq.mq import (
    NoMessageAvailable,
    QueueManager,
    SimulatedFailure,
    directory,
    keys,
    structure_params,
)
from sharedq.mq.messages import Decoded
from tests.mq.faults import CrashAt

ADMIN = "CRASHADM"
APP = "CRASHAPP"
#: Queues of the scenarios: two in the application structure, one in the admin one,
#: so that some units of work span two structures (a MUSE).
QUEUES = {"CQ1": APP, "CQ2": APP, "CQ3": ADMIN}
VICTIM, VICTIM_ID = "VICTIM", 1
PEER, PEER_ID = "PEER", 2
PEER2, PEER2_ID = "PEER2", 3
SETUP, SETUP_ID = "SETUP", 9


# -- the scenario --------------------------------------------------------------------------


@dataclass
class Unit:
    """One unit of work of the script: its operations, then how it ends."""

    ops: list[tuple[str, str]]  # ("put" | "get", queue)
    end: str  # "commit" | "backout" | "prepare-commit" | "prepare-backout" | "oos"


@dataclass
class Scenario:
    seed: int
    initial: int = 12
    units: list[Unit] = field(default_factory=list)

    @classmethod
    def generate(cls, seed: int, units: int = 10, big: bool = True) -> Scenario:
        rng = random.Random(seed)
        scenario = cls(seed)
        names = sorted(QUEUES)
        for n in range(units):
            if rng.random() < 0.2:
                ops = [(rng.choice(["put", "get"]), rng.choice(names))]
                scenario.units.append(Unit(ops, "oos"))
                continue
            count = 60 if big and n == units // 2 else rng.randint(1, 5)
            ops = [(rng.choice(["put", "put", "get"]), rng.choice(names)) for _ in range(count)]
            end = rng.choice(
                ["commit", "commit", "commit", "backout", "prepare-commit", "prepare-backout"]
            )
            scenario.units.append(Unit(ops, end))
        return scenario

    def body(self, unit: int, op: int) -> bytes:
        return f"s{self.seed}u{unit}o{op}".encode()


def setup_group(facility: CouplingFacility, scenario: Scenario) -> None:
    """Create the structures and queues, and put the initial messages."""
    for name in (ADMIN, APP):
        if not facility.exists(name):
            facility.create(structure_params(name, queues=8, managers=4, messages=3000))
    with QueueManager(facility, SETUP, SETUP_ID, admin=ADMIN, structures=[APP]) as qm:
        for queue, structure in sorted(QUEUES.items()):
            qm.define_queue(queue, structure=structure)
        for i in range(scenario.initial):
            queue = sorted(QUEUES)[i % len(QUEUES)]
            qm.open(queue).put(f"init{i}".encode(), priority=i % 10, persistent=i % 2 == 0)


# -- the record ------------------------------------------------------------------------------


class Recorder:
    """Appends one JSON line per event, written to the file before the next call."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def __call__(self, **event: Any) -> None:
        self._stream.write(json.dumps(event) + "\n")
        self._stream.flush()


def run_workload(qm: QueueManager, scenario: Scenario, record: Recorder) -> None:
    """Run the scenario's units on ``qm``, recording what each call returned."""
    rng = random.Random(scenario.seed + 1)
    for n, unit in enumerate(scenario.units):
        if unit.end == "oos":
            kind, name = unit.ops[0]
            queue = qm.open(name)
            if kind == "put":
                body = scenario.body(n, 0)
                record(u=n, op="oos-put-start", body=body.decode())
                queue.put(body, priority=rng.randint(0, 9), persistent=rng.random() < 0.5)
                record(u=n, op="oos-put", body=body.decode())
            else:
                record(u=n, op="oos-get-start")
                try:
                    got = queue.get()
                except NoMessageAvailable:
                    record(u=n, op="oos-none")
                else:
                    record(u=n, op="oos-get", body=got.body.decode())
            continue
        record(u=n, op="begin")
        uow = qm.unit_of_work()
        for k, (kind, name) in enumerate(unit.ops):
            queue = qm.open(name)
            if kind == "put":
                body = scenario.body(n, k)
                queue.put(body, uow=uow, priority=rng.randint(0, 9), persistent=rng.random() < 0.5)
                record(u=n, op="put", body=body.decode())
            else:
                try:
                    got = queue.get(uow=uow)
                except NoMessageAvailable:
                    continue
                record(u=n, op="get", body=got.body.decode())
        if unit.end.startswith("prepare"):
            uow.prepare()
            record(u=n, op="prepare")
        if unit.end.endswith("commit"):
            uow.commit()
            record(u=n, op="commit")
        else:
            uow.backout()
            record(u=n, op="backout")


# -- recovery and the count ---------------------------------------------------------------------


def recover_and_check(
    facility: CouplingFacility,
    scenario: Scenario,
    lines: Sequence[str],
    peer_faults: CrashAt | None = None,
) -> dict[str, Any]:
    """Recover the victim (peer, then the victim's restart), then count everything.

    With ``peer_faults`` the peer may die too while recovering; a second peer then
    recovers both (rolling recovery).  Raises ``AssertionError`` describing the first
    discrepancy; returns a summary.
    """
    try:
        peer = QueueManager(
            facility, PEER, PEER_ID, admin=ADMIN, structures=[APP], faults=peer_faults
        )
        peer.declare_failed(VICTIM)
        peer.recover(VICTIM)
        peer.close()
    except SimulatedFailure:
        with QueueManager(facility, PEER2, PEER2_ID, admin=ADMIN, structures=[APP]) as other:
            other.declare_failed(PEER)
            other.declare_failed(VICTIM)  # if the peer died before it could
            other.recover(VICTIM)
            other.recover(PEER)
    restarted = QueueManager(facility, VICTIM, VICTIM_ID, admin=ADMIN, structures=[APP])
    with restarted:
        for unit in restarted.indoubt():
            # The harness's coordinator decides commit for prepared units.
            restarted.resolve(unit.uow_id, commit=True)
        assert restarted.indoubt() == [], "in-doubt units left after resolution"
        present = _inventory(restarted)
    return check(scenario, lines, present)


def _inventory(qm: QueueManager) -> Counter[str]:
    """Every committed body on the queues; asserts nothing else is anywhere."""
    present: Counter[str] = Counter()
    for name in QUEUES:
        state = qm._state(name)
        for entry in state.acc.conn.scan(state.put_list, LOWEST_KEY, HIGHEST_KEY):
            if entry.key == keys.LHQC_KEY:
                continue
            body = entry.data[Decoded(entry.data).body_offset :].decode()
            assert keys.is_committed(entry.key), f"uncommitted {body} visible on {name}"
            present[body] += 1
    for structure, acc in qm._structures.items():
        for user in acc.conn.users():
            assert user.state is UserState.ACTIVE, f"failed user {user.name} in {structure}"
        for owner in (VICTIM_ID, PEER_ID, PEER2_ID, SETUP_ID):
            lists = directory.read_manager_lists(acc, owner)
            if lists is not None:
                left = list(acc.conn.scan(lists.get_list, LOWEST_KEY, HIGHEST_KEY))
                assert not left, f"{len(left)} messages left on manager {owner}'s get list"
    return present


def _events(lines: Sequence[str]) -> list[dict[str, Any]]:
    """The recorded events; a last line cut short by SIGKILL is dropped (a line is
    written with one system call, so only the last can be cut)."""
    events = []
    kept = [line for line in lines if line.strip()]
    for n, line in enumerate(kept):
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            if n != len(kept) - 1:
                raise
    return events


def check(scenario: Scenario, lines: Sequence[str], present: Counter[str]) -> dict[str, Any]:
    events = _events(lines)
    duplicates = [b for b, c in present.items() if c > 1]
    assert not duplicates, f"messages on a queue twice: {duplicates}"
    expected = {f"init{i}" for i in range(scenario.initial)}
    per_unit: dict[int, dict[str, Any]] = {}
    for event in events:
        unit = per_unit.setdefault(event["u"], {"puts": set(), "gets": set(), "end": None})
        op = event["op"]
        if op in ("put", "get"):
            unit[op + "s"].add(event["body"])
        elif op in ("commit", "backout"):
            unit["end"] = op
        elif op == "oos-put":
            unit["puts"].add(event["body"])
            unit["end"] = "commit"
        elif op == "oos-get":
            unit["gets"].add(event["body"])
            unit["end"] = "commit"
        elif op == "oos-none":
            unit["end"] = "commit"
        elif op == "oos-put-start":
            unit["maybe_put"] = event["body"]
    uncertain = [n for n, u in per_unit.items() if u["end"] is None]
    assert len(uncertain) <= 1, f"more than one unit interrupted: {uncertain}"
    consumed: set[str] = set()
    for unit in per_unit.values():
        if unit["end"] == "commit":
            expected |= unit["puts"]
            consumed |= unit["gets"]
    assert not consumed & set(present), f"gotten and still there: {consumed & set(present)}"
    settled = expected - consumed
    outcomes: list[set[str]] = [settled]
    if uncertain:
        unit = per_unit[uncertain[0]]
        maybe = unit["puts"] | ({unit["maybe_put"]} if "maybe_put" in unit else set())
        outcomes.append((settled | maybe) - unit["gets"])
        # An interrupted get out of syncpoint may or may not have taken a message;
        # which one is unknown, so allow any single one of the settled to be gone.
        if unit.get("maybe_put") is None and not unit["puts"] and not unit["gets"]:
            outcomes.extend(settled - {gone} for gone in settled)
    got = set(present)
    assert got in outcomes, (
        f"unit {uncertain} neither all nor nothing: missing {sorted(settled - got)}, "
        f"unexpected {sorted(got - settled)}"
    )
    return {"present": len(got), "consumed": len(consumed), "uncertain": uncertain}


# -- the worker process ---------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run a crash scenario's workload")
    parser.add_argument("command", choices=["worker"])
    parser.add_argument("--facility", required=True, help="facility URL")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--record", type=Path, required=True, help="the record file")
    parser.add_argument("--kill-at", type=int, help="SIGKILL this process at request K")
    parser.add_argument("--setup", action="store_true", help="create structures and queues")
    args = parser.parse_args(argv)
    scenario = Scenario.generate(args.seed)
    facility = open_facility(args.facility)
    if args.setup:
        setup_group(facility, scenario)
    hook = CrashAt(args.kill_at, kill=True) if args.kill_at else None
    with args.record.open("a", buffering=1) as stream:
        qm = QueueManager(facility, VICTIM, VICTIM_ID, admin=ADMIN, structures=[APP], faults=hook)
        run_workload(qm, scenario, Recorder(stream))
        qm.close()
    return 0


def record_lines(path: Path) -> Iterator[str]:
    yield from path.read_text().splitlines()


if __name__ == "__main__":
    sys.exit(main())
