"""Sequence numbers: strictly increasing across users, none taken by failures."""

from __future__ import annotations

import threading

from sharedq.cf import (
    BulkMove,
    ById,
    CouplingFacility,
    Head,
    ListFull,
    StructureParams,
)
from sharedq.testing.conformance._registry import MakeStructure, check, raises
from sharedq.testing.conformance.helpers import key


@check
def every_kind_of_change_takes_a_higher_seq(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    user = facility.connect(make_structure(), "U")
    seqs = []
    entry = user.write(0, key(1), b"a")
    seqs.append(entry.seq)
    moved = user.move(ById(entry.entry.entry_id), 1)
    assert moved is not None
    seqs.append(moved.seq)
    updated = user.update(Head(1), data=b"b")
    assert updated is not None
    seqs.append(updated.seq)
    seqs.append(user.set_list_controls(1, limit=10))
    seqs.append(user.lock(0))
    seqs.append(user.unlock(0))
    seqs.append(user.monitor_list(2).seq)
    bulk = user.move_entries([BulkMove(entry.entry.entry_id, 2)])
    seqs.extend(bulk.seqs)
    deleted = user.delete(Head(2))
    assert deleted is not None
    seqs.append(deleted.seq)
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert user.statistics().seq == seqs[-1]


@check
def failed_requests_take_no_seq(facility: CouplingFacility, make_structure: MakeStructure) -> None:
    user = facility.connect(make_structure(), "U")
    user.set_list_controls(0, limit=0)
    before = user.statistics().seq
    with raises(ListFull):
        user.write(0, key(1))
    assert user.move(Head(3), 1) is None
    assert user.statistics().seq == before


@check
def sequence_floor_continues_an_old_numbering(facility: CouplingFacility) -> None:
    facility.create(
        StructureParams(name="REBUILT", list_count=2, size=100_000), sequence_floor=5000
    )
    user = facility.connect("REBUILT", "U")
    assert user.write(0, key(1)).seq > 5000


@check
def seqs_are_unique_and_ordered_across_concurrent_users(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    name = make_structure(entries=2000, elements=2000)
    per_user: dict[int, list[int]] = {}

    def work(n: int) -> None:
        user = facility.connect(name, f"W{n}")
        seqs = per_user.setdefault(n, [])
        for i in range(100):
            seqs.append(user.write(n, key(i)).seq)
            moved = user.move(Head(n), n)
            assert moved is not None
            seqs.append(moved.seq)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = [seq for seqs in per_user.values() for seq in seqs]
    assert len(everything) == len(set(everything)) == 800
    for seqs in per_user.values():
        assert seqs == sorted(seqs)
