"""The seed's full-function flow (redbook chapter 3, figures 10-13) step by step.

Three CQSs (IMSA, IMSB, IMSC) share one MSGQ structure; after each step the test
looks at every list of the structure through a connection of its own.
"""

from __future__ import annotations

import threading

from sharedq.cf import CouplingFacility
from sharedq.cqs import CQS, Kind, Message, Uow, make_name

from .conftest import MSGQ, MakeCQS
from .helpers import LTERMA, TRANA, TRANB, where

LTERMA_Q = LTERMA


def test_the_full_function_flow_of_figures_10_to_13(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    told: dict[str, list[bytes]] = {"IMSA": [], "IMSB": []}
    cqsa = make_cqs("IMSA", on_work=lambda kind, q: told["IMSA"].append(q))
    cqsb = make_cqs("IMSB", on_work=lambda kind, q: told["IMSB"].append(q))

    # 1. IMSA and IMSB register interest in TRANB; 2. IMSA in LTERMA (it logged on).
    assert cqsa.register(TRANB) is False and cqsb.register(TRANB) is False
    assert cqsa.register(LTERMA_Q) is False
    assert cqsa.statistics().emcs == 3
    assert where(facility, MSGQ) == {}

    # 3-4. IMSA gets MSG1 and, without resources, puts it on TRANB's ready queue.
    msg1_uow = cqsa.new_uow()
    cqsa.put(TRANB, b"MSG1", uow=msg1_uow)
    assert where(facility, MSGQ) == {"ready": [(TRANB, b"MSG1")]}

    # 5. Both are told that TRANB went from empty to non-empty.
    assert cqsa.wait_for_work(30) == (Kind.MSGQ, TRANB)
    assert cqsb.wait_for_work(30) == (Kind.MSGQ, TRANB)

    # 6-7. IMSB reads MSG1 first: it moves to the lock queue; IMSA finds nothing.
    msg1 = cqsb.read(TRANB)
    assert msg1 is not None and msg1.body == b"MSG1" and msg1.uow == msg1_uow
    assert cqsa.read(TRANB) is None
    assert where(facility, MSGQ) == {"lock": [(TRANB, b"CQSIMSB")]}

    # 9. The reply MSG2 in two buffers: MSG2B to the LTERM staging queue first, then
    # MSG2A to LTERMA's ready queue; spawned from MSG1's unit of work.
    msg2_uow = msg1.uow.spawn("IMSB", cqsb.tokens)
    cqsb.put(LTERMA_Q, [b"MSG2A", b"MSG2B"], uow=msg2_uow)
    lists = where(facility, MSGQ)
    assert lists["ready"] == [(LTERMA_Q, b"MSG2A")]
    [(staging, body)] = lists["staging"]
    assert staging[0] == 6 and staging[9:13] == b"IMSB" and body == b"MSG2B"
    #    ... and IMSB deletes MSG1 from the lock queue.
    assert msg1.token is not None
    cqsb.delete(msg1.token)
    assert "lock" not in where(facility, MSGQ)

    # 10. IMSA is told of work for LTERMA; IMSB (not registered) is not.
    assert cqsa.wait_for_work(30) == (Kind.MSGQ, LTERMA_Q)
    assert told["IMSB"] == [TRANB]

    # 11. IMSA reads MSG2: part 1 locked, the parts read from the staging queue.
    msg2 = cqsa.read(LTERMA_Q)
    assert msg2 is not None and msg2.parts == (b"MSG2A", b"MSG2B")
    assert msg2.uow.origin_id == msg1_uow.origin_id and msg2.uow.processor == b"IMSB    "
    lists = where(facility, MSGQ)
    assert lists["lock"] == [(LTERMA_Q, b"CQSIMSA")] and "ready" not in lists
    assert lists["staging"] == [(staging, b"MSG2B")]

    # 12. LTERMA acknowledged: IMSA deletes MSG2A and MSG2B.
    assert msg2.token is not None
    cqsa.delete(msg2.token)
    assert where(facility, MSGQ) == {}
    assert told["IMSA"] == [TRANB, LTERMA_Q]


def test_local_processing_goes_straight_to_the_lock_queue_and_tells_nobody(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    cqsa, cqsb = make_cqs("IMSA"), make_cqs("IMSB")
    sentinel = make_name(1, "SENTINEL")
    for cqs in (cqsa, cqsb):
        cqs.register(TRANB)
        cqs.register(sentinel)

    token = cqsa.put(TRANB, b"MSG1", local=True)
    assert where(facility, MSGQ) == {"lock": [(TRANB, b"CQSIMSA")]}
    assert cqsa.locks() == [token]
    # Nobody was told: the next work either CQS hears of is the sentinel put after it.
    cqsa.put(sentinel, b"later")
    assert cqsa.wait_for_work(30) == (Kind.MSGQ, sentinel)
    assert cqsb.wait_for_work(30) == (Kind.MSGQ, sentinel)
    assert cqsb.read(TRANB) is None

    message = cqsa.browse_locked(token)  # type: ignore[arg-type]
    assert message.body == b"MSG1"
    cqsa.delete(token)  # type: ignore[arg-type]
    assert where(facility, MSGQ) == {"ready": [(sentinel, b"later")]}


def test_global_processing_three_readers_first_wins_the_others_get_none(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    cqss = [make_cqs(s) for s in ("IMSA", "IMSB", "IMSC")]
    for cqs in cqss:
        assert cqs.register(TRANA) is False
    cqss[0].put(TRANA, b"the one")
    results: dict[str, Message | None] = {}
    start = threading.Barrier(3)

    def bid(cqs: CQS) -> None:
        assert cqs.wait_for_work(30) == (Kind.MSGQ, TRANA)  # every registered CQS told
        start.wait()
        results[cqs.system] = cqs.read(TRANA)

    threads = [threading.Thread(target=bid, args=(c,)) for c in cqss]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = {s: m for s, m in results.items() if m is not None}
    assert len(results) == 3 and len(winners) == 1
    [(system, message)] = winners.items()
    assert message is not None and message.body == b"the one"
    assert where(facility, MSGQ) == {"lock": [(TRANA, f"CQS{system}".encode())]}


def test_a_message_spawned_keeps_the_first_16_bytes_of_its_unit_of_work(
    make_cqs: MakeCQS,
) -> None:
    cqsa = make_cqs("IMSA")
    first = cqsa.new_uow()
    child = first.spawn("IMSB", cqsa.tokens)
    assert bytes(child)[:16] == bytes(first)[:16] and len(bytes(child)) == 32
    assert bytes(first)[16:] == b" " * 8 + bytes(8)
    assert Uow.from_bytes(bytes(child)) == child
