"""Deleting records no longer needed, and the log-full protocol (CHKNEARFULL)."""

from __future__ import annotations

import threading

import pytest

from sharedq.clock import retry_until
from sharedq.log import (
    ChangeOp,
    LogFull,
    LogFullEvent,
    LogStream,
    LogWriter,
    RecordType,
)

from .helpers import MakeStream, eid, key


def _put(w: LogWriter, seq: int, size: int = 60, structure: str | None = None) -> None:
    w.append(
        RecordType.PUT,
        op=ChangeOp.WRITE,
        seq=seq,
        entry_id=eid(seq % 2**40),
        list_number=0,
        key=key(seq),
        data=b"r" * size,
        structure=structure,
    )


def test_delete_before_hides_records_and_removes_whole_files(make_stream: MakeStream) -> None:
    # Given records 1..600 in several data sets and staging segments
    stream = make_stream(staging_bytes=1 << 22)
    with stream.writer("QM1") as w:
        for seq in range(1, 601):
            _put(w, seq)
            if seq % 150 == 0:
                w.offload()
    datasets_before = len(stream.layout.dataset_files())
    assert datasets_before == 4
    # When records below 320 are deleted
    result = stream.delete_before("S1", 320)
    # Then no reader sees them, the files holding only them are gone, and the rest stays
    assert [r.seq for r in stream.records()] == list(range(320, 601))
    assert len(stream.layout.dataset_files()) == 2
    assert result.bytes_freed > 0 and len(result.files) == 2
    # and the point is durable and never goes down
    again = LogStream(stream.root, name="S1.LOG", structure="S1")
    assert again.retention_points() == {"S1": 320}
    again.delete_before("S1", 100)
    assert again.retention_points() == {"S1": 320}
    assert next(r.seq for r in again.records()) == 320


def test_closed_segments_go_but_the_newest_segment_stays(make_stream: MakeStream) -> None:
    stream = make_stream(staging_bytes=1 << 22)
    with stream.writer("QM1") as w:
        for seq in range(1, 300):
            _put(w, seq)
    segments = stream.layout.segments("QM1")
    assert len(segments) > 3
    stream.delete_before("S1", 10_000)
    assert stream.layout.segments("QM1") == segments[-1:]
    assert list(stream.records()) == []
    # The writer still knows where it is
    with stream.writer("QM1") as w:
        assert w.last_lsn == 299


def test_retention_is_per_structure(make_stream: MakeStream) -> None:
    stream = make_stream(structure="PRIMARY")
    with stream.writer("QM1") as w:
        for seq in range(1, 101):
            _put(w, seq)
            _put(w, seq, structure="OVERFLOW")
    stream.delete_before("PRIMARY", 51)
    seqs = [(r.structure, r.seq) for r in stream.records()]
    assert [s for name, s in seqs if name == "PRIMARY"] == list(range(51, 101))
    assert [s for name, s in seqs if name == "OVERFLOW"] == list(range(1, 101))


def test_a_server_down_across_two_checkpoints_loses_its_restart_records(
    make_stream: MakeStream,
) -> None:
    """CK-T5 and CK-T6: retention keeps the log from the older SRDS on."""
    stream = make_stream()
    with stream.writer("CQSA") as a, stream.writer("CQSB") as b, stream.writer("CQSC") as c:
        # B takes its last system checkpoint at 150, C at 50, then both go down
        for seq in range(1, 251):
            _put(a, seq)
            if seq == 50:
                c.observe(seq)
                c_restart = c.log_event(RecordType.SYSTEM_CHECKPOINT, payload={"cqs": "C"})
            if seq == 150:
                b.observe(seq)
                b_restart = b.log_event(RecordType.SYSTEM_CHECKPOINT, payload={"cqs": "B"})
        # Structure checkpoints at 100 (SRDS1) and 200 (SRDS2): keep from the older one
        stream.delete_before("S1", 100)
    points = stream.retention_points()
    # B's restart records are kept: it warm starts from its checkpoint
    assert b_restart.seq >= points["S1"]
    [b_checkpoint] = stream.records(start=b_restart, writers={"CQSB"})
    assert b_checkpoint.payload_value() == {"cqs": "B"}
    # C's are deleted: it must cold start
    assert c_restart.seq < points["S1"]
    assert list(stream.records(start=c_restart, writers={"CQSC"})) == []


def test_log_full_calls_the_handler_which_makes_room(make_stream: MakeStream) -> None:
    # Given a log of at most 48 KiB whose handler checkpoints and deletes what it covers
    stream = make_stream(max_bytes=48 * 1024, staging_bytes=8192, segment_bytes=2048)
    w = stream.writer("QM1")
    events: list[LogFullEvent] = []

    def checkpoint(event: LogFullEvent) -> None:
        events.append(event)
        covered = w.last_seq()
        # The checkpoint logs itself from the handler's thread, past the maximum
        w.log_event(RecordType.STRUCTURE_CHECKPOINT, payload={"srds": 1, "seq": covered})
        stream.delete_before("S1", covered - 50)

    stream.set_full_handler(checkpoint)
    # When far more than the maximum is appended
    for seq in range(1, 3001):
        _put(w, seq)
    w.close()
    # Then the handler ran, each time for the writer that needed room
    assert events and all(e.writer == "QM1" and e.max_bytes == 48 * 1024 for e in events)
    assert stream.size_bytes() <= 48 * 1024 + 2 * 2048
    # and every record from the retention point on is there
    point = stream.retention_points()["S1"]
    changes = [r.seq for r in stream.records() if r.op != ChangeOp.NONE]
    assert changes == list(range(point, 3001))


def test_log_full_without_room_is_a_clear_error(make_stream: MakeStream) -> None:
    stream = make_stream(max_bytes=8192, staging_bytes=8192, segment_bytes=2048)
    calls = []
    stream.set_full_handler(lambda event: calls.append(event))  # frees nothing
    with stream.writer("QM1") as w:
        with pytest.raises(LogFull) as info:
            for seq in range(1, 1000):
                _put(w, seq)
        assert info.value.reason_name == "LOG_FULL" and info.value.reason_code == 3020
        assert "maximum 8192" in str(info.value)
        assert len(calls) == 1
        last = w.last_lsn
        # Nothing was written by the failed append; once room is made, appends go on
        stream.delete_before("S1", 10**6)
        _put(w, 10**6)
        assert w.last_lsn == last + 1


def test_a_failing_handler_gives_log_full_with_its_cause(make_stream: MakeStream) -> None:
    stream = make_stream(max_bytes=8192, staging_bytes=8192, segment_bytes=2048)

    def broken(event: LogFullEvent) -> None:
        raise RuntimeError("SRDS unavailable")

    stream.set_full_handler(broken)
    with stream.writer("QM1") as w, pytest.raises(LogFull) as info:
        for seq in range(1, 1000):
            _put(w, seq)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert "SRDS unavailable" in str(info.value)


def test_no_handler_means_log_full(make_stream: MakeStream) -> None:
    stream = make_stream(max_bytes=8192, staging_bytes=8192, segment_bytes=2048)
    with stream.writer("QM1") as w, pytest.raises(LogFull):
        for seq in range(1, 1000):
            _put(w, seq)


def test_threads_finding_the_log_full_run_the_handler_once(make_stream: MakeStream) -> None:
    # (The maximum leaves room for what no deletion can free at any instant: each
    # writer's open segment, closed segments and a data set being written.)
    stream = make_stream(max_bytes=40960, staging_bytes=8192, segment_bytes=2048)
    calls = []
    gate = threading.Event()

    def slow_checkpoint(event: LogFullEvent) -> None:
        calls.append(event)
        gate.wait(5)
        stream.delete_before("S1", 10**9)

    stream.set_full_handler(slow_checkpoint)
    writers = [stream.writer(f"QM{i}") for i in range(3)]
    seqs = iter(range(1, 10**6))
    lock = threading.Lock()
    errors: list[BaseException] = []

    def work(w: LogWriter) -> None:
        try:
            for _ in range(200):
                with lock:
                    seq = next(seqs)
                _put(w, seq)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in writers]
    for t in threads:
        t.start()
    retry_until(lambda: bool(calls), timeout_s=30, first_pause_s=0.001)
    gate.set()
    for t in threads:
        t.join()
    for w in writers:
        w.close()
    assert errors == []
    assert len(calls) >= 1
    assert len(calls) <= 600 * 150 // 40960 + 3  # once per filling, not once per thread
