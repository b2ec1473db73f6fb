"""Several threads acting as several users on one structure."""

from __future__ import annotations

import threading
from collections import Counter

from sharedq.cf import BulkMove, ById, Compare, CouplingFacility, Head
from sharedq.testing.conformance._registry import MakeStructure, check
from sharedq.testing.conformance.helpers import key

COMMITTED = b"\x0a" + b"\x00" * 15


@check
def conditional_head_moves_never_hand_one_entry_to_two_users(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    name = make_structure(list_count=10, entries=3000, elements=3000)
    producer = facility.connect(name, "PRODUCER")
    total = 1200
    got: dict[int, list[bytes]] = {}
    done = threading.Event()

    def consume(n: int) -> None:
        user = facility.connect(name, f"C{n}")
        mine = got.setdefault(n, [])
        while True:
            change = user.move(Head(0, key=COMMITTED, compare=Compare.LE), 1 + n)
            if change is None:
                if done.is_set() and user.read(Head(0)) is None:
                    return
                continue
            mine.append(change.entry.data)

    threads = [threading.Thread(target=consume, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for i in range(total):
        # Written uncommitted, then committed by a move within the list: the patent's
        # two-phase put.  A consumer must never see the uncommitted form.
        entry = producer.write(0, b"\xf6" + i.to_bytes(15, "big"), b"%06d" % i).entry
        producer.move(ById(entry.entry_id), 0, new_key=b"\x04" + i.to_bytes(15, "big"))
    done.set()
    for thread in threads:
        thread.join(timeout=60)
    counts = Counter(data for mine in got.values() for data in mine)
    assert len(counts) == total
    assert max(counts.values()) == 1
    assert sum(producer.list_info(1 + n).entries for n in range(4)) == total
    for mine in got.values():
        assert mine == sorted(mine)  # each consumer took them in key order


@check
def concurrent_bulk_and_single_requests_keep_counts_exact(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    name = make_structure(list_count=4, entries=5000, elements=5000)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            user = facility.connect(name, f"W{n}")
            for round_ in range(20):
                ids = [
                    user.write(n, key(round_ * 100 + i), b"x" * 300).entry.entry_id
                    for i in range(10)
                ]
                result = user.move_entries([BulkMove(i, n, new_key=key(7)) for i in ids])
                assert result.complete
                result = user.delete_entries(ids[:5])
                assert result.complete
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    observer = facility.connect(name, "OBSERVER")
    stats = observer.statistics()
    assert stats.entries == 4 * 20 * 5
    assert stats.elements == stats.entries * 2
    assert [observer.list_info(n).entries for n in range(4)] == [100] * 4
