"""Log stream throughput, against raw file writes and raw msgpack decoding in the same run.

Appends per durability setting (``every_commit`` with and without commits,
``interval_ms``, ``every_record``) against ``os.write`` of the same framed bytes (and
``os.write`` + ``fdatasync`` for ``every_record``), and syncing every record into
preallocated segments (the default) against appended ones, raw writes likewise; the
merged read of four writers' staging and of Parquet data sets against
``msgpack.unpackb`` of the same bodies;
offload against ``pyarrow.parquet.write_table`` of the same table already in memory;
and structure recovery (read + replay onto a fresh memory structure) against the read
alone, for a queue workload where most messages are consumed and one where all stay.
Dual logging (each segment written under two roots) against one copy, committing every
ten records and syncing every record; and the continuity check a recovery makes
before it reads, against the read.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgpack
import pyarrow.parquet as pq

from bench.harness import Report, best_rate, best_rates_in_turns, parse_args
from sharedq.cf import Change, ListEntry, StructureParams
from sharedq.cf.memory import MemoryFacility
from sharedq.log import Durability, LogConfig, LogRecord, LogStream, MessageInfo, RecordType
from sharedq.log.codec import FRAME_HEADER_BYTES, SEGMENT_HEADER_BYTES
from sharedq.log.datasets import records_to_table
from sharedq.log.writer import LogWriter
from sharedq.recovery import replay

WRITERS = 4
#: Message bodies are 200-byte slices of this, each message its own, so that Parquet
#: cannot shrink them away as it would identical bodies.
NOISE = os.urandom(1 << 20)


def _changes(n: int, consumed: float) -> list[tuple[str, Change]]:
    """A queue workload of ``n`` changes: put, read to a lock list, and (mostly) delete."""
    out: list[tuple[str, Change]] = []
    seq = 0
    message = 0
    while len(out) < n:
        message += 1
        entry_id = message.to_bytes(12, "big")
        key = b"\x04" + message.to_bytes(15, "big")
        at = (message * 211) % (len(NOISE) - 200)
        data = NOISE[at : at + 200]
        seq += 1
        out.append(("put", Change(seq, ListEntry(entry_id, 1, key, data, b"", None, 0, 1))))
        seq += 1
        out.append(("read", Change(seq, ListEntry(entry_id, 2, key, data, b"", None, 1, 1))))
        if (message % 100) < consumed * 100:
            seq += 1
            out.append(("delete", Change(seq, ListEntry(entry_id, 2, key, data, b"", None, 1, 1))))
    return out[:n]


def _log(w: LogWriter, kind: str, change: Change, info: MessageInfo) -> None:
    if kind == "put":
        w.log_write(change, message=info)
    elif kind == "read":
        w.log_move(change, record_type=RecordType.READ, from_list=1, message=info)
    else:
        w.log_delete(change, message=info)


def _stream(root: Path, copy_root: Path | None = None, **config: object) -> LogStream:
    for path in (root, copy_root):
        if path is not None and path.exists():
            shutil.rmtree(path)
    settings: dict[str, object] = {"staging_bytes": 1 << 30, "segment_bytes": 64 << 20}
    settings.update(config)
    return LogStream(
        root,
        name="BENCH.LOG",
        structure="BENCH",
        config=LogConfig(**settings),  # type: ignore[arg-type]
        copy_root=copy_root,
    )


def append_figures(report: Report, base: Path, n: int, n_sync: int) -> None:
    work = _changes(n, 0.9)
    info = MessageInfo(uow=b"U" * 8, queue=b"\x01TRANA   IMSA   ", message_id=b"M" * 24)

    def appender(
        durability: Durability,
        count: int,
        commit_every: int,
        dual: bool = False,
        preallocate: bool = True,
    ) -> Callable[[], None]:
        def run() -> None:
            copy = base / "append-copy" if dual else None
            stream = _stream(base / "append", copy, durability=durability, preallocate=preallocate)
            w = stream.writer("QM1")
            for index, (kind, change) in enumerate(work[:count]):
                _log(w, kind, change, info)
                if commit_every and index % commit_every == commit_every - 1:
                    w.commit()
            w.close()

        return run

    # The baseline writes the very frames the writer writes, one os.write each.
    stream = _stream(base / "frames")
    with stream.writer("QM1") as w:
        for kind, change in work:
            _log(w, kind, change, info)
    [(_, segment)] = stream.layout.segments("QM1")
    raw = segment.read_bytes()
    frames, pos = [], SEGMENT_HEADER_BYTES
    while pos < len(raw):
        end = pos + FRAME_HEADER_BYTES + int.from_bytes(raw[pos : pos + 4], "little")
        frames.append(raw[pos:end])
        pos = end

    def raw_writes(count: int, sync: bool) -> Callable[[], None]:
        def run() -> None:
            fd = os.open(base / "raw.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND)
            try:
                for frame in frames[:count]:
                    os.write(fd, frame)
                    if sync:
                        os.fdatasync(fd)
            finally:
                os.close(fd)

        return run

    def raw_in_place(count: int) -> Callable[[], None]:
        """The frames written and synced one by one into room allocated beforehand."""

        def run() -> None:
            fd = os.open(base / "raw-room.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                os.posix_fallocate(fd, 0, sum(map(len, frames[:count])))
                os.fsync(fd)
                at = 0
                for frame in frames[:count]:
                    os.pwrite(fd, frame, at)
                    at += len(frame)
                    os.fdatasync(fd)
            finally:
                os.close(fd)

        return run

    raw_rate = best_rate(n, raw_writes(n, False), repeats=3)
    raw_sync_rate = best_rate(n_sync, raw_writes(n_sync, True), repeats=2)
    report.add("raw_write_per_s", raw_rate, "records/s", "os.write of the same frames")
    report.add("raw_write_fdatasync_per_s", raw_sync_rate, "records/s", "os.write + fdatasync")
    cases = [
        ("every_commit", Durability.every_commit(), n, 0),
        ("every_commit_10", Durability.every_commit(), n, 10),
        ("interval_10ms", Durability.interval(10), n, 0),
        ("every_record", Durability.every_record(), n_sync, 0),
    ]
    for name, durability, count, commit_every in cases:
        rate = best_rate(count, appender(durability, count, commit_every), repeats=2)
        note = f"commit every {commit_every}" if commit_every else ""
        report.add(f"append_{name}_per_s", rate, "records/s", note)
        baseline = raw_sync_rate if name == "every_record" else raw_rate
        report.add(f"append_{name}_ratio_vs_raw", rate / baseline, "", "vs raw write (+sync)")
        if name in ("every_commit_10", "every_record"):
            dual = best_rate(count, appender(durability, count, commit_every, True), repeats=2)
            report.add(f"append_{name}_dual_per_s", dual, "records/s", "two copies")
            report.add(f"dual_{name}_ratio_vs_single", dual / rate, "", "dual logging vs one copy")
    # Preallocated segments (the default) against appended ones, and the same for raw
    # writes, in turns: what writing into allocated room saves a sync on this disk.
    durability = Durability.every_record()
    turns = best_rates_in_turns(
        n_sync,
        {
            "preallocated": appender(durability, n_sync, 0),
            "appended": appender(durability, n_sync, 0, preallocate=False),
            "raw_appended": raw_writes(n_sync, True),
            "raw_in_place": raw_in_place(n_sync),
        },
        3,
    )
    report.add(
        "append_every_record_appended_per_s",
        turns["appended"],
        "records/s",
        "LogConfig(preallocate=False)",
    )
    report.add(
        "every_record_preallocated_vs_appended",
        turns["preallocated"] / turns["appended"],
        "",
        "best of 3 turns each",
    )
    report.add(
        "raw_fdatasync_in_place_vs_appended",
        turns["raw_in_place"] / turns["raw_appended"],
        "",
        "pwrite into fallocated room vs append, each + fdatasync",
    )


def _fill(root: Path, n: int, consumed: float, **config: object) -> LogStream:
    """Four writers logging one structure's changes round robin."""
    stream = _stream(root, None, **config)
    writers = [stream.writer(f"QM{i}") for i in range(WRITERS)]
    info = MessageInfo(uow=b"U" * 8, queue=b"Q", message_id=b"M" * 24)
    for index, (kind, change) in enumerate(_changes(n, consumed)):
        _log(writers[(index // 3) % WRITERS], kind, change, info)
    for w in writers:
        w.close()
    return stream


def read_figures(report: Report, base: Path, n: int) -> None:
    stream = _fill(base / "read", n, 0.9)

    def read() -> None:
        count = sum(len(batch) for batch in stream.reader().batches())
        assert count == n, count

    read_rate = best_rate(n, read, repeats=3)
    bodies = []
    for _, path in [s for w in stream.layout.writers() for s in stream.layout.segments(w)]:
        raw = path.read_bytes()
        pos = SEGMENT_HEADER_BYTES
        while pos < len(raw):
            end = pos + FRAME_HEADER_BYTES + int.from_bytes(raw[pos : pos + 4], "little")
            bodies.append(raw[pos + FRAME_HEADER_BYTES : end])
            pos = end

    def raw_decode() -> None:
        unpackb = msgpack.unpackb
        decoded = [unpackb(body, use_list=False, raw=False) for body in bodies]
        assert len(decoded) == n

    raw_rate = best_rate(n, raw_decode, repeats=3)
    report.add("read_staging_records_per_s", read_rate, "records/s", f"{WRITERS} writers merged")
    report.add(
        "raw_msgpack_decode_per_s", raw_rate, "records/s", "unpackb of the same bodies, kept"
    )
    report.add("read_staging_ratio_vs_raw_msgpack", read_rate / raw_rate, "")

    # Offload everything, then read the data sets.  (First a small offload elsewhere:
    # pyarrow initialises itself on its first conversion and write.)
    with _fill(base / "warm", 1000, 0.9).writer("QM0") as w:
        w.offload()
    offload_seconds = 0.0
    for writer in stream.layout.writers():
        with stream.writer(writer) as w:
            started = time.perf_counter()
            w.offload()
            offload_seconds += time.perf_counter() - started
    staged = sum(os.path.getsize(p) for _, p in stream.layout.dataset_files())
    report.add("offload_records_per_s", n / offload_seconds, "records/s")
    records = list(stream.records())
    table = records_to_table(records)
    sink = base / "baseline.parquet"
    write_rate = best_rate(n, lambda: pq.write_table(table, sink, compression="snappy"), 3)
    report.add("parquet_write_table_per_s", write_rate, "records/s", "table already in memory")
    report.add("offload_ratio_vs_write_table", (n / offload_seconds) / write_rate, "")
    report.add("dataset_bytes_per_record", staged / n, "bytes")
    parquet_rate = best_rate(n, read, repeats=3)
    report.add("read_datasets_records_per_s", parquet_rate, "records/s")
    report.add("read_datasets_ratio_vs_raw_msgpack", parquet_rate / raw_rate, "")


def replay_figures(report: Report, base: Path, n: int) -> None:
    for label, consumed in (("consumed", 0.9), ("kept", 0.0)):
        stream = _fill(base / f"replay-{label}", n, consumed)
        read_rate = best_rate(n, _reading(stream, n), repeats=3)
        fold_rate = best_rate(n, _recovering(stream, n, True), repeats=3)
        naive_rate = best_rate(n, _recovering(stream, n, False), repeats=1)
        note = "90 % of messages consumed" if consumed else "every message kept"
        report.add(f"read_{label}_records_per_s", read_rate, "records/s", note)
        report.add(f"recover_{label}_records_per_s", fold_rate, "records/s", "read + folded replay")
        report.add(f"replay_ratio_vs_read_{label}", fold_rate / read_rate, "", "target >= 0.25")
        report.add(
            f"replay_unfolded_ratio_vs_read_{label}",
            naive_rate / read_rate,
            "",
            "record by record",
        )


def check_figures(report: Report, base: Path, n: int) -> None:
    """The continuity check a recovery runs before it reads, against the read itself."""
    stream = _fill(base / "check", n, 0.9, staging_bytes=16 << 20, segment_bytes=1 << 20)
    read = best_rate(n, _reading(stream, n), repeats=3)

    def check() -> None:
        coverage = stream.plan().check(starts=None, needed_seq={"BENCH": 0})
        assert coverage.whole

    checked = best_rate(n, check, repeats=3)
    report.add("check_records_per_s", checked, "records/s", "plan + continuity check")
    report.add("check_ratio_vs_read", checked / read, "", "check vs the merged read")


def _reading(stream: LogStream, n: int) -> Callable[[], None]:
    """Read and decode every record, keeping them (as recovery does)."""

    def run() -> None:
        records: list[LogRecord] = []
        for batch in stream.reader().batches():
            records.extend(batch)
        assert len(records) == n

    return run


def _recovering(stream: LogStream, n: int, fold: bool) -> Callable[[], None]:
    """Read every record and replay it onto a fresh memory structure."""
    facility = MemoryFacility()
    names = iter(range(10**6))

    def run() -> None:
        name = f"R{next(names)}"
        facility.create(StructureParams.for_capacity(name, list_count=4, entries=n, elements=n))
        with facility.connect(name, "RECOVERY") as conn:
            result = replay(conn, stream.records(), structure_name="BENCH", fold=fold)
            assert result.records == n
        facility.delete(name)

    return run


def main() -> None:
    args = parse_args(__doc__ or "")
    n = 30_000 if args.quick else 300_000
    n_sync = 500 if args.quick else 3_000
    report = Report("sharedq.log I/O", args.quick)
    report.add("records_per_run", n)
    base = Path(tempfile.mkdtemp(prefix="sharedq-log-bench-"))
    try:
        append_figures(report, base, n, n_sync)
        read_figures(report, base, n)
        replay_figures(report, base, n)
        check_figures(report, base, n)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    report.emit(args.json)


if __name__ == "__main__":
    main()
