"""Fixtures for the log stream tests: real directories under ``tmp_path``, no mocks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sharedq.cf.memory import MemoryFacility
from tests.log.helpers import MakeStream, MakeStructure, stream_maker, structure_maker


@pytest.fixture
def make_stream(tmp_path: Path) -> Iterator[MakeStream]:
    """Open a stream on ``tmp_path/log`` (the same directory each call); closes them all."""
    with stream_maker(tmp_path) as make:
        yield make


@pytest.fixture
def facility() -> Iterator[MemoryFacility]:
    fac = MemoryFacility()
    yield fac
    fac.close()


@pytest.fixture
def make_structure(facility: MemoryFacility) -> MakeStructure:
    """Create a structure and connect to it; keywords go to ``for_capacity``."""
    return structure_maker(facility)
