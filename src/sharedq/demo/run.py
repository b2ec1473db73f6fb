"""``sharedq demo``: a queue-sharing group at work, two disasters, and the pipeline's report.

1. three queue managers run a mixed workload (threads on the embedded default, a
   process each on Redis); one takes a structure checkpoint a third of the way in;
2. the last manager is stopped dead mid-work; a peer declares it failed and recovers
   its units of work;
3. both structures are destroyed; the managers reconnect and the structures are
   rebuilt from the SRDS and the log;
4. the Spark pipeline reads the log and the SRDS and writes its tables, charts and
   report; the demo prints the work per manager, latency percentiles and the balance
   sheet, which must show nothing lost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from sharedq.cf import open_facility
from sharedq.demo.group import (
    APP,
    GroupLayout,
    create_structures,
    depths,
    destroy_structures,
    start_manager,
)
from sharedq.demo.summary import DemoSummary, print_summary, read_summary
from sharedq.demo.workload import (
    DieAt,
    WorkloadPlan,
    WorkloadResult,
    define_queues,
    run_workload,
    sweep_expired,
)
from sharedq.mq import QueueManager

MANAGERS = 3


@dataclass(frozen=True)
class DemoOptions:
    """What the demo runs: where, how long, and where it writes."""

    output: Path
    backend: str = "memory://"
    rounds: int = 300
    seed: int = 7
    master: str = "local[2]"

    @property
    def in_processes(self) -> bool:
        return not self.backend.lower().startswith("memory")


@dataclass
class DemoOutcome:
    """What happened, what the group saw, and what the pipeline found."""

    workload: WorkloadResult
    depth_before_loss: dict[str, int]
    depth_after_recovery: dict[str, int]
    expired_purged: int
    summary: DemoSummary
    report_path: Path
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def nothing_lost(self) -> bool:
        """Recovery kept every message, and the log accounts for every message put."""
        return (
            self.depth_before_loss == self.depth_after_recovery
            and self.summary.balanced
            and self.summary.still_queued == sum(self.depth_after_recovery.values())
        )


def run_demo(options: DemoOptions, console: Console | None = None) -> DemoOutcome:
    console = console or Console()
    facility = open_facility(options.backend)  # a bad URL fails before anything is touched
    layout = GroupLayout(options.output)
    layout.reset()
    timings: dict[str, float] = {}
    plan = WorkloadPlan(
        rounds=options.rounds, seed=options.seed, crash_round=options.rounds * 2 // 3
    )
    began = time.perf_counter()
    with _progress(console) as progress:
        task = progress.add_task("workload (3 managers)", total=options.rounds * MANAGERS)

        def advance(_: str) -> None:
            progress.advance(task)

        try:
            create_structures(facility, messages=max(5_000, options.rounds * MANAGERS * 6))
            if options.in_processes:
                workload, peer = _processes(facility, options, layout, plan, advance)
            else:
                workload, peer = _threads(facility, layout, plan, advance)
            progress.update(task, completed=options.rounds * MANAGERS)
            timings["workload_seconds"] = time.perf_counter() - began
            expired = sweep_expired(peer[0], plan)
            before = depths(peer[0])
            destroy_structures(facility)
            for qm in peer:
                qm.reconnect()
            after = depths(peer[0])
            for qm in peer:
                qm.close()
        finally:
            facility.close()
    _tell_incidents(console, workload, before, after)
    began = time.perf_counter()
    report_path, jvm = _pipeline(options, layout, console)
    timings["pipeline_seconds"] = time.perf_counter() - began
    timings["jvm_startup_seconds"] = jvm
    summary = read_summary(layout.pipeline)
    outcome = DemoOutcome(workload, before, after, expired, summary, report_path, timings)
    print_summary(console, outcome.summary, after, outcome.nothing_lost)
    console.print(f"report: [bold]{report_path}[/bold]")
    return outcome


def _threads(
    facility: Any, layout: GroupLayout, plan: WorkloadPlan, advance: Any
) -> tuple[WorkloadResult, list[QueueManager]]:
    killer = DieAt()
    managers = [start_manager(facility, layout, n) for n in range(1, MANAGERS)]
    managers.append(start_manager(facility, layout, MANAGERS, faults=killer))
    define_queues(managers[0], APP)
    result = run_workload(managers, plan, killer=killer, on_round=advance)
    return result, [qm for qm in managers if qm.name != result.crashed]


def _processes(
    facility: Any, options: DemoOptions, layout: GroupLayout, plan: WorkloadPlan, advance: Any
) -> tuple[WorkloadResult, list[QueueManager]]:
    from sharedq.demo.processes import run_in_processes

    first = start_manager(facility, layout, 1)
    define_queues(first, APP)
    first.close()
    result = run_in_processes(options.backend, layout, plan, MANAGERS, advance)
    peer = start_manager(facility, layout, 1)  # a warm restart in this process
    if result.crashed is not None:
        peer.declare_failed(result.crashed)
        result.peer_recovery = peer.recover(result.crashed)
        result.recovered_by = peer.name
    return result, [peer]


def _pipeline(options: DemoOptions, layout: GroupLayout, console: Console) -> tuple[Path, float]:
    from sharedq.pipeline.job import JobContext
    from sharedq.pipeline.jobs import report
    from sharedq.pipeline.session import start_session

    with console.status("starting Spark") as status:
        started = start_session(options.master, {"spark.sql.shuffle.partitions": "4"})
        ctx = JobContext.open(
            started.spark, layout.recovery, layout.pipeline, step=lambda s: status.update(s)
        )
        result = report.run_all(ctx)
    for job, error in sorted(result.errors.items()):
        console.print(f"[bold red]pipeline job {job} failed[/bold red]: {error}")
    if result.errors or result.html is None:
        raise RuntimeError(f"the pipeline failed: {sorted(result.errors)}")
    return Path(result.html), started.startup_seconds


def _tell_incidents(
    console: Console, workload: WorkloadResult, before: dict[str, int], after: dict[str, int]
) -> None:
    if workload.crashed is not None and workload.peer_recovery is not None:
        report = workload.peer_recovery
        console.print(
            f"{workload.crashed} stopped dead mid-work; {workload.recovered_by} recovered its "
            f"units: {report.committed} committed, {report.backed_out} backed out, "
            f"{report.puts_deleted} puts removed, {report.gets_returned} gets returned"
        )
    console.print(
        f"structure checkpoints: {workload.checkpoints}; structures destroyed and recovered "
        f"from the SRDS and the log: {sum(before.values())} messages on the queues before, "
        f"{sum(after.values())} after"
    )


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )
