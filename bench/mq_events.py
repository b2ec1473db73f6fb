"""Queue depth events: what they cost the message cycle, and what one event costs.

Used by ``bench/mq_cycle.py`` (its figures ``events_*`` and ``event_*``):

* ``events_ratio_vs_off``: the cycle (a persistent put out of syncpoint, a get in a
  unit of work, its commit) on a queue with every depth event enabled whose depth
  oscillates just under the High limit (78 and 79 of 100, limit 80: never crossed),
  against the same cycle on a queue with events disabled, same run: the median
  ratio of many short turns of each, in both orders,
  on Redis (``events_ratio_vs_off_memory`` on the memory backend).  Target >= 0.9:
  detection reads the depth the put and get requests return, and makes no request of
  its own unless a limit is crossed; ``events_round_trips_per_cycle`` and
  ``events_off_round_trips_per_cycle`` say so.
* ``event_cost_ms_3_managers``: three managers with PERFMEV enabled, each with its own
  facility (its own connections, as in three processes); from the put that crosses
  the High limit until an observer has gotten the three event messages (median of
  ``EVENT_REPEATS``); ``event_round_trips_coordinator`` the crossing put's requests
  (the put, the toggle, its own message, the broadcast), and
  ``event_round_trips_total`` every manager's requests for the event (the responders'
  and the observer's gets included).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from bench.harness import Report, RoundTrips, best_rates_in_turns
from sharedq.cf import CouplingFacility
from sharedq.cf.memory import MemoryFacility
from sharedq.cf.redis import RedisFacility
from sharedq.mq import EVENT_QUEUE, DepthEvents, QueueManager, structure_params

ADMIN = "BENCHEVADM"
ON, OFF = "BENCH.EV.ON", "BENCH.EV.OFF"
ALL_ENABLED = DepthEvents(80, 20, True, True, True)
#: Messages kept on each queue: each cycle's put makes 79 of 100, its get 78.
KEPT = 78
EVENT_REPEATS = (3, 10)
#: Turns of each kind a round is cut into.
CHUNKS_PER_ROUND = 10


def cycler(qm: QueueManager, name: str, body: bytes = b"x" * 100) -> Callable[[int], None]:
    """A function doing ``n`` cycles of the user's path on queue ``name``: a
    persistent put (out of syncpoint), a get in a unit of work, the unit's commit."""
    queue = qm.open(name)

    def cycles(n: int) -> None:
        put, get, begin = queue.put, queue.get, qm.unit_of_work
        for _ in range(n):
            put(body, persistent=True)
            uow = begin()
            get(uow=uow)
            uow.commit()

    return cycles


def _prepare(facility: CouplingFacility) -> QueueManager:
    if facility.exists(ADMIN):
        facility.delete(ADMIN, force=True)
    facility.create(structure_params(ADMIN, queues=8, managers=8, messages=2_000))
    qm = QueueManager(facility, "EVBENCH1", 1, admin=ADMIN, performance_events=True)
    for name, events in ((ON, ALL_ENABLED), (OFF, DepthEvents())):
        qm.define_queue(name, max_depth=100, depth_events=events)
        qm.open(name).put_many([b"kept"] * KEPT)
    return qm


def cycle_figures(
    report: Report, facility: CouplingFacility, n: int, rounds: int, label: str
) -> float:
    """The cycle with events on and off; returns the ratio."""
    qm = _prepare(facility)
    on, off = cycler(qm, ON), cycler(qm, OFF)
    on(200)
    off(200)
    # Short turns, in both orders, many of them: each pair of turns sees the same load
    # of a busy machine, and the ratio is the median of the pairs' ratios.
    chunk = max(100, n // CHUNKS_PER_ROUND)
    best = {"on": 0.0, "off": 0.0}
    pairs: list[float] = []
    for turn in range(rounds * CHUNKS_PER_ROUND):
        order = ("on", "off") if turn % 2 == 0 else ("off", "on")
        fns = {"on": lambda: on(chunk), "off": lambda: off(chunk)}
        rates = best_rates_in_turns(chunk, {k: fns[k] for k in order}, 1)
        pairs.append(rates["on"] / rates["off"])
        for name, value in rates.items():
            best[name] = max(best[name], value)
    suffix = "" if label == "redis" else f"_{label}"
    if label == "redis":
        with RoundTrips() as trips:
            on(100)
            trips_on = trips.of()
        with RoundTrips() as trips:
            off(100)
            trips_off = trips.of()
        report.add("events_round_trips_per_cycle", trips_on / 100, "", "events enabled")
        report.add("events_off_round_trips_per_cycle", trips_off / 100, "", "events disabled")
    assert qm.queue_definition(ON).depth_events == ALL_ENABLED  # nothing was crossed
    qm.close()
    facility.delete(ADMIN, force=True)
    ratio = statistics.median(pairs)
    report.add(f"events_on_cycles_per_s{suffix}", best["on"], "cycles/s", "depth events enabled")
    report.add(f"events_off_cycles_per_s{suffix}", best["off"], "cycles/s", "depth events disabled")
    report.add(
        f"events_ratio_vs_off{suffix}",
        ratio,
        "",
        "target >= 0.9: depth under the High limit, events enabled vs disabled",
    )
    return ratio


def memory_figures(report: Report, n: int, rounds: int) -> None:
    with MemoryFacility() as facility:
        cycle_figures(report, facility, n, rounds, "memory")


def event_cost_figures(report: Report, url: str, quick: bool) -> None:
    """One High event with three managers, each on a facility of its own."""
    facilities = [RedisFacility.from_url(url) for _ in range(4)]
    admin = facilities[0]
    if admin.exists(ADMIN):
        admin.delete(ADMIN, force=True)
    admin.create(structure_params(ADMIN, queues=8, managers=8, messages=2_000))
    managers = [
        QueueManager(facilities[i], f"EVBENCH{i + 1}", i + 1, admin=ADMIN, performance_events=True)
        for i in range(3)
    ]
    observer = QueueManager(facilities[3], "EVBENCH9", 9, admin=ADMIN)
    high = DepthEvents(80, 20, True, False, False)
    observer.define_queue(ON, max_depth=100, depth_events=high)
    queue, events = managers[1].open(ON), observer.open(EVENT_QUEUE)
    costs, coordinator, total = [], 0, 0
    for _ in range(EVENT_REPEATS[not quick]):
        observer.alter_queue(ON, depth_events=high)  # armed again
        queue.put_many([b"x"] * 79)
        with RoundTrips() as trips:
            start = time.perf_counter()
            queue.put(b"the crossing put")
            coordinator += trips.of()
            for _ in range(3):
                events.get(wait=30)
            costs.append(time.perf_counter() - start)
            total += sum(trips.sends.values())
        while queue.get_many(100):
            pass
    repeats = len(costs)
    report.add(
        "event_cost_ms_3_managers",
        statistics.median(costs) * 1000,
        "ms",
        "the crossing put until the 3 event messages are gotten (median)",
    )
    report.add("event_round_trips_coordinator", coordinator / repeats, "", "the crossing put's")
    report.add(
        "event_round_trips_total", total / repeats, "", "every manager's, observer's gets included"
    )
    for qm in (*managers, observer):
        qm.close()
    admin.delete(ADMIN, force=True)
    for facility in facilities:
        facility.close()
