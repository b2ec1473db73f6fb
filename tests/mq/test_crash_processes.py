"""Crash tests with queue managers in separate processes on Redis, killed with SIGKILL.

Each crash is a queue-sharing group of its own (structures named after the group) on
one private Redis server.  Every manager under test is a process (``python -m
tests.mq.crash_harness``) that opens its own facility on the server, with a lease of
``LEASE`` seconds, as a manager on another host would:

* the victim runs a scripted workload and kills itself with SIGKILL at structure
  request K (``--kill-at``), or is killed by this process at an arbitrary moment;
* nobody declares it failed: its connections fail when their leases lapse, which a
  peer sees in ``users()`` (``docs/redis.md``, *Failure*);
* a peer (in this process, or a process of its own) recovers it; the victim's next
  incarnation (in this process, or a new process under the same name) resolves its
  prepared units as the script's coordinator decides;
* then the count (``crash_harness.check``): every committed message is on its queue or
  was gotten in a committed unit, exactly once; no uncommitted put is visible; units
  in doubt stayed so, with their messages, until resolved, and ended as decided.

The kill points are chosen by where a crash there leaves the victim, found by crashing
at every point in-process on memory (``label_points``): in flight, between the two
calls of commit ("begin commit" written, "in commit" not yet), part-way through a
multi-part or multi-structure descriptor set, "in commit" or "in abort" part done,
"in prepare", an out-of-syncpoint put or get under way.  The crash must leave the
same state on Redis: the victim's descriptors are read before anyone recovers it.

Victims run a few at a time, so that their leases lapse while the next ones run.
"""

from __future__ import annotations

import itertools
import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cf.redis import RedisFacility
from sharedq.testing.redis_server import RedisServer
from tests.mq.crash_harness import (
    AUDIT,
    AUDIT_ID,
    PEER,
    PEER_ID,
    VICTIM,
    Left,
    Scenario,
    audit,
    check_in_doubt,
    events_of,
    finish_recovery,
    inspect,
    label_points,
    recover_and_check,
    restart_and_check,
    run_in_process,
    setup_group,
    verdict,
    victim_in_doubt,
)
from tests.mq.faults import CrashAt

ROOT = Path(__file__).resolve().parents[2]
#: Seconds a worker's connections live without renewal: how long a death takes to see.
LEASE = 1.0
#: Worker processes alive at once.
PARALLEL = 4
_groups = itertools.count(1)


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    """A private server for this module: its processes never touch the session's."""
    with RedisServer() as started:
        yield started


@pytest.fixture(scope="module")
def facility(server: RedisServer) -> Iterator[CouplingFacility]:
    """This process's facility: for setting groups up, peers, restarts and audits."""
    with RedisFacility.from_url(server.url) as opened:
        yield opened


@dataclass
class Crash:
    """One group: its scenario, the victim's record, and its processes."""

    scenario: Scenario
    directory: Path
    kill_at: int | None = None
    #: Where the crash leaves the victim, as found on memory.
    expected: str | None = None
    victim: subprocess.Popen[str] | None = None

    @classmethod
    def new(
        cls,
        facility: CouplingFacility,
        directory: Path,
        seed: int,
        *,
        units: int = 10,
        held: int = 0,
        kill_at: int | None = None,
        expected: str | None = None,
        batched: bool = False,
    ) -> Crash:
        group = f"G{next(_groups)}"
        scenario = Scenario.generate(seed, units, held=held, group=group, batched=batched)
        setup_group(facility, scenario)
        return cls(scenario, directory, kill_at, expected)

    @property
    def record(self) -> Path:
        return self.directory / f"{self.scenario.group}.jsonl"

    def lines(self) -> list[str]:
        return self.record.read_text().splitlines() if self.record.exists() else []

    def start(self, server: RedisServer, command: str, *extra: str) -> subprocess.Popen[str]:
        """A harness process of this group: ``worker``, ``peer`` or ``restart``."""
        log = self.directory / f"{self.scenario.group}.{command}.log"
        with log.open("w") as stderr:  # the process has its own copy
            return subprocess.Popen(
                [
                    *(sys.executable, "-m", "tests.mq.crash_harness", command),
                    *("--facility", f"{server.url}?lease={LEASE}", "--record", str(self.record)),
                    *self.scenario.args(),
                    *extra,
                ],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )

    def start_victim(self, server: RedisServer) -> None:
        kill = ["--kill-at", str(self.kill_at)] if self.kill_at else []
        self.victim = self.start(server, "worker", *kill)


def finish(process: subprocess.Popen[str], returncode: int = 0) -> str:
    """Wait for a harness process; its standard output.  Its log is in the error if
    it ended otherwise than ``returncode`` says."""
    out, _ = process.communicate(timeout=300)
    if process.returncode != returncode:
        args = [str(a) for a in process.args]  # type: ignore[union-attr]
        record = Path(args[args.index("--record") + 1])
        command = args[args.index("tests.mq.crash_harness") + 1]
        log = record.with_name(f"{record.stem}.{command}.log")
        raise AssertionError(
            f"{command} of {record.stem} ended with {process.returncode}: "
            + (log.read_text()[-3000:] if log.exists() else "(no log)")
        )
    return out


def run_victims(server: RedisServer, crashes: list[Crash]) -> None:
    """Run the victims, ``PARALLEL`` at a time, until every one has ended as it should."""
    pending = list(crashes)
    live: list[subprocess.Popen[str]] = []
    while pending or live:
        while pending and len(live) < PARALLEL:
            crash = pending.pop(0)
            crash.start_victim(server)
            assert crash.victim is not None
            live.append(crash.victim)
        time.sleep(0.01)
        live = [process for process in live if process.poll() is None]
    for crash in crashes:
        assert crash.victim is not None
        finish(crash.victim, 0 if crash.kill_at is None else -signal.SIGKILL)


def in_batches(crashes: list[Crash]) -> Iterator[list[Crash]]:
    for start in range(0, len(crashes), PARALLEL):
        yield crashes[start : start + PARALLEL]


def choose(labels: dict[str, list[int]]) -> list[tuple[int, str]]:
    """Kill points: one for each place a crash can leave the victim; two (the first and
    the last) between the two calls of commit and in a descriptor set cut short."""
    chosen: list[tuple[int, str]] = []
    for label, points in sorted(labels.items()):
        picks = [points[len(points) // 2]]
        if label.startswith("begin-commit") or "/partial" in label:
            picks = [points[0], points[-1]]
        chosen.extend((k, label) for k in dict.fromkeys(picks))
    return chosen


def planned(
    facility: CouplingFacility,
    directory: Path,
    seed: int,
    held: int,
    plan: list[tuple[int, str]],
    batched: bool = False,
) -> list[Crash]:
    return [
        Crash.new(facility, directory, seed, held=held, kill_at=k, expected=label, batched=batched)
        for k, label in plan
    ]


# -- the victim kills itself at chosen requests; a peer here sees it fail and recovers it ------


@pytest.mark.parametrize(("seed", "held"), [(31, 0), (34, 2)])
def test_victims_killed_at_chosen_requests(
    facility: CouplingFacility, server: RedisServer, tmp_path: Path, seed: int, held: int
) -> None:
    crashes = planned(
        facility, tmp_path, seed, held, choose(label_points(Scenario.generate(seed, held=held)))
    )
    run_victims(server, crashes)
    found: Counter[str] = Counter()
    for crash in crashes:
        try:
            summary = recover_and_check(facility, crash.scenario, crash.lines(), detect="lease")
        except AssertionError as error:
            raise AssertionError(
                f"seed {seed}, killed at {crash.kill_at} ({crash.expected}): {error}"
            ) from None
        assert summary["label"] == crash.expected, f"killed at {crash.kill_at}"
        found[summary["label"]] += 1
    assert any(label.startswith("begin-commit") for label in found)
    assert any("/partial" in label for label in found)
    assert any("/muse" in label for label in found)
    assert "in-flight" in found


def test_batched_victims_killed_in_the_middle_of_bulk_commits(
    facility: CouplingFacility, server: RedisServer, tmp_path: Path
) -> None:
    """Units that get in batches (``get_many``) and commit them with bulk requests: the
    victim is killed with SIGKILL at a request of each kind of place, among them the
    middle of a bulk commit (descriptors written, part of the bulk moves and deletes
    done), and every message is counted afterwards."""
    seed = 31
    plan = choose(label_points(Scenario.generate(seed, batched=True)))
    crashes = planned(facility, tmp_path, seed, 0, plan, batched=True)
    run_victims(server, crashes)
    found: Counter[str] = Counter()
    for crash in crashes:
        try:
            summary = recover_and_check(facility, crash.scenario, crash.lines(), detect="lease")
        except AssertionError as error:
            raise AssertionError(
                f"batched, killed at {crash.kill_at} ({crash.expected}): {error}"
            ) from None
        assert summary["label"] == crash.expected, f"killed at {crash.kill_at}"
        found[summary["label"]] += 1
    assert any(label.startswith("in-commit/partial") for label in found), found


# -- no peer: the failed manager restarts in a new process and recovers itself --------------


def test_restarted_victim_recovers_and_resolves_its_own_units(
    facility: CouplingFacility, server: RedisServer, tmp_path: Path
) -> None:
    """The victim's next incarnation, a new process under the same name, connects once
    the dead one's leases lapse; its restart finishes "in commit" and "in abort" units,
    backs out "begin commit" ones (no recovery log says they committed), and resolves
    the prepared ones (held before the crash, or caught preparing) as decided."""
    seed, held = 41, 2
    points_of = label_points(Scenario.generate(seed, held=held))
    plan = [(points[len(points) // 2], label) for label, points in sorted(points_of.items())]
    crashes = planned(facility, tmp_path, seed, held, plan)
    run_victims(server, crashes)
    before = {c.scenario.group: inspect(facility, c.scenario) for c in crashes}
    resolved, labels = 0, set[str]()
    for batch in in_batches(crashes):
        restarts = [(crash, crash.start(server, "restart")) for crash in batch]
        for crash, process in restarts:
            units = json.loads(finish(process))["resolved"]
            present = audit(facility, crash.scenario)
            events = events_of(crash.lines())
            summary = verdict(crash.scenario, events, before[crash.scenario.group], units, present)
            assert summary["label"] == crash.expected, f"killed at {crash.kill_at}"
            resolved += len(units)  # exactly the prepared ones (checked by verdict)
            labels.add(summary["label"])
    assert resolved >= len(crashes)  # most crashes left both held units in doubt
    assert {"begin-commit", "in-prepare"} <= {label.split("/")[0] for label in labels}


# -- killed by the parent at any moment; the peer and the restart are processes too ----------


def test_victims_killed_at_any_moment(
    facility: CouplingFacility, server: RedisServer, tmp_path: Path
) -> None:
    """The parent kills each victim once its record reaches a random line, after a
    random delay of up to 2 ms: wherever it is.  A peer process, started with the
    victim, waits to see its connections fail and recovers it; then the victim
    restarts as a new process and resolves its units; then an auditor counts."""
    seed, units, held, moments = 45, 16, 2, 8
    rng = random.Random(seed)
    whole = Crash.new(facility, tmp_path, seed, units=units, held=held)
    crashes = [Crash.new(facility, tmp_path, seed, units=units, held=held) for _ in range(moments)]
    _peer_recovers_then_restart(server, facility, [whole], {})  # no crash
    length = len(whole.lines())
    lines = {c.scenario.group: rng.randint(1, length - 5) for c in crashes}
    labels = []
    for batch in in_batches(crashes):
        labels += _peer_recovers_then_restart(server, facility, batch, lines, rng, length)
    mid_run = [c for c in crashes if len(c.lines()) < length]
    assert len(mid_run) >= moments // 2, labels


def _peer_recovers_then_restart(
    server: RedisServer,
    facility: CouplingFacility,
    batch: list[Crash],
    kill_lines: dict[str, int],
    rng: random.Random | None = None,
    length: int | None = None,
) -> list[str]:
    """Start each victim with its peer; kill each victim once its record reaches its
    line (none: let it finish); read what it left before its peer can see it dead;
    let the peers recover; check what is in doubt; restart the victims; count.  Returns
    where each crash caught its victim.

    A victim whose record is shorter than a whole run's (``length``) died in its
    workload: its peer must have seen it fail, and recovered it, in both structures
    (a kill that lands later may find it disconnected already)."""
    peers = {}
    for crash in batch:
        crash.start_victim(server)
        peers[crash.scenario.group] = crash.start(server, "peer")
    before: dict[str, dict[str, Left]] = {}
    while len(before) < len(batch):
        for crash in batch:
            group, victim = crash.scenario.group, crash.victim
            assert victim is not None
            if group in before:
                continue
            line = kill_lines.get(group)
            if line is not None and len(crash.lines()) >= line:
                time.sleep(rng.uniform(0, 0.002) if rng else 0)
                victim.send_signal(signal.SIGKILL)
            elif victim.poll() is None:
                continue
            if victim.wait(timeout=60) not in (0, -signal.SIGKILL):
                finish(victim)  # reports its log
            before[group] = inspect(facility, crash.scenario)
        time.sleep(0.001)
    for crash in batch:
        group = crash.scenario.group
        report = json.loads(finish(peers[group]))
        assert set(report["in_doubt"]) == {k for k, v in before[group].items() if v.in_doubt}
        if length is not None and len(crash.lines()) < length:
            assert report["structures"] == sorted([crash.scenario.admin, crash.scenario.app]), (
                report,
                crash.lines()[-3:],
            )
        events = events_of(crash.lines())
        with crash.scenario.manager(facility, AUDIT, AUDIT_ID) as auditor:
            check_in_doubt(auditor, crash.scenario, events, before[group], victim_in_doubt(auditor))
    restarts = [(crash, crash.start(server, "restart")) for crash in batch]
    labels = []
    for crash, process in restarts:
        units = json.loads(finish(process))["resolved"]
        present = audit(facility, crash.scenario)
        events = events_of(crash.lines())
        summary = verdict(crash.scenario, events, before[crash.scenario.group], units, present)
        labels.append(summary["label"])
    return labels


# -- the peer process dies too while recovering; a second peer here finishes ----------------


def _recovery_points(scenario: Scenario, victim_point: int) -> int:
    """How many fault points a peer's ``recover_failed()`` passes after the victim died
    at ``victim_point`` (in-process on memory: the same requests as on Redis)."""
    _, memory = run_in_process(scenario, CrashAt(victim_point))
    hook = CrashAt(armed=False)
    peer = scenario.manager(memory, PEER, PEER_ID, faults=hook)
    peer.declare_failed(VICTIM)
    hook.arm()
    peer.recover_failed()
    return hook.points


def test_peer_process_killed_while_recovering(
    facility: CouplingFacility, server: RedisServer, tmp_path: Path
) -> None:
    """Rolling recovery across processes: the peer process kills itself at a point of
    its recovery; its recovery claim stays until its own leases lapse; a second peer
    (here) then recovers the victim and the peer, and the victim restarts."""
    seed, held = 46, 2
    scenario = Scenario.generate(seed, held=held)
    labels = label_points(scenario)
    cases = []
    for label in ("in-commit/partial/muse", "begin-commit/muse"):
        victim_point = labels[label][len(labels[label]) // 2]
        total = _recovery_points(scenario, victim_point)
        for peer_point in sorted({1, total // 3, 2 * total // 3, total}):
            crash = Crash.new(
                facility, tmp_path, seed, held=held, kill_at=victim_point, expected=label
            )
            cases.append((crash, peer_point))
    run_victims(server, [crash for crash, _ in cases])
    before = {c.scenario.group: inspect(facility, c.scenario) for c, _ in cases}
    for start in range(0, len(cases), PARALLEL):
        batch = cases[start : start + PARALLEL]
        peers = [crash.start(server, "peer", "--kill-at", str(k)) for crash, k in batch]
        for process in peers:
            finish(process, -signal.SIGKILL)
    for crash, peer_point in cases:
        group, events = crash.scenario.group, events_of(crash.lines())
        try:
            finish_recovery(facility, crash.scenario, events, before[group], detect="lease")
            summary = restart_and_check(facility, crash.scenario, events, before[group])
        except AssertionError as error:
            raise AssertionError(f"peer killed at {peer_point}: {error}") from None
        assert summary["label"] == crash.expected
