"""Queue-manager message cycles per second, against baselines measured in the same run.

The cycle is what a consuming application does per message: a put out of syncpoint
(the two-phase put: write uncommitted, then sync to the committed key), a get in
syncpoint (the head moves to the manager's get list), and a commit (the message is
deleted).  It is measured with 100-byte and 4 KiB bodies, on both backends.

Memory backend.  Baseline: persist-queue's ``SQLiteAckQueue`` put -> get -> ack of the
same body, in its least durable mode: an in-memory SQLite database (``path=":memory:"``,
``auto_commit=True``).  sharedq's memory backend keeps its structures in memory with no
disk either, so neither side survives its process; that is the durability both have
here.  ``memory_ratio_vs_persistqueue`` is the smaller of the two body sizes' ratios.

``SQLiteAckQueue`` keeps acknowledged rows until ``clear_acked_data()`` is called, and
its gets slow down as they pile up, so its rate depends on how long a run is.  Each
round therefore starts from a fresh queue and runs the same number of cycles
(``ROUND`` = 10,000: a backlog of ten thousand messages worked off).  The
``_cleared`` figures are the same with ``clear_acked_data()`` (its defaults) called
every 1,000 acks inside the timed loop, the maintenance its maintainers ask users to
do; ``memory_ratio_vs_persistqueue_cleared`` compares against that.

Redis backend: a private ``redis-server`` started for the run (no persistence), or the
server of ``--redis URL``.  The sharedq cycle is three requests, each one function
call and one round trip: put = write and sync move (``write_and_rekey``: two changes,
one call), get = move, commit = delete (a unit with one operation commits in one
request).  Baselines, on the facility's own client (same
URL, hiredis parser, RESP2, one connection), LPUSH then RPOP of the same body:

* ``redis_ratio_vs_lpush_rpop`` (the issue's figure): LPUSH/RPOP through the redis-py
  client API (``Redis.lpush``/``Redis.rpop``), as an application calls them;
* ``redis_ratio_vs_lpush_rpop_same_path``: the same two commands over the lean
  connection path the backend itself uses (no redis-py command bookkeeping), which is
  the fairer comparison of what the server and the round trips cost.

``redis_server_us_per_request_*`` is the server's own time per sharedq function call
during the sharedq rounds (``INFO commandstats``).  Then aggregate cycles per second
with 1, 2 and 4 managers in separate processes (``--processes``), all on one shared
queue, each process with its own facility and connection, started together and run for
the same time.  Everything shares the machine's cores with the server.

Rounds of sharedq and of the baselines alternate, and each figure is the best round,
so that a busy moment on a shared machine does not decide a ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import sys
import time
from collections.abc import Callable
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import Report, best_rates_in_turns, parse_args, rate, redis_url
from sharedq.cf import CouplingFacility, open_facility
from sharedq.cf.redis import RedisFacility
from sharedq.mq import QueueExists, QueueManager, structure_params

SIZES = {"100b": 100, "4k": 4096}
#: Cycles in one timed round on memory, for sharedq and persist-queue alike.
ROUND = 10_000
#: Cycles in one timed round on Redis (quick, full), and rounds.
REDIS_ROUND = (2_000, 10_000)
REDIS_ROUNDS = (3, 6)
#: Seconds the manager processes run together (quick, full).
AGGREGATE_SECONDS = (1.5, 5.0)
ADMIN = "BENCHADM"
QUEUE = "BENCH.Q"
DURABILITY = (
    "none on either side: sharedq memory backend (structures in process memory) vs "
    "persist-queue SQLiteAckQueue(':memory:', auto_commit=True) (in-memory SQLite)"
)
BASELINE_CLIENT = (
    "the backend's own redis-py client: same URL and settings, hiredis parser, RESP2, "
    "one connection"
)


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--redis", metavar="URL", help="measure on this Redis server (default: a private one)"
    )
    parser.add_argument(
        "--processes", default="1,2,4", help="manager processes for the aggregate (Redis)"
    )


def prepare_group(facility: CouplingFacility, body_bytes: int, messages: int) -> None:
    """The administrative structure and the queue, if not there already."""
    if not facility.exists(ADMIN):
        facility.create(
            structure_params(
                ADMIN, queues=2, managers=8, messages=messages, message_bytes=body_bytes
            )
        )


def cycler(qm: QueueManager, body: bytes) -> Callable[[int], None]:
    """A function doing ``n`` cycles of put (out of syncpoint), get (in syncpoint), commit."""
    queue = qm.open(QUEUE)

    def cycles(n: int) -> None:
        put, get, begin = queue.put, queue.get, qm.unit_of_work
        for _ in range(n):
            put(body)
            uow = begin()
            get(uow=uow)
            uow.commit()

    return cycles


def start_manager(facility: CouplingFacility, body_bytes: int, qm_id: int = 1) -> QueueManager:
    prepare_group(facility, body_bytes, 20_000)
    qm = QueueManager(facility, f"BENCH{qm_id}", qm_id, admin=ADMIN)
    with contextlib.suppress(QueueExists):  # another process may define it first
        qm.define_queue(QUEUE, max_depth=1_000_000)
    return qm


def sharedq_runner(url: str, body: bytes) -> tuple[Callable[[int], None], Callable[[], None]]:
    facility = open_facility(url)
    qm = start_manager(facility, len(body))

    def close() -> None:
        qm.close()
        facility.close()

    return cycler(qm, body), close


def persistqueue_runner(body: bytes, *, clear_every: int | None = None) -> Callable[[int], None]:
    """``n`` put -> get -> ack cycles on a fresh in-memory ``SQLiteAckQueue``."""
    from persistqueue import SQLiteAckQueue

    def cycles(n: int) -> None:
        queue = SQLiteAckQueue(":memory:", auto_commit=True)
        put, get, ack = queue.put, queue.get, queue.ack
        for i in range(1, n + 1):
            put(body)
            ack(get())
            if clear_every is not None and i % clear_every == 0:
                queue.clear_acked_data()

    return cycles


def duel(
    ours: Callable[[int], None], theirs: Callable[[int], None], n: int, rounds: int
) -> tuple[float, float]:
    """Best rates of alternating rounds: (ours, theirs)."""
    ours(500)
    best_ours = best_theirs = 0.0
    for _ in range(rounds):
        best_ours = max(best_ours, rate(n, lambda: ours(n)))
        best_theirs = max(best_theirs, rate(n, lambda: theirs(n)))
    return best_ours, best_theirs


def memory_figures(report: Report, n: int, rounds: int) -> None:
    ratios, cleared_ratios = [], []
    for label, size in SIZES.items():
        body = b"x" * size
        ours, close = sharedq_runner("memory://", body)
        try:
            mine, baseline = duel(ours, persistqueue_runner(body), n, rounds)
            mine_again, cleared = duel(ours, persistqueue_runner(body, clear_every=1000), n, rounds)
        finally:
            close()
        mine = max(mine, mine_again)
        ratios.append(mine / baseline)
        cleared_ratios.append(mine / cleared)
        report.add(
            f"memory_cycles_per_s_{label}",
            mine,
            "cycles/s",
            "put (out of syncpoint) -> get (in syncpoint) -> commit",
        )
        report.add(
            f"persistqueue_cycles_per_s_{label}",
            baseline,
            "cycles/s",
            "SQLiteAckQueue put -> get -> ack, in-memory SQLite",
        )
        report.add(
            f"persistqueue_cleared_cycles_per_s_{label}",
            cleared,
            "cycles/s",
            "the same, clear_acked_data() every 1,000 acks",
        )
        report.add(f"memory_ratio_vs_persistqueue_{label}", mine / baseline, "x")
        report.add(f"memory_ratio_vs_persistqueue_cleared_{label}", mine / cleared, "x")
    report.add("memory_ratio_vs_persistqueue", min(ratios), "x", "target >= 3 (smaller of both)")
    report.add(
        "memory_ratio_vs_persistqueue_cleared",
        min(cleared_ratios),
        "x",
        "against SQLiteAckQueue with its acked rows cleared",
    )
    report.add("memory_durability", DURABILITY)
    report.add("cycles_per_round", n)


# -- Redis ---------------------------------------------------------------------------------


def _fcall_totals(facility: RedisFacility) -> tuple[int, int]:
    """The server's function calls so far and the microseconds they took."""
    stats: dict[str, Any] = facility.client.redis.info("commandstats")
    fcall = stats.get("cmdstat_fcall", {})
    return int(fcall.get("calls", 0)), int(fcall.get("usec", 0))


def redis_figures(report: Report, url: str, quick: bool, processes: list[int]) -> None:
    n, rounds = REDIS_ROUND[not quick], REDIS_ROUNDS[not quick]
    report.add("redis_cycles_per_round", n)
    ratios: list[tuple[float, float]] = []
    with RedisFacility.from_url(url) as facility:
        for label, size in SIZES.items():
            ratios.append(redis_size_figures(report, facility, label, b"x" * size, n, rounds))
    report.add(
        "redis_ratio_vs_lpush_rpop",
        min(api for api, _ in ratios),
        "",
        "target >= 0.4 (smaller of both sizes; baseline: redis-py client API)",
    )
    report.add(
        "redis_ratio_vs_lpush_rpop_same_path",
        min(lane for _, lane in ratios),
        "",
        "baseline over the backend's own connection path",
    )
    report.add("redis_baseline_client", BASELINE_CLIENT)
    seconds = AGGREGATE_SECONDS[not quick]
    for count in processes:
        plural = "manager" if count == 1 else "managers"
        report.add(
            f"redis_aggregate_cycles_per_s_{count}_{plural}",
            aggregate_rate(url, count, seconds),
            "cycles/s",
            f"{count} {plural} in processes of their own, one shared queue, 100-byte bodies",
        )


def redis_size_figures(
    report: Report, facility: RedisFacility, label: str, body: bytes, n: int, rounds: int
) -> tuple[float, float]:
    """The cycle and both baselines with one body size; returns both ratios."""
    if facility.exists(ADMIN):  # left by an earlier size, or run on a given server
        facility.delete(ADMIN, force=True)
    qm = start_manager(facility, len(body))
    ours = cycler(qm, body)
    public, lane = facility.client.redis, facility.client.command
    baseline_key = "sharedq:bench:lpush-rpop"

    def sharedq() -> None:
        ours(n)

    def lpush_rpop() -> None:
        # The redis-py client API, as an application calls it.
        for _ in range(n):
            public.lpush(baseline_key, body)
            public.rpop(baseline_key)

    def lpush_rpop_same_path() -> None:
        # The same commands over the backend's own per-thread connection path.
        for _ in range(n):
            lane("LPUSH", baseline_key, body)
            lane("RPOP", baseline_key)

    ours(500)
    calls, usec = _fcall_totals(facility)
    best = best_rates_in_turns(
        n, {"ours": sharedq, "api": lpush_rpop, "lane": lpush_rpop_same_path}, rounds
    )
    calls_after, usec_after = _fcall_totals(facility)
    qm.close()
    facility.delete(ADMIN, force=True)
    report.add(
        f"redis_cycles_per_s_{label}",
        best["ours"],
        "cycles/s",
        "put -> get -> commit: 3 requests, 3 round trips",
    )
    report.add(
        f"redis_lpush_rpop_per_s_{label}", best["api"], "pairs/s", "LPUSH + RPOP, redis-py API"
    )
    report.add(
        f"redis_lpush_rpop_same_path_per_s_{label}",
        best["lane"],
        "pairs/s",
        "LPUSH + RPOP, the backend's connection path",
    )
    api, same_path = best["ours"] / best["api"], best["ours"] / best["lane"]
    report.add(f"redis_ratio_vs_lpush_rpop_{label}", api)
    report.add(f"redis_ratio_vs_lpush_rpop_same_path_{label}", same_path)
    report.add(
        f"redis_server_us_per_request_{label}",
        (usec_after - usec) / max(1, calls_after - calls),
        "us",
        "server time of one sharedq function call",
    )
    return api, same_path


def _manager_process(
    url: str, qm_id: int, start: float, seconds: float, counts: Queue[int]
) -> None:
    """One manager in a process of its own: cycles until the common end, then its count."""
    with open_facility(url) as facility:
        qm = start_manager(facility, 100, qm_id)
        cycles = cycler(qm, b"x" * 100)
        cycles(50)
        while time.time() < start:
            time.sleep(0.001)
        done = 0
        while time.time() < start + seconds:
            cycles(50)
            done += 50
        counts.put(done)
        qm.close()


def aggregate_rate(url: str, processes: int, seconds: float) -> float:
    """Cycles per second of ``processes`` managers, each in its own process, together."""
    with open_facility(url) as facility:  # the group, before the managers race for it
        start_manager(facility, 100, 9).close()
    context = multiprocessing.get_context("spawn")
    counts: Queue[int] = context.Queue()
    start = time.time() + 2.0  # after every process has started and connected
    workers = [
        context.Process(target=_manager_process, args=(url, 10 + i, start, seconds, counts))
        for i in range(processes)
    ]
    for worker in workers:
        worker.start()
    total = sum(counts.get(timeout=300) for _ in workers)
    for worker in workers:
        worker.join(timeout=60)
    return total / seconds


def main() -> None:
    args = parse_args(__doc__.splitlines()[0] if __doc__ else "mq cycle", _options)
    report = Report("sharedq.mq message cycle", args.quick)
    memory_figures(report, ROUND, 2 if args.quick else 5)
    counts = [int(c) for c in args.processes.split(",") if c]
    with redis_url(args.redis) as url:
        redis_figures(report, url, args.quick, counts)
    report.emit(args.json)


if __name__ == "__main__":
    main()
