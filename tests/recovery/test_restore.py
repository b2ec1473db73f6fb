"""Rebuilding a structure from an SRDS image and the log after it, object for object."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from sharedq.cf import (
    BulkMove,
    ById,
    CouplingFacility,
    Head,
    ListStructure,
    Position,
    StructureParams,
)
from sharedq.cf.memory import MemoryFacility
from sharedq.log import LogStream, LogWriter, MessageInfo, RecordType
from sharedq.recovery import (
    EntryRow,
    ListControls,
    SrdsImage,
    StructureImage,
    contents,
    newest_readable,
    rebuild,
    rows_to_table,
    write_srds,
)

NAME = "APP1"
PARAMS = StructureParams.for_capacity(NAME, list_count=6, entries=2000, elements=4000)


@pytest.fixture(params=["memory", "redis"])
def facility(request: pytest.FixtureRequest) -> CouplingFacility:
    if request.param == "memory":
        return MemoryFacility()
    from sharedq.cf import open_facility

    server = request.getfixturevalue("redis_server")
    server.flush()
    return open_facility(server.url)


def _key(rng: random.Random) -> bytes:
    return bytes([rng.choice((1, 4, 9, 0xF6))]) + rng.randbytes(2) + bytes(13)


def _work(conn: ListStructure, log: LogWriter, rng: random.Random, steps: int) -> None:
    """Random changes of every kind, each logged as a server logs it."""
    for _ in range(steps):
        entries = [e for n in range(6) for e in conn.scan(n, with_data=False)]
        choice = rng.random()
        if choice < 0.4 or not entries:
            position = rng.choice((Position.TAIL, Position.HEAD))
            change = conn.write(
                rng.randrange(6),
                _key(rng),
                rng.randbytes(rng.randrange(0, 700)),
                adjunct=rng.randbytes(8),
                secondary_key=rng.choice((None, b"ID1", b"ID2")),
                version=rng.randrange(3),
                position=position,
                ignore_limit=True,
            )
            log.log_write(
                change, position=position, message=MessageInfo(queue=b"Q", persistent=True)
            )
        elif choice < 0.6:
            entry = rng.choice(entries)
            moved = conn.move(
                ById(entry.entry_id),
                rng.randrange(6),
                new_key=rng.choice((None, _key(rng))),
                increment_version=rng.random() < 0.5,
                ignore_limit=True,
            )
            assert moved is not None
            log.log_move(moved, record_type=RecordType.READ, from_list=entry.list_number)
        elif choice < 0.7:
            chosen = rng.sample(entries, min(len(entries), 3))
            moves = [BulkMove(e.entry_id, rng.randrange(6), increment_version=True) for e in chosen]
            result = conn.move_entries(moves, ignore_limit=True)
            log.log_bulk_move(moves, result, ignore_limit=True)
        elif choice < 0.85:
            deleted = conn.delete(ById(rng.choice(entries).entry_id))
            assert deleted is not None
            log.log_delete(deleted)
        elif choice < 0.95:
            updated = conn.update(Head(rng.choice(entries).list_number), data=rng.randbytes(300))
            if updated is not None:
                log.log_update(updated, adjunct_changed=False)
        else:
            number = rng.randrange(6)
            seq = conn.set_list_controls(number, limit=rng.randrange(50), increment_authority=True)
            log.log_list_controls(
                seq, number, limit=conn.list_info(number).limit, increment_authority=True
            )


def _image(conn: ListStructure, slot: int) -> SrdsImage:
    now = contents(conn)
    rows = [
        EntryRow(NAME, entry, position, recoverable=True)
        for entries in now.lists.values()
        for position, entry in enumerate(entries)
    ]
    seq = conn.statistics().seq
    return SrdsImage(
        pair=NAME,
        slot=slot,
        seq=seq,
        taken_at_us=0,
        master="TEST",
        checkpoint_id=slot,
        structures={
            NAME: StructureImage(NAME, PARAMS, seq, tuple(now.controls.values()), len(rows))
        },
        entries=rows_to_table(rows),
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_image_plus_log_rebuilds_the_structure_exactly(
    facility: CouplingFacility, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    stream = LogStream(tmp_path / "log", name="APP1.LOG", structure=NAME)
    facility.create(PARAMS)
    conn = facility.connect(NAME, "QM1")
    with stream.writer("QM1") as log:
        _work(conn, log, rng, 150)
        write_srds(tmp_path / "srds", _image(conn, 1))
        _work(conn, log, rng, 150)
    before = contents(conn)
    last_seq = conn.statistics().seq

    # The structure is lost; rebuild it from the SRDS and the log after it.
    facility.delete(NAME, force=True)
    image, _ = newest_readable(tmp_path / "srds")
    assert image is not None
    result = rebuild(
        facility,
        PARAMS,
        image=image,
        records=stream.records(structures={NAME}, from_seq=image.seq + 1),
        sequence_floor=stream.last_seq(NAME),
    )
    assert result.loaded == image.structures[NAME].entry_count
    assert result.image_seq == image.seq and result.last_seq == last_seq
    with facility.connect(NAME, "QM1") as again:
        assert contents(again) == before
        assert again.write(0, bytes(16), ignore_limit=True).seq > last_seq  # numbering goes on


def test_log_alone_rebuilds_when_no_checkpoint_was_taken(
    facility: CouplingFacility, tmp_path: Path
) -> None:
    rng = random.Random(7)
    stream = LogStream(tmp_path / "log", name="APP1.LOG", structure=NAME)
    facility.create(PARAMS)
    conn = facility.connect(NAME, "QM1")
    with stream.writer("QM1") as log:
        _work(conn, log, rng, 200)
    before = contents(conn)
    facility.delete(NAME, force=True)
    rebuild(
        facility,
        PARAMS,
        image=None,
        records=stream.records(structures={NAME}),
        sequence_floor=stream.last_seq(NAME),
    )
    with facility.connect(NAME, "QM1") as again:
        assert contents(again) == before


def test_list_controls_come_back(facility: CouplingFacility, tmp_path: Path) -> None:
    facility.create(PARAMS)
    conn = facility.connect(NAME, "QM1")
    conn.set_list_controls(2, limit=7)
    for _ in range(3):
        conn.set_list_controls(2, increment_authority=True)
    image = _image(conn, 1)
    facility.delete(NAME, force=True)
    rebuild(facility, PARAMS, image=image, records=[], sequence_floor=image.seq)
    with facility.connect(NAME, "QM1") as again:
        assert contents(again).controls[2] == ListControls(2, 7, 3)
