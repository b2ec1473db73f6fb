"""A process imports what it uses: pyarrow only to offload, checkpoint or read data sets,
and the ``sharedq`` command only the subcommand it runs.

Importing pyarrow costs a process about 0.2 s and 90 MB, pyspark and matplotlib more:
a queue manager or CQS that puts, gets and logs to staging segments, and ``sharedq
--help``, do without them (``docs/log.md``, "What a process imports").  Each check runs
in a fresh interpreter, since this one has imported everything already; the work it
does is real (a memory facility, a log on disk), and so is the check that the
deferred import then happens and works.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import sharedq.log
import sharedq.recovery
from sharedq.cli import pipeline
from sharedq.cli.main import SUBCOMMANDS, cli
from sharedq.log import records
from sharedq.recovery import srds


def run_python(code: str, cwd: Path) -> str:
    """Run ``code`` in a fresh interpreter; its standard output (it must exit 0)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


#: Puts, gets and a commit on a memory facility, with the manager's structures made.
SETUP = """
    import sys
    from pathlib import Path

    import sharedq.mq
    from sharedq.cf import open_facility
    from sharedq.mq import QueueManager, structure_params

    def loaded():
        return sorted(m for m in ("pyarrow", "numpy", "pyspark") if m in sys.modules)

    facility = open_facility("memory://")
    for name in ("QSGADMIN", "APP1"):
        facility.create(structure_params(name, queues=16, managers=4, messages=2000))

    def work(qm):
        qm.define_queue("Q", structure="APP1")
        queue = qm.open("Q")
        for n in range(20):
            queue.put(b"message %d" % n, persistent=True)
        with qm.unit_of_work() as uow:
            got = [queue.get(uow=uow).body for _ in range(5)]
        assert got == [b"message %d" % n for n in range(5)], got
        return queue
"""


def test_a_recoverable_manager_imports_pyarrow_only_for_its_structure_checkpoint(
    tmp_path: Path,
) -> None:
    out = run_python(
        SETUP
        + """
    from sharedq.recovery import read_srds
    from sharedq.recovery.settings import RecoverySettings

    settings = RecoverySettings(Path("recovery"))
    qm = QueueManager(facility, "QM1", 1, admin="QSGADMIN", structures=["APP1"],
                      recovery=settings)
    queue = work(qm)
    qm.system_checkpoint()
    print("worked", loaded())
    [result] = qm.checkpoint("APP1")
    print("checkpoint", loaded())
    image = read_srds(Path("recovery/APP1/srds") / f"SRDS{result.slot}.parquet")
    print("rows", image.entries.num_rows >= 15, queue.depth())
    qm.close()
    """,
        tmp_path,
    )
    assert out.splitlines() == [
        "worked []",
        "checkpoint ['numpy', 'pyarrow']",
        "rows True 15",
    ]


def test_a_logged_manager_imports_pyarrow_only_when_its_writer_offloads(tmp_path: Path) -> None:
    out = run_python(
        SETUP
        + """
    from sharedq.log import LogStream
    from sharedq.mq import LogJournal

    streams = {s: LogStream(Path(s), name=f"{s}.LOG", structure=s) for s in ("QSGADMIN", "APP1")}
    journal = LogJournal("QM1", streams)
    qm = QueueManager(facility, "QM1", 1, admin="QSGADMIN", structures=["APP1"],
                      journal=journal)
    work(qm)
    staged = len(list(streams["APP1"].records()))
    print("worked", loaded())
    result = journal.writer_for("APP1").offload()
    print("offloaded", loaded(), len(result.datasets))
    print("read", len(list(streams["APP1"].records())) == staged > 20)
    qm.close()
    journal.close()
    """,
        tmp_path,
    )
    assert out.splitlines() == [
        "worked []",
        "offloaded ['numpy', 'pyarrow'] 1",
        "read True",
    ]


def test_the_server_packages_import_no_pyarrow(tmp_path: Path) -> None:
    out = run_python(
        """
    import sys
    import sharedq.cqs, sharedq.log, sharedq.mq, sharedq.recovery, sharedq.seam
    print(sorted(m for m in ("pyarrow", "numpy", "pyspark") if m in sys.modules))
    """,
        tmp_path,
    )
    assert out.splitlines() == ["[]"]


def test_the_schemas_are_made_at_their_first_use() -> None:
    """``ARROW_SCHEMA`` and ``ENTRY_SCHEMA`` are still there, the same object by every
    name; other names are still missing."""
    assert sharedq.log.ARROW_SCHEMA is records.ARROW_SCHEMA
    assert sharedq.log.ARROW_SCHEMA.names == [f.name for f in records.FIELDS]
    assert sharedq.recovery.ENTRY_SCHEMA is srds.ENTRY_SCHEMA is srds.entry_schema()
    for module in (sharedq.log, records, sharedq.recovery, srds):
        with pytest.raises(AttributeError, match="NO_SUCH_NAME"):
            module.NO_SUCH_NAME  # noqa: B018


# -- the sharedq command -----------------------------------------------------------------

#: Runs ``sharedq ARGS`` in this interpreter, then prints which heavy modules it loaded.
CLI = """
    import sys
    from sharedq.cli.main import main

    sys.argv = ["sharedq", *{args!r}]
    try:
        main()
    except SystemExit as exit:
        code = exit.code
    heavy = (
        "pyarrow", "pyspark", "matplotlib", "rich", "sharedq.cli.pipeline", "sharedq.mq",
        "sharedq.pipeline.job",
    )  # fmt: skip
    print("exit", code, sorted(m for m in heavy if m in sys.modules))
"""


@pytest.mark.parametrize(
    ("args", "loaded"),
    [
        (["--help"], []),
        (["--version"], []),
        (["walk", "--help"], ["rich"]),
        (["demo", "--help"], []),
        (["recovery", "--help"], []),
        (["walk"], ["rich"]),
        (["pipeline", "--help"], ["sharedq.cli.pipeline"]),
        *(
            (["pipeline", job.name, "--help"], ["sharedq.cli.pipeline"])
            for job in pipeline.JOB_COMMANDS
        ),
    ],
    ids=" ".join,
)
def test_sharedq_imports_only_the_subcommand_it_runs(
    args: list[str], loaded: list[str], tmp_path: Path
) -> None:
    out = run_python(CLI.format(args=args), tmp_path)
    assert out.splitlines()[-1] == f"exit 0 {loaded}"


def test_the_help_lists_each_subcommand_by_its_own_help() -> None:
    """The summaries ``sharedq --help`` shows without importing a subcommand are the
    first paragraphs of the subcommands' own help, and name every subcommand."""
    for name, subcommand in SUBCOMMANDS.items():
        command = subcommand.load()
        assert command.name == name
        first = inspect.cleandoc(command.help or "").split("\n\n")[0]
        assert " ".join(first.split()) == subcommand.summary, name
    assert sorted(cli.commands) == sorted(SUBCOMMANDS)


def test_the_help_listing_is_the_same_before_and_after_the_imports(tmp_path: Path) -> None:
    fresh = run_python(
        """
    from click.testing import CliRunner
    from sharedq.cli.main import cli
    print(CliRunner().invoke(cli, ["--help"]).output)
    """,
        tmp_path,
    )
    dict(cli.commands.items())  # every subcommand imported
    from click.testing import CliRunner

    assert CliRunner().invoke(cli, ["--help"]).output + "\n" == fresh


def test_each_job_command_shows_its_job_function_s_docstring() -> None:
    """A job's help is held in :mod:`sharedq.cli.pipeline` (``Job.help``) so that showing
    it imports no job module; it is the job function's own docstring, word for word."""
    assert sorted(pipeline.pipeline.commands) == sorted(c.name for c in pipeline.JOB_COMMANDS)
    for command in pipeline.JOB_COMMANDS:
        function = command.load()
        assert function.__module__.startswith("sharedq."), command.name
        help_text = inspect.cleandoc(command.help or "")
        assert help_text == inspect.cleandoc(function.__doc__ or ""), command.name
        if isinstance(command.job, pipeline.Job):
            assert function.__module__ == f"sharedq.pipeline.jobs.{command.job.module}"
            assert function.__name__ == "run"
