"""Work for child processes of the multi-process tests (importable, for ``spawn``)."""

from __future__ import annotations

from multiprocessing.connection import Connection
from typing import Any

from sharedq.log import Durability, LogConfig, LogError, LogStream, RecordType


def _stream(root: str, **config: Any) -> LogStream:
    settings = {"segment_bytes": 4096, "staging_bytes": 1 << 20, "background_offload": False}
    return LogStream(
        root, name="S1.LOG", structure="S1", config=LogConfig(**{**settings, **config})
    )


def append_with_shared_seq(root: str, writer: str, count: int, counter: Any) -> None:
    """Take seqs from a counter shared by all processes (the structure), then log them."""
    with _stream(root, high_offload=20, staging_bytes=32768) as stream:
        w = stream.writer(writer)
        for n in range(count):
            with counter.get_lock():
                counter.value += 1
                seq = counter.value
            # Logged after the "structure" gave the seq, as a server does: another
            # process may log a higher seq first.
            w.append(
                RecordType.PUT,
                op=1,
                seq=seq,
                entry_id=seq.to_bytes(12, "big"),
                list_number=n % 8,
                key=seq.to_bytes(16, "big"),
                data=b"p" * (n % 50),
            )
            if n % 25 == 24:
                w.log_event(RecordType.STATISTICS, payload={"n": n})


def try_open(root: str, writer: str) -> str:
    """Open a writer; the reason name if refused, else ``"opened"``."""
    with _stream(root) as stream:
        try:
            stream.writer(writer).close()
        except LogError as exc:
            return exc.reason_name
        return "opened"


def append_until_killed(root: str, writer: str, durability: str, conn: Connection) -> None:
    """Append forever; report each acknowledged lsn to the parent, which kills us."""
    with _stream(root, durability=Durability.parse(durability)) as stream:
        w = stream.writer(writer)
        seq = 0
        while True:
            seq += 1
            position = w.append(
                RecordType.PUT,
                op=1,
                seq=seq,
                entry_id=seq.to_bytes(12, "big"),
                list_number=0,
                key=seq.to_bytes(16, "big"),
                data=b"k" * 300,
            )
            assert position is not None
            conn.send(position.lsn)


def append_and_die(root: str, writer: str, count: int, first_seq: int) -> None:
    """Append ``count`` records, sync them, and die without closing the writer (a crash)."""
    import os

    stream = _stream(root, segment_bytes=1 << 20, staging_bytes=1 << 22)
    w = stream.writer(writer)
    for n in range(count):
        seq = first_seq + n
        w.append(
            RecordType.PUT,
            op=1,
            seq=seq,
            entry_id=seq.to_bytes(12, "big"),
            list_number=0,
            key=seq.to_bytes(16, "big"),
            data=b"c" * (n % 30),
        )
    w.commit()
    os._exit(0)


def commit_in_threads_until_killed(
    root: str, writers: list[str], threads: int, group_commit: str, conn: Connection
) -> None:
    """``threads`` threads per writer append and commit forever (durable at each
    commit); each commit that returned is reported as ``(writer, lsn, thread, n)``."""
    import threading

    from sharedq.log import GroupCommit

    stream = _stream(
        root,
        durability=Durability.every_commit(),
        group_commit=GroupCommit(group_commit),
        segment_bytes=16384,
    )
    send_lock = threading.Lock()

    def commit_forever(writer: Any, thread: str) -> None:
        n = 0
        while True:
            n += 1
            position = writer.log_event(RecordType.STATISTICS, payload=[thread, n])
            writer.commit()
            with send_lock:
                conn.send((writer.name, position.lsn, thread, n))

    workers = []
    for name in writers:
        w = stream.writer(name)
        for t in range(threads):
            workers.append(
                threading.Thread(target=commit_forever, args=(w, f"{name}.{t}"), daemon=True)
            )
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
