"""What every benchmark shares: options, timing, a printed table and a flat JSON file.

Each benchmark measures sharedq and a baseline in the same process and run, and
reports the ratio, so that a number means the same on a slow or a busy machine.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table


def parse_args(
    description: str, extra: Callable[[argparse.ArgumentParser], None] | None = None
) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="a short run, under a minute")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the figures here")
    if extra is not None:
        extra(parser)
    return parser.parse_args()


def rate(operations: int, fn: Callable[[], object]) -> float:
    """Operations per second of ``fn``, which performs ``operations`` operations.

    The cyclic garbage collector is off while ``fn`` runs, as ``timeit`` does, for
    sharedq and baselines alike, so that a collection landing in one run and not the
    other does not decide a ratio.
    """
    gc.collect()
    gc.disable()
    try:
        started = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - started
    finally:
        gc.enable()
    return operations / elapsed


def best_rate(operations: int, fn: Callable[[], object], repeats: int = 5) -> float:
    """The best of several runs: the least disturbed by the rest of the machine."""
    return max(rate(operations, fn) for _ in range(repeats))


def best_rates_in_turns(
    operations: int, fns: dict[str, Callable[[], object]], rounds: int
) -> dict[str, float]:
    """The best rate of each function, measured in turns, round after round.

    A benchmark and its baseline run alternately, so that whatever else the machine
    is doing hits both alike and the best rounds of each are comparable.
    """
    best = dict.fromkeys(fns, 0.0)
    for _ in range(rounds):
        for name, fn in fns.items():
            best[name] = max(best[name], rate(operations, fn))
    return best


@contextmanager
def redis_url(given: str | None) -> Iterator[str]:
    """The server to measure on: the one given, or a private one for this run
    (:class:`sharedq.testing.redis_server.RedisServer`, as the tests use: its own port
    and directory, no persistence)."""
    if given:
        yield given
        return
    from sharedq.testing.redis_server import RedisServer

    with RedisServer() as server:
        yield server.url


class Report:
    """Figures of one benchmark run, printed as a table and written as flat JSON."""

    def __init__(self, title: str, quick: bool) -> None:
        self.title = title
        self.figures: dict[str, float | int | str | bool] = {
            "quick": quick,
            "python": platform.python_version(),
            # What the benchmark, its baselines and any server shared.
            "cpus": os.cpu_count() or 0,
        }
        self.rows: list[tuple[str, str, str]] = []

    def add(
        self, name: str, value: float | int | str | bool, unit: str = "", note: str = ""
    ) -> None:
        self.figures[name] = round(value, 4) if isinstance(value, float) else value
        shown = (
            f"{value:,.1f}"
            if isinstance(value, float) and value >= 100
            else (f"{value:.3f}" if isinstance(value, float) else str(value))
        )
        self.rows.append((name, f"{shown} {unit}".strip(), note))

    def emit(self, json_path: Path | None) -> None:
        table = Table(title=self.title)
        table.add_column("figure")
        table.add_column("value", justify="right")
        table.add_column("note")
        for row in self.rows:
            table.add_row(*row)
        Console().print(table)
        if json_path is not None:
            json_path.parent.mkdir(parents=True, exist_ok=True)
            json_path.write_text(json.dumps(self.figures, indent=2, sort_keys=True) + "\n")


class RoundTrips:
    """Round trips to Redis counted on the client side, per thread, while in use.

    Every request a redis-py connection sends (one command, or a pipeline of several)
    is one ``send_packed_command`` followed by reading its replies: one round trip.
    Inside ``with RoundTrips() as trips:`` that method is wrapped to count, per
    calling thread, the sends and the command names they carried, so that a benchmark
    can say how many round trips and which top-level commands an operation took
    without ``MONITOR`` (which would slow the server for everyone).  Counting costs the
    client time: measure rates outside it.
    """

    def __init__(self) -> None:
        self.sends: dict[int, int] = {}
        self.commands: dict[str, int] = {}

    def __enter__(self) -> RoundTrips:
        from redis.connection import AbstractConnection

        original: Any = AbstractConnection.send_packed_command
        self._original = original
        sends, commands = self.sends, self.commands

        def counting(connection: Any, command: Any, check_health: bool = True) -> None:
            ident = threading.get_ident()
            sends[ident] = sends.get(ident, 0) + 1
            chunks = [command] if isinstance(command, bytes | str) else list(command)
            packed = b"".join(c if isinstance(c, bytes) else c.encode() for c in chunks)
            for name in command_names(packed):
                commands[name] = commands.get(name, 0) + 1
            original(connection, command, check_health)

        AbstractConnection.send_packed_command = counting  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        from redis.connection import AbstractConnection

        AbstractConnection.send_packed_command = self._original  # type: ignore[method-assign]

    def of(self, thread: threading.Thread | None = None) -> int:
        """Round trips made by ``thread`` (the calling one by default)."""
        ident = threading.get_ident() if thread is None else thread.ident
        return self.sends.get(ident or 0, 0)


def command_names(packed: bytes) -> list[str]:
    """The (lower-case) names of the RESP commands in ``packed``, in order."""
    names, at = [], 0
    while at < len(packed):
        end = packed.index(b"\r\n", at)
        count = int(packed[at + 1 : end])
        at = end + 2
        for i in range(count):
            end = packed.index(b"\r\n", at)
            length = int(packed[at + 1 : end])
            if i == 0:
                names.append(packed[end + 2 : end + 2 + length].decode().lower())
            at = end + 2 + length + 2
    return names


def server_stats(client: Any) -> dict[str, tuple[int, int]]:
    """``INFO commandstats`` as command -> (calls, microseconds)."""
    stats: dict[str, Any] = client.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): (int(s["calls"]), int(s["usec"]))
        for name, s in stats.items()
    }
