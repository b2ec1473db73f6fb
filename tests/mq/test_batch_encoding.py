"""A batch's shortcuts write and read what single requests do.

``put_many`` makes the parts of its entries every message shares once (the header
around the stamp, the adjunct); a unit of work sorts its own puts only when a get asks
for its best key; ``get_many`` decodes each message it takes in one pass.  These
tests hold each shortcut to the long way: the same bytes on the structure, the same
messages in the same order.
"""

from __future__ import annotations

import struct

import pytest

from sharedq.cf import CouplingFacility
from sharedq.mq import IndexType, Message, NoMessageAvailable, keys
from sharedq.mq import messages as m
from sharedq.mq.units import Trop, TropKind, Trqs
from tests.mq.conftest import APP, MakeManager


@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("expiry", [m.UNLIMITED, 1, 36_000])
@pytest.mark.parametrize("name", [b"QM1", b"QMGRLONGNAME"])
def test_generated_frame_is_what_encode_writes(persistent: bool, expiry: int, name: bytes) -> None:
    nonce = b"\x01\xfe\x07"
    head, tail = m.generated_frame(7, persistent, expiry, 3, name, nonce)
    for stamp in (0, 1, 2**63 + 12345, 2**64 - 1):
        for body in (b"", b"x" * 100):
            ident = m.generated_msg_id(name, stamp, 3, nonce)
            expected = m.encode(body, 7, persistent, ident, m.NO_ID, stamp, expiry, 3, name)
            assert head + stamp.to_bytes(8, "big") + tail + body == expected


def _view(message: Message) -> tuple[object, ...]:
    return (
        message.body,
        message.priority,
        message.persistent,
        message.msg_id,
        message.correl_id,
        message.expiry,
        message.put_time,
        message.put_qmgr,
        message.backout_count,
        message.data_length,
        message.truncated,
    )


@pytest.mark.parametrize("syncpoint", [False, True])
def test_put_many_writes_the_entries_put_writes(
    make_qm: MakeManager, facility: CouplingFacility, syncpoint: bool
) -> None:
    """Byte for byte, apart from the stamps: data, adjunct, key, version, secondary key."""
    qm = make_qm(1)
    qm.define_queue("BATCH", structure=APP, index=IndexType.MSG_ID)
    qm.define_queue("SINGLE", structure=APP, index=IndexType.MSG_ID)
    batch, single = qm.open("BATCH"), qm.open("SINGLE")
    bodies = [b"b%d" % n * n for n in range(5)]
    options = {"priority": 6, "persistent": True, "expiry": 3.0}
    uow = qm.unit_of_work() if syncpoint else None
    batched = batch.put_many(bodies, uow=uow, **options)
    singles = [single.put(body, uow=uow, **options) for body in bodies]
    with facility.connect(APP, "LOOK") as conn:
        entries = {}
        for list_number in range(conn.statistics().list_count):
            for entry in conn.scan(list_number):
                entries[entry.entry_id] = entry
    for one, other in zip(batched, singles, strict=True):
        a, b = entries[one.token], entries[other.token]
        ha, hb = m.Decoded(a.data), m.Decoded(b.data)
        assert a.data == m.encode(
            one.body, 6, True, one.msg_id, m.NO_ID, ha.stamp, 30, ha.qm_id, b"QM1", False
        )
        assert b.data == m.encode(
            other.body, 6, True, other.msg_id, m.NO_ID, hb.stamp, 30, hb.qm_id, b"QM1", False
        )
        assert a.adjunct == m.encode_adjunct(a.list_number, one.msg_id, m.NO_ID, a.entry_id)
        assert b.adjunct == m.encode_adjunct(b.list_number, other.msg_id, m.NO_ID, b.entry_id)
        assert (a.key[:2], a.key[10:], a.version > 0) == (b.key[:2], b.key[10:], b.version > 0)
        made = keys.uncommitted_key if syncpoint else keys.committed_key
        assert a.key == made(6, ha.stamp, ha.qm_id)
        assert a.secondary_key == (None if syncpoint else one.msg_id)
        assert b.secondary_key == (None if syncpoint else other.msg_id)
        assert (_view(one)[:3], _view(one)[4:6], _view(one)[7:]) == (
            _view(other)[:3],
            _view(other)[4:6],
            _view(other)[7:],
        )
    if uow is not None:
        uow.commit()
    for one in batched:
        got = batch.get(msg_id=one.msg_id)
        assert _view(got) == _view(one)


def test_best_own_puts_in_any_order_of_batches_and_singles(make_qm: MakeManager) -> None:
    """A unit's own puts, added in batches and singly, in and out of priority order,
    persistent or not, are gotten where gets would take them, by either kind of get."""
    results = []
    for name in ("MANY", "ONE"):
        qm = make_qm(1 if name == "MANY" else 2)
        qm.define_queue(name, structure=APP)
        queue = qm.open(name)
        queue.put(b"c8", priority=8)
        queue.put(b"c2", priority=2, persistent=False)
        uow = qm.unit_of_work()
        plan: list[tuple[int, bool, list[bytes]]] = [
            (3, True, [b"u3a", b"u3b"]),
            (9, False, [b"u9a"]),
            (5, True, [b"u5a", b"u5b", b"u5c"]),
            (0, False, [b"u0a", b"u0b"]),
        ]
        for priority, persistent, bodies in plan:
            if name == "MANY":
                queue.put_many(bodies, uow=uow, priority=priority, persistent=persistent)
            else:
                for body in bodies:
                    queue.put(body, uow=uow, priority=priority, persistent=persistent)
        got = [queue.get(uow=uow, if_persistent=True).body for _ in range(2)]
        got += [m.body for m in queue.get_many(3, uow=uow)]
        queue.put(b"u7", uow=uow, priority=7)
        while True:
            try:
                got.append(queue.get(uow=uow).body)
            except NoMessageAvailable:
                break
        uow.backout()
        results.append((got, queue.depth()))
    assert results[0] == results[1]
    # c8 is not persistent (the default): gotten with if_persistent, it is gone for good.
    order = [b"c8", b"u5a", b"u9a", b"u5b", b"u5c", b"u7", b"u3a", b"u3b", b"c2", b"u0a", b"u0b"]
    assert results[0] == (order, 1)


class _Queue:
    """Stands for a queue: a TRQS only keeps it."""


def test_trqs_best_and_order_as_operations_come_and_go() -> None:
    """The TRQS's candidates (taken in lazily) against a plain sort of the operations."""
    trqs = Trqs(_Queue())  # type: ignore[arg-type]

    def trop(priority: int, stamp: int, persistent: bool) -> Trop:
        key = b"\xf6" + bytes((9 - priority,)) + stamp.to_bytes(8, "big") + b"\x01" + bytes(5)
        return Trop(TropKind.PUT, bytes(12), key, persistent, m.NO_ID, None, None, trqs)

    def expected(persistent_only: bool) -> Trop | None:
        candidates = [
            t
            for t in trqs.trops
            if t.kind is TropKind.PUT and (t.persistent or not persistent_only)
        ]
        return min(candidates, key=lambda t: t.ckey, default=None)

    assert trqs.best(False) is None and trqs.best(True) is None
    first = [trop(4, n, n % 2 == 0) for n in range(1, 6)]
    trqs.add_puts(first)
    trqs.add(trop(6, 10, False))
    assert trqs.best(False) is expected(False) and trqs.best(True) is expected(True)
    trqs.add_puts([trop(6, 11, True), trop(1, 12, True)])
    best = trqs.best(True)
    assert best is expected(True)
    assert best is not None
    trqs.take_own(best)
    assert trqs.best(True) is expected(True) and trqs.best(False) is expected(False)
    trqs.add(trop(9, 13, True))
    trqs.give_back_own(best)
    trqs.remove(first[0])
    assert trqs.best(True) is expected(True) and trqs.best(False) is expected(False)
    assert trqs.ordered() == sorted(trqs.trops, key=lambda t: t.ckey)


@pytest.mark.parametrize("generated", [False, True])
@pytest.mark.parametrize("correl_id", [m.NO_ID, b"C" * 24])
@pytest.mark.parametrize("expiry", [m.UNLIMITED, 25])
@pytest.mark.parametrize("version", [0, 3, 255, 1000])
def test_whole_message_is_to_message(
    generated: bool, correl_id: bytes, expiry: int, version: int
) -> None:
    stamp, nonce = 2**62 + 99, b"\x00\x10\x20"
    msg_id = m.generated_msg_id(b"QMX", stamp, 5, nonce) if generated else b"M" * 24
    for body in (b"", b"body"):
        data = m.encode(body, 4, True, msg_id, correl_id, stamp, expiry, 5, b"QMX")
        assert m.whole_message(data, version, b"t") == m.to_message(data, version, b"t")
        header = m.Decoded(data)
        format1 = (
            struct.pack(
                ">BBBBQI24s24sB",
                1,
                1,
                4,
                5,
                stamp,
                header.expiry_tenths,
                header.msg_id,
                header.correl_id,
                3,
            )
            + b"QMX"
            + body
        )
        assert m.whole_message(format1, version, b"t") == m.to_message(data, version, b"t")
