"""Dual logging: every file written under two roots, and damage in one copy costs nothing.

Each test writes a real dual stream, damages or deletes files of one copy on disk, and
reads: every record is there, the check finds no gap, and what the other copy made
good is reported as repaired.  Damage both copies share is still a gap.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sharedq.log import LogConfig, LogReason, LogStream, RecordType, StreamMismatch

from .helpers import SMALL, crashed_writer, eid, fill, flip, frames, step_clock


class Dual:
    """A dual stream on ``tmp/a`` with its copy on ``tmp/b``."""

    def __init__(self, tmp: Path) -> None:
        self.root, self.copy_root = tmp / "a", tmp / "b"
        self.opened: list[LogStream] = []

    def open(self, copy: bool = True, **config: object) -> LogStream:
        stream = LogStream(
            self.root,
            name="S1.LOG",
            structure="S1",
            config=LogConfig(**{**SMALL, "staging_bytes": 1 << 22, **config}),  # type: ignore[arg-type]
            clock=step_clock(),
            copy_root=self.copy_root if copy else None,
        )
        self.opened.append(stream)
        return stream

    def copy_of(self, path: Path) -> Path:
        return self.copy_root / path.relative_to(self.root)

    def close(self) -> None:
        for stream in self.opened:
            stream.close()


@pytest.fixture
def dual(tmp_path: Path) -> Iterator[Dual]:
    d = Dual(tmp_path)
    yield d
    d.close()


def _written(dual: Dual) -> tuple[LogStream, list[object]]:
    stream = dual.open()
    fill(stream, "QM1", 200, 1)
    fill(stream, "QM2", 60, 1000)
    return stream, list(stream.records())


def test_every_file_is_written_under_both_roots(dual: Dual) -> None:
    stream, _ = _written(dual)
    with stream.writer("QM1") as w:
        w.offload()
    mine = sorted(p.relative_to(dual.root) for p in dual.root.rglob("*") if p.is_file())
    theirs = sorted(p.relative_to(dual.copy_root) for p in dual.copy_root.rglob("*") if p.is_file())
    assert [p for p in mine if not p.name.startswith(".")] == [
        p for p in theirs if not p.name.startswith(".")
    ]
    assert stream.layout.dataset_files()
    for _, path in stream.layout.dataset_files() + stream.layout.segments("QM2"):
        assert path.read_bytes() == dual.copy_of(path).read_bytes()


def test_the_stream_file_remembers_the_copy(dual: Dual) -> None:
    stream, records = _written(dual)
    # A process that does not name the copy finds it, and reads through it
    reader = dual.open(copy=False)
    assert reader.copy is not None and reader.copy.root == dual.copy_root.resolve()
    [(_, path), *_] = stream.layout.segments("QM1")
    path.unlink()
    assert list(reader.records()) == records
    # A process naming another copy is refused
    with pytest.raises(StreamMismatch) as info:
        LogStream(dual.root, name="S1.LOG", copy_root=dual.root.parent / "elsewhere")
    assert info.value.reason is LogReason.STREAM_MISMATCH


def test_a_flipped_byte_in_one_copy_is_made_good_from_the_other(dual: Dual) -> None:
    stream, records = _written(dual)
    _, path = stream.layout.segments("QM1")[1]
    flip(path, 4)
    reader = stream.reader()
    assert list(reader.records()) == records
    assert reader.damage == []
    coverage = stream.check()
    assert coverage.gaps == [] and len(coverage.repaired) == 1 and str(path) in coverage.repaired[0]


def test_damage_in_both_copies_at_different_frames_is_made_good(dual: Dual) -> None:
    stream, records = _written(dual)
    _, path = stream.layout.segments("QM1")[1]
    flip(path, 2)
    flip(dual.copy_of(path), 7)
    assert list(stream.records()) == records
    assert stream.check().gaps == []


def test_damage_in_both_copies_at_the_same_frame_is_still_a_gap(dual: Dual) -> None:
    stream, records = _written(dual)
    first, path = stream.layout.segments("QM1")[1]
    flip(path, 3)
    flip(dual.copy_of(path), 3, offset=11)
    reader = stream.reader()
    assert len(list(reader.records())) == len(records) - 1
    [gap] = stream.check().gaps
    assert (gap.first_lsn, gap.last_lsn) == (first + 3, first + 3)


@pytest.mark.parametrize("where", ["primary", "copy"])
def test_a_deleted_segment_in_one_root_loses_nothing(dual: Dual, where: str) -> None:
    stream, records = _written(dual)
    _, path = stream.layout.segments("QM1")[2]
    (path if where == "primary" else dual.copy_of(path)).unlink()
    assert list(stream.records()) == records
    assert stream.check().gaps == []


def test_a_cut_off_tail_of_a_closed_writer_is_made_good(dual: Dual) -> None:
    stream, records = _written(dual)
    _, path = stream.layout.segments("QM2")[-1]
    raw = path.read_bytes()
    path.write_bytes(raw[: frames(raw)[-4][0] + 5])
    assert list(stream.records()) == records
    assert stream.check().gaps == []


@pytest.mark.parametrize("damage", ["truncated", "page flip", "deleted"])
def test_a_damaged_data_set_is_read_from_its_copy(dual: Dual, damage: str) -> None:
    stream, records = _written(dual)
    with stream.writer("QM1") as w:
        w.offload()
    [(_, dataset)] = stream.layout.dataset_files()
    raw = bytearray(dataset.read_bytes())
    if damage == "truncated":
        dataset.write_bytes(bytes(raw[: len(raw) // 2]))
    elif damage == "page flip":
        raw[len(raw) // 3] ^= 0x04
        dataset.write_bytes(bytes(raw))
    else:
        dataset.unlink()
    coverage = stream.check()
    assert coverage.gaps == []
    assert list(stream.records()) == records


def test_a_damaged_retention_file_is_read_from_its_copy(dual: Dual) -> None:
    stream, _ = _written(dual)
    stream.delete_before("S1", 50)
    expected = list(stream.records())
    stream.layout.retention_file.write_bytes(b"garbage")
    assert stream.retention_points() == {"S1": 50}
    assert list(stream.records()) == expected


def test_retention_deletes_both_copies(dual: Dual) -> None:
    stream, _ = _written(dual)
    before = {p.name for p in (dual.copy_root / "staging" / "QM1").iterdir()}
    result = stream.delete_before("S1", 150)
    assert result.files
    for path in result.files:
        assert not path.exists() and not dual.copy_of(path).exists()
    after = {p.name for p in (dual.copy_root / "staging" / "QM1").iterdir()}
    assert after < before
    assert stream.check().gaps == []


def test_a_writer_after_a_crash_keeps_both_copies_in_step(dual: Dual) -> None:
    # Given a dual writer killed mid-write, its last frame torn in one copy only
    stream = dual.open(segment_bytes=1 << 20)
    crashed_writer(dual.root, count=20)
    [(_, path)] = stream.layout.segments("QM1")
    with open(dual.copy_of(path), "ab") as f:
        f.write(b"\x30\x00\x00\x00\x01\x02")
    assert stream.check().gaps == []
    # When it reopens and appends
    with stream.writer("QM1") as w:
        assert w.repaired is not None
        w.append(RecordType.PUT, op=1, seq=900, entry_id=eid(900), list_number=0)
    # Then both copies hold the same records, in a new segment each
    names = [p.name for p in sorted((dual.root / "staging" / "QM1").glob("*.seg"))]
    copy_names = [p.name for p in sorted((dual.copy_root / "staging" / "QM1").glob("*.seg"))]
    assert names == copy_names and len(names) == 2
    assert path.read_bytes() == dual.copy_of(path).read_bytes()
    assert stream.check().gaps == []
    assert [r.lsn for r in stream.records()] == list(range(1, 22))
