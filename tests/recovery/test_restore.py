"""Rebuilding a structure from an SRDS image and the log after it, object for object."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cf.memory import MemoryFacility
from sharedq.log import LogStream
from sharedq.recovery import (
    ListControls,
    contents,
    newest_readable,
    rebuild,
    write_srds,
)
from tests.recovery.changes import NAME, PARAMS, random_work, srds_image


@pytest.fixture(params=["memory", "redis"])
def facility(request: pytest.FixtureRequest) -> CouplingFacility:
    if request.param == "memory":
        return MemoryFacility()
    from sharedq.cf import open_facility

    server = request.getfixturevalue("redis_server")
    server.flush()
    return open_facility(server.url)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_image_plus_log_rebuilds_the_structure_exactly(
    facility: CouplingFacility, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    stream = LogStream(tmp_path / "log", name="APP1.LOG", structure=NAME)
    facility.create(PARAMS)
    conn = facility.connect(NAME, "QM1")
    with stream.writer("QM1") as log:
        random_work(conn, log, rng, 150)
        write_srds(tmp_path / "srds", srds_image(conn, 1))
        random_work(conn, log, rng, 150)
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
        random_work(conn, log, rng, 200)
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
    image = srds_image(conn, 1)
    facility.delete(NAME, force=True)
    rebuild(facility, PARAMS, image=image, records=[], sequence_floor=image.seq)
    with facility.connect(NAME, "QM1") as again:
        assert contents(again).controls[2] == ListControls(2, 7, 3)
