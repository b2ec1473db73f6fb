"""Replay rebuilds a structure object for object: from nothing, or from a checkpoint copy.

Random programs of list-structure requests run on a memory structure, each change
logged through the writer's helpers as a server would.  Replaying the log onto a fresh
structure (or onto a copy taken mid-program, standing in for an SRDS, from the seq
after it) must give every list the same entries, in the same order, with the same
ids, keys, data, adjuncts, secondary keys, versions, and the same limits and
authorities.  Folded replay (the default) and record-by-record replay must agree.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sharedq.cf import (
    UNCHANGED,
    BulkMove,
    ById,
    CFError,
    ListStructure,
    Position,
    StructureParams,
)
from sharedq.cf.memory import MemoryFacility
from sharedq.log import (
    ChangeOp,
    LogRecord,
    LogStream,
    LogWriter,
    MessageInfo,
    RecordType,
    ReplayError,
)
from sharedq.recovery import apply_record, replay
from tests.log.helpers import MakeStream, MakeStructure, eid, key, stream_maker, structure_maker

LISTS = 6
KINDS = [
    "write",
    "write",
    "write",
    "write_head",
    "move",
    "move",
    "move_head",
    "move_rekey",
    "bulk_move",
    "delete",
    "bulk_delete",
    "update",
    "update_version",
    "limit",
    "authority",
    "take_checkpoint",
]


@pytest.fixture
def facility() -> Iterator[MemoryFacility]:
    fac = MemoryFacility()
    yield fac
    fac.close()


@pytest.fixture
def make_structure(facility: MemoryFacility) -> MakeStructure:
    """Create a structure and connect to it; keywords go to ``for_capacity``."""
    return structure_maker(facility)


@pytest.fixture
def make_stream(tmp_path: Path) -> Iterator[MakeStream]:
    """Open a stream on ``tmp_path/log`` (the same directory each call); closes them all."""
    with stream_maker(tmp_path) as make:
        yield make


def image(conn: ListStructure) -> list[object]:
    """Everything replay must reproduce, list by list, in list order."""
    return [(conn.list_info(n), list(conn.scan(n))) for n in range(LISTS)]


def copy_into(source: ListStructure, target: ListStructure) -> None:
    """What loading an SRDS does: entries in list order, then limits and authorities."""
    for number in range(LISTS):
        for entry in source.scan(number):
            target.write(
                number,
                entry.key,
                entry.data,
                adjunct=entry.adjunct,
                secondary_key=entry.secondary_key,
                entry_id=entry.entry_id,
                version=entry.version,
                ignore_limit=True,
            )
        info = source.list_info(number)
        target.set_list_controls(number, limit=info.limit)
        for _ in range(info.authority):
            target.set_list_controls(number, increment_authority=True)


class Program:
    """Runs random requests on a structure, logging each change."""

    def __init__(self, conn: ListStructure, writer: LogWriter, facility: MemoryFacility) -> None:
        self.conn = conn
        self.w = writer
        self.facility = facility
        self.present: list[bytes] = []
        self.next_id = 1
        #: A copy of the structure taken mid-program (an SRDS) and the seq it covers.
        self.checkpoint_at: tuple[ListStructure, int] | None = None

    def run(self, steps: list[tuple[str, int, int]]) -> None:
        for kind, a, b in steps:
            # (a refused request changes nothing and is not logged)
            with contextlib.suppress(CFError):
                getattr(self, kind)(random.Random(a * 7919 + b), a, b)

    def _pick(self, a: int) -> bytes | None:
        return self.present[a % len(self.present)] if self.present else None

    def _info(self, a: int) -> MessageInfo:
        return MessageInfo(uow=a.to_bytes(8, "big"), queue=b"Q%d" % (a % 3), priority=a % 10)

    def write(self, rng: random.Random, a: int, b: int, head: bool = False) -> None:
        entry_id = eid(self.next_id)
        self.next_id += 1
        position = Position.HEAD if head else Position.TAIL
        ignore = rng.random() < 0.3
        change = self.conn.write(
            a % LISTS,
            key(b % 4),
            bytes([a % 251]) * rng.randrange(0, 700),
            adjunct=bytes([b % 251]) * rng.randrange(0, 8),
            secondary_key=rng.choice([None, b"s1", b"s2"]),
            entry_id=entry_id,
            version=rng.choice([0, 1, 2**64 - 2]),
            position=position,
            ignore_limit=ignore,
        )
        self.w.log_write(change, position=position, ignore_limit=ignore, message=self._info(a))
        self.present.append(entry_id)

    def write_head(self, rng: random.Random, a: int, b: int) -> None:
        self.write(rng, a, b, head=True)

    def move(
        self, rng: random.Random, a: int, b: int, head: bool = False, rekey: bool = False
    ) -> None:
        entry_id = self._pick(a)
        if entry_id is None:
            return
        position = Position.HEAD if head else Position.TAIL
        before = self.conn.read(ById(entry_id))
        assert before is not None
        change = self.conn.move(
            ById(entry_id),
            b % LISTS,
            new_key=key(a % 5) if rekey else None,
            new_secondary_key=rng.choice([None, b"s3"]) if rekey else UNCHANGED,
            increment_version=rng.random() < 0.5,
            position=position,
            ignore_limit=True,
        )
        assert change is not None
        self.w.log_move(
            change,
            record_type=RecordType.READ,
            from_list=before.list_number,
            position=position,
            ignore_limit=True,
        )

    def move_head(self, rng: random.Random, a: int, b: int) -> None:
        self.move(rng, a, b, head=True)

    def move_rekey(self, rng: random.Random, a: int, b: int) -> None:
        self.move(rng, a, b, rekey=True)

    def bulk_move(self, rng: random.Random, a: int, b: int) -> None:
        chosen = rng.sample(self.present, min(len(self.present), 1 + a % 4))
        moves = [
            BulkMove(
                e,
                rng.randrange(LISTS),
                new_key=rng.choice([None, key(b % 3)]),
                new_secondary_key=rng.choice([UNCHANGED, None, b"s4"]),
                increment_version=rng.random() < 0.5,
            )
            for e in chosen
        ]
        result = self.conn.move_entries(moves, ignore_limit=True)
        self.w.log_bulk_move(moves, result, ignore_limit=True)

    def delete(self, rng: random.Random, a: int, b: int) -> None:
        entry_id = self._pick(a)
        if entry_id is None:
            return
        change = self.conn.delete(ById(entry_id))
        assert change is not None
        self.w.log_delete(change, message=self._info(a))
        self.present.remove(entry_id)

    def bulk_delete(self, rng: random.Random, a: int, b: int) -> None:
        chosen = rng.sample(self.present, min(len(self.present), 1 + a % 5))
        result = self.conn.delete_entries(chosen)
        self.w.log_bulk_delete(chosen, result)
        for entry_id in chosen:
            self.present.remove(entry_id)

    def update(self, rng: random.Random, a: int, b: int) -> None:
        entry_id = self._pick(a)
        if entry_id is None:
            return
        data_changed, adjunct_changed = rng.random() < 0.6, rng.random() < 0.5
        authority = rng.random() < 0.3
        change = self.conn.update(
            ById(entry_id),
            data=b"u" * rng.randrange(0, 900) if data_changed else UNCHANGED,
            adjunct=b"A" * rng.randrange(0, 9) if adjunct_changed else UNCHANGED,
            increment_authority=authority,
        )
        assert change is not None
        self.w.log_update(
            change,
            data_changed=data_changed,
            adjunct_changed=adjunct_changed,
            increment_authority=authority,
        )

    def update_version(self, rng: random.Random, a: int, b: int) -> None:
        entry_id = self._pick(a)
        if entry_id is None:
            return
        change = self.conn.update(ById(entry_id), set_version=rng.choice([b, 2**64 - 1]))
        assert change is not None
        self.w.log_update(change, data_changed=False, adjunct_changed=False)

    def limit(self, rng: random.Random, a: int, b: int) -> None:
        limit = rng.choice([None, 0, 2, 5, 50])
        seq = self.conn.set_list_controls(a % LISTS, limit=limit)
        self.w.log_list_controls(seq, a % LISTS, limit=limit)

    def authority(self, rng: random.Random, a: int, b: int) -> None:
        seq = self.conn.set_list_controls(a % LISTS, increment_authority=True)
        self.w.log_list_controls(seq, a % LISTS, increment_authority=True)

    def take_checkpoint(self, rng: random.Random, a: int, b: int) -> None:
        if self.checkpoint_at is None:
            copy = _fresh(self.facility)
            copy_into(self.conn, copy)
            self.checkpoint_at = (copy, self.conn.statistics().seq)


_counter = iter(range(1, 10**9))


def _fresh(facility: MemoryFacility, name: str | None = None) -> ListStructure:
    name = name or f"R{next(_counter)}"
    facility.create(
        StructureParams.for_capacity(name, list_count=LISTS, entries=4000, elements=40000)
    )
    return facility.connect(name, "RECOVERY")


steps = st.lists(
    st.tuples(st.sampled_from(KINDS), st.integers(0, 10**6), st.integers(0, 10**6)),
    min_size=5,
    max_size=150,
)


@given(program=steps, window=st.sampled_from([1, 3, 16, 200_000]))
def test_replay_reproduces_the_structure(
    tmp_path_factory: pytest.TempPathFactory, program: list[tuple[str, int, int]], window: int
) -> None:
    facility = MemoryFacility()
    original = _fresh(facility, "ORIG")
    root = tmp_path_factory.mktemp("replay") / "log"
    with LogStream(root, name="ORIG.LOG", structure="ORIG") as stream:
        run = Program(original, stream.writer("QM1"), facility)
        run.run(program)
        run.w.close()
        records = list(stream.records())
        want = image(original)
        # From nothing: folded, windowed, and record by record
        for fold in (True, False):
            rebuilt = _fresh(facility)
            result = replay(rebuilt, records, structure_name="ORIG", fold=fold, window=window)
            assert image(rebuilt) == want
            assert result.records == len(records)
        # From a checkpoint copy, replaying the log after the seq it covers
        if run.checkpoint_at is not None:
            copy, covered = run.checkpoint_at
            after = list(stream.records(structures={"ORIG"}, from_seq=covered + 1))
            replay(copy, after, structure_name="ORIG", window=window)
            assert image(copy) == want
    facility.close()


def test_replay_reads_the_same_from_data_sets(
    make_stream: MakeStream, facility: MemoryFacility
) -> None:
    original = _fresh(facility, "ORIG")
    stream = make_stream(structure="ORIG", staging_bytes=16384, segment_bytes=2048)
    run = Program(original, stream.writer("QM1"), facility)
    run.run([(KINDS[i % len(KINDS)], i * 37, i * 11) for i in range(600)])
    run.w.close()
    assert stream.layout.dataset_files()
    rebuilt = _fresh(facility)
    replay(rebuilt, stream.records(structures={"ORIG"}), structure_name="ORIG")
    assert image(rebuilt) == image(original)


def test_folding_skips_messages_that_came_and_went(
    make_stream: MakeStream, make_structure: MakeStructure, facility: MemoryFacility
) -> None:
    # Given a thousand messages put, read to a lock list and deleted, and ten still there
    conn = make_structure("QSG1")
    stream = make_stream(structure="QSG1", staging_bytes=1 << 22)
    with stream.writer("QM1") as w:
        for n in range(1010):
            put = conn.write(1, key(n % 10), b"msg", entry_id=eid(n))
            w.log_write(put)
            if n < 1000:
                read = conn.move(ById(eid(n)), 2)
                assert read is not None
                w.log_move(read, record_type=RecordType.READ)
                deleted = conn.delete(ById(eid(n)))
                assert deleted is not None
                w.log_delete(deleted)
    rebuilt = _fresh(facility)
    # When the log is replayed
    result = replay(rebuilt, stream.records(), structure_name="QSG1")
    # Then only the survivors cost anything: one bulk write of the ten
    assert result.records == 3010
    assert result.requests == 1
    assert [e.entry_id for e in rebuilt.scan(1)] == [e.entry_id for e in conn.scan(1)]


def test_a_log_that_disagrees_with_the_structure_is_a_replay_error(
    make_stream: MakeStream, make_structure: MakeStructure, facility: MemoryFacility
) -> None:
    conn = make_structure("QSG1")
    stream = make_stream(structure="QSG1")
    with stream.writer("QM1") as w:
        w.log_write(conn.write(1, key(1), b"x", entry_id=eid(1)))
        moved = conn.move(ById(eid(1)), 2)
        assert moved is not None
        w.log_move(moved)
    records = list(stream.records())
    for fold in (True, False):
        with pytest.raises(ReplayError) as info:  # the move, without the write before it
            replay(_fresh(facility), records[1:], structure_name="QSG1", fold=fold)
        assert info.value.context["seq"] == records[1].seq
    twice = _fresh(facility)
    replay(twice, records, structure_name="QSG1")
    with pytest.raises(ReplayError):  # the write again: the entry exists
        replay(twice, records[:1], structure_name="QSG1", fold=False)
    with pytest.raises(ReplayError):
        replay(_fresh(facility), records + records[:1], structure_name="QSG1")


def test_apply_record_skips_records_that_are_not_changes(facility: MemoryFacility) -> None:
    record = LogRecord(5, int(ChangeOp.NONE), "QM1", 1, int(RecordType.CONNECT), "S", 0)
    assert apply_record(_fresh(facility), record) is False


def test_the_delete_of_an_entry_the_log_never_wrote_replays_as_nothing(
    make_stream: MakeStream, make_structure: MakeStructure, facility: MemoryFacility
) -> None:
    """A server killed between its change and its log record leaves an unlogged put;
    the peer that recovers its units deletes it and logs that.  Replay lets it pass."""
    conn = make_structure("QSG1")
    stream = make_stream(structure="QSG1")
    with stream.writer("QM1") as w:
        w.log_write(conn.write(1, key(1), b"kept", entry_id=eid(1)))
        conn.write(1, key(2), b"never logged", entry_id=eid(2))  # the writer dies here
    with stream.writer("QM2") as peer:
        deleted = conn.delete(ById(eid(2)))
        assert deleted is not None
        peer.log_delete(deleted)
    for fold in (True, False):
        rebuilt = _fresh(facility)
        replay(rebuilt, stream.records(), structure_name="QSG1", fold=fold)
        assert [e.entry_id for e in rebuilt.scan(1)] == [eid(1)]
