"""A queue-sharing group at work: the demo's workload, and the pipeline tests' input.

Three queue managers (by default) each run in a thread of their own, as they would in
processes of their own: units of work that put to several queues at once, with
priorities, some backed out; consumers that get-wait on queues (woken by the
commits of other managers, not by polling), some backing out what they got; some
messages with a short expiry that lapse before anybody gets them.  Half way, one
manager takes a structure checkpoint; later, the last manager is stopped dead in
the middle of a request and a peer declares it failed and recovers its units of
work.  Every message is persistent: everything the group does is in the log, which
is what the pipeline reads.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from sharedq.errors import SharedqError
from sharedq.mq import DepthEvents, NoMessageAvailable, PeerRecoveryReport, QueueManager
from sharedq.seam import SimulatedFailure

#: The application queues the workload puts to and gets from.
QUEUES = ("ORDERS", "PAYMENTS", "SHIPPING")
#: Messages put here expire before anyone looks (nobody gets from it until the end).
NOTICES = "NOTICES"
#: A queue the first manager fills in one burst and drains again, with depth events
#: enabled: a High event on the way up and a Low on the way down, issued by every
#: manager (each has PERFMEV enabled), for the pipeline's ``events`` job to show.
BURSTS = "BURSTS"
BURST_MAX_DEPTH = 20
#: High at 80 % of the max depth (16 messages), Low back at 20 % (4).
BURST_EVENTS = DepthEvents(high_limit=80, low_limit=20, high_enabled=True, low_enabled=True)


@dataclass(frozen=True)
class WorkloadPlan:
    """How much work, and where the two incidents happen (in rounds of each manager)."""

    rounds: int = 120
    seed: int = 7
    backout_percent: int = 10
    #: Seconds a message put to NOTICES lives.
    notice_expiry: float = 0.05
    #: The round after which the first manager takes a structure checkpoint.
    checkpoint_round: int | None = None
    #: The round in which the last manager dies mid-request; ``None``: nobody dies.
    crash_round: int | None = None
    #: Seconds a consumer waits for a message (a get-wait).
    get_wait: float = 0.02
    #: The round in which the first manager fills and drains BURSTS; ``None``: never.
    burst_round: int | None = None

    def checkpoint_at(self) -> int:
        return self.rounds // 3 if self.checkpoint_round is None else self.checkpoint_round


@dataclass
class ManagerTally:
    """What one manager's application saw: its own view, before any recovery."""

    units_committed: int = 0
    units_backed_out: int = 0
    puts: int = 0
    gets: int = 0
    get_waits_empty: int = 0
    died: bool = False


@dataclass
class WorkloadResult:
    """The application's tallies, and who died and was recovered by whom."""

    tallies: dict[str, ManagerTally] = field(default_factory=dict)
    crashed: str | None = None
    recovered_by: str | None = None
    peer_recovery: PeerRecoveryReport | None = None
    checkpoints: int = 0
    #: The puts and gets the dead manager's last unit of work had made when it was
    #: killed (a process of its own: it is killed inside that unit; see ``die_in_a_unit``).
    in_flight: tuple[int, int] | None = None


class DieAt:
    """A fault hook that stops its manager dead at a request once armed.

    Only the requests of the thread that armed it count, and only they fail: the
    manager's own threads (its depth event responder) would otherwise move the point
    of death from run to run, and die of an exception in a thread nobody joins.  The
    manager is then stopped dead (``stop_dead``) and its threads end with it.
    """

    def __init__(self) -> None:
        self.armed_after: int | None = None
        self.seen = 0
        self._thread: int | None = None

    def arm(self, after: int) -> None:
        self.seen = 0
        self._thread = threading.get_ident()
        self.armed_after = after

    def __call__(self, request: str, structure: str, before: bool) -> None:
        if self.armed_after is None or not before or threading.get_ident() != self._thread:
            return
        self.seen += 1
        if self.seen > self.armed_after:
            raise SimulatedFailure(f"stopped dead before {request} on {structure}")


def define_queues(qm: QueueManager, structure: str | None = None) -> None:
    """The workload's queues, defined once for the group (on ``structure``, else the
    manager's administration structure)."""
    for name in (*QUEUES, NOTICES):
        qm.define_queue(name, structure=structure, max_depth=100_000)


def define_burst_queue(qm: QueueManager, structure: str | None = None) -> None:
    """BURSTS, with High and Low depth events enabled (see :func:`burst`)."""
    qm.define_queue(
        BURSTS,
        structure=structure,
        max_depth=BURST_MAX_DEPTH,
        default_persistent=True,
        depth_events=BURST_EVENTS,
    )


def burst(qm: QueueManager, tally: ManagerTally) -> None:
    """Fill BURSTS up to its High limit and drain it, out of syncpoint: one High event
    at the last put, one Low event at the get that brings it down to the Low limit."""
    queue = qm.open(BURSTS)
    count = BURST_MAX_DEPTH * BURST_EVENTS.high_limit // 100
    for number in range(count):
        queue.put(b"burst %d" % number)
        tally.puts += 1
    for _ in range(count):
        queue.get()
        tally.gets += 1


def run_workload(
    managers: list[QueueManager],
    plan: WorkloadPlan,
    *,
    killer: DieAt | None = None,
    on_round: Callable[[str], None] | None = None,
) -> WorkloadResult:
    """Run the plan on ``managers``, a thread each (the last one dies if ``plan.crash_round``).

    ``killer`` must be the fault hook the last manager was started with when a crash
    is planned.  ``on_round`` is called after every round of every manager (progress).
    A peer declares the dead manager failed and recovers its units of work.
    """
    result = WorkloadResult({qm.name: ManagerTally() for qm in managers})
    barrier = threading.Barrier(len(managers))
    errors: list[BaseException] = []

    def at_checkpoint(index: int, qm: QueueManager) -> None:
        barrier.wait()  # everybody is mid-work, nobody is between rounds of its own
        if index == 0:
            qm.checkpoint()
            result.checkpoints += 1
        barrier.wait()

    def work(index: int, qm: QueueManager) -> None:
        dies = plan.crash_round is not None and index == len(managers) - 1
        try:
            work_rounds(
                qm,
                index,
                plan,
                result.tallies[qm.name],
                at_checkpoint=lambda: at_checkpoint(index, qm),
                killer=killer if dies else None,
                on_round=on_round,
            )
        except SimulatedFailure:
            result.tallies[qm.name].died = True
            result.crashed = qm.name
            barrier.abort()
        except threading.BrokenBarrierError:
            pass
        except BaseException as exc:  # reported by the caller's thread
            errors.append(exc)
            barrier.abort()

    threads = [
        threading.Thread(target=work, args=(i, qm), name=f"workload-{qm.name}", daemon=True)
        for i, qm in enumerate(managers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    if result.crashed is not None:
        dead = next(qm for qm in managers if qm.name == result.crashed)
        peer = next(qm for qm in managers if qm.name != result.crashed)
        stop_dead(dead)
        peer.declare_failed(dead.name)
        result.peer_recovery = peer.recover(dead.name)
        result.recovered_by = peer.name
    return result


def sweep_expired(qm: QueueManager, plan: WorkloadPlan) -> int:
    """Look at NOTICES once every notice has lapsed: each get finds expired messages
    (moved to the expiry list and logged as expired) and none to return; then purge.

    Returns how many were purged.
    """
    qm.clock.sleep_s(plan.notice_expiry * 2)  # on a ManualClock: no real wait
    notices = qm.open(NOTICES)
    with contextlib.suppress(NoMessageAvailable):
        while True:
            notices.get()  # a notice that has not expired is consumed like any message
    return qm.purge_expired()


def work_rounds(
    qm: QueueManager,
    index: int,
    plan: WorkloadPlan,
    tally: ManagerTally,
    *,
    at_checkpoint: Callable[[], None] | None = None,
    killer: DieAt | None = None,
    on_round: Callable[[str], None] | None = None,
    killed_in_unit: Callable[[int, int], None] | None = None,
) -> None:
    """One manager's share of the plan (in its thread, or its process).

    ``at_checkpoint`` runs at the checkpoint round; ``killer`` is armed at the crash
    round, so that the manager dies a few requests into it.  The first manager
    (``index`` 0) makes the plan's burst.  ``killed_in_unit`` (a
    manager in a process of its own) makes the crash round :func:`die_in_a_unit`.
    """
    rng = random.Random(plan.seed * 1000 + index)
    checkpoint_at = plan.checkpoint_at()
    for round_number in range(plan.rounds):
        if round_number == checkpoint_at and at_checkpoint is not None:
            at_checkpoint()
        if killer is not None and round_number == plan.crash_round:
            killer.arm(rng.randrange(3, 12))
        if killed_in_unit is not None and round_number == plan.crash_round:
            die_in_a_unit(qm, rng, plan, tally, killed_in_unit)
        if index == 0 and round_number == plan.burst_round:
            burst(qm, tally)
        _round(qm, rng, plan, tally)
        if on_round is not None:
            on_round(qm.name)


def die_in_a_unit(
    qm: QueueManager,
    rng: random.Random,
    plan: WorkloadPlan,
    tally: ManagerTally,
    killed: Callable[[int, int], None],
) -> None:
    """The victim's last unit of work: two puts and a get, then ``killed(puts, gets)``,
    which does not return (the process is killed while it waits there).

    So the manager dies with work in flight, whatever the timing: its peer finds
    uncommitted puts to delete and a gotten message to put back on its queue.
    """
    first, second = rng.sample(QUEUES, 2)
    third = next(name for name in QUEUES if name not in (first, second))
    uow = qm.unit_of_work()
    puts = gets = 0
    for name in (first, second):
        qm.open(name).put(_body(rng), uow=uow, priority=rng.randint(0, 9), persistent=True)
        puts += 1
    with contextlib.suppress(NoMessageAvailable):
        qm.open(third).get(uow=uow, wait=plan.get_wait)
        gets += 1
    tally.puts += puts
    tally.gets += gets
    killed(puts, gets)
    raise RuntimeError(f"{qm.name} was to be killed inside its unit of work, and was not")


def stop_dead(qm: QueueManager) -> None:
    """Leave a manager as a killed process leaves it: nothing written, writers let go."""
    qm.stop_dead()


def _round(qm: QueueManager, rng: random.Random, plan: WorkloadPlan, tally: ManagerTally) -> None:
    """One producer unit (puts to two queues) and one consumer unit (gets)."""
    first, second = rng.sample(QUEUES, 2)
    with qm.unit_of_work() as uow:
        for _ in range(rng.randint(1, 3)):
            qm.open(first).put(_body(rng), uow=uow, priority=rng.randint(0, 9), persistent=True)
            tally.puts += 1
        qm.open(second).put(_body(rng), uow=uow, priority=rng.randint(0, 9), persistent=True)
        tally.puts += 1
        if rng.random() < 0.15:
            qm.open(NOTICES).put(b"notice", uow=uow, persistent=True, expiry=plan.notice_expiry)
            tally.puts += 1
        if rng.randrange(100) < plan.backout_percent:
            uow.backout()
            tally.units_backed_out += 1
            return
    tally.units_committed += 1
    uow = qm.unit_of_work()
    try:
        for name in rng.sample(QUEUES, rng.randint(1, 2)):
            try:
                qm.open(name).get(uow=uow, wait=plan.get_wait)
                tally.gets += 1
            except NoMessageAvailable:
                tally.get_waits_empty += 1
        if rng.randrange(100) < plan.backout_percent:
            uow.backout()
            tally.units_backed_out += 1
        else:
            uow.commit()
            tally.units_committed += 1
    except SharedqError:
        uow.backout()
        raise


def _body(rng: random.Random) -> bytes:
    return rng.randbytes(rng.randint(40, 400))
