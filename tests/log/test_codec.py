"""Framing: what is encoded decodes to the same record; damage is named precisely and
skipped, so that the sound frames after it are read too."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from sharedq.log import ChangeOp, DamageReason, LogRecord, RecordType
from sharedq.log.codec import (
    SEGMENT_HEADER,
    check_header,
    decode_frames,
    encode_frame,
)

_bytes_or_none = st.none() | st.binary(max_size=40)
records = st.builds(
    LogRecord,
    seq=st.integers(0, 2**63 - 1),
    op=st.sampled_from([int(o) for o in ChangeOp]),
    writer=st.text(min_size=1, max_size=20),
    lsn=st.integers(1, 2**63 - 1),
    type=st.sampled_from([int(t) for t in RecordType]),
    structure=st.text(min_size=1, max_size=16),
    time_us=st.integers(0, 2**63 - 1),
    entry_id=st.none() | st.binary(min_size=12, max_size=12),
    list_number=st.none() | st.integers(0, 2**31 - 1),
    key=st.none() | st.binary(min_size=16, max_size=16),
    set_secondary_key=st.none() | st.booleans(),
    version=st.none() | st.integers(0, 2**64 - 1),
    data=st.none() | st.binary(max_size=300),
    adjunct=_bytes_or_none,
    limit=st.none() | st.integers(-1, 2**40),
    uow=st.none() | st.binary(max_size=32),
    priority=st.none() | st.integers(0, 9),
    persistent=st.none() | st.booleans(),
    payload=_bytes_or_none,
    from_list=st.none() | st.integers(0, 2**31 - 1),
    secondary_key=_bytes_or_none,
    increment_version=st.none() | st.booleans(),
    at_head=st.none() | st.booleans(),
    increment_authority=st.none() | st.booleans(),
    ignore_limit=st.none() | st.booleans(),
    queue=_bytes_or_none,
    message_id=_bytes_or_none,
    correl_id=_bytes_or_none,
)


@given(st.lists(records, max_size=20))
def test_frames_round_trip(batch: list[LogRecord]) -> None:
    buf = SEGMENT_HEADER + b"".join(encode_frame(r) for r in batch)
    decoded, end, damages = decode_frames(buf, "seg")
    assert damages == []
    assert end == len(buf)
    assert decoded == batch
    assert all(type(r) is LogRecord for r in decoded)


def test_header_damage() -> None:
    assert check_header(SEGMENT_HEADER, "s") is None
    short = check_header(SEGMENT_HEADER[:5], "s")
    assert short is not None and short.reason is DamageReason.TRUNCATED
    bad = check_header(b"XXXX" + SEGMENT_HEADER[4:], "s")
    assert bad is not None and bad.reason is DamageReason.BAD_HEADER
    version = check_header(SEGMENT_HEADER[:4] + b"\x09" + bytes(3), "s")
    assert version is not None and version.reason is DamageReason.BAD_HEADER


def _record(n: int) -> LogRecord:
    return LogRecord(n, 1, "QM1", n, 7, "S1", n, data=b"d" * n)


def test_each_kind_of_damage_is_skipped_and_the_frames_after_it_are_read() -> None:
    good = [encode_frame(_record(n)) for n in range(1, 4)]
    base = SEGMENT_HEADER + b"".join(good)
    offset = len(base)
    nxt = encode_frame(_record(9))
    zero_length = struct.pack("<II", 0, 0)
    huge_length = struct.pack("<II", 2**31, 0)
    body = b"\x93\x01\x02\x03"  # a msgpack array of 3: sound msgpack, not a record
    not_a_record = struct.pack("<II", len(body), _crc(body)) + body
    cases = {
        DamageReason.TRUNCATED: [nxt[:5], nxt[:-1]],
        DamageReason.BAD_LENGTH: [zero_length, huge_length],
        DamageReason.BAD_CHECKSUM: [nxt[:-1] + bytes([nxt[-1] ^ 1]), nxt[:8] + bytes(len(nxt) - 8)],
        DamageReason.BAD_RECORD: [not_a_record],
    }
    for reason, tails in cases.items():
        for tail in tails:
            # (truncation can only be at the end; other damage has sound frames after it)
            after = b"" if reason is DamageReason.TRUNCATED else nxt
            decoded, end, damages = decode_frames(base + tail + after, "seg")
            assert len(damages) == 1
            damage = damages[0]
            assert (damage.reason, damage.offset, damage.records_before) == (reason, offset, 3)
            assert damage.path == "seg" and str(offset) in str(damage)
            if reason is DamageReason.TRUNCATED:
                assert [r.seq for r in decoded] == [1, 2, 3]
                assert end == offset
                assert damage.at_tail and "nothing sound after it" in str(damage)
            else:
                assert [r.seq for r in decoded] == [1, 2, 3, 9]
                assert end == len(base + tail + after)
                assert damage.resumed_at == offset + len(tail)
                assert f"reading went on at byte {offset + len(tail)}" in str(damage)


@given(st.lists(records, min_size=3, max_size=12), st.data())
def test_a_flipped_byte_costs_at_most_the_frame_it_is_in(
    batch: list[LogRecord], data: st.DataObject
) -> None:
    frames = [encode_frame(r) for r in batch]
    buf = bytearray(SEGMENT_HEADER + b"".join(frames))
    at = data.draw(st.integers(len(SEGMENT_HEADER), len(buf) - 1), label="flipped byte")
    buf[at] ^= data.draw(st.integers(1, 255), label="mask")
    decoded, _, damages = decode_frames(bytes(buf), "seg")
    # Which frame the byte was in: every other record is read, in order.
    starts = [len(SEGMENT_HEADER)]
    for frame in frames:
        starts.append(starts[-1] + len(frame))
    hit = next(i for i in range(len(frames)) if starts[i] <= at < starts[i + 1])
    assert decoded == batch[:hit] + batch[hit + 1 :]
    assert len(damages) == 1 and damages[0].offset == starts[hit]


def _crc(body: bytes) -> int:
    import google_crc32c

    return int(google_crc32c.value(body))
