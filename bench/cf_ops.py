"""List-structure operations per second, against bare baselines in the same run.

Memory backend: write, conditional move of the head, delete by id, and the
write -> conditional move -> delete cycle a queue manager does per message; the same
cycle on ``sortedcontainers`` structures with no accounting, conditions, sequence
numbers or locking is the baseline (``memory_cycle_ratio_vs_sortedlist``).

Redis backend: the same figures on a Redis server (a private ``redis-server`` started
for the run, or ``--redis-url``), each step one atomic function call; the baseline is
LPUSH then RPOP of the same payload with the same redis-py client (hiredis parser,
one connection), measured in turns with the cycle (``redis_cycle_ratio_vs_lpush_rpop``).
Then requests per second of the cycle with 1, 2 and 4 client processes on one server.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sortedcontainers import SortedDict

from bench.harness import Report, best_rate, best_rates_in_turns, parse_args, redis_url
from sharedq.cf import ById, Compare, CouplingFacility, Head, ListStructure, StructureParams
from sharedq.cf.memory import MemoryFacility
from sharedq.cf.redis import RedisFacility

COMMITTED = b"\x0a" + b"\x00" * 15
PAYLOAD = b"x" * 100
GET = Head(0, key=COMMITTED, compare=Compare.LE)
PROCESS_COUNTS = (1, 2, 4)


def committed_key(n: int) -> bytes:
    return b"\x04" + n.to_bytes(15, "big")


def fresh_structure(facility: CouplingFacility, capacity: int, lists: int = 4) -> ListStructure:
    facility.create(
        StructureParams.for_capacity("BENCH", list_count=lists, entries=capacity, elements=capacity)
    )
    return facility.connect("BENCH", "BENCH")


def op_rates(report: Report, prefix: str, struct: ListStructure, n: int, rounds: int) -> None:
    """Writes, conditional head moves and deletes by id, each as a run of ``n``."""
    ids: list[bytes] = []

    def writes() -> None:
        ids.clear()
        for i in range(n):
            ids.append(struct.write(0, committed_key(i), PAYLOAD).entry.entry_id)

    def moves() -> None:
        for _ in range(n):
            struct.move(GET, 1)

    def deletes() -> None:
        for entry_id in ids:
            struct.delete(ById(entry_id))

    # In this order each run leaves the structure as the next one needs it.
    best = best_rates_in_turns(n, {"write": writes, "move": moves, "delete": deletes}, rounds)
    report.add(f"{prefix}_write_ops_per_s", best["write"], "ops/s")
    report.add(
        f"{prefix}_move_head_ops_per_s", best["move"], "ops/s", "conditional on key <= X'0A00..'"
    )
    report.add(f"{prefix}_delete_ops_per_s", best["delete"], "ops/s")


def cycle_of(
    struct: ListStructure, n: int, get_list: int = 1, put_list: int = 0
) -> Callable[[], None]:
    """The per-message cycle: write, get the head (conditional move), delete by id."""
    get = Head(put_list, key=COMMITTED, compare=Compare.LE)

    def cycle() -> None:
        for i in range(n):
            struct.write(put_list, committed_key(i), PAYLOAD)
            change = struct.move(get, get_list)
            assert change is not None
            struct.delete(ById(change.entry.entry_id))

    return cycle


# -- memory ------------------------------------------------------------------------------


def memory_figures(report: Report, n: int) -> float:
    facility = MemoryFacility()
    op_rates(report, "memory", fresh_structure(facility, n + 10), n, rounds=3)
    struct = facility.connect("BENCH", "CYCLE")
    cycle_rate = best_rate(n, cycle_of(struct, n))
    report.add("memory_cycle_per_s", cycle_rate, "cycles/s", "write -> move head -> delete")
    return cycle_rate


def sortedcontainers_cycle_rate(n: int) -> float:
    """The same cycle on bare SortedDicts: two lists, an id index, head comparison."""
    lists = [SortedDict(), SortedDict()]
    index: dict[bytes, tuple[int, tuple[bytes, int]]] = {}
    counter = [0]

    def cycle() -> None:
        put_list, get_list = lists
        for i in range(n):
            counter[0] += 1
            ordinal = counter[0]
            entry_id = ordinal.to_bytes(12, "big")
            sort_key = (committed_key(i), ordinal)
            put_list[sort_key] = (entry_id, PAYLOAD)
            index[entry_id] = (0, sort_key)
            head_key, value = put_list.peekitem(0)
            assert head_key[0] <= COMMITTED
            del put_list[head_key]
            counter[0] += 1
            moved_key = (head_key[0], counter[0])
            get_list[moved_key] = value
            index[value[0]] = (1, moved_key)
            list_number, at = index.pop(value[0])
            del lists[list_number][at]

    return best_rate(n, cycle)


# -- redis -------------------------------------------------------------------------------


def redis_figures(report: Report, url: str, n: int, rounds: int) -> None:
    with RedisFacility.from_url(url) as facility:
        for name in facility.structure_names():
            if name == "BENCH":
                facility.delete(name, force=True)
        struct = fresh_structure(facility, n + 10, lists=2 * max(PROCESS_COUNTS))
        op_rates(report, "redis", struct, n, rounds=max(1, rounds // 2))
        client = facility.client
        public, lane = client.redis, client.command

        def lpush_rpop() -> None:
            # The baseline: the redis-py client API, as an application calls it.
            for _ in range(n):
                public.lpush("sharedq:bench:baseline", PAYLOAD)
                public.rpop("sharedq:bench:baseline")

        def lpush_rpop_same_path() -> None:
            # The same commands over the per-thread connection path the backend uses.
            for _ in range(n):
                lane("LPUSH", "sharedq:bench:baseline", PAYLOAD)
                lane("RPOP", "sharedq:bench:baseline")

        best = best_rates_in_turns(
            n,
            {"cycle": cycle_of(struct, n), "pair": lpush_rpop, "lane": lpush_rpop_same_path},
            rounds,
        )
        report.add("redis_cycle_per_s", best["cycle"], "cycles/s", "3 function calls a cycle")
        report.add(
            "redis_lpush_rpop_per_s", best["pair"], "pairs/s", "redis-py client API, 1 connection"
        )
        report.add(
            "redis_cycle_ratio_vs_lpush_rpop", best["cycle"] / best["pair"], "", "target >= 0.5"
        )
        report.add(
            "redis_cycle_ratio_vs_lpush_rpop_same_path",
            best["cycle"] / best["lane"],
            "",
            "baseline over the backend's own connection path",
        )
        struct.disconnect()
        facility.delete("BENCH")


def _client_process(
    url: str, user: int, start: float, seconds: float, counts: multiprocessing.Queue[int]
) -> None:
    """One client process: cycles on its own pair of lists of the shared structure."""
    with RedisFacility.from_url(url) as facility:
        struct = facility.connect("PROCS", f"P{user}")
        cycle = cycle_of(struct, 50, get_list=2 * user + 1, put_list=2 * user)
        while time.time() < start:
            time.sleep(0.001)
        done = 0
        while time.time() < start + seconds:
            cycle()
            done += 50
        counts.put(done * 3)
        struct.disconnect()


def process_rates(report: Report, url: str, seconds: float) -> None:
    context = multiprocessing.get_context("spawn")
    with RedisFacility.from_url(url) as facility:
        if facility.exists("PROCS"):
            facility.delete("PROCS", force=True)
        facility.create(
            StructureParams.for_capacity(
                "PROCS", list_count=2 * max(PROCESS_COUNTS), entries=1000, elements=1000
            )
        )
        for count in PROCESS_COUNTS:
            counts: multiprocessing.Queue[int] = context.Queue()
            start = time.time() + 2.0  # after every process has started and connected
            processes = [
                context.Process(target=_client_process, args=(url, n, start, seconds, counts))
                for n in range(count)
            ]
            for process in processes:
                process.start()
            total = sum(counts.get(timeout=120) for _ in processes)
            for process in processes:
                process.join(timeout=60)
            plural = "process" if count == 1 else "processes"
            report.add(
                f"redis_ops_per_s_{count}_{plural}",
                total / seconds,
                "ops/s",
                f"write/move/delete cycles, {count} client {plural}, one server",
            )
        facility.delete("PROCS")


def extra_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--redis-url", metavar="URL", help="measure on this server (default: a private one)"
    )


def main() -> None:
    args = parse_args(__doc__ or "", extra_options)
    n = 20_000 if args.quick else 200_000
    report = Report("sharedq.cf operations", args.quick)
    report.add("operations_per_run", n)
    cycle_rate = memory_figures(report, n)
    baseline = sortedcontainers_cycle_rate(n)
    report.add("sortedlist_cycle_per_s", baseline, "cycles/s", "bare sortedcontainers baseline")
    report.add("memory_cycle_ratio_vs_sortedlist", cycle_rate / baseline, "", "target >= 0.33")
    redis_n, rounds, seconds = (1_000, 6, 1.5) if args.quick else (5_000, 12, 5.0)
    report.add("redis_operations_per_run", redis_n)
    with redis_url(args.redis_url) as url:
        redis_figures(report, url, redis_n, rounds)
        process_rates(report, url, seconds)
    report.emit(args.json)


if __name__ == "__main__":
    main()
