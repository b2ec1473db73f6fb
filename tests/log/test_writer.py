"""Writers: durability settings, ownership, reopening, what is and is not logged."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from pathlib import Path

import pytest

from sharedq.cf import ById, Position
from sharedq.clock import retry_until
from sharedq.log import (
    ChangeOp,
    Durability,
    DurabilityMode,
    GroupCommit,
    InvalidLogRequest,
    LogConfig,
    LogStream,
    LogWriter,
    MessageInfo,
    RecordType,
    StreamMismatch,
    WriterClosed,
    WriterInUse,
)

from . import procs
from .helpers import MakeStream, MakeStructure, eid, key


def _put(w: LogWriter, seq: int, *, commit: bool = False, persistent: bool = True) -> object:
    return w.append(
        RecordType.PUT,
        op=ChangeOp.WRITE,
        seq=seq,
        entry_id=eid(seq),
        list_number=0,
        key=key(seq),
        data=b"x" * 20,
        commit=commit,
        persistent=persistent,
    )


def test_every_record_is_durable_before_append_returns(make_stream: MakeStream) -> None:
    stream = make_stream(durability=Durability.every_record())
    with stream.writer("QM1") as w:
        for seq in range(1, 30):
            _put(w, seq)
            assert w.durable_lsn == w.last_lsn == seq


def test_every_commit_is_durable_at_commit(make_stream: MakeStream) -> None:
    stream = make_stream(durability=Durability.every_commit())
    with stream.writer("QM1") as w:
        _put(w, 1)
        _put(w, 2)
        assert w.durable_lsn == 0
        w.commit()
        assert w.durable_lsn == 2
        _put(w, 3)
        _put(w, 4, commit=True)
        assert w.durable_lsn == 4


def test_interval_syncs_in_the_background(make_stream: MakeStream) -> None:
    stream = make_stream(durability=Durability.interval(10))
    with stream.writer("QM1") as w:
        for seq in range(1, 6):
            _put(w, seq)
        retry_until(lambda: w.durable_lsn >= 5, timeout_s=5, first_pause_s=0.005)
        assert w.durable_lsn == 5


@pytest.mark.parametrize("group_commit", [GroupCommit.HOST, GroupCommit.WRITER])
def test_concurrent_every_record_appends_share_syncs(
    make_stream: MakeStream, group_commit: GroupCommit
) -> None:
    stream = make_stream(
        durability=Durability.every_record(), staging_bytes=1 << 22, group_commit=group_commit
    )
    w = stream.writer("QM1")
    seqs = iter(range(1, 10**6))
    lock = threading.Lock()

    def work() -> None:
        for _ in range(100):
            with lock:
                seq = next(seqs)
            _put(w, seq)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert w.durable_lsn == w.last_lsn == 400
    w.close()
    assert [r.seq for r in stream.records()] == list(range(1, 401))


@pytest.mark.parametrize("durability", ["every_record", "every_commit"])
def test_a_killed_writer_loses_no_acknowledged_record(tmp_path: Path, durability: str) -> None:
    # Given a process appending and telling us each lsn it got back
    root = str(tmp_path / "log")
    LogStream(root, name="S1.LOG", structure="S1").close()
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=procs.append_until_killed, args=(root, "QM1", durability, send))
    child.start()
    acknowledged = 0
    while acknowledged < 300:
        assert receive.poll(30)
        acknowledged = receive.recv()
    # When it is killed mid-stream
    assert child.pid is not None
    os.kill(child.pid, signal.SIGKILL)
    child.join()
    while receive.poll():
        acknowledged = receive.recv()
    # Then every acknowledged record is read back, in order, and a torn tail at most
    stream = LogStream(root, name="S1.LOG", structure="S1")
    reader = stream.reader()
    lsns = [r.lsn for r in reader.records()]
    assert lsns[:acknowledged] == list(range(1, acknowledged + 1))
    assert len(lsns) <= acknowledged + 1
    assert all(d.offset > 0 and d.path.endswith(".seg") for d in reader.damage)
    # and the writer resumes right after the last sound record
    with stream.writer("QM1") as w:
        assert w.last_lsn == len(lsns)


def test_durability_settings_parse_and_check() -> None:
    assert Durability.parse("every_record").mode is DurabilityMode.EVERY_RECORD
    assert Durability.parse(" Every_Commit ") == Durability.every_commit()
    assert Durability.parse("interval_ms=25") == Durability.interval(25)
    assert str(Durability.interval(25)) == "interval_ms=25"
    for bad in ("sometimes", "interval_ms=", "interval_ms=0"):
        with pytest.raises(InvalidLogRequest):
            Durability.parse(bad)
    with pytest.raises(InvalidLogRequest):
        Durability(DurabilityMode.EVERY_RECORD, 5)


@pytest.mark.parametrize(
    "settings",
    [
        {"segment_bytes": 10},
        {"staging_bytes": 1024, "segment_bytes": 4096},
        {"high_offload": 101},
        {"low_offload": 60, "high_offload": 50},
        {"max_bytes": 100},
    ],
)
def test_config_is_checked(settings: dict[str, int]) -> None:
    with pytest.raises(InvalidLogRequest) as info:
        LogConfig(**settings)
    assert info.value.reason_name == "BAD_CONFIG"


def test_a_writer_name_has_one_owner(make_stream: MakeStream) -> None:
    stream = make_stream()
    w = stream.writer("QM1")
    with pytest.raises(WriterInUse):
        stream.writer("QM1")
    w.close()
    stream.writer("QM1").close()


def test_bad_names_are_refused(make_stream: MakeStream, tmp_path: Path) -> None:
    stream = make_stream()
    for name in ("", "_hidden", ".dot", "a/b", "x" * 49, "sp ace"):
        with pytest.raises(InvalidLogRequest):
            stream.writer(name)
    with pytest.raises(StreamMismatch):
        LogStream(tmp_path / "log", name="OTHER")


def test_a_closed_writer_refuses_appends(make_stream: MakeStream) -> None:
    stream = make_stream()
    w = stream.writer("QM1")
    w.close()
    w.close()
    with pytest.raises(WriterClosed):
        _put(w, 1)


def test_reopening_continues_lsn_and_observed_seq(make_stream: MakeStream) -> None:
    stream = make_stream()
    with stream.writer("QM1") as w:
        for seq in range(1, 200):
            _put(w, seq * 3)
        w.offload()  # staging empties: the writer must find its place in the data sets
    with stream.writer("QM1") as w:
        assert w.last_lsn == 199
        assert w.last_seq() == 597
        position = w.log_event(RecordType.CONNECT)
        assert (position.seq, position.op, position.lsn) == (597, ChangeOp.NONE, 200)


def test_records_that_are_not_changes_carry_the_last_seq_observed(
    make_stream: MakeStream,
) -> None:
    stream = make_stream()
    with stream.writer("QM1") as w:
        assert w.log_event(RecordType.CONNECT).seq == 0
        _put(w, 7)
        assert w.log_event(RecordType.STATISTICS).seq == 7
        w.observe(42)
        w.observe(40)
        checkpoint = w.log_event(RecordType.SYSTEM_CHECKPOINT, payload={"state": [1, 2]})
        assert checkpoint.seq == 42
        assert w.log_event(RecordType.STATISTICS, seq=3).seq == 3
        with pytest.raises(InvalidLogRequest):
            w.append(RecordType.PUT, op=ChangeOp.WRITE)  # a change needs its seq
    [record] = stream.records(start=checkpoint, to_seq=42, writers={"QM1"})
    assert record.position == checkpoint
    assert record.payload_value() == {"state": [1, 2]}


def test_nonpersistent_messages_are_not_logged(
    make_stream: MakeStream, make_structure: MakeStructure
) -> None:
    stream = make_stream()
    conn = make_structure()
    with stream.writer("QM1", structure=conn.structure_name) as w:
        kept = conn.write(1, key(1), b"persistent", entry_id=eid(1))
        dropped = conn.write(1, key(2), b"nonpersistent", entry_id=eid(2))
        assert w.log_write(kept, message=MessageInfo(queue=b"Q", persistent=True))
        assert w.log_write(dropped, message=MessageInfo(queue=b"Q", persistent=False)) is None
        assert _put(w, 99, persistent=False) is None
    [record] = stream.records()
    assert record.data == b"persistent" and record.persistent is True


def test_helpers_record_what_the_change_was(
    make_stream: MakeStream, make_structure: MakeStructure
) -> None:
    stream = make_stream()
    conn = make_structure()
    info = MessageInfo(
        uow=b"\x01" * 32, queue=b"\x01TRANA   IMSA   ", message_id=b"M", correl_id=b"C", priority=5
    )
    with stream.writer("QM1", structure=conn.structure_name) as w:
        put = conn.write(
            1,
            key(1),
            b"body",
            adjunct=b"adj",
            secondary_key=b"sk",
            entry_id=eid(1),
            version=2**64 - 1,
            position=Position.HEAD,
        )
        w.log_write(put, position=Position.HEAD, message=info)
        read = conn.move(ById(eid(1)), 3, new_key=key(9), new_secondary_key=None, set_version=5)
        assert read is not None
        w.log_move(read, record_type=RecordType.READ, from_list=1, message=info)
    put_rec, read_rec = stream.records()
    assert (put_rec.type, put_rec.op, put_rec.at_head, put_rec.version) == (
        RecordType.PUT,
        ChangeOp.WRITE,
        True,
        2**64 - 1,
    )
    assert put_rec[-7:-1] == tuple(info)
    assert (put_rec.data, put_rec.adjunct, put_rec.secondary_key) == (b"body", b"adj", b"sk")
    assert (read_rec.type, read_rec.list_number, read_rec.from_list, read_rec.key) == (
        RecordType.READ,
        3,
        1,
        key(9),
    )
    assert (read_rec.set_secondary_key, read_rec.secondary_key, read_rec.version) == (
        True,
        None,
        5,
    )


def test_a_segment_being_created_at_a_crash_is_never_seen(make_stream: MakeStream) -> None:
    stream = make_stream()
    with stream.writer("QM1") as w:
        _put(w, 1)
    # A crash while the next segment was being created leaves only a hidden file
    leftover = stream.layout.writer_dir("QM1") / f".{2:020d}.seg.tmp"
    leftover.write_bytes(b"SQ")
    reader = stream.reader()
    assert [r.seq for r in reader.records()] == [1] and reader.damage == []
    with stream.writer("QM1") as w:
        assert not leftover.exists()
        _put(w, 2)
    assert [r.seq for r in stream.records()] == [1, 2]
