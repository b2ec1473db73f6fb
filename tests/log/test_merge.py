"""Merging: one stream in structure order, across writers, threads, processes, files."""

from __future__ import annotations

import itertools
import multiprocessing
import random
import threading
from pathlib import Path

from sharedq.cf import ById, ListStructure, Position
from sharedq.log import ChangeOp, LogRecord, LogStream, MessageInfo, RecordType

from . import procs
from .helpers import MakeStream, MakeStructure, eid, key


def _sorted_by_position(records: list[LogRecord]) -> bool:
    return all(a.position < b.position for a, b in itertools.pairwise(records))


def _server(
    conn: ListStructure, stream: LogStream, name: str, first_id: int, seqs: list[int]
) -> None:
    """A server: random puts, reads (moves) and deletes of its own entries, each logged."""
    rng = random.Random(first_id)
    w = stream.writer(name)
    mine: list[bytes] = []
    for n in range(250):
        choice = rng.random()
        info = MessageInfo(uow=name.encode().ljust(8), queue=b"Q%d" % (n % 3))
        if choice < 0.5 or not mine:
            entry = eid(first_id + n)
            change = conn.write(
                rng.randrange(4),
                key(rng.randrange(5)),
                b"m" * rng.randrange(60),
                entry_id=entry,
                position=rng.choice(list(Position)),
            )
            w.log_write(change, message=info)
            mine.append(entry)
        elif choice < 0.8:
            change = conn.move(ById(rng.choice(mine)), rng.randrange(4, 8))
            assert change is not None
            w.log_move(change, record_type=RecordType.READ, message=info)
        else:
            entry = mine.pop(rng.randrange(len(mine)))
            change = conn.delete(ById(entry))
            assert change is not None
            w.log_delete(change, message=info)
        seqs.append(change.seq)
        if n % 40 == 0:
            w.observe(conn.statistics().seq)
            w.log_event(RecordType.STATISTICS, payload={"n": n})
    w.close()


def test_writers_in_threads_merge_into_structure_order(
    make_stream: MakeStream, make_structure: MakeStructure
) -> None:
    # Given four servers racing on one structure, each logging to its own writer,
    # with segments small enough to roll and offload to data sets along the way
    stream = make_stream(structure="QSG1")
    conns = [make_structure("QSG1", user=f"QM{i}") for i in range(4)]
    seqs: list[list[int]] = [[] for _ in conns]
    threads = [
        threading.Thread(target=_server, args=(c, stream, f"QM{i}", 10_000 * (i + 1), seqs[i]))
        for i, c in enumerate(conns)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert stream.layout.dataset_files(), "some records went to data sets"
    # When the stream is read
    records = list(stream.records())
    # Then every change is there once, in the structure's order
    changes = [r for r in records if r.op != ChangeOp.NONE]
    assert [r.seq for r in changes] == sorted(s for per in seqs for s in per)
    assert _sorted_by_position(records)
    # and each other record follows the change whose seq it carries
    for before, record in itertools.pairwise(records):
        if record.op == ChangeOp.NONE and before.op != ChangeOp.NONE:
            assert before.seq <= record.seq


def test_threads_sharing_one_writer_get_contiguous_lsns(make_stream: MakeStream) -> None:
    stream = make_stream(staging_bytes=1 << 22)
    w = stream.writer("QM1")
    counter = iter(range(1, 10**9))
    lock = threading.Lock()

    def work() -> None:
        for _ in range(300):
            with lock:
                seq = next(counter)
            w.append(RecordType.PUT, op=1, seq=seq, entry_id=eid(seq), list_number=0, key=key(seq))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.close()
    records = list(stream.records())
    assert [r.seq for r in records] == list(range(1, 1201))
    assert sorted(r.lsn for r in records) == list(range(1, 1201))


def test_writers_in_separate_processes_merge_completely(tmp_path: Path) -> None:
    # Given three processes taking seqs from one shared counter and each logging its own
    root = str(tmp_path / "log")
    LogStream(root, name="S1.LOG", structure="S1").close()
    ctx = multiprocessing.get_context("spawn")
    counter = ctx.Value("q", 0)
    children = [
        ctx.Process(target=procs.append_with_shared_seq, args=(root, f"P{i}", 400, counter))
        for i in range(3)
    ]
    for child in children:
        child.start()
    for child in children:
        child.join(60)
        assert child.exitcode == 0
    # When the parent reads the stream
    stream = LogStream(root, name="S1.LOG", structure="S1")
    records = list(stream.records())
    # Then every seq the counter gave is there exactly once, in order, whatever the
    # order the processes logged them in, from staging and data sets alike
    changes = [r for r in records if r.op != ChangeOp.NONE]
    assert [r.seq for r in changes] == list(range(1, 1201))
    assert _sorted_by_position(records)
    assert {r.writer for r in records} == {"P0", "P1", "P2"}
    assert stream.layout.dataset_files()


def test_a_writer_name_has_one_owner_across_processes(make_stream: MakeStream) -> None:
    stream = make_stream()
    ctx = multiprocessing.get_context("spawn")
    with stream.writer("QM1"), ctx.Pool(1) as pool:
        assert pool.apply(procs.try_open, (str(stream.root), "QM1")) == "WRITER_IN_USE"
        assert pool.apply(procs.try_open, (str(stream.root), "QM2")) == "opened"
    with ctx.Pool(1) as pool:
        assert pool.apply(procs.try_open, (str(stream.root), "QM1")) == "opened"
