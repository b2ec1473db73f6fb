"""A CQS in a process of its own for the tests: ``sharedq cqs serve`` started, killed,
started again, on a private Redis (a memory structure is one process's alone)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from sharedq.cqs import RemoteCQS, authkey_file

#: The longest a server takes to say it listens, or to end, seconds.
START_S = 120.0


class ServedCQS:
    """One CQS process: its socket and key in a private (0700) temporary directory."""

    def __init__(
        self,
        url: str,
        name: str,
        system: str,
        *,
        emhq: str | None = None,
        recovery_root: str | None = None,
        options: tuple[str, ...] = (),
    ) -> None:
        self.url, self.name, self.system, self.emhq = url, name, system, emhq
        self.recovery_root = recovery_root
        #: Further ``cqs serve`` options (``--durability``, ``--logging-structure``).
        self.options = options
        self.directory = Path(tempfile.mkdtemp(prefix="cqs"))  # short: a socket path
        self.socket = str(self.directory / "cqs.sock")
        self.key_file = self.directory / "key"
        self.process: subprocess.Popen[str] | None = None
        self.incarnations = 0
        self._logs: list[TextIO] = []

    def start(self) -> ServedCQS:
        command = [sys.executable, "-m", "sharedq", "cqs", "serve", "--facility", self.url]
        command += ["--name", self.name, "--system", self.system, "--msgq", "MSGQ01"]
        command += ["--socket", self.socket, "--authkey-file", str(self.key_file)]
        if self.emhq is not None:
            command += ["--emhq", self.emhq]
        if self.recovery_root is not None:
            command += ["--recovery-root", self.recovery_root]
        command += self.options
        self.incarnations += 1
        log = open(self.directory / f"stderr.{self.incarnations}", "w")  # noqa: SIM115
        self._logs.append(log)
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # "" if it ended first: no hang
        assert "serving on" in line, (line, self.stderr())
        return self

    def stderr(self) -> str:
        return (self.directory / f"stderr.{self.incarnations}").read_text()

    @property
    def key(self) -> bytes:
        return authkey_file(self.key_file)

    def client(self) -> RemoteCQS:
        return RemoteCQS(self.socket, self.key)

    def kill(self) -> None:
        """SIGKILL: no CQSDISC, nothing more written."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        assert self.process.wait(START_S) == -signal.SIGKILL

    def stop(self) -> int | None:
        """SIGTERM (a clean end, CQSDISC), if it still runs; its exit code.  Its
        directory (socket, key, stderr) goes."""
        code = None
        if self.process is not None:
            if self.process.poll() is None:
                self.process.terminate()
            code = self.process.wait(START_S)
            if self.process.stdout is not None:
                self.process.stdout.close()
        for log in self._logs:
            log.close()
        shutil.rmtree(self.directory, ignore_errors=True)
        return code
