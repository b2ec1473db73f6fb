"""Where a waiting get's latency goes: ``bench/mq_cycle.py``'s wait figure in parts.

The same scene as ``mq_cycle.wait_figures`` (a getter thread already waiting in
``Queue.get(wait=30)``, a putter putting one 100-byte persistent message once the
getter sleeps), timed with ``perf_counter`` stamps around the backend's own request
functions (``client.exchange``, which writes the put, and ``client.read_reply``, which
reads the getter's two replies; each stamp costs some 0.1 us), and the server's time
from ``INFO commandstats`` of the same run.  Medians over the messages, in
microseconds:

* ``putter_client_us``: the put's start to its request written (the queue manager,
  seam and backend layers of ``Queue.put``);
* ``put_to_getter_wake_us``: the request written to the getter's first reply read
  (the ``XREAD``'s): the server's put, the wake of the ``XREAD`` and the take it lets
  run, the replies' transport and the getter thread's wake-up;
* ``getter_between_replies_us``: the ``XREAD``'s reply to the take's;
* ``getter_client_us``: the take's reply read to ``get`` returning the message (the
  backend, seam, get and wait layers);
* ``server_fcall_us_per_message``: every function call's server time per message
  (the put, the take after the wake, and the getter's try that found nothing before
  it slept, which is off the path), ``server_xread_us``: the wake's;
* ``getter_woke_after_putter``: the share of messages whose getter read its first
  reply only after the putter's ``put`` had returned (the getter then waited for the
  GIL while the putter finished); ``putter_after_reply_us`` is that finishing.

With ``--slowlog``, a second pass splits the function calls' server time by function
(``SLOWLOG`` with every command logged, which slows the server: its figures are high).
The bare Lua wait (``lua_floor.waiter``) is stamped the same way where it can be: its
put when sent, its getter's replies as read.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import lua_floor
from bench.harness import Report, parse_args, redis_url, server_stats
from bench.mq_cycle import QUEUE, _blocked_in_read, fresh_manager
from sharedq.cf.redis import RedisFacility
from sharedq.cf.redis import client as redis_client
from sharedq.testing.waits import asleep_in_wait_events

#: Messages timed (quick, full), after ``WARM`` untimed ones.
MESSAGES = (300, 2_000)
WARM = 30


class Stamps:
    """``perf_counter`` stamps by name, of one thread each."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}
        self.putter = threading.get_ident()

    def __call__(self, name: str) -> None:
        self.times.setdefault(name, []).append(time.perf_counter())

    def clear(self) -> None:
        self.times.clear()

    def after(self, name: str, moment: float) -> float:
        """The first stamp ``name`` after ``moment``."""
        for stamp in self.times.get(name, ()):
            if stamp > moment:
                return stamp
        raise RuntimeError(f"no {name} after {moment}")


def _stamped(stamps: Stamps) -> Callable[[], None]:
    """Wrap the backend's request functions to stamp; returns what undoes it."""
    exchange, read_reply = redis_client.exchange, redis_client.read_reply

    def stamped_exchange(connection: Any, packed: bytes) -> Any:
        if threading.get_ident() != stamps.putter:
            return exchange(connection, packed)
        stamps("put_sent")
        reply = exchange(connection, packed)
        stamps("put_reply")
        return reply

    def stamped_read(connection: Any) -> Any:
        reply = read_reply(connection)
        if threading.get_ident() != stamps.putter:
            stamps("getter_read")
        return reply

    redis_client.exchange = stamped_exchange
    redis_client.read_reply = stamped_read

    def undo() -> None:
        redis_client.exchange, redis_client.read_reply = exchange, read_reply

    return undo


def _run(
    stamps: Stamps,
    put: Callable[[], None],
    get: Callable[[], None],
    asleep: Callable[[threading.Thread], bool],
    count: int,
) -> None:
    """``WARM`` then ``count`` messages put one at a time to a waiting getter, stamped."""
    done: list[int] = []

    def getter() -> None:
        for _ in range(WARM + count):
            get()
            stamps("got")
            done.append(1)

    thread = threading.Thread(target=getter, name="getter")
    thread.start()
    for i in range(WARM + count):
        deadline = time.monotonic() + 10
        while len(done) < i or not asleep(thread):
            if time.monotonic() > deadline:
                raise RuntimeError("the getter does not wait")
            time.sleep(0.0002)
        if i == WARM:
            stamps.clear()
        stamps("put_start")
        put()
        stamps("put_end")
    thread.join(timeout=30)


def _parts(stamps: Stamps, report: Report, prefix: str) -> None:
    """The medians of the parts, from the stamps of one run."""
    t = stamps.times
    rows: dict[str, list[float]] = {}

    def add(name: str, seconds: float) -> None:
        rows.setdefault(name, []).append(seconds * 1e6)

    late = 0
    for start, end, got in zip(t["put_start"], t["put_end"], t["got"], strict=True):
        sent = stamps.after("put_sent", start) if "put_sent" in t else start
        wake = stamps.after("getter_read", sent)
        second = stamps.after("getter_read", wake)
        add("total_us", got - start)
        add("putter_client_us", sent - start)
        add("put_to_getter_wake_us", wake - sent)
        add("getter_between_replies_us", second - wake)
        add("getter_client_us", got - second)
        if "put_reply" in t:
            add("putter_after_reply_us", end - stamps.after("put_reply", sent))
        late += wake > end
    for name, values in rows.items():
        report.add(f"{prefix}{name}", statistics.median(values), "us")
    report.add(f"{prefix}getter_woke_after_putter", late / len(t["got"]))


def _slowlog_split(public: Any) -> dict[str, list[int]]:
    """Server microseconds of each function call logged, by function name."""
    split: dict[str, list[int]] = {}
    previous = ""
    for entry in sorted(public.slowlog_get(1_000_000), key=lambda e: e["id"]):
        words = bytes(entry["command"]).split(b" ")
        name = words[0].decode().upper()
        if name == "FCALL":
            function = words[1].decode().split("_", 1)[-1]
            if function == "take" and previous != "XREAD":
                function = "take (try before the wait)"
            split.setdefault(function, []).append(entry["duration"])
            previous = "FCALL"
        elif name == "XREAD":
            previous = name
    return split


def main() -> None:
    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--redis", metavar="URL", help="this server (default: a private one)")
        parser.add_argument(
            "--slowlog", action="store_true", help="split the server time by function"
        )

    args = parse_args(__doc__.splitlines()[0] if __doc__ else "wait parts", options)
    report = Report("a waiting get's latency in parts", args.quick)
    count = MESSAGES[not args.quick]
    body = b"x" * 100
    stamps = Stamps()
    with redis_url(args.redis) as url, RedisFacility.from_url(url) as facility:
        public: Any = facility.client.redis
        qm = fresh_manager(facility, len(body))
        queue = qm.open(QUEUE)

        def put() -> None:
            queue.put(body, persistent=True)

        def get() -> None:
            queue.get(wait=30)

        undo = _stamped(stamps)
        try:
            public.config_resetstat()
            _run(stamps, put, get, asleep_in_wait_events, count)
            stats = server_stats(public)
            _parts(stamps, report, "wait_")
            calls, usec = stats["fcall"]
            report.add("wait_server_fcall_us_per_message", usec / (WARM + count), "us")
            report.add("wait_server_fcalls_per_message", calls / (WARM + count))
            x_calls, x_usec = stats.get("xread", (1, 0))
            report.add("wait_server_xread_us", x_usec / x_calls, "us")
            if args.slowlog:
                public.config_set("slowlog-log-slower-than", 0)
                public.config_set("slowlog-max-len", 1_000_000)
                public.slowlog_reset()
                _run(stamps, put, get, asleep_in_wait_events, count)
                public.config_set("slowlog-log-slower-than", 10_000)
                for function, times in _slowlog_split(public).items():
                    report.add(
                        f"wait_slowlog_us_{function}", statistics.median(times), "us", "SLOWLOG"
                    )
            qm.close()
            # The bare Lua wait, its put stamped as it is sent.
            lane = facility.client.command

            def sent(*command: Any) -> Any:
                stamps("put_sent")
                return lane(*command)

            floor_put, floor_getter = lua_floor.waiter(
                public, body, sent, lambda: facility.client.nodes.connection(lua_floor.KEYS[0])
            )
            arrivals: list[float] = []
            public.config_resetstat()
            _run(
                stamps,
                floor_put,
                lambda: floor_getter(arrivals, 1),
                _blocked_in_read,
                count,
            )
            stats = server_stats(public)
            _parts(stamps, report, "lua_floor_wait_")
            calls, usec = stats["fcall"]
            report.add("lua_floor_wait_server_fcall_us_per_message", usec / (WARM + count), "us")
            lua_floor.drop(public)
        finally:
            undo()
    report.emit(args.json)


if __name__ == "__main__":
    main()
