"""Fixtures for the log stream tests: real directories under ``tmp_path``, no mocks."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sharedq.cf import ListStructure, StructureParams
from sharedq.cf.memory import MemoryFacility
from sharedq.log import LogConfig, LogStream

#: A small configuration: segments of 4 KiB, so a few hundred records make several.
SMALL = {"segment_bytes": 4096, "staging_bytes": 16384, "background_offload": False}


class StepClock:
    """A clock that advances one millisecond per reading: record times are predictable."""

    def __init__(self, start_us: int = 1_700_000_000_000_000) -> None:
        self.now = start_us

    def __call__(self) -> int:
        self.now += 1000
        return self.now


MakeStream = Callable[..., LogStream]


@contextmanager
def stream_maker(root: Path) -> Iterator[MakeStream]:
    """Open streams on ``root/log`` (the same directory each call); closes them all."""
    opened: list[LogStream] = []

    def make(**config: Any) -> LogStream:
        clock = config.pop("clock", StepClock())
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


@pytest.fixture
def make_stream(tmp_path: Path) -> Iterator[MakeStream]:
    """Open a stream on ``tmp_path/log`` (the same directory each call); closes them all."""
    with stream_maker(tmp_path) as make:
        yield make


_names = itertools.count(1)


@pytest.fixture
def facility() -> Iterator[MemoryFacility]:
    fac = MemoryFacility()
    yield fac
    fac.close()


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


@pytest.fixture
def make_structure(facility: MemoryFacility) -> MakeStructure:
    """Create a structure and connect to it; keywords go to ``for_capacity``."""
    return structure_maker(facility)


def key(n: int) -> bytes:
    return n.to_bytes(16, "big")


def eid(n: int) -> bytes:
    return b"\x01" + n.to_bytes(11, "big")
