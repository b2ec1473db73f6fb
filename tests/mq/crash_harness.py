"""Crash scenarios: a scripted workload, a record of what it was told, and the count.

The same code serves two ways of dying:

* in-process (memory backend, ``tests/mq/test_crash.py``): the victim manager runs
  the workload with a ``CrashAt(k)`` fault hook that raises ``SimulatedFailure`` at
  its k-th structure request; the manager object is abandoned, declared failed, and a
  peer recovers it;
* in separate processes (Redis, ``tests/mq/test_crash_processes.py``): ``python -m
  tests.mq.crash_harness worker --facility URL --seed S --record FILE [--kill-at K]``
  runs the workload in a process that kills itself with SIGKILL at request K (or is
  killed by its parent at any moment); ``peer`` and ``restart`` run the recovering
  peer and the victim's next incarnation as processes too.

Each scenario's structures are named after its *group* (``CRASHADM<group>``), so
that many scenarios can share one server.

The worker records, in a line-buffered file, what each call returned *after* it
returned: a line is in the file only if the application saw the call succeed.  Before
a unit's first ending call it records the unit's id, so that units of work left in
doubt can be matched to the script.  After the crash, :func:`inspect` reads what the
victim's descriptors say (before anyone recovers), the peer recovers, the victim's
next incarnation resolves its prepared units as the script's coordinator decides, and
:func:`check` counts every message: each message put in a committed unit (or out of
syncpoint, completed) is on its queue or was gotten in a committed unit, exactly
once; nothing uncommitted is visible; a unit left in doubt ends as decided; the one
unit the crash interrupted otherwise happened entirely or not at all.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TextIO

from sharedq.cf import CouplingFacility, UserState, open_facility
from sharedq.mq import (
    ConfigurationError,
    InDoubtUnit,
    MQReason,
    NoMessageAvailable,
    QueueManager,
    directory,
    keys,
    structure_params,
)
from sharedq.mq import descriptors as d
from sharedq.mq.errors import journal_failed
from sharedq.mq.messages import Decoded
from sharedq.seam import Journal, StructureAccess
from sharedq.testing import SimulatedFailure
from tests.mq.faults import CrashAt

ADMIN = "CRASHADM"
APP = "CRASHAPP"
#: Queues of the scenarios: two in the application structure, one in the admin one,
#: so that some units of work span two structures (a MUSE).
QUEUES = {"CQ1": "app", "CQ2": "app", "CQ3": "admin"}
VICTIM, VICTIM_ID = "VICTIM", 1
PEER, PEER_ID = "PEER", 2
PEER2, PEER2_ID = "PEER2", 3
AUDIT, AUDIT_ID = "AUDIT", 4
SETUP, SETUP_ID = "SETUP", 9
#: Seconds to wait for a dead manager's connections to fail (a hang guard only).
DETECTION_LIMIT = 120.0


# -- the scenario --------------------------------------------------------------------------


@dataclass
class Unit:
    """One unit of work of the script: its operations, then how it ends."""

    ops: list[tuple[str, str]]  # ("put" | "get", queue)
    #: "commit" | "backout" | "prepare-commit" | "prepare-backout" | "oos", or
    #: "hold-commit" | "hold-backout": prepared, then left for the coordinator, whose
    #: decision the victim's next incarnation applies.
    end: str

    @property
    def decision(self) -> str:
        """The coordinator's decision for the unit once prepared."""
        return "commit" if self.end.endswith("commit") else "backout"


@dataclass
class Scenario:
    seed: int
    initial: int = 12
    units: list[Unit] = field(default_factory=list)
    group: str = ""
    held: int = 0
    #: A unit puts to a queue with one ``put_many`` and gets from it with one
    #: ``get_many`` (the first put or get of the queue in the unit does as many as the
    #: unit does there), so that commits and backouts carry batches.
    batched: bool = False

    @classmethod
    def generate(
        cls,
        seed: int,
        units: int = 10,
        big: bool = True,
        held: int = 0,
        group: str = "",
        batched: bool = False,
    ) -> Scenario:
        """``held`` units of work are prepared and left in doubt for the coordinator."""
        rng = random.Random(seed)
        scenario = cls(seed, group=group, held=held, batched=batched)
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
        # A separate generator, so that a scenario with held units differs from the
        # one without only in those units' ends.
        pick = random.Random(seed + 7919)
        candidates = [n for n, unit in enumerate(scenario.units) if unit.end != "oos"]
        for n in pick.sample(candidates, min(held, len(candidates))):
            scenario.units[n].end = pick.choice(["hold-commit", "hold-backout"])
        return scenario

    @property
    def admin(self) -> str:
        return ADMIN + self.group

    @property
    def app(self) -> str:
        return APP + self.group

    def structure(self, queue: str) -> str:
        return self.admin if QUEUES[queue] == "admin" else self.app

    def args(self) -> list[str]:
        """The worker arguments that make this scenario again in another process."""
        return [
            *("--seed", str(self.seed), "--units", str(len(self.units))),
            *("--held", str(self.held), "--group", self.group),
            *(["--batched"] if self.batched else []),
        ]

    def body(self, unit: int, op: int) -> bytes:
        return f"s{self.seed}u{unit}o{op}".encode()

    def manager(
        self, facility: CouplingFacility, name: str, qm_id: int, **options: Any
    ) -> QueueManager:
        """A manager of this scenario's group."""
        return QueueManager(
            facility, name, qm_id, admin=self.admin, structures=[self.app], **options
        )


def setup_group(facility: CouplingFacility, scenario: Scenario) -> None:
    """Create the structures and queues, and put the initial messages."""
    for name in (scenario.admin, scenario.app):
        if not facility.exists(name):
            facility.create(structure_params(name, queues=8, managers=5, messages=3000))
    with scenario.manager(facility, SETUP, SETUP_ID) as qm:
        for queue in sorted(QUEUES):
            qm.define_queue(queue, structure=scenario.structure(queue))
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
    """Run the scenario's units on ``qm``, recording what each call returned.

    A held unit runs in a thread of its own (a thread has one unit of work at a time),
    which stays until the workload ends, so that no later thread inherits its id.
    """
    work = _Workload(qm, scenario, random.Random(scenario.seed + 1), record)
    release = threading.Event()
    try:
        for n, unit in enumerate(scenario.units):
            if unit.end == "oos":
                work.out_of_syncpoint(n, unit)
            elif unit.end.startswith("hold"):
                _in_own_thread(partial(work.unit, n, unit), release)
            else:
                work.unit(n, unit)
    finally:
        release.set()


@dataclass
class _Workload:
    qm: QueueManager
    scenario: Scenario
    rng: random.Random
    record: Recorder

    def out_of_syncpoint(self, n: int, unit: Unit) -> None:
        kind, name = unit.ops[0]
        queue = self.qm.open(name)
        if kind == "put":
            body = self.scenario.body(n, 0)
            self.record(u=n, op="oos-put-start", body=body.decode())
            queue.put(body, priority=self.rng.randint(0, 9), persistent=self.rng.random() < 0.5)
            self.record(u=n, op="oos-put", body=body.decode())
            return
        self.record(u=n, op="oos-get-start")
        try:
            got = queue.get()
        except NoMessageAvailable:
            self.record(u=n, op="oos-none")
        else:
            self.record(u=n, op="oos-get", body=got.body.decode())

    @staticmethod
    def _batches(unit: Unit) -> dict[int, list[int]]:
        """Batched: the op that puts or gets a queue's batch, with the ops the batch
        stands for (an empty list: an op a batch before it covered)."""
        batches: dict[int, list[int]] = {}
        first: dict[tuple[str, str], int] = {}
        for k, op in enumerate(unit.ops):
            if op in first:
                batches[first[op]].append(k)
                batches[k] = []
            else:
                first[op] = k
                batches[k] = [k]
        return batches

    def unit(self, n: int, unit: Unit) -> None:
        record, rng = self.record, self.rng
        record(u=n, op="begin")
        uow = self.qm.unit_of_work()
        batches = self._batches(unit) if self.scenario.batched else {}
        for k, (kind, name) in enumerate(unit.ops):
            queue = self.qm.open(name)
            if k in batches:
                covered = batches[k]
                if covered and kind == "put":
                    bodies = [self.scenario.body(n, j) for j in covered]
                    queue.put_many(
                        bodies, uow=uow, priority=rng.randint(0, 9), persistent=rng.random() < 0.5
                    )
                    for body in bodies:
                        record(u=n, op="put", body=body.decode())
                gets = kind == "get" and covered
                for got in queue.get_many(len(covered), uow=uow) if gets else ():
                    record(u=n, op="get", body=got.body.decode())
                continue
            if kind == "put":
                body = self.scenario.body(n, k)
                queue.put(body, uow=uow, priority=rng.randint(0, 9), persistent=rng.random() < 0.5)
                record(u=n, op="put", body=body.decode())
            else:
                try:
                    got = queue.get(uow=uow)
                except NoMessageAvailable:
                    continue
                record(u=n, op="get", body=got.body.decode())
        record(u=n, op="ending", uow=uow.uow_id.hex())
        if unit.end not in ("commit", "backout"):
            uow.prepare()
            record(u=n, op="prepare")
            if unit.end.startswith("hold"):
                return
        if unit.end.endswith("commit"):
            uow.commit()
            record(u=n, op="commit")
        else:
            uow.backout()
            record(u=n, op="backout")


def _in_own_thread(work: Callable[[], None], release: threading.Event) -> None:
    """Run ``work`` in a new thread that then waits for ``release``; re-raise its error."""
    failure: list[BaseException] = []
    done = threading.Event()

    def body() -> None:
        try:
            work()
        except BaseException as error:  # handed to the workload's thread
            failure.append(error)
        finally:
            done.set()
        release.wait()

    threading.Thread(target=body, daemon=True).start()
    done.wait()
    if failure:
        raise failure[0]


# -- what the application was told ----------------------------------------------------------


@dataclass
class Told:
    """One unit of the record: what its calls returned before the crash."""

    puts: set[str] = field(default_factory=set)
    gets: set[str] = field(default_factory=set)
    #: "commit" or "backout" once the application saw it end (or a decision ended it).
    end: str | None = None
    uow: str | None = None
    prepared: bool = False
    #: An out-of-syncpoint put that began and was not seen to return.
    maybe_put: str | None = None


def events_of(lines: Sequence[str]) -> list[dict[str, Any]]:
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


def told(events: Sequence[dict[str, Any]]) -> dict[int, Told]:
    units: dict[int, Told] = {}
    for event in events:
        unit = units.setdefault(event["u"], Told())
        op = event["op"]
        if op in ("put", "oos-put"):
            unit.puts.add(event["body"])
        elif op in ("get", "oos-get"):
            unit.gets.add(event["body"])
        elif op == "oos-put-start":
            unit.maybe_put = event["body"]
        elif op == "ending":
            unit.uow = event["uow"]
        elif op == "prepare":
            unit.prepared = True
        if op in ("commit", "backout"):
            unit.end = op
        elif op in ("oos-put", "oos-get", "oos-none"):
            unit.end = "commit"
    return units


def units_by_uow(events: Sequence[dict[str, Any]]) -> dict[str, int]:
    return {e["uow"]: e["u"] for e in events if e["op"] == "ending"}


# -- what the victim left: its descriptors, read before anyone recovers ---------------------


@dataclass(frozen=True)
class Left:
    """A unit of work whose descriptors the dead victim left."""

    status: str | None  # "begin-commit", "in-commit", "in-prepare", "in-abort"
    complete: bool
    multi: bool

    @property
    def in_doubt(self) -> bool:
        """Left to the owner by a peer: a complete "begin commit" or "in prepare"."""
        return self.complete and self.status in ("begin-commit", "in-prepare")

    @property
    def label(self) -> str:
        return (
            (self.status or "no-status")
            + ("" if self.complete else "/partial")
            + ("/muse" if self.multi else "")
        )


def inspect(facility: CouplingFacility, scenario: Scenario) -> dict[str, Left]:
    """UOW id (hex) -> what the victim's descriptor list holds for it (read only)."""
    with facility.connect(scenario.admin, "INSPECTOR") as conn:
        acc = StructureAccess(conn, 0, Journal(), journal_failed)
        lists = directory.read_manager_lists(acc, VICTIM_ID)
        if lists is None or lists.descriptor_list is None:
            return {}
        records = d.load(acc, lists.descriptor_list)
    left = {}
    for uow_id, record in records.items():
        status = record.status()
        name = None if status is None else status.name.lower().replace("_", "-")
        left[uow_id.hex()] = Left(name, record.is_complete(), record.multi)
    return left


def crash_label(scenario: Scenario, events: Sequence[dict[str, Any]], left: dict[str, Left]) -> str:
    """Where the crash caught the victim: the interrupted unit's descriptors, or else
    the point of the script (held units, prepared before it, are left out)."""
    numbers = units_by_uow(events)
    held = {k for k, n in numbers.items() if scenario.units[n].end.startswith("hold")}
    interrupted = sorted(v.label for k, v in left.items() if k not in held or not v.in_doubt)
    if interrupted:
        return "+".join(interrupted)
    last = events[-1]["op"] if events else "start"
    if last in ("oos-put-start", "oos-get-start"):
        return last.removesuffix("-start")
    return "in-flight" if last in ("begin", "put", "get", "ending") else "between-units"


# -- recovery ---------------------------------------------------------------------------------


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DETECTION_LIMIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {DETECTION_LIMIT}s")
        time.sleep(0.05)


def _users(qm: QueueManager, name: str) -> list[UserState]:
    """The states of user ``name`` in ``qm``'s structures (read straight from them, so
    that a fault hook counts none of it)."""
    view = qm.view()
    return [
        user.state
        for structure in view.structures
        for user in view.users(structure)
        if user.name == name
    ]


def wait_until_failed(qm: QueueManager, name: str) -> None:
    """Until no structure of ``qm``'s has an active user ``name``: its connections were
    declared failed, or their leases lapsed."""
    _wait(lambda: UserState.ACTIVE not in _users(qm, name), f"{name} failed")


def wait_until_registered(qm: QueueManager, name: str) -> None:
    """Until ``name`` has registered in the group (it then holds its connections)."""
    _wait(lambda: name in directory.managers(qm.admin).values(), f"{name} registered")


def _detect(qm: QueueManager, name: str, detect: str) -> None:
    if detect == "declare":
        qm.declare_failed(name)
    else:
        wait_until_failed(qm, name)


def peer_recover(
    facility: CouplingFacility,
    scenario: Scenario,
    events: Sequence[dict[str, Any]],
    before: dict[str, Left],
    faults: CrashAt | None = None,
    *,
    detect: str = "declare",
) -> None:
    """A peer detects the victim's death (``detect``: "declare" it failed, or "lease":
    wait for its connections to fail) and recovers it; then checks what is in doubt.

    With ``faults`` the peer may die too while recovering; a second peer then recovers
    both (rolling recovery).
    """
    try:
        peer = scenario.manager(facility, PEER, PEER_ID, faults=faults)
        _detect(peer, VICTIM, detect)
        peer.recover(VICTIM)
        if faults is not None:
            faults.armed = False  # the checks below are not the peer's recovery
        check_in_doubt(peer, scenario, events, before, victim_in_doubt(peer))
        peer.close()
    except SimulatedFailure:
        finish_recovery(facility, scenario, events, before, detect=detect)


def finish_recovery(
    facility: CouplingFacility,
    scenario: Scenario,
    events: Sequence[dict[str, Any]],
    before: dict[str, Left],
    *,
    detect: str,
) -> None:
    """Rolling recovery: a second peer recovers the victim and the peer that died
    recovering it, then checks what is in doubt."""
    with scenario.manager(facility, PEER2, PEER2_ID) as other:
        _detect(other, PEER, detect)
        _detect(other, VICTIM, detect)  # if the peer died before it could
        other.recover(VICTIM)
        other.recover(PEER)
        check_in_doubt(other, scenario, events, before, victim_in_doubt(other))


def victim_in_doubt(qm: QueueManager) -> list[InDoubtUnit]:
    """The victim's units in doubt; none if it died before it registered."""
    if VICTIM not in directory.managers(qm.admin).values():
        return []
    return qm.indoubt(VICTIM)


def check_in_doubt(
    qm: QueueManager,
    scenario: Scenario,
    events: Sequence[dict[str, Any]],
    before: dict[str, Left],
    in_doubt: Sequence[InDoubtUnit],
) -> None:
    """After peer recovery: the units left in doubt are exactly the complete "begin
    commit" and "in prepare" ones, and they keep their puts (uncommitted: invisible)
    and their gets (on the victim's get list); nothing else is uncommitted or gotten."""
    status = {"begin-commit": "begin-commit", "in-prepare": "prepared"}
    expected = {k: status[v.status] for k, v in before.items() if v.in_doubt and v.status}
    assert {u.uow_id.hex(): u.status for u in in_doubt} == expected, "in-doubt units"
    units, numbers = told(events), units_by_uow(events)
    puts: set[str] = set()
    gets: set[str] = set()
    for uow in expected:
        unit = units[numbers[uow]]
        puts |= unit.puts
        gets |= unit.gets - unit.puts
    committed, uncommitted = queue_contents(qm, scenario)
    assert set(uncommitted) == puts, f"uncommitted puts {sorted(uncommitted)} != {sorted(puts)}"
    assert set(get_lists(qm, VICTIM_ID)) == gets, "the in-doubt units' gets moved"
    assert not (puts | gets) & set(committed), "an in-doubt unit's message is visible"


def start_restarted(facility: CouplingFacility, scenario: Scenario) -> QueueManager:
    """The victim's next incarnation; it waits while the dead one's connections are
    still live (until their leases lapse, on a backend with leases)."""
    deadline = time.monotonic() + DETECTION_LIMIT
    while True:
        try:
            return scenario.manager(facility, VICTIM, VICTIM_ID)
        except ConfigurationError as error:
            if error.reason is not MQReason.Q_MGR_NAME_ERROR or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def resolve_in_doubt(
    qm: QueueManager, scenario: Scenario, events: Sequence[dict[str, Any]]
) -> dict[str, str]:
    """Resolve the restarted victim's prepared units as the script's coordinator
    decides; returns UOW id (hex) -> "commit" | "backout"."""
    numbers = units_by_uow(events)
    resolved = {}
    for unit in qm.indoubt():
        assert unit.status == "prepared", f"{unit} left in doubt after restart"
        decision = scenario.units[numbers[unit.uow_id.hex()]].decision
        qm.resolve(unit.uow_id, commit=decision == "commit")
        resolved[unit.uow_id.hex()] = decision
    assert qm.indoubt() == [], "in-doubt units left after resolution"
    return resolved


def decisions_for(
    scenario: Scenario,
    events: Sequence[dict[str, Any]],
    before: dict[str, Left],
    resolved: dict[str, str],
) -> dict[int, str]:
    """Unit -> outcome of every unit left in doubt: a prepared one as resolved (which
    must be the coordinator's decision), "begin commit" backed out by the owner's
    restart (there is no recovery log to say it committed)."""
    numbers = units_by_uow(events)
    prepared = {k for k, v in before.items() if v.in_doubt and v.status == "in-prepare"}
    assert set(resolved) == prepared, "the restart resolved other units than were prepared"
    decisions = {}
    for uow, left in before.items():
        if left.in_doubt:
            n = numbers[uow]
            if left.status == "in-prepare":
                assert resolved[uow] == scenario.units[n].decision
            decisions[n] = resolved.get(uow, "backout")
    return decisions


def recover_and_check(
    facility: CouplingFacility,
    scenario: Scenario,
    lines: Sequence[str],
    peer_faults: CrashAt | None = None,
    *,
    detect: str = "declare",
) -> dict[str, Any]:
    """Recover the victim (peer, then the victim's restart), then count everything.

    Raises ``AssertionError`` describing the first discrepancy; returns a summary.
    """
    events = events_of(lines)
    before = inspect(facility, scenario)
    peer_recover(facility, scenario, events, before, peer_faults, detect=detect)
    return restart_and_check(facility, scenario, events, before)


def restart_and_check(
    facility: CouplingFacility,
    scenario: Scenario,
    events: Sequence[dict[str, Any]],
    before: dict[str, Left],
) -> dict[str, Any]:
    """The victim's next incarnation (in this process) resolves its units; the count."""
    with start_restarted(facility, scenario) as restarted:
        resolved = resolve_in_doubt(restarted, scenario, events)
        present = inventory(restarted, scenario)
    return verdict(scenario, events, before, resolved, present)


def verdict(
    scenario: Scenario,
    events: Sequence[dict[str, Any]],
    before: dict[str, Left],
    resolved: dict[str, str],
    present: Counter[str],
) -> dict[str, Any]:
    """The count (:func:`check`) with the outcomes of the units left in doubt, and
    where the crash caught the victim (``label``)."""
    summary = check(scenario, events, present, decisions_for(scenario, events, before, resolved))
    summary["label"] = crash_label(scenario, events, before)
    return summary


def audit(facility: CouplingFacility, scenario: Scenario) -> Counter[str]:
    """The inventory, taken by a manager of its own (after the others are done)."""
    with scenario.manager(facility, AUDIT, AUDIT_ID) as auditor:
        return inventory(auditor, scenario)


# -- the count ----------------------------------------------------------------------------------


def queue_contents(qm: QueueManager, scenario: Scenario) -> tuple[Counter[str], Counter[str]]:
    """The bodies on the queues: (committed, uncommitted)."""
    committed: Counter[str] = Counter()
    uncommitted: Counter[str] = Counter()
    view = qm.view()
    for name in QUEUES:
        where = view.queue(name)
        for entry in view.entries(where.structure, where.put_list):
            if entry.key == keys.LHQC_KEY:
                continue
            body = entry.data[Decoded(entry.data).body_offset :].decode()
            (committed if keys.is_committed(entry.key) else uncommitted)[body] += 1
    return committed, uncommitted


def get_lists(qm: QueueManager, owner: int) -> list[str]:
    """The bodies on a manager's get lists, in every structure."""
    found = []
    view = qm.view()
    for structure in view.structures:
        try:
            lists = view.manager_lists(structure, owner)
        except KeyError:
            continue
        for entry in view.entries(structure, lists.get_list):
            found.append(entry.data[Decoded(entry.data).body_offset :].decode())
    return found


def inventory(qm: QueueManager, scenario: Scenario) -> Counter[str]:
    """Every committed body on the queues; asserts nothing else is anywhere."""
    present, uncommitted = queue_contents(qm, scenario)
    assert not uncommitted, f"uncommitted {sorted(uncommitted)} visible"
    view = qm.view()
    for structure in view.structures:
        for user in view.users(structure):
            assert user.state is UserState.ACTIVE, f"failed user {user.name} in {structure}"
    for owner in (VICTIM_ID, PEER_ID, PEER2_ID, AUDIT_ID, SETUP_ID):
        left = get_lists(qm, owner)
        assert not left, f"{len(left)} messages left on manager {owner}'s get list"
    return present


def check(
    scenario: Scenario,
    events: Sequence[dict[str, Any]],
    present: Counter[str],
    decisions: dict[int, str] | None = None,
) -> dict[str, Any]:
    """Count every message against what the application was told.

    ``decisions`` gives the outcome of units left in doubt and then resolved.
    """
    duplicates = [b for b, c in present.items() if c > 1]
    assert not duplicates, f"messages on a queue twice: {duplicates}"
    units = told(events)
    for n, outcome in (decisions or {}).items():
        assert units[n].end in (None, outcome), f"unit {n} ended {units[n].end}, not {outcome}"
        units[n].end = outcome
    uncertain = [n for n, u in units.items() if u.end is None]
    assert len(uncertain) <= 1, f"more than one unit interrupted: {uncertain}"
    expected = {f"init{i}" for i in range(scenario.initial)}
    consumed: Counter[str] = Counter()
    for unit in units.values():
        if unit.end == "commit":
            expected |= unit.puts
            consumed.update(unit.gets)
    twice = [b for b, c in consumed.items() if c > 1]
    assert not twice, f"gotten in two committed units: {twice}"
    assert not set(consumed) & set(present), f"gotten and still there: {consumed & present}"
    settled = expected - set(consumed)
    outcomes: list[set[str]] = [settled]
    if uncertain:
        unit = units[uncertain[0]]
        maybe = unit.puts | ({unit.maybe_put} if unit.maybe_put is not None else set())
        outcomes.append((settled | maybe) - unit.gets)
        # An interrupted get out of syncpoint may or may not have taken a message;
        # which one is unknown, so allow any single one of the settled to be gone.
        if unit.maybe_put is None and not unit.puts and not unit.gets:
            outcomes.extend(settled - {gone} for gone in settled)
    got = set(present)
    assert got in outcomes, (
        f"unit {uncertain} neither all nor nothing: missing {sorted(settled - got)}, "
        f"unexpected {sorted(got - settled)}"
    )
    return {
        "present": len(got),
        "consumed": len(consumed),
        "uncertain": uncertain,
        "decided": sorted(decisions or {}),
    }


# -- in one process (memory): running to a point, and where each point leaves the victim -------


def run_in_process(
    scenario: Scenario, crash: CrashAt, facility: CouplingFacility | None = None
) -> tuple[list[str], CouplingFacility]:
    """Run the workload with ``crash`` as the victim's fault hook, on a new group (on a
    fresh memory facility by default); returns the record's lines and the facility."""
    if facility is None:
        from sharedq.cf.memory import MemoryFacility

        facility = MemoryFacility()
    setup_group(facility, scenario)
    stream = io.StringIO()
    try:
        victim = scenario.manager(facility, VICTIM, VICTIM_ID, faults=crash)
        run_workload(victim, scenario, Recorder(stream))
    except SimulatedFailure:
        pass
    return stream.getvalue().splitlines(), facility


def count_points(scenario: Scenario) -> int:
    """How many fault points the victim passes in a run with no crash."""
    counter = CrashAt()
    run_in_process(scenario, counter)
    return counter.points


def label_points(scenario: Scenario) -> dict[str, list[int]]:
    """Every point of the workload, by where a crash there leaves the victim
    (:func:`crash_label`), found by crashing there in-process on memory."""
    labels: dict[str, list[int]] = {}
    for k in range(1, count_points(scenario) + 1):
        lines, facility = run_in_process(scenario, CrashAt(k))
        label = crash_label(scenario, events_of(lines), inspect(facility, scenario))
        labels.setdefault(label, []).append(k)
    return labels


# -- the processes ------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="a crash scenario's processes")
    commands = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--facility", required=True, help="facility URL")
    common.add_argument("--group", default="", help="suffix of the structure names")
    common.add_argument("--seed", type=int, required=True)
    common.add_argument("--units", type=int, default=10, help="units of work in the script")
    common.add_argument("--held", type=int, default=0, help="units prepared and left in doubt")
    common.add_argument("--batched", action="store_true", help="gets in batches (get_many)")
    common.add_argument("--record", type=Path, required=True, help="the victim's record file")
    worker = commands.add_parser("worker", parents=[common], help="the victim: run the workload")
    worker.add_argument("--kill-at", type=int, help="SIGKILL this process at request K")
    worker.add_argument("--setup", action="store_true", help="create structures and queues")
    peer = commands.add_parser(
        "peer", parents=[common], help="wait for the victim to fail, recover it, report"
    )
    peer.add_argument("--kill-at", type=int, help="SIGKILL at request K of the recovery")
    commands.add_parser(
        "restart", parents=[common], help="the victim's next incarnation: resolve, report"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    scenario = Scenario.generate(
        args.seed, args.units, held=args.held, group=args.group, batched=args.batched
    )
    facility = open_facility(args.facility)
    if args.command == "worker":
        if args.setup:
            setup_group(facility, scenario)
        hook = CrashAt(args.kill_at, kill=True) if args.kill_at else None
        with args.record.open("a", buffering=1) as stream:
            qm = scenario.manager(facility, VICTIM, VICTIM_ID, faults=hook)
            run_workload(qm, scenario, Recorder(stream))
            qm.close()
    elif args.command == "peer":
        hook = CrashAt(args.kill_at, kill=True, armed=False)
        with scenario.manager(facility, PEER, PEER_ID, faults=hook) as peer:
            wait_until_registered(peer, VICTIM)
            wait_until_failed(peer, VICTIM)
            hook.arm()
            reports = [r for r in peer.recover_failed() if r.manager == VICTIM]
            in_doubt = {u.uow_id.hex(): u.status for u in victim_in_doubt(peer)}
            structures = sorted(s for r in reports for s in r.structures)
            skipped = sorted(s for r in reports for s in r.skipped)
            print(
                json.dumps({"structures": structures, "skipped": skipped, "in_doubt": in_doubt}),
                flush=True,
            )
    else:
        events = events_of(list(record_lines(args.record)))
        with start_restarted(facility, scenario) as restarted:
            resolved = resolve_in_doubt(restarted, scenario, events)
            print(json.dumps({"resolved": resolved}), flush=True)
    facility.close()
    return 0


def record_lines(path: Path) -> Iterator[str]:
    yield from path.read_text().splitlines()


if __name__ == "__main__":
    sys.exit(main())
