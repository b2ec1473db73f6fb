"""List-structure operations per second, against bare containers in the same run.

Memory backend: write, conditional move of the head, delete by id, and the
write -> conditional move -> delete cycle a queue manager does per message; the same
cycle on ``sortedcontainers`` structures with no accounting, conditions, sequence
numbers or locking is the baseline (``memory_cycle_ratio_vs_sortedlist``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sortedcontainers import SortedDict

from bench.harness import Report, best_rate, parse_args
from sharedq.cf import ById, Compare, Head, ListStructure, StructureParams
from sharedq.cf.memory import MemoryFacility

COMMITTED = b"\x0a" + b"\x00" * 15
PAYLOAD = b"x" * 100


def committed_key(n: int) -> bytes:
    return b"\x04" + n.to_bytes(15, "big")


def fresh_memory_structure(capacity: int) -> ListStructure:
    facility = MemoryFacility()
    facility.create(
        StructureParams.for_capacity("BENCH", list_count=4, entries=capacity, elements=capacity)
    )
    return facility.connect("BENCH", "BENCH")


def memory_figures(report: Report, n: int) -> float:
    struct = fresh_memory_structure(n + 10)
    ids: list[bytes] = []

    def writes() -> None:
        ids.clear()
        for i in range(n):
            ids.append(struct.write(0, committed_key(i), PAYLOAD).entry.entry_id)

    def moves() -> None:
        head = Head(0, key=COMMITTED, compare=Compare.LE)
        for _ in range(n):
            struct.move(head, 1)

    def deletes() -> None:
        for entry_id in ids:
            struct.delete(ById(entry_id))

    write_rate = move_rate = delete_rate = 0.0
    for _ in range(3):
        write_rate = max(write_rate, best_rate(n, writes, repeats=1))
        move_rate = max(move_rate, best_rate(n, moves, repeats=1))
        delete_rate = max(delete_rate, best_rate(n, deletes, repeats=1))
    report.add("memory_write_ops_per_s", write_rate, "ops/s")
    report.add("memory_move_head_ops_per_s", move_rate, "ops/s", "conditional on key <= X'0A00..'")
    report.add("memory_delete_ops_per_s", delete_rate, "ops/s")

    def cycle() -> None:
        head = Head(0, key=COMMITTED, compare=Compare.LE)
        for i in range(n):
            struct.write(0, committed_key(i), PAYLOAD)
            change = struct.move(head, 1)
            assert change is not None
            struct.delete(ById(change.entry.entry_id))

    cycle_rate = best_rate(n, cycle)
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


def main() -> None:
    args = parse_args(__doc__ or "")
    n = 20_000 if args.quick else 200_000
    report = Report("sharedq.cf operations", args.quick)
    report.add("operations_per_run", n)
    cycle_rate = memory_figures(report, n)
    baseline = sortedcontainers_cycle_rate(n)
    report.add("sortedlist_cycle_per_s", baseline, "cycles/s", "bare sortedcontainers baseline")
    report.add("memory_cycle_ratio_vs_sortedlist", cycle_rate / baseline, "", "target >= 0.33")
    report.emit(args.json)


if __name__ == "__main__":
    main()
