"""The demo with its managers in processes of their own, on a shared Redis.

Each manager runs its share of the workload in a process started for it; the parent
only watches (progress) and, when the last manager is well into its work, kills it
with SIGKILL: nothing of it runs after that, as when a system fails.  A manager
started in the parent then declares it failed and recovers its units of work.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
from collections.abc import Callable
from typing import Any

from sharedq.cf import open_facility
from sharedq.demo.group import GroupLayout, start_manager
from sharedq.demo.workload import ManagerTally, WorkloadPlan, WorkloadResult, work_rounds

#: How long the parent waits for a worker's next sign of life before giving up.
WORKER_SILENCE_SECONDS = 120.0


def worker_main(
    url: str, output: str, number: int, plan: WorkloadPlan, events: Any
) -> None:  # pragma: no cover - runs in a child process (its effects are tested)
    """One manager's process: connect, work, report each round, shut down cleanly."""
    facility = open_facility(url)
    qm = start_manager(facility, GroupLayout(__import__("pathlib").Path(output)), number)
    tally = ManagerTally()

    def checkpoint() -> None:
        qm.checkpoint()
        events.put(("checkpoint", qm.name))

    try:
        work_rounds(
            qm,
            number - 1,
            plan,
            tally,
            at_checkpoint=checkpoint if number == 1 else None,
            on_round=lambda name: events.put(("round", name)),
        )
        qm.close()
        events.put(("done", qm.name, tally))
    except BaseException as exc:
        events.put(("error", qm.name, repr(exc)))
        raise
    finally:
        facility.close()


def run_in_processes(
    url: str,
    layout: GroupLayout,
    plan: WorkloadPlan,
    managers: int,
    on_round: Callable[[str], None],
) -> WorkloadResult:
    """Run the workload with a process per manager; SIGKILL the last at ``plan.crash_round``."""
    context = multiprocessing.get_context("spawn")
    events = context.Queue()
    names = [f"QM{n}" for n in range(1, managers + 1)]
    result = WorkloadResult({name: ManagerTally() for name in names})
    processes = {
        name: context.Process(
            target=worker_main,
            args=(url, str(layout.output), n, plan, events),
            name=f"sharedq-demo-{name}",
            daemon=True,
        )
        for n, name in enumerate(names, start=1)
    }
    for process in processes.values():
        process.start()
    victim = names[-1] if plan.crash_round is not None else None
    rounds = dict.fromkeys(names, 0)
    running = set(names)
    try:
        while running:
            try:
                event = events.get(timeout=WORKER_SILENCE_SECONDS)
            except queue.Empty:
                raise RuntimeError(f"no word from {sorted(running)} for a long time") from None
            kind, name = event[0], event[1]
            if kind == "round":
                rounds[name] += 1
                on_round(name)
                if name == victim and name in running and rounds[name] >= (plan.crash_round or 0):
                    pid = processes[name].pid
                    assert pid is not None
                    os.kill(pid, signal.SIGKILL)
                    processes[name].join()
                    running.discard(name)
                    result.tallies[name].died = True
                    result.crashed = name
            elif kind == "checkpoint":
                result.checkpoints += 1
            elif kind == "done":
                result.tallies[name] = event[2]
                running.discard(name)
            elif kind == "error":
                raise RuntimeError(f"{name} failed: {event[2]}")
    finally:
        for process in processes.values():
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    return result
