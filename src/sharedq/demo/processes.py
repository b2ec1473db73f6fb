"""The demo with its managers in processes of their own, on a shared Redis.

Each manager runs its share of the workload in a process started for it; the parent
only watches (progress) and, when the last manager is well into its work, kills it
with SIGKILL: nothing of it runs after that, as when a system fails.  The victim is
killed inside a unit of work, with puts and a get made and not committed: at its crash
round it makes them, tells the parent, and waits to be killed.  A manager started in
the parent then declares it failed and recovers its units of work, which has work to
do whatever the timing.

Each worker reports on a pipe of its own, not on a shared queue: a process killed
while it holds a shared queue's lock would silence every other writer.  What a worker
logs goes up the same pipe and is logged again in the parent, so that it comes out
in order with the parent's output instead of across its progress display.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from multiprocessing.synchronize import Barrier as BarrierType
from pathlib import Path
from typing import Any, cast

from sharedq.cf import open_facility
from sharedq.demo.group import GroupLayout, start_manager
from sharedq.demo.workload import ManagerTally, WorkloadPlan, WorkloadResult, work_rounds

#: How long the parent waits for a worker's next sign of life before giving up.
WORKER_SILENCE_SECONDS = 120.0


def worker_main(
    url: str,
    output: str,
    number: int,
    plan: WorkloadPlan,
    events: Connection,
    barrier: BarrierType,
    victim: bool = False,
    log_level: int = logging.WARNING,
) -> None:  # pragma: no cover - runs in a child process (its effects are tested)
    """One manager's process: connect, work, report each round, shut down cleanly.

    The ``victim`` makes its crash round a unit of work it is killed in.
    """
    lock = threading.Lock()  # the checkpoint watcher's thread logs too

    def send(*event: Any) -> None:
        with lock:
            events.send(event)

    root = logging.getLogger("sharedq")
    root.setLevel(log_level)
    root.addHandler(_ToParent(send))
    root.propagate = False
    facility = open_facility(url)
    qm = start_manager(facility, GroupLayout(Path(output)), number)
    tally = ManagerTally()

    def checkpoint() -> None:
        # As in the threaded demo: everybody is mid-work when the first manager takes
        # the checkpoint, and nobody reaches the crash round before it.  Killed before
        # it, the victim's work would all lie below the SRDS, deleted from the log.
        barrier.wait(timeout=WORKER_SILENCE_SECONDS)
        if number == 1:
            qm.checkpoint()
            send("checkpoint", qm.name)
        barrier.wait(timeout=WORKER_SILENCE_SECONDS)

    def killed(puts: int, gets: int) -> None:
        send("in-unit", qm.name, puts, gets)
        qm.clock.sleep_s(WORKER_SILENCE_SECONDS)  # the parent kills this process here

    try:
        work_rounds(
            qm,
            number - 1,
            plan,
            tally,
            at_checkpoint=checkpoint,
            on_round=lambda name: send("round", name),
            killed_in_unit=killed if victim else None,
        )
        qm.close()
        send("done", qm.name, tally)
    except BaseException as exc:
        send("error", qm.name, repr(exc))
        raise
    finally:
        facility.close()


class _ToParent(logging.Handler):
    """A worker's log records, sent to the parent (which logs them again)."""

    def __init__(self, send: Callable[..., None]) -> None:
        super().__init__()
        self.send = send

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.send("log", record.name, record.levelno, record.getMessage())
        except Exception:  # a closed pipe: the parent is gone
            self.handleError(record)


def run_in_processes(
    url: str,
    layout: GroupLayout,
    plan: WorkloadPlan,
    managers: int,
    on_round: Callable[[str], None],
) -> WorkloadResult:
    """Run the workload with a process per manager; SIGKILL the last inside the unit of
    work it starts at ``plan.crash_round``."""
    context = multiprocessing.get_context("spawn")
    names = [f"QM{n}" for n in range(1, managers + 1)]
    result = WorkloadResult({name: ManagerTally() for name in names})
    processes = {}
    readers: dict[Connection, str] = {}
    barrier = context.Barrier(len(names))
    victim = names[-1] if plan.crash_round is not None else None
    log_level = logging.getLogger("sharedq").getEffectiveLevel()
    for n, name in enumerate(names, start=1):
        reader, writer = context.Pipe(duplex=False)
        processes[name] = context.Process(
            target=worker_main,
            args=(url, str(layout.output), n, plan, writer, barrier, name == victim, log_level),
            name=f"sharedq-demo-{name}",
            daemon=True,
        )
        processes[name].start()
        writer.close()  # the child holds it now; EOF on the reader means the child is gone
        readers[reader] = name
    rounds = dict.fromkeys(names, 0)
    running = set(names)
    try:
        while running:
            ready = wait(list(readers), timeout=WORKER_SILENCE_SECONDS)
            if not ready:
                raise RuntimeError(f"no word from {sorted(running)} for a long time")
            for item in ready:
                reader = cast(Connection, item)
                name = readers[reader]
                try:
                    event = reader.recv()
                except EOFError:
                    del readers[reader]
                    if name in running:
                        raise RuntimeError(f"{name} ended without a word") from None
                    continue
                _handle(event, name, rounds, running, result, processes, victim, on_round)
    finally:
        for process in processes.values():
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    return result


def _handle(
    event: tuple[Any, ...],
    name: str,
    rounds: dict[str, int],
    running: set[str],
    result: WorkloadResult,
    processes: dict[str, Any],
    victim: str | None,
    on_round: Callable[[str], None],
) -> None:
    kind = event[0]
    if kind == "round":
        rounds[name] += 1
        on_round(name)
    elif kind == "in-unit" and name == victim:
        # The victim is inside a unit of work, its puts and get made, waiting: kill it.
        pid = processes[name].pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        processes[name].join()
        running.discard(name)
        result.tallies[name].died = True
        result.crashed = name
        result.in_flight = (int(event[2]), int(event[3]))
    elif kind == "log":
        logging.getLogger(str(event[1])).log(int(event[2]), "[%s] %s", name, event[3])
    elif kind == "checkpoint":
        result.checkpoints += 1
    elif kind == "done" and not result.tallies[name].died:
        # A victim that raced to the end before its kill landed still counts as killed.
        result.tallies[name] = event[2]
        running.discard(name)
    elif kind == "error":
        raise RuntimeError(f"{name} failed: {event[2]}")
