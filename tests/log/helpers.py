"""Helpers shared by the log tests (and the tests of replay onto structures): streams on
real directories, structures, filling a stream, finding frames, a crashed writer."""

from __future__ import annotations

import itertools
import multiprocessing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sharedq.cf import ListStructure, StructureParams
from sharedq.cf.memory import MemoryFacility
from sharedq.log import LogConfig, LogStream, RecordType
from sharedq.log.codec import FRAME_HEADER_BYTES, SEGMENT_HEADER_BYTES, preallocated
from sharedq.log.records import ChangeOp
from sharedq.testing import ManualClock

from . import procs

#: A small configuration: segments of 4 KiB, so a few hundred records make several.
SMALL = {"segment_bytes": 4096, "staging_bytes": 16384, "background_offload": False}


def step_clock() -> ManualClock:
    """A clock that moves one millisecond at each reading: record times are predictable."""
    return ManualClock(1_700_000_000.001, tick_s=0.001)


MakeStream = Callable[..., LogStream]


@contextmanager
def stream_maker(root: Path) -> Iterator[MakeStream]:
    """Open streams on ``root/log`` (the same directory each call); closes them all."""
    opened: list[LogStream] = []

    def make(**config: Any) -> LogStream:
        clock = config.pop("clock", step_clock())
        structure = config.pop("structure", "S1")
        stream = LogStream(
            root / "log",
            name="S1.LOG",
            structure=structure,
            config=LogConfig(**{**SMALL, **config}),
            clock=clock,
        )
        opened.append(stream)
        return stream

    yield make
    for stream in opened:
        stream.close()


_names = itertools.count(1)


MakeStructure = Callable[..., ListStructure]


def structure_maker(facility: MemoryFacility) -> MakeStructure:
    """Create a structure and connect to it; keywords go to ``for_capacity``."""

    def make(name: str | None = None, user: str = "U1", **overrides: Any) -> ListStructure:
        name = name or f"T{next(_names)}"
        options: dict[str, Any] = {"list_count": 8, "entries": 2000, "elements": 8000}
        options.update(overrides)
        if not facility.exists(name):
            facility.create(StructureParams.for_capacity(name, **options))
        return facility.connect(name, user)

    return make


def key(n: int) -> bytes:
    return n.to_bytes(16, "big")


def eid(n: int) -> bytes:
    return b"\x01" + n.to_bytes(11, "big")


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
    """``(start, end)`` of each frame of a sound segment (up to the room a writer that
    did not close it had allocated ahead: zeros to the end)."""
    found, pos = [], SEGMENT_HEADER_BYTES
    room = preallocated(buf)
    while pos < len(buf):
        if room and not any(buf[pos:]):
            break
        end = pos + FRAME_HEADER_BYTES + int.from_bytes(buf[pos : pos + 4], "little")
        found.append((pos, end))
        pos = end
    assert pos == len(buf) or (room and not any(buf[pos:]))
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


def three_puts(make_stream: MakeStream) -> LogStream:
    """A stream whose writer QM1 committed three puts (seqs 1-3, data ``b"kept"``): what
    a refused request must leave as it was."""
    stream = make_stream()
    with stream.writer("QM1") as w:
        for seq in (1, 2, 3):
            w.append(
                RecordType.PUT, op=ChangeOp.WRITE, seq=seq, entry_id=eid(seq), list_number=0,
                key=key(seq), data=b"kept", commit=True,
            )  # fmt: skip
    return stream
