"""Helpers shared by the log tests: filling a stream, finding frames, a crashed writer."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from sharedq.log import LogStream, RecordType
from sharedq.log.codec import FRAME_HEADER_BYTES, SEGMENT_HEADER_BYTES

from . import procs
from .conftest import eid, key


def fill(stream: LogStream, writer: str, count: int, first_seq: int, step: int = 1) -> None:
    """Append ``count`` put records of varied sizes (and a checkpoint every tenth)."""
    with stream.writer(writer) as w:
        for n in range(count):
            seq = first_seq + n * step
            w.append(
                RecordType.PUT,
                op=1,
                seq=seq,
                entry_id=eid(seq),
                list_number=n % 4,
                key=key(seq),
                data=bytes([0xA0 + n % 16]) * (n * 7 % 40),
                uow=b"U" * 8,
            )
            if n % 10 == 9:
                w.log_event(RecordType.STATISTICS, payload={"n": n})


def frames(buf: bytes) -> list[tuple[int, int]]:
    """``(start, end)`` of each frame of a sound segment."""
    found, pos = [], SEGMENT_HEADER_BYTES
    while pos < len(buf):
        end = pos + FRAME_HEADER_BYTES + int.from_bytes(buf[pos : pos + 4], "little")
        found.append((pos, end))
        pos = end
    assert pos == len(buf)
    return found


def flip(path: Path, frame: int, offset: int = 9, mask: int = 0x01) -> tuple[int, int]:
    """Flip bits in frame number ``frame`` of a segment; returns that frame's span."""
    raw = bytearray(path.read_bytes())
    start, end = frames(bytes(raw))[frame]
    raw[start + offset] ^= mask
    path.write_bytes(bytes(raw))
    return start, end


def crashed_writer(root: Path, count: int = 30, writer: str = "QM1") -> None:
    """A writer in a process of its own that appends ``count`` records and dies unclosed."""
    ctx = multiprocessing.get_context("spawn")
    child = ctx.Process(target=procs.append_and_die, args=(str(root), writer, count, 10))
    child.start()
    child.join(60)
    assert child.exitcode == 0
