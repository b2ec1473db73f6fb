"""A put writes the same entry whichever way it builds it.

The common put (a generated msg id, no correl id, no expiry) builds its data, adjunct
and key from a frame its queue's puts share (``operations._put_frame``); the others
call ``messages.encode``, ``encode_adjunct`` and ``keys.uncommitted_key``.  Every entry
either way must be exactly what those functions make of the message's facts.
"""

from __future__ import annotations

from typing import Any

from sharedq.cf import CouplingFacility, ListEntry
from sharedq.mq import IndexType, QueueManager, keys
from sharedq.mq import messages as m
from sharedq.mq.clock import STAMP_SHIFT
from tests.mq.conftest import APP, MakeManager


def _entries(facility: CouplingFacility) -> dict[bytes, tuple[int, ListEntry]]:
    """Every entry of ``APP`` by entry id, with its list."""
    found = {}
    with facility.connect(APP, "FRAMES") as conn:
        for list_number in range(conn.statistics().list_count):
            for entry in conn.scan(list_number):
                found[entry.entry_id] = (list_number, entry)
    return found


def _expected(qm: QueueManager, message: m.Message, put_list: int) -> tuple[bytes, bytes]:
    """The data and adjunct ``encode`` and ``encode_adjunct`` make of ``message``."""
    stamp = int.from_bytes(message.token[1:9], "big")
    assert (stamp >> STAMP_SHIFT) / 1_000_000 == message.put_time
    tenths = m.UNLIMITED if message.expiry is None else round(message.expiry * 10)
    name = qm.name.encode()
    data = m.encode(
        message.body,
        message.priority,
        message.persistent,
        message.msg_id,
        message.correl_id,
        stamp,
        tenths,
        message.token[0],
        name,
    )
    adjunct = m.encode_adjunct(put_list, message.msg_id, message.correl_id, message.token)
    return data, adjunct


def test_every_put_writes_what_encode_makes(
    make_qm: MakeManager, facility: CouplingFacility
) -> None:
    qm = make_qm(1)
    qm.define_queue("FRAMES.Q", structure=APP, max_depth=100)
    qm.define_queue("FRAMES.INDEXED", structure=APP, max_depth=100, index=IndexType.CORREL_ID)
    puts: list[m.Message] = []
    for name in ("FRAMES.Q", "FRAMES.INDEXED"):
        queue = qm.open(name)
        variants: list[dict[str, Any]] = [
            {},
            {"priority": 9},
            {"priority": 0, "persistent": False},
            {"persistent": True},
            {"priority": 3, "persistent": True},
            {"expiry": 60.0},
            {"correl_id": b"correl"},
            {"msg_id": b"given"},
            {"msg_id": bytes(24)},  # none given: one is generated
        ]
        for options in variants:
            puts.append(queue.put(b"body " + repr(options).encode(), **options))
        with qm.unit_of_work() as uow:
            pending = [queue.put(b"in a unit", uow=uow, **options) for options in variants]
            entries = _entries(facility)
            for message in pending:
                put_list, entry = entries[message.token]
                uncommitted = keys.uncommitted_key(
                    message.priority, int.from_bytes(message.token[1:9], "big"), 1
                )
                assert entry.key == uncommitted
                assert (entry.data, entry.adjunct) == _expected(qm, message, put_list)
            uow.backout()
    entries = _entries(facility)
    for message in puts:
        put_list, entry = entries[message.token]
        assert (entry.data, entry.adjunct) == _expected(qm, message, put_list)
        stamp = int.from_bytes(message.token[1:9], "big")
        assert entry.key == keys.committed_key(message.priority, stamp, 1)
        assert entry.version == 0
