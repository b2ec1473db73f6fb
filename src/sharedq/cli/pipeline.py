"""``sharedq pipeline JOB``: the Spark jobs over the log and the SRDS files.

Each job is a plain function in :mod:`sharedq.pipeline.jobs` (``run(ctx, **options)
-> JobResult``); this module makes each one a command: :func:`job_command` adds the
options every job takes (``--input``, ``--output``, ``--master``, ``--conf``) to the
job's own, starts the session, shows progress, writes and prints the summary.  The
``spark-submit`` entry (:mod:`sharedq.cli.submit`) runs the same commands.

A job's module is imported when the job runs, not when the commands are made: every
one imports pyarrow, some pyspark or matplotlib (about a second), which ``sharedq
pipeline --help`` and ``sharedq pipeline JOB --help`` do without.  So a command is made
from a :class:`Job` (the module and a copy of its function's docstring, which
``tests/test_import_cost.py`` holds to the function's own), and what its options'
checks need is imported by the checks, which run only when a job is run.
"""

from __future__ import annotations

import functools
import importlib
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import click

from sharedq.cli.names import named_path, queue_name, server_name, structure_name
from sharedq.pipeline.errors import PipelineError, PipelineReason, pipeline_error
from sharedq.pipeline.session import check_master, parse_conf
from sharedq.pipeline.sizing import DEFAULT_HEADROOM, check_headroom

if TYPE_CHECKING:
    from sharedq.pipeline.job import JobContext, JobResult

#: A job: ``fn(ctx, **options) -> JobResult``; its docstring is the command's help.
JobFunction = Callable[..., "JobResult"]
#: A ``click.option(...)`` decorator.
Option = Callable[[Callable[..., Any]], Callable[..., Any]]


@click.group(
    "pipeline",
    epilog="Example:\n\n  sharedq pipeline stats --input /shared/recovery --output /tmp/stats",
)
def pipeline() -> None:
    """Spark jobs over the recovery log and the structure checkpoints (SRDS)."""


# -- how a job becomes a command ---------------------------------------------------------


class Job(NamedTuple):
    """A job's ``run`` function, not imported yet: its module (in
    :mod:`sharedq.pipeline.jobs`) and its docstring, the command's help."""

    module: str
    help: str

    def load(self) -> JobFunction:
        function: JobFunction = importlib.import_module(f"sharedq.pipeline.jobs.{self.module}").run
        return function


class JobCommand(click.Command):
    """A job's command; ``job`` is the function it runs, or the :class:`Job` that
    imports it."""

    def __init__(self, *args: Any, job: JobFunction | Job, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.job = job

    def load(self) -> JobFunction:
        """The job's function (its module imported now if it was not)."""
        return self.job.load() if isinstance(self.job, Job) else self.job


def job_command(name: str, fn: JobFunction | Job, *options: Option) -> JobCommand:
    """The command ``name`` that runs the job ``fn`` (``fn(ctx, **options)``), or the
    function a :class:`Job` names, imported when the command runs.

    Its options are those every job takes, then ``options`` (``click.option``
    decorators) in the order given; its help is ``fn``'s docstring.
    """

    def command(
        input_path: str, output: str, master: str | None, conf: tuple[str, ...], **values: Any
    ) -> None:
        from rich.console import Console

        job = fn.load() if isinstance(fn, Job) else fn
        result = run_job(job, input_path, output, master=master, conf=parse_conf(conf), **values)
        console = Console()
        console.print(result.summary.rstrip(), markup=False, highlight=False)
        console.print(
            f"[dim]{name}: {result.seconds:.1f} s of work, "
            f"JVM start {result.figures.get('jvm_startup_seconds', 0.0):.1f} s; "
            f"output in {output}[/dim]"
        )

    if not isinstance(fn, Job):  # the job's name and docstring, not its attributes
        command = functools.wraps(fn, updated=())(command)
    decorated: Callable[..., Any] = command
    for option in (*_COMMON_OPTIONS, *options)[::-1]:  # the last applied is shown first
        decorated = option(decorated)
    help_text = fn.help if isinstance(fn, Job) else fn.__doc__
    return click.command(name, cls=JobCommand, help=help_text, job=fn)(decorated)


def run_job(
    fn: JobFunction,
    input_path: str,
    output: str,
    *,
    master: str | None = None,
    conf: dict[str, str] | None = None,
    **options: Any,
) -> JobResult:
    """Start the session, run one job with a progress line per stage, write its summary.

    The input is looked for and the output made first: a path without a log, or an
    output the system refuses, is named at once, not after the seconds a JVM takes
    to start.
    """
    from rich.console import Console

    from sharedq.pipeline.job import JobContext
    from sharedq.pipeline.session import start_session
    from sharedq.pipeline.sources import find_pairs

    find_pairs(input_path)
    Path(output).mkdir(parents=True, exist_ok=True)
    started = start_session(_master(master), conf)
    console = Console(stderr=True)
    with console.status(f"{fn.__name__}: starting") as status:
        ctx = JobContext.open(
            started.spark, input_path, output, step=lambda text: status.update(text)
        )
        began = time.perf_counter()
        result = fn(ctx, **options)
        result.seconds = time.perf_counter() - began
    result.figures["jvm_startup_seconds"] = round(started.startup_seconds, 3)
    result.write_summary(ctx.job_dir(result.job))
    return result


def _master(master: str | None) -> str:
    if master:
        return master
    try:
        from pyspark import SparkConf

        return SparkConf().get("spark.master", "local[*]") or "local[*]"
    except ImportError:
        return "local[*]"


def _checked(parse: Callable[[Any], Any]) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A click callback that refuses a bad value before Spark starts (same message)."""

    def callback(_: click.Context, param: click.Parameter, value: Any) -> Any:
        try:
            parse(value)
        except PipelineError as exc:
            raise click.BadParameter(str(exc), param=param) from None
        return value

    return callback


def _parse_time(option: str) -> Callable[[Any], Any]:
    def parse(value: Any) -> Any:
        from sharedq.pipeline.transforms.printing import parse_time

        return parse_time(value, option)

    return parse


def _parse_types(value: Any) -> Any:
    from sharedq.pipeline.transforms.printing import parse_types

    return parse_types(value)


def _parse_uow(value: Any) -> Any:
    from sharedq.pipeline.transforms.printing import parse_uow

    return parse_uow(value)


_COMMON_OPTIONS: tuple[Option, ...] = (
    click.option(
        "--input",
        "input_path",
        required=True,
        type=click.Path(exists=True, file_okay=False),
        help="a recovery root, one pair's directory (log/ and srds/), or a log stream",
    ),
    click.option(
        "--output",
        required=True,
        type=click.Path(file_okay=False),
        callback=named_path,
        help="directory for the job's Parquet tables and summary",
    ),
    click.option(
        "--master",
        default=None,
        callback=_checked(check_master),
        help="Spark master (default: what spark-submit set, else local[*])",
    ),
    click.option("--conf", multiple=True, metavar="KEY=VALUE", help="a Spark setting"),
)


# -- checks made before Spark starts -----------------------------------------------------


def _checked_headroom(_ctx: click.Context, _param: click.Parameter, value: float) -> float:
    check_headroom(value)
    return value


def _checked_interval(
    _ctx: click.Context, _param: click.Parameter, value: float | None
) -> float | None:
    if value is not None and not (math.isfinite(value) and value >= 1e-6):
        raise pipeline_error(
            PipelineReason.BAD_ARGUMENT,
            f"--interval {value}: must be a positive number of seconds (at least 1 us)",
        )
    return value


#: ``--headroom``, checked before Spark starts (the capacity and report commands).
headroom_option = click.option(
    "--headroom",
    type=float,
    default=DEFAULT_HEADROOM,
    show_default=True,
    callback=_checked_headroom,
    help="per cent to add to the peaks when sizing",
)


#: ``--no-srds`` of the jobs that count queue depth (stats, events).
no_srds_depth_option = click.option(
    "--no-srds",
    is_flag=True,
    help="do not read the SRDS image the log starts from (opening depth from the log only)",
)


# -- the jobs ------------------------------------------------------------------------------


def _recover(
    ctx: JobContext,
    structure: str | None,
    at_seq: int | None,
    at_time: str | None,
    accept_loss: bool,
) -> JobResult:
    """A structure's image at the end of the log or at a point: SRDS + log, on Spark."""
    from sharedq.pipeline.jobs import recover

    return recover.run(
        ctx, structure=structure, at_seq=at_seq, at_time=at_time, accept_loss=accept_loss
    )


recover_command = job_command(
    "recover",
    _recover,
    click.option(
        "--structure",
        default=None,
        callback=structure_name,
        help="one structure (default: every one)",
    ),
    click.option(
        "--at-seq",
        type=click.IntRange(min=0),
        default=None,
        help="recover to this sequence number",
    ),
    click.option(
        "--at-time",
        default=None,
        callback=_checked(_parse_time("--at-time")),
        help="recover to this time (ISO 8601; without a zone: UTC)",
    ),
    click.option(
        "--accept-loss",
        is_flag=True,
        help="go on past records missing from the log (listed in the summary) instead of refusing",
    ),
)

print_command = job_command(
    "print",
    Job(
        "print_log",
        "Print log records for people, filtered by time, type, queue, server or unit of work.",
    ),
    click.option(
        "--from",
        "start",
        default=None,
        callback=_checked(_parse_time("--from")),
        help="first time to print (ISO, UTC if naive)",
    ),
    click.option(
        "--to",
        "end",
        default=None,
        callback=_checked(_parse_time("--to")),
        help="last time to print (ISO, UTC if naive)",
    ),
    click.option(
        "--type",
        "types",
        multiple=True,
        callback=_checked(_parse_types),
        help="record type: a name (PUT) or hex code (07); repeatable",
    ),
    click.option(
        "--queue", "queues", multiple=True, callback=queue_name, help="queue name; repeatable"
    ),
    click.option(
        "--server",
        "servers",
        multiple=True,
        callback=server_name,
        help="writer (server, queue manager); repeatable",
    ),
    click.option(
        "--uow",
        default=None,
        callback=_checked(_parse_uow),
        help="unit of work id in hex, or its leading bytes",
    ),
    click.option(
        "--structure",
        "structures",
        multiple=True,
        callback=structure_name,
        help="structure name; repeatable",
    ),
    click.option(
        "--limit", default=50, show_default=True, type=click.IntRange(min=0), help="rows shown"
    ),
)

track_command = job_command(
    "track",
    Job(
        "track",
        """Track every message: who put and got it, latencies, stuck ones, the balance sheet;
        and follow a CQS unit of work (--uow) across systems.""",
    ),
    click.option(
        "--held-ms",
        default=1000.0,
        show_default=True,
        type=click.FloatRange(min=0),
        help="a consumed message held longer than this between get and commit is reported",
    ),
    click.option(
        "--waiting-seconds",
        default=5.0,
        show_default=True,
        type=click.FloatRange(min=0),
        help="a queued message never gotten for longer than this at the log's end is reported",
    ),
    click.option(
        "--backouts",
        "backout_limit",
        default=2,
        show_default=True,
        type=click.IntRange(min=1),
        help="a message backed out this often is reported",
    ),
    click.option(
        "--no-srds",
        is_flag=True,
        help="do not read the SRDS image the log starts from (opening balance from the log only)",
    ),
    click.option(
        "--limit",
        default=20,
        show_default=True,
        type=click.IntRange(min=0),
        help="stuck rows shown",
    ),
    click.option(
        "--uow",
        default=None,
        callback=_checked(_parse_uow),
        help="follow a CQS unit of work: SYSTEM/TOKEN (its origin) or hex (a prefix)",
    ),
)

stats_command = job_command(
    "stats",
    Job(
        "stats",
        "Statistics per queue and interval (puts, gets, backouts, depth) and per server.",
    ),
    click.option(
        "--interval",
        default=1.0,
        show_default=True,
        type=float,
        callback=_checked_interval,
        help="seconds per interval of the queue figures",
    ),
    no_srds_depth_option,
)


def capacity_job(ctx: JobContext, headroom: float = DEFAULT_HEADROOM) -> JobResult:
    """Peak list entries and data elements per structure, and the structure size and
    overflow threshold (OVFLWMAX) recommended for them with HEADROOM per cent to spare."""
    from sharedq.pipeline.jobs import capacity

    return capacity.run(ctx, headroom=headroom)


capacity_command = job_command("capacity", capacity_job, headroom_option)


events_command = job_command(
    "events",
    Job(
        "events",
        """Queue depth events: each queue's depth over time with every event marked, and the
        event messages of each CorrelId grouped (type, queue, coordinator, managers).""",
    ),
    no_srds_depth_option,
    click.option(
        "--limit",
        default=20,
        show_default=True,
        type=click.IntRange(min=0),
        help="event groups shown",
    ),
)


emhq_option = click.option(
    "--emhq",
    multiple=True,
    callback=structure_name,
    help="an EMHQ (Fast Path) structure; repeatable (default: names containing EMHQ)",
)
ims_command = job_command(
    "ims",
    Job(
        "ims",
        """An IMS group's work per IMS, local vs global inputs, input-to-reply latency and
        the balance per queue type, from the CQS log records (EMHQ structures: --emhq, or
        those whose name contains EMHQ).""",
    ),
    emhq_option,
)


def report_job(
    ctx: JobContext,
    headroom: float = DEFAULT_HEADROOM,
    interval: float | None = None,
    emhq: tuple[str, ...] = (),
) -> JobResult:
    """Run every job on one reading of the log (ims when it holds CQS records), draw the
    charts and write OUTPUT/report.html with every job's summary."""
    from sharedq.pipeline.jobs import report

    return report.run(ctx, headroom=headroom, interval=interval, emhq=emhq)


report_command = job_command(
    "report",
    report_job,
    headroom_option,
    click.option(
        "--interval",
        type=float,
        default=None,
        callback=_checked_interval,
        help="stats: seconds per interval (default: about 60 intervals over the log)",
    ),
    emhq_option,
)

#: Every job's command, in the order the report runs them.
JOB_COMMANDS = (
    recover_command,
    print_command,
    track_command,
    stats_command,
    capacity_command,
    events_command,
    ims_command,
    report_command,
)
for _command in JOB_COMMANDS:
    pipeline.add_command(_command)
