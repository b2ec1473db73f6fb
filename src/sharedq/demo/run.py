"""``sharedq demo``: a queue-sharing group at work, two disasters, and the pipeline's report.

1. three queue managers run a mixed workload (threads on the embedded default, a
   process each on Redis); one takes a structure checkpoint a third of the way in;
2. the last manager is stopped dead inside a unit of work (on Redis: its process is
   SIGKILLed there); a peer declares it failed and recovers its units of work;
3. both structures are destroyed; the managers reconnect and the structures are
   rebuilt from the SRDS and the log; then the demo deletes its structures (on a
   shared Redis server too), unless told to keep them;
4. an IMS shared-queues group (:mod:`sharedq.demo.ims_group`): three IMSs with their
   CQSs on structures of their own, terminals entering full-function, Fast Path and
   serial work, one IMS killed with work in progress and emergency-restarted;
5. the Spark pipeline reads the logs and the SRDS and writes its tables, charts and
   report; the demo prints the work per manager, latency percentiles and the balance
   sheet, and the IMS group's work per IMS, local vs global share, latency and
   balance sheet, which must show nothing lost.
"""

from __future__ import annotations

import contextlib
import logging
import shlex
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from sharedq.cf import open_facility, redact_url
from sharedq.demo.group import (
    APP,
    STRUCTURES,
    GroupLayout,
    create_structures,
    depths,
    destroy_structures,
    start_manager,
)
from sharedq.demo.ims_group import (
    IMS_STRUCTURES,
    IMSGroupResult,
    destroy_ims_structures,
    run_ims_group,
)
from sharedq.demo.ims_summary import (
    IMSSummary,
    ims_nothing_lost,
    print_ims_summary,
    read_ims_summary,
    run_ims_job,
    tell_ims_group,
)
from sharedq.demo.summary import DemoSummary, print_summary, read_summary
from sharedq.demo.workload import (
    DieAt,
    WorkloadPlan,
    WorkloadResult,
    define_burst_queue,
    define_queues,
    run_workload,
    sweep_expired,
)
from sharedq.mq import PeerRecoveryReport, QueueManager

MANAGERS = 3
#: The pipeline jobs whose tables the demo prints (``--short`` runs only these).
SUMMARY_JOBS = ("track", "stats", "events")


@dataclass(frozen=True)
class DemoOptions:
    """What the demo runs: where, how long, and where it writes."""

    output: Path
    backend: str = "memory://"
    rounds: int = 300
    seed: int = 7
    master: str = "local[2]"
    #: The pipeline's jobs to run (default: every one; ``SUMMARY_JOBS``: the short demo).
    jobs: tuple[str, ...] | None = None
    #: Leave the structures on the server at the end (default: deleted).
    keep: bool = False
    #: Show the group's INFO log lines too (checkpoints, recoveries, log purges).
    verbose: bool = False

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
    #: Whether the demo deleted its structures at the end (``False`` with ``keep``).
    structures_deleted: bool = False
    #: The IMS group: what it did and counted, and what the pipeline found in its log.
    ims: IMSGroupResult | None = None
    ims_summary: IMSSummary | None = None

    @property
    def ims_nothing_lost(self) -> bool:
        """Every IMS input answered exactly once; the ledger, the log and the structures agree."""
        if self.ims is None or self.ims_summary is None:
            return False
        return ims_nothing_lost(self.ims, self.ims_summary)

    @property
    def nothing_lost(self) -> bool:
        """Recovery kept every message, the log accounts for every message put, and the
        IMS group answered every input exactly once."""
        return _mq_nothing_lost(self) and self.ims_nothing_lost


def run_demo(options: DemoOptions, console: Console | None = None) -> DemoOutcome:
    """Run the demo, printing on ``console`` (the terminal by default).

    While it runs, the log records of ``sharedq`` (the group's, the worker processes',
    and the JVM's lines that are not start-up chatter) are printed on the same console,
    WARNING and above (INFO too with ``options.verbose``), so that they come out in
    order with the rest, on a terminal or through a pipe.
    """
    console = console or Console()
    with _logging_to(console, logging.INFO if options.verbose else logging.WARNING):
        return _run(options, console)


def _run(options: DemoOptions, console: Console) -> DemoOutcome:
    facility = open_facility(options.backend)  # a bad URL fails before anything is touched
    layout = GroupLayout(options.output)
    layout.reset()
    timings: dict[str, float] = {}
    plan = WorkloadPlan(
        rounds=options.rounds,
        seed=options.seed,
        crash_round=options.rounds * 2 // 3,
        burst_round=options.rounds // 2,  # after the checkpoint: the log keeps it
    )
    deleted = False
    try:
        create_structures(facility, messages=max(5_000, options.rounds * MANAGERS * 6))
        began = time.perf_counter()
        # Only the workload runs under the progress bar: through a pipe the bar is
        # printed when it stops, and what follows must come after it.
        with _progress(console) as progress:
            task = progress.add_task("workload (3 managers)", total=options.rounds * MANAGERS)

            def advance(_: str) -> None:
                progress.advance(task)

            if options.in_processes:
                workload, peer = _processes(facility, options, layout, plan, advance)
            else:
                workload, peer = _threads(facility, layout, plan, advance)
            progress.update(task, completed=options.rounds * MANAGERS)
        timings["workload_seconds"] = time.perf_counter() - began
        _tell_crash(console, workload, options.in_processes)
        expired = sweep_expired(peer[0], plan)
        before = depths(peer[0])
        destroy_structures(facility)
        for qm in peer:
            qm.reconnect()
        after = depths(peer[0])
        for qm in peer:
            qm.close()
        _tell_structure_loss(console, workload, peer[0].name, before, after, plan)
        began = time.perf_counter()
        with console.status("IMS group") as status:
            ims = run_ims_group(
                facility,
                options.output,
                batches=ims_batches(options.rounds),
                seed=options.seed,
                on_phase=status.update,
            )
        timings["ims_seconds"] = time.perf_counter() - began
        tell_ims_group(console, ims)
        if not options.keep:
            destroy_structures(facility)
            destroy_ims_structures(facility)
            deleted = True
        _tell_structures_left(console, options)
    finally:
        if not options.keep and not deleted:  # a demo that failed cleans up too
            with contextlib.suppress(Exception):
                destroy_structures(facility)
            destroy_ims_structures(facility)
        facility.close()
    began = time.perf_counter()
    report_path, jvm = _pipeline(options, layout, console, ims_log=options.output)
    timings["pipeline_seconds"] = time.perf_counter() - began
    timings["jvm_startup_seconds"] = jvm
    console.print(
        f"the Spark pipeline read the logs and the SRDS in {timings['pipeline_seconds']:.0f} s "
        f"({jvm:.0f} s of it starting Spark)"
    )
    summary = read_summary(layout.pipeline)
    outcome = DemoOutcome(
        workload,
        before,
        after,
        expired,
        summary,
        report_path,
        timings,
        structures_deleted=deleted,
        ims=ims,
        ims_summary=read_ims_summary(layout.pipeline),
    )
    print_summary(console, outcome.summary, after, _mq_nothing_lost(outcome), plan.checkpoint_at())
    assert outcome.ims_summary is not None
    print_ims_summary(console, ims, outcome.ims_summary, outcome.ims_nothing_lost)
    console.print(f"report: [bold]{escape(str(report_path))}[/bold]")
    return outcome


@contextlib.contextmanager
def _logging_to(console: Console, level: int) -> Iterator[None]:
    """Print the ``sharedq`` loggers' records at ``level`` and above on ``console``."""
    handler = RichHandler(
        level,
        console=console,
        show_time=False,
        show_path=False,
        markup=False,
        rich_tracebacks=False,
    )
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("sharedq")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def _threads(
    facility: Any, layout: GroupLayout, plan: WorkloadPlan, advance: Any
) -> tuple[WorkloadResult, list[QueueManager]]:
    killer = DieAt()
    managers = [start_manager(facility, layout, n) for n in range(1, MANAGERS)]
    managers.append(start_manager(facility, layout, MANAGERS, faults=killer))
    define_queues(managers[0], APP)
    define_burst_queue(managers[0], APP)
    result = run_workload(managers, plan, killer=killer, on_round=advance)
    return result, [qm for qm in managers if qm.name != result.crashed]


def _processes(
    facility: Any, options: DemoOptions, layout: GroupLayout, plan: WorkloadPlan, advance: Any
) -> tuple[WorkloadResult, list[QueueManager]]:
    from sharedq.demo.processes import run_in_processes

    first = start_manager(facility, layout, 1)
    define_queues(first, APP)
    define_burst_queue(first, APP)
    first.close()
    result = run_in_processes(options.backend, layout, plan, MANAGERS, advance)
    peer = start_manager(facility, layout, 1)  # a warm restart in this process
    if result.crashed is not None:
        peer.declare_failed(result.crashed)
        result.peer_recovery = peer.recover(result.crashed)
        result.recovered_by = peer.name
    return result, [peer]


def ims_batches(rounds: int) -> int:
    """Batches of three inputs each IMS terminal enters: 10 for the default 300 rounds,
    3 for ``--short``."""
    return max(3, rounds // 30)


def _mq_nothing_lost(outcome: DemoOutcome) -> bool:
    """The queue-sharing group's part of :attr:`DemoOutcome.nothing_lost`."""
    return (
        outcome.depth_before_loss == outcome.depth_after_recovery
        and outcome.summary.balanced
        and outcome.summary.still_queued == sum(outcome.depth_after_recovery.values())
    )


def _pipeline(
    options: DemoOptions, layout: GroupLayout, console: Console, ims_log: Path
) -> tuple[Path, float]:
    from sharedq.pipeline.job import JobContext
    from sharedq.pipeline.jobs import report
    from sharedq.pipeline.session import start_session

    with console.status("starting Spark") as status:
        started = start_session(options.master, {"spark.sql.shuffle.partitions": "4"})
        # The IMS group's log first: its context is released before the report's
        # stages the MQ group's log in the same scratch directory.
        section, chart = run_ims_job(
            started.spark, ims_log, layout.pipeline, lambda s: status.update(s)
        )
        ctx = JobContext.open(
            started.spark, layout.recovery, layout.pipeline, step=lambda s: status.update(s)
        )
        result = report.run_all(
            ctx, jobs=options.jobs, extra_sections=[section], extra_charts=[chart]
        )
    for job, error in sorted(result.errors.items()):
        console.print(f"[bold red]pipeline job {job} failed[/bold red]: {escape(error)}")
    if result.errors or result.html is None:
        raise RuntimeError(f"the pipeline failed: {sorted(result.errors)}")
    return Path(result.html), started.startup_seconds


def _tell_crash(console: Console, workload: WorkloadResult, in_processes: bool) -> None:
    if workload.crashed is None or workload.peer_recovery is None:
        return
    if in_processes and workload.in_flight is not None:
        puts, gets = workload.in_flight
        how = (
            f"{workload.crashed} was killed (SIGKILL) inside a unit of work, with "
            f"{_count(puts, 'put')} and {_count(gets, 'get')} made and not committed"
        )
    else:
        how = f"{workload.crashed} was stopped dead in the middle of a unit of work"
    console.print(
        f"{how}; {workload.recovered_by} declared it failed and recovered its units: "
        f"{_recovery_words(workload.peer_recovery)}"
    )


def _recovery_words(report: PeerRecoveryReport) -> str:
    words = [
        f"{_count(report.puts_deleted, 'uncommitted put')} deleted",
        f"{_count(report.gets_returned, 'gotten message')} put back on "
        + ("its queue" if report.gets_returned == 1 else "their queues"),
    ]
    if report.committed:  # the unit was committing: its descriptors say so
        words.append(f"{_count(report.committed, 'unit')} that were committing committed")
    if report.backed_out:
        words.append(f"{_count(report.backed_out, 'unit')} that were backing out backed out")
    return ", ".join(words)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _tell_structure_loss(
    console: Console,
    workload: WorkloadResult,
    rebuilder: str,
    before: dict[str, int],
    after: dict[str, int],
    plan: WorkloadPlan,
) -> None:
    console.print(
        f"structure checkpoints: {workload.checkpoints} (in round {plan.checkpoint_at()}); "
        f"then both structures were destroyed, and {rebuilder} rebuilt them from the SRDS "
        f"and the log: {sum(before.values())} messages on the queues before, "
        f"{sum(after.values())} after"
    )


def _tell_structures_left(console: Console, options: DemoOptions) -> None:
    """Say what became of the structures on a server (in memory they go with the process)."""
    if not options.in_processes:
        return
    every = (*STRUCTURES, *IMS_STRUCTURES)
    names = ", ".join(every[:-1]) + " and " + every[-1]
    where = redact_url(options.backend)
    if not options.keep:
        console.print(f"structures {names} deleted from {escape(where)} (--keep keeps them)")
        return
    hidden = " (with the password in place of ***)" if where != options.backend else ""
    console.print(
        f"structures {names} are left on {escape(where)} (--keep): the next demo there "
        f"replaces them; to delete them now{hidden}:\n"
        f"  python -c {escape(shlex.quote(delete_structures_code(where)))}",
        soft_wrap=True,
    )


def delete_structures_code(url: str) -> str:
    """Python that deletes the demo's structures from the server at ``url``."""
    return (
        f"from sharedq.cf import open_facility; f = open_facility({url!r}); "
        f"[f.delete(n, force=True) for n in {(*STRUCTURES, *IMS_STRUCTURES)!r}]"
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
