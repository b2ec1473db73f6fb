"""The log's files are its owner's only (0600, directories 0700), whatever the umask:
a stream made from nothing, a writer that died mid-frame, and its torn tail set aside
in ``damaged/`` when it opens again (the recovery tests walk a whole group's root)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sharedq.log import ChangeOp, RecordType
from sharedq.testing import files as files_private

from .helpers import MakeStream, crashed_writer, eid, key


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    with files_private.permissive_umask():
        yield


def not_private(root: Path) -> dict[str, str]:
    return files_private.not_private(root)


def test_a_stream_its_writers_and_a_torn_tail_set_aside_are_private(
    make_stream: MakeStream, permissive_umask: None
) -> None:
    stream = make_stream(segment_bytes=1 << 20, staging_bytes=1 << 22)
    crashed_writer(stream.root)  # a process of its own, under the same umask
    [(_, path)] = stream.layout.segments("QM1")
    with open(path, "ab") as segment:
        segment.write(b"\x40\x00\x00\x00\x12\x34\x56")  # half a frame
    with stream.writer("QM1") as writer:
        assert writer.repaired is not None
        written = {"seq": 500, "entry_id": eid(500), "list_number": 0, "key": key(500)}
        writer.append(RecordType.PUT, op=ChangeOp.WRITE, **written)
    assert [aside.name for aside in stream.damaged_files()] != []
    assert not_private(stream.root) == {}
