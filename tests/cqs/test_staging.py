"""Multi-part messages: no reader ever sees part of one, whatever it races with."""

from __future__ import annotations

import threading

from sharedq.cf import CouplingFacility
from sharedq.cqs import CQS, Message

from .conftest import MSGQ, MakeCQS
from .helpers import TRANA, where

MESSAGES = 40
PARTS = 4


def parts_of(n: int) -> list[bytes]:
    return [f"m{n:03d}p{i}".encode() * 64 for i in range(PARTS)]


def test_concurrent_readers_see_only_whole_messages(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    putter = make_cqs("IMSP")
    readers = [make_cqs(s) for s in ("IMSA", "IMSB", "IMSC")]
    got: dict[str, list[Message]] = {r.system: [] for r in readers}
    done = threading.Event()

    def read_all(cqs: CQS) -> None:
        # Read as fast as possible while the putter stages parts; stop when all are in.
        while True:
            finished = done.is_set()
            message = cqs.read(TRANA)
            if message is not None:
                got[cqs.system].append(message)
                assert message.token is not None
                cqs.delete(message.token)
            elif finished:
                return

    threads = [threading.Thread(target=read_all, args=(r,)) for r in readers]
    for t in threads:
        t.start()
    for n in range(MESSAGES):
        putter.put(TRANA, parts_of(n))
    done.set()
    for t in threads:
        t.join()

    every = [m for messages in got.values() for m in messages]
    assert sorted(m.body for m in every) == sorted(b"".join(parts_of(n)) for n in range(MESSAGES))
    assert all(list(m.parts) == parts_of(int(m.parts[0][1:4])) for m in every)
    assert where(facility, MSGQ) == {}  # every part deleted with its message


def test_a_put_that_fails_for_room_takes_its_staged_parts_back(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    from sharedq.cqs import CapacityExceeded, CQSReason, structure_params

    facility.create(structure_params("SMALLQ", messages=8, message_bytes=100))
    cqs = make_cqs("IMSA", msgq="SMALLQ")
    room = cqs.statistics().max_entries
    try:
        for _ in range(room + 1):
            cqs.put(TRANA, [b"a", b"b", b"c"])
    except CapacityExceeded as full:
        assert full.reason is CQSReason.STRUCTURE_FULL
    else:
        raise AssertionError("the structure never filled")
    lists = where(facility, "SMALLQ")
    # Every message on the ready queue is whole; no staged part without its part 1.
    assert len(lists.get("staging", [])) == 2 * len(lists["ready"])
    for message in cqs.browse(TRANA):
        assert message.parts == (b"a", b"b", b"c")
