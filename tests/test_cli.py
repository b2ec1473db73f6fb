"""The ``sharedq`` command, run as a user runs it: in its own process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sharedq.testing.redis_server import RedisServer


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sharedq", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_walk_on_the_embedded_facility_prints_each_step() -> None:
    result = run_cli("walk")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "QM2 tries a get: nothing, the head is uncommitted" in out
    assert "QM2 is woken: monitor 1 went nonempty" in out
    assert "LIST_FULL (1041)" in out
    assert "MSG-A (key X'0400..' version 1), MSG-B" in out
    assert "Accounting: 2/100 entries" in out


def test_walk_on_a_redis_server() -> None:
    server = RedisServer().start()  # its own server: the CLI runs in another process
    try:
        result = run_cli("walk", "--facility", server.url)
        assert result.returncode == 0, result.stderr
        out = result.stdout
        assert "on RedisFacility" in out
        assert "QM2 tries a get: nothing, the head is uncommitted" in out
        assert "QM2 is woken: monitor 1 went nonempty" in out
        assert "LIST_FULL (1041)" in out
        assert "MSG-A (key X'0400..' version 1), MSG-B" in out
        assert "Accounting: 2/100 entries" in out
        assert server.command("KEYS", "*") == []  # the walk deleted its structure
        # An unreachable server is a clear error and a failure exit.
        server.kill()
        result = run_cli("walk", "--facility", server.url)
        assert result.returncode == 1
        assert "CONNECTION_FAILED" in result.stderr
    finally:
        server.stop()


def test_an_unknown_facility_url_is_a_clear_error_and_a_failure_exit() -> None:
    result = run_cli("walk", "--facility", "ftp://nowhere")
    assert result.returncode == 1
    assert "BAD_URL" in result.stderr and "ftp://nowhere" in result.stderr


def test_usage_errors_exit_2() -> None:
    assert run_cli("no-such-command").returncode == 2
    assert run_cli("walk", "--bogus").returncode == 2


def test_demo_refuses_a_bad_option_before_doing_anything(tmp_path: object) -> None:
    result = run_cli("demo", "--rounds", "2", "--output", str(tmp_path))
    assert result.returncode == 2
    assert "--rounds" in result.stderr
    result = run_cli("demo", "--backend", "nosuch://x", "--short", "--output", str(tmp_path))
    assert result.returncode == 1
    assert "nosuch" in result.stderr


def test_pipeline_lists_its_jobs() -> None:
    result = run_cli("pipeline", "--help")
    assert result.returncode == 0, result.stderr
    for job in ("recover", "print", "track", "stats", "capacity", "report"):
        assert job in result.stdout


def test_recovery_check_and_accept_loss_name_what_is_missing(tmp_path: Path) -> None:
    from sharedq.cf.memory import MemoryFacility
    from sharedq.log import LogConfig
    from sharedq.mq import QueueManager, structure_params
    from sharedq.recovery import RecoverySettings

    # Given a pair whose log lost a staging segment after its checkpoint
    root = tmp_path / "recovery"
    facility = MemoryFacility()
    for name in ("CADMIN", "CAPP"):
        facility.create(structure_params(name, queues=4, managers=2, messages=2000))
    settings = RecoverySettings(
        root, log_config=LogConfig(staging_bytes=1 << 20, segment_bytes=64 << 10)
    )
    qm = QueueManager(facility, "QM1", 1, admin="CADMIN", structures=["CAPP"], recovery=settings)
    qm.define_queue("ORDERS", structure="CAPP", max_depth=1000)
    qm.checkpoint()
    for n in range(400):
        qm.open("ORDERS").put(b"m%05d" % n + b"." * 300, persistent=True)
    assert qm.recovery_log is not None
    first, segment = qm.recovery_log.pairs["CAPP"].stream.layout.segments("QM1")[1]
    qm.close()
    facility.close()
    segment.unlink()
    # Then check names it and fails; accept-loss accepts exactly it; check then passes
    checked = run_cli("recovery", "check", "--root", str(root), "--pair", "CAPP")
    assert checked.returncode == 1
    assert f"MISSING: writer QM1: lsns {first}.." in checked.stdout
    accepted = run_cli("recovery", "accept-loss", "--root", str(root), "--pair", "CAPP")
    assert accepted.returncode == 0, accepted.stderr
    assert f"accepted as lost: writer QM1: lsns {first}.." in accepted.stdout
    again = run_cli("recovery", "check", "--root", str(root), "--pair", "CAPP")
    assert again.returncode == 0 and "accepted as lost: writer QM1" in again.stdout
    # A root without the pair is a clear error, no traceback
    wrong = run_cli("recovery", "check", "--root", str(tmp_path / "nowhere"), "--pair", "CAPP")
    assert wrong.returncode == 1 and "BAD_ARGUMENT" in wrong.stderr
    assert "Traceback" not in wrong.stderr
