"""The message format: format 2 (written now, compact) and format 1 (still read).

Format 2 leaves out of a message entry what is known without it: a generated msg id
(3 bytes of it kept), a correl id of none, an unlimited expiry; the adjunct keeps both
ids without their trailing zeros.  Messages that a manager wrote in format 1, before
format 2 existed, must still be read as they were put: the test rewrites messages
into format 1 on the structure itself, then gets and browses them on both backends.
"""

from __future__ import annotations

import struct

import pytest

from sharedq.cf import ById, CouplingFacility
from sharedq.mq import IndexType, Message
from sharedq.mq import messages as m
from sharedq.mq.errors import MQError
from tests.mq.conftest import APP, MakeManager

_FORMAT1 = struct.Struct(">BBBBQI24s24sB")
_ADJUNCT1 = struct.Struct(">H24s24s")


def _format1(h: m.Decoded, body: bytes) -> bytes:
    name = h.qm_name.encode()
    return (
        _FORMAT1.pack(
            1,
            int(h.persistent),
            h.priority,
            h.qm_id,
            h.stamp,
            h.expiry_tenths,
            h.msg_id,
            h.correl_id,
            len(name),
        )
        + name
        + body
    )


def _rewrite_as_format1(facility: CouplingFacility) -> int:
    """Rewrite every message entry of ``APP`` in format 1 (data and adjunct), keeping
    its list, key, id, version and secondary key; returns how many."""
    rewritten = 0
    with facility.connect(APP, "FORMAT1") as conn:
        for list_number in range(conn.statistics().list_count):
            for entry in list(conn.scan(list_number)):
                if entry.data[:1] != b"\x02":
                    continue
                h = m.Decoded(entry.data)
                put_list, msg_id, correl_id = m.decode_adjunct(entry.adjunct, entry.entry_id)
                assert (msg_id, correl_id) == (h.msg_id, h.correl_id)
                conn.delete(ById(entry.entry_id))
                conn.write(
                    list_number,
                    entry.key,
                    _format1(h, entry.data[h.body_offset :]),
                    adjunct=_ADJUNCT1.pack(put_list, msg_id, correl_id),
                    secondary_key=entry.secondary_key,
                    entry_id=entry.entry_id,
                    version=entry.version,
                )
                rewritten += 1
    return rewritten


def _same(got: Message, put: Message) -> None:
    for name in ("body", "priority", "persistent", "msg_id", "correl_id", "expiry", "put_qmgr"):
        assert getattr(got, name) == getattr(put, name), name
    assert got.put_time == pytest.approx(put.put_time)


def test_format2_is_compact_and_reads_back() -> None:
    """A generated id, no correl id and no expiry cost 3 bytes beyond the fixed 13 and
    the manager's name; every field decodes as it was given."""
    name = b"QM1"
    stamp = 123_456_789
    msg_id = m.generated_msg_id(name, stamp, 7, b"abc")
    data = m.encode(b"x" * 100, 4, True, msg_id, m.NO_ID, stamp, m.UNLIMITED, 7, name)
    assert len(data) == 13 + len(name) + 3 + 100
    h = m.Decoded(data)
    assert (h.persistent, h.priority, h.qm_id, h.stamp, h.qm_name) == (True, 4, 7, stamp, "QM1")
    assert (h.msg_id, h.correl_id, h.expires_at) == (msg_id, m.NO_ID, None)
    assert data[h.body_offset :] == b"x" * 100
    given, correl = b"mine".ljust(24, b"\0"), b"\1" * 24
    data = m.encode(b"", 0, False, given, correl, stamp, 55, 7, name)
    assert len(data) == m.header_length("QM1")  # the longest header is format 1's
    assert m.message_facts(data) == (False, 0, given, correl)
    assert m.Decoded(data).expiry_tenths == 55
    adjunct = m.encode_adjunct(3, msg_id, m.NO_ID)
    assert len(adjunct) == 3 + 20
    assert m.decode_adjunct(adjunct) == (3, msg_id, m.NO_ID)
    assert m.decode_adjunct(m.encode_adjunct(4095, given, correl)) == (4095, given, correl)
    # Given the entry id the msg id was generated with, the adjunct keeps 4 bytes of it.
    entry_id = bytes((7,)) + stamp.to_bytes(8, "big") + b"abc"
    adjunct = m.encode_adjunct(3, msg_id, correl, entry_id)
    assert len(adjunct) == 3 + 4 + 24
    assert m.adjunct_put_list(adjunct) == 3
    assert m.decode_adjunct(adjunct, entry_id) == (3, msg_id, correl)
    with pytest.raises(MQError, match="without its entry id"):
        m.decode_adjunct(adjunct)
    assert len(m.encode_adjunct(3, msg_id, m.NO_ID, b"\0" * 12)) == 3 + 20  # not its id


def test_format2_messages_matched_by_both_ids(make_qm: MakeManager) -> None:
    """A generated msg id kept in the entry id matches a get and a browse by both ids."""
    qm = make_qm(1)
    qm.define_queue("Q", structure=APP, index=IndexType.CORREL_ID)
    q = qm.open("Q")
    first, second = q.put(b"one", correl_id=b"C"), q.put(b"two", correl_id=b"C")
    both = list(q.browser(msg_id=second.msg_id, correl_id=b"C"))
    assert [msg.body for msg in both] == [b"two"]
    _same(q.get(msg_id=second.msg_id, correl_id=b"C"), second)
    _same(q.get(msg_id=first.msg_id, correl_id=b"C"), first)


def test_unknown_format_is_refused_not_misread() -> None:
    with pytest.raises(MQError, match="unknown message format"):
        m.Decoded(b"\x09" + b"\0" * 80)


def test_format1_messages_still_read(make_qm: MakeManager, facility: CouplingFacility) -> None:
    """Messages stored in format 1 are gotten, browsed and matched by both ids as put."""
    qm = make_qm(1)
    qm.define_queue("Q", structure=APP, index=IndexType.CORREL_ID)
    q = qm.open("Q")
    put = [
        q.put(b"plain", persistent=True),
        q.put(b"ids", msg_id=b"M1", correl_id=b"C1", priority=5, expiry=60),
        q.put(b"correl", correl_id=b"C2"),
    ]
    assert _rewrite_as_format1(facility) == 3
    browsed = {msg.body: msg for msg in q.browser()}
    for msg in put:
        _same(browsed[msg.body], msg)
    both = list(q.browser(msg_id=put[1].msg_id, correl_id=put[1].correl_id))
    assert [msg.body for msg in both] == [b"ids"]
    _same(q.get(msg_id=put[1].msg_id, correl_id=put[1].correl_id), put[1])
    _same(q.get(correl_id=b"C2"), put[2])
    _same(q.get(), put[0])
