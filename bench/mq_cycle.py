"""Queue-manager message cycles per second, against baselines measured in the same run.

The cycle is what a consuming application does per message: a put out of syncpoint
(the two-phase put: write uncommitted, then sync to the committed key), a get in
syncpoint (the head moves to the manager's get list), and a commit (the message is
deleted).  It is measured with 100-byte and 4 KiB bodies.

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

Redis backend (``--redis URL``, once the Redis backend is available): the same cycle
through ``open_facility(URL)``, against raw redis-py ``LPUSH`` + ``RPOP`` of the same
body on one connection (``redis_ratio_vs_lpush_rpop``), and aggregate cycles per second
with 1, 2 and 4 managers in separate processes (``--processes``).  Without ``--redis``
those figures are not measured and not reported.

Rounds of sharedq and of the baseline alternate, and each figure is the best round,
so that a busy moment on a shared machine does not decide a ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import Report, parse_args, rate
from sharedq.cf import CouplingFacility, open_facility
from sharedq.mq import QueueExists, QueueManager, structure_params

SIZES = {"100b": 100, "4k": 4096}
#: Cycles in one timed round, for sharedq and the baselines alike.
ROUND = 10_000
ADMIN = "BENCHADM"
QUEUE = "BENCH.Q"
DURABILITY = (
    "none on either side: sharedq memory backend (structures in process memory) vs "
    "persist-queue SQLiteAckQueue(':memory:', auto_commit=True) (in-memory SQLite)"
)


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--redis", metavar="URL", help="also measure on this Redis server")
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


def sharedq_runner(
    url: str, body: bytes, qm_id: int = 1
) -> tuple[Callable[[int], None], Callable[[], None]]:
    facility = open_facility(url)
    prepare_group(facility, len(body), 20_000)
    qm = QueueManager(facility, f"BENCH{qm_id}", qm_id, admin=ADMIN)
    with contextlib.suppress(QueueExists):  # another process may define it first
        qm.define_queue(QUEUE, max_depth=1_000_000)

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


def lpush_rpop_runner(url: str, body: bytes) -> Callable[[int], None]:
    import redis

    client = redis.Redis.from_url(url)
    key = "sharedq-bench:lpush-rpop"
    client.delete(key)

    def cycles(n: int) -> None:
        lpush, rpop = client.lpush, client.rpop
        for _ in range(n):
            lpush(key, body)
            rpop(key)

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


def redis_figures(report: Report, url: str, n: int, rounds: int, processes: list[int]) -> None:
    ratios = []
    for label, size in SIZES.items():
        body = b"x" * size
        ours, close = sharedq_runner(url, body)
        try:
            mine, baseline = duel(ours, lpush_rpop_runner(url, body), n, rounds)
        finally:
            close()
        ratios.append(mine / baseline)
        report.add(f"redis_cycles_per_s_{label}", mine, "cycles/s")
        report.add(f"redis_lpush_rpop_per_s_{label}", baseline, "cycles/s")
        report.add(f"redis_ratio_vs_lpush_rpop_{label}", mine / baseline, "x")
    report.add("redis_ratio_vs_lpush_rpop", min(ratios), "x", "target >= 0.4 (smaller of both)")
    for count in processes:
        report.add(
            f"redis_aggregate_cycles_per_s_{count}_managers",
            aggregate_rate(url, count, n),
            "cycles/s",
            "100-byte bodies",
        )


def _process_worker(
    url: str, qm_id: int, n: int, start: float, results: multiprocessing.Queue
) -> None:
    ours, close = sharedq_runner(url, b"x" * 100, qm_id)
    ours(50)
    while time.time() < start:
        time.sleep(0.001)
    began = time.perf_counter()
    ours(n)
    results.put((n, time.perf_counter() - began))
    close()


def aggregate_rate(url: str, processes: int, n: int) -> float:
    """Cycles per second of ``processes`` managers, each in its own process, together."""
    results: multiprocessing.Queue = multiprocessing.Queue()
    start = time.time() + 2.0
    workers = [
        multiprocessing.Process(target=_process_worker, args=(url, 10 + i, n, start, results))
        for i in range(processes)
    ]
    for worker in workers:
        worker.start()
    done = [results.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join()
    return sum(count for count, _ in done) / max(elapsed for _, elapsed in done)


def main() -> None:
    args = parse_args(__doc__.splitlines()[0] if __doc__ else "mq cycle", _options)
    n, rounds = ROUND, (2 if args.quick else 5)
    report = Report("sharedq.mq message cycle", args.quick)
    memory_figures(report, n, rounds)
    if args.redis:
        counts = [int(c) for c in args.processes.split(",") if c]
        redis_figures(report, args.redis, n, rounds, counts)
    report.emit(args.json)


if __name__ == "__main__":
    main()
