"""Group commit beside a busy neighbour: what one process's Python work costs the others.

Three processes commit in a loop (``append(..., commit=True)``, ``every_commit``, the
default ``GroupCommit.HOST``) on one log stream, while a fourth process that also has a
writer on the file system either sleeps or runs a pure-Python loop.  A group commit
whose work runs in some other process's thread (a syncer thread, say) needs that
process's interpreter lock at each step, and a process computing in Python holds it
for up to the switch interval (5 ms) at a time: this benchmark is how such a design
shows what it costs.  ``busy_neighbour_ratio`` is the committers' rate beside the
busy process over their rate beside the sleeping one, in the same run (1.0: the
neighbour's work costs the committers nothing but its share of the cores).

Every process keeps its host group-commit files in a private directory of this run,
so that other processes of the user on this host (tests, other benchmarks) do not
share its syncs.
"""

from __future__ import annotations

import multiprocessing
import sys
import tempfile
import time
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import Report, parse_args

#: Committing processes, and seconds each phase is timed (quick, full).
COMMITTERS = 3
SECONDS = (2.0, 5.0)


def _stream(root: str, host_dir: str) -> Any:
    import sharedq.log.groupsync as groupsync
    from sharedq.log import LogStream

    groupsync.HOST_DIR = Path(host_dir)
    return LogStream(root, name="BUSY.LOG", structure="BUSY")


def _neighbour(root: str, host_dir: str, busy: bool, ready: Event, stop: Event) -> None:
    """A process with a writer on the file system (it commits a few times, so that
    whatever the group commit keeps per process is set up), then busy or asleep."""
    from sharedq.log import RecordType

    writer = _stream(root, host_dir).writer("NEIGHBOUR")
    for _ in range(3):
        writer.append(RecordType.CONNECT, commit=True)
    ready.set()
    total = 0
    while not stop.is_set():
        if busy:
            for i in range(20_000):
                total += i * i
        else:
            time.sleep(0.01)


def _committer(root: str, host_dir: str, name: str, seconds: float, start: Event, out: Any) -> None:
    from sharedq.log import RecordType

    writer = _stream(root, host_dir).writer(name)
    start.wait()
    count = 0
    began = time.perf_counter()
    while time.perf_counter() - began < seconds:
        writer.append(RecordType.CONNECT, commit=True)
        count += 1
    out.put(count)


def commits_per_second(busy: bool, seconds: float) -> float:
    """The committers' total rate beside a neighbour that is busy or asleep."""
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        root, host_dir = str(Path(tmp) / "log"), str(Path(tmp) / "host")
        Path(host_dir).mkdir()
        _stream(root, host_dir).close()
        ready, stop, start = context.Event(), context.Event(), context.Event()
        out = context.Queue()
        neighbour = context.Process(target=_neighbour, args=(root, host_dir, busy, ready, stop))
        neighbour.start()
        try:
            ready.wait(60)
            committers = [
                context.Process(
                    target=_committer, args=(root, host_dir, f"C{n}", seconds, start, out)
                )
                for n in range(COMMITTERS)
            ]
            for process in committers:
                process.start()
            time.sleep(1.0)  # every committer's writer open before the clock starts
            start.set()
            total: int = sum(out.get(timeout=60 + seconds) for _ in committers)
            for process in committers:
                process.join()
        finally:
            stop.set()
            neighbour.join(10)
    return total / seconds


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    seconds = SECONDS[0 if args.quick else 1]
    report = Report("Group commit beside a busy neighbour", args.quick)
    # Asleep, busy, asleep again: the two asleep rates bracket the busy one.
    asleep = [commits_per_second(False, seconds)]
    busy = commits_per_second(True, seconds)
    asleep.append(commits_per_second(False, seconds))
    quiet = sum(asleep) / len(asleep)
    report.add(
        "commits_per_s_neighbour_asleep",
        quiet,
        "commits/s",
        f"{COMMITTERS} committing processes, a fourth with a writer asleep (mean of 2)",
    )
    report.add(
        "commits_per_s_neighbour_busy",
        busy,
        "commits/s",
        "the same, the fourth running a Python loop",
    )
    report.add("busy_neighbour_ratio", busy / quiet, "", "busy over asleep; 1.0: no cost")
    report.emit(args.json)


if __name__ == "__main__":
    main()
