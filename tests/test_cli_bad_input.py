"""No ``sharedq`` command prints a traceback for a user error.

Every subcommand (``demo``, ``walk``, ``pipeline capacity|print|recover|report|stats|
track``, ``recovery check|accept-loss``) is run through click's ``CliRunner`` with bad
arguments: a missing input directory, a malformed URL, a bad structure name, negative
numbers, a malformed time, a file that does not exist...  Each must exit non-zero (2
for a usage error, 1 for a failure), say what is wrong in its last line, and show no
traceback.  None of them may start Spark or reach a server: they are refused first.
A few run as a user runs them, in their own process (``.venv/bin/sharedq``, and the
``spark-submit`` entry), and the credential options against a private redis-server
with a password, which no output may show.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from sharedq.cf import open_facility
from sharedq.cli.credentials import PASSWORD_ENV, USERNAME_ENV
from sharedq.cli.main import cli
from sharedq.mq import QueueManager, structure_params
from sharedq.recovery import RecoverySettings
from sharedq.testing.redis_server import RedisServer

SHAREDQ = Path(sys.executable).with_name("sharedq")
JOBS = ("capacity", "ims", "print", "recover", "report", "stats", "track")
SECRET = "Cli-s3cret-pw"
WRONG = "Wr0ng-cli-pw"


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A recovery root with a logged pair, an empty directory, a plain file, an output."""
    base = tmp_path_factory.mktemp("cli")
    root = base / "recovery"
    facility = open_facility("memory://")
    facility.create(structure_params("QSGADMIN", queues=4, managers=2, messages=100))
    with QueueManager(facility, "QM1", 1, admin="QSGADMIN", recovery=RecoverySettings(root)) as qm:
        qm.define_queue("Q")
        qm.open("Q").put(b"kept", persistent=True)
    (base / "empty").mkdir()
    (base / "file").write_text("not a directory\n")
    (base / "password").write_text("anything\n")
    return {
        "root": str(root),
        "empty": str(base / "empty"),
        "file": str(base / "file"),
        "password": str(base / "password"),
        "out": str(base / "out"),
        "missing": str(base / "missing"),
    }


def invoke(args: Sequence[str], env: dict[str, str] | None = None) -> Result:
    """Run ``sharedq ARGS`` in this process, as ``main`` would, and time it."""
    started = time.monotonic()
    result = CliRunner().invoke(cli, list(args), env=env)
    assert time.monotonic() - started < 10, "refused before any Spark or server"
    return result


def check_refused(result: Result, code: int, *words: str) -> None:
    """A ``code`` exit, no traceback, and the last line names what is wrong."""
    output = result.output
    assert result.exit_code == code, output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in output
    last = output.strip().splitlines()[-1]
    assert last.startswith("sharedq: " if code == 1 else "Error: "), output
    for word in words:
        assert word in last, (word, output)


def _cases() -> Iterator[tuple[str, list[str], int, tuple[str, ...]]]:
    """(id, arguments with {placeholders}, exit code, words in the message)."""
    yield "no such command", ["nosuch"], 2, ("No such command",)
    # walk
    url_cases = {
        "port not a number": ("redis://localhost:abc/0", "Port could not be cast"),
        "port out of range": ("redis://localhost:70000/0", "Port out of range"),
        "broken IPv6": ("redis://[::1/0", "Invalid IPv6 URL"),
        "database not a number": ("redis://localhost:6379/x", "database 'x'"),
        "unknown scheme": ("nosuch://x", "unknown facility URL"),
        "memory with a host": ("memory://x", "memory:// takes no host"),
        "lease not finite": ("redis://localhost/0?lease=inf", "lease='inf'"),
    }
    for name, (url, words) in url_cases.items():
        yield f"walk {name}", ["walk", "--facility", url], 1, ("BAD_URL", words)
        yield (
            f"demo {name}",
            ["demo", "--backend", url, "--short", "--output", "{out}/demo"],
            1,
            ("BAD_URL", words),
        )
    yield "walk ..", ["walk", "--structure", ".."], 2, ("--structure", "names a directory")
    yield "walk unicode", ["walk", "--structure", "ÄPP"], 2, ("outside ASCII",)
    yield "walk long", ["walk", "--structure", "W" * 17], 2, ("more than 16",)
    yield "walk newline", ["walk", "--structure", "WALK\n"], 2, ("not allowed",)
    yield (
        "walk no password file",
        ["walk", "--password-file", "{missing}"],
        2,
        ("--password-file", "does not exist"),
    )
    yield (
        "walk password file for memory",
        ["walk", "--password-file", "{password}"],
        2,
        ("--password-file is for a redis://",),
    )
    yield "walk unknown option", ["walk", "--bogus"], 2, ("No such option",)
    # demo
    yield "demo rounds", ["demo", "--rounds", "-5"], 2, ("--rounds", "-5")
    yield "demo seed", ["demo", "--seed", "x"], 2, ("--seed",)
    yield "demo empty output", ["demo", "--output", ""], 2, ("--output", "an empty path")
    yield "demo output a file", ["demo", "--output", "{file}"], 2, ("--output", "is a file")
    yield (
        "demo master",
        ["demo", "--master", "bogus", "--short", "--output", "{out}/demo"],
        1,
        ("not a Spark master",),
    )
    # recovery
    for command in ("check", "accept-loss"):
        base = ["recovery", command]
        yield (
            f"{command} empty root",
            [*base, "--root", "", "--pair", "QSGADMIN"],
            1,
            ("BAD_ARGUMENT (3501)", "root is empty"),
        )
        yield (
            f"{command} missing root",
            [*base, "--root", "{missing}", "--pair", "QSGADMIN"],
            1,
            ("holds no log of pair QSGADMIN",),
        )
        yield (
            f"{command} root a file",
            [*base, "--root", "{file}", "--pair", "QSGADMIN"],
            2,
            ("--root", "is a file"),
        )
        yield f"{command} pair ..", [*base, "--root", "{root}", "--pair", ".."], 2, ("--pair",)
        yield (
            f"{command} pair escaping",
            [*base, "--root", "{root}", "--pair", "../x"],
            2,
            ("starts with '.'",),
        )
        yield (
            f"{command} unknown pair",
            [*base, "--root", "{root}", "--pair", "NOPE"],
            1,
            ("holds no log of pair NOPE",),
        )
        yield f"{command} no pair", [*base, "--root", "{root}"], 2, ("Missing option '--pair'",)
    # every pipeline job
    for job in JOBS:
        base = ["pipeline", job]
        good = [*base, "--input", "{root}", "--output", "{out}/" + job]
        yield (
            f"{job} missing input",
            [*base, "--input", "{missing}", "--output", "{out}"],
            2,
            ("--input", "does not exist"),
        )
        yield (
            f"{job} input without a log",
            [*base, "--input", "{empty}", "--output", "{out}"],
            1,
            ("NO_INPUT (4002)", "holds no log stream"),
        )
        yield (
            f"{job} empty output",
            [*base, "--input", "{root}", "--output", ""],
            2,
            ("an empty path",),
        )
        yield (
            f"{job} output under a file",
            [*base, "--input", "{root}", "--output", "{file}/out"],
            1,
            ("Not a directory", "{file}"),
        )
        yield f"{job} master", [*good, "--master", "bogus"], 2, ("--master", "not a Spark master")
        yield f"{job} conf", [*good, "--conf", "novalue"], 1, ("expected KEY=VALUE",)
        yield f"{job} no output", [*base, "--input", "{root}"], 2, ("Missing option '--output'",)
    good = ["--input", "{root}", "--output", "{out}/x"]
    yield "capacity headroom", ["pipeline", "capacity", *good, "--headroom", "-1"], 1, ("-1",)
    yield "report headroom", ["pipeline", "report", *good, "--headroom", "nan"], 1, ("nan",)
    yield "report interval", ["pipeline", "report", *good, "--interval", "0"], 1, ("--interval",)
    yield "ims emhq", ["pipeline", "ims", *good, "--emhq", "bad name"], 2, ("--emhq",)
    yield "stats interval", ["pipeline", "stats", *good, "--interval", "-1"], 1, ("--interval",)
    yield "stats interval nan", ["pipeline", "stats", *good, "--interval", "nan"], 1, ("nan",)
    yield "recover time", ["pipeline", "recover", *good, "--at-time", "garbage"], 2, ("ISO",)
    yield "recover seq", ["pipeline", "recover", *good, "--at-seq", "-1"], 2, ("--at-seq",)
    yield "recover seq text", ["pipeline", "recover", *good, "--at-seq", "x"], 2, ("--at-seq",)
    yield (
        "recover structure",
        ["pipeline", "recover", *good, "--structure", ".."],
        2,
        ("--structure", "names a directory"),
    )
    yield "print from", ["pipeline", "print", *good, "--from", "yesterday"], 2, ("--from",)
    yield "print to", ["pipeline", "print", *good, "--to", "2024-13-01"], 2, ("--to",)
    yield "print limit", ["pipeline", "print", *good, "--limit", "-1"], 2, ("--limit",)
    yield "print type", ["pipeline", "print", *good, "--type", "NOPE"], 2, ("NOPE",)
    yield "print uow", ["pipeline", "print", *good, "--uow", "zz"], 2, ("--uow",)
    yield "print structure", ["pipeline", "print", *good, "--structure", "A B"], 2, ("' '",)
    yield "print server", ["pipeline", "print", *good, "--server", "../QM1"], 2, ("--server",)
    yield "print queue", ["pipeline", "print", *good, "--queue", "Q\n"], 2, ("--queue",)
    yield "track held", ["pipeline", "track", *good, "--held-ms", "-1"], 2, ("--held-ms",)
    yield "track waiting", ["pipeline", "track", *good, "--waiting-seconds", "x"], 2, ("x",)
    yield "track backouts", ["pipeline", "track", *good, "--backouts", "0"], 2, ("--backouts",)
    yield "track limit", ["pipeline", "track", *good, "--limit", "-3"], 2, ("--limit",)


CASES = list(_cases())


def test_every_subcommand_is_tried() -> None:
    tried = {
        tuple(args[:2]) if args[0] in ("pipeline", "recovery") else args[0]
        for _, args, _, _ in CASES
    }
    expected = {"walk", "demo", *(("pipeline", job) for job in JOBS)}
    expected |= {("recovery", "check"), ("recovery", "accept-loss")}
    assert expected <= tried


@pytest.mark.parametrize(
    ("args", "code", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_user_error_is_one_line_and_no_traceback(
    places: dict[str, str], args: list[str], code: int, words: tuple[str, ...]
) -> None:
    filled = [a.format(**places) for a in args]
    result = invoke(filled)
    check_refused(result, code, *(w.format(**places) for w in words))
    assert not Path(places["out"], "x").exists()  # refused before any output was made


def test_the_real_command_exits_with_one_line(places: dict[str, str]) -> None:
    """As a user runs it: its own process, standard error apart."""
    for args, code, first in (
        (["walk", "--facility", "redis://localhost:abc/0"], 1, "sharedq: BAD_URL (1011)"),
        (["recovery", "check", "--root", "", "--pair", "QSGADMIN"], 1, "sharedq: BAD_ARGUMENT"),
        (
            ["pipeline", "recover", "--input", places["root"], "--output", places["out"],
             "--at-time", "garbage"],
            2,
            "Usage: sharedq pipeline recover",
        ),
    ):  # fmt: skip
        done = subprocess.run(
            [str(SHAREDQ), *args], capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == code, done.stderr
        assert "Traceback" not in done.stderr + done.stdout
        assert done.stderr.startswith(first), done.stderr
        if code == 1:
            assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_spark_submit_entry_shows_no_traceback(places: dict[str, str]) -> None:
    entry = [sys.executable, "-m", "sharedq.cli.submit"]
    for args, code, words in (
        (["recover", "--input", places["root"], "--output", places["out"], "--at-seq", "-1"],
         2, "--at-seq"),
        (["stats", "--input", places["missing"], "--output", places["out"]], 2, "--input"),
        (["stats", "--input", places["empty"], "--output", places["out"]], 1, "NO_INPUT"),
        (["stats", "--input", places["root"], "--output", places["out"], "--conf", "x"],
         1, "KEY=VALUE"),
        (["nosuch"], 2, "No such command"),
    ):  # fmt: skip
        done = subprocess.run(
            [*entry, *args], capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == code, done.stderr
        assert "Traceback" not in done.stderr + done.stdout
        assert words in done.stderr


# -- credentials -------------------------------------------------------------------------------


@pytest.fixture
def guarded() -> Iterator[RedisServer]:
    with RedisServer(password=SECRET) as server:
        yield server


def _no_secret(result: Result | subprocess.CompletedProcess[str]) -> str:
    text = result.output if isinstance(result, Result) else result.stdout + result.stderr
    for secret in (SECRET, WRONG):
        assert secret not in text, text
    assert "Traceback" not in text
    return text


def test_a_wrong_password_from_a_file_or_the_environment_is_refused_unshown(
    guarded: RedisServer, tmp_path: Path
) -> None:
    url = f"redis://127.0.0.1:{guarded.port}/0"
    wrong_file = tmp_path / "wrong.pw"
    wrong_file.write_text(WRONG + "\n")
    refused = [
        invoke(["walk", "--facility", url, "--password-file", str(wrong_file)]),
        invoke(["walk", "--facility", url], env={PASSWORD_ENV: WRONG}),
        invoke(["walk", "--facility", url], env={PASSWORD_ENV: WRONG, USERNAME_ENV: "default"}),
        invoke(["walk", "--facility", f"redis://:{WRONG}@127.0.0.1:{guarded.port}/0"]),
    ]
    for result in refused:
        check_refused(result, 1, "AUTHENTICATION_FAILED", "refused the credentials")
        _no_secret(result)
    # the right one from the file wins over a wrong one in the environment
    right_file = tmp_path / "right.pw"
    right_file.write_text(SECRET + "\n")
    result = invoke(
        ["walk", "--facility", url, "--password-file", str(right_file), "--structure", "CREDS"],
        env={PASSWORD_ENV: WRONG},
    )
    assert result.exit_code == 0, result.output
    assert "Deleted structure CREDS." in _no_secret(result)


def test_a_password_given_twice_is_a_usage_error_that_shows_neither(
    guarded: RedisServer, tmp_path: Path
) -> None:
    url = f"redis://:{SECRET}@127.0.0.1:{guarded.port}/0"
    password = tmp_path / "pw"
    password.write_text(WRONG)
    for result in (
        invoke(["walk", "--facility", url, "--password-file", str(password)]),
        invoke(["walk", "--facility", url], env={PASSWORD_ENV: WRONG}),
        invoke(
            ["demo", "--backend", url, "--output", str(tmp_path / "d")], env={PASSWORD_ENV: WRONG}
        ),
    ):
        check_refused(result, 2, "carries credentials", "give them once")
        assert "***" in _no_secret(result)
    empty = tmp_path / "empty.pw"
    empty.write_text("\n")
    result = invoke(
        ["walk", "--facility", url.replace(f":{SECRET}@", ""), "--password-file", str(empty)]
    )
    check_refused(result, 2, "--password-file", "holds no password")
    assert guarded.command("KEYS", "*") == []  # nothing reached the server's data


def test_the_real_command_takes_the_password_from_the_environment(guarded: RedisServer) -> None:
    url = f"redis://127.0.0.1:{guarded.port}/0"
    env = {**os.environ, PASSWORD_ENV: SECRET}
    done = subprocess.run(
        [str(SHAREDQ), "walk", "--facility", url], capture_output=True, text=True, timeout=120,
        env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "on RedisFacility" in _no_secret(done)
    env[PASSWORD_ENV] = WRONG
    done = subprocess.run(
        [str(SHAREDQ), "walk", "--facility", url], capture_output=True, text=True, timeout=120,
        env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith("sharedq: AUTHENTICATION_FAILED (1062)")
    _no_secret(done)
