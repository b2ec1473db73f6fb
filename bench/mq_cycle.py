"""Queue-manager message cycles per second, against baselines measured in the same run.

The cycle is what a consuming application does per message, on the path users take: a
persistent message put through ``Queue.put`` (out of syncpoint), a get in a unit of
work, and the unit's commit.  It is measured with 100-byte and 4 KiB bodies, on both
backends, with no recovery log (``bench/recovery.py`` measures the log).

Memory backend.  Baseline: persist-queue's ``SQLiteAckQueue`` put -> get -> ack of the
same body, in its least durable mode: an in-memory SQLite database (``path=":memory:"``,
``auto_commit=True``).  sharedq's memory backend keeps its structures in memory with no
disk either, so neither side survives its process; that is the durability both have
here.  ``memory_ratio_vs_persistqueue`` is the smaller of the two body sizes' ratios.

``SQLiteAckQueue`` keeps acknowledged rows until ``clear_acked_data()`` is called, and
its gets slow down as they pile up, so its rate depends on how long a run is.  Each
round therefore starts from a fresh queue and runs the same number of cycles
(``ROUND`` = 10,000: a backlog of ten thousand messages worked off; 5,000 in one
round with ``--quick``, which keeps every figure but does fewer rounds and cycles).  The
``_cleared`` figures are the same with ``clear_acked_data()`` (its defaults) called
every 1,000 acks inside the timed loop, the maintenance its maintainers ask users to
do; ``memory_ratio_vs_persistqueue_cleared`` compares against that.

Redis backend: a private ``redis-server`` started for the run (no persistence), or the
server of ``--redis URL``.  Baselines, on the facility's own client (same URL, hiredis
parser, RESP2, one connection), each what a user choosing a queue would write:

* ``redis_ratio_vs_lpush_rpop``: LPUSH then RPOP of the same body through the redis-py
  client API (``Redis.lpush``/``Redis.rpop``); ``..._same_path`` the same two commands
  over the lean connection path the backend itself uses (no redis-py command
  bookkeeping), the fairer comparison of what the server and the round trips cost;
* ``redis_ratio_vs_streams``: Redis Streams with a consumer group, one message a cycle:
  ``XADD``, ``XREADGROUP COUNT 1``, ``XACK`` (three round trips, like the cycle today);
* ``batch_ratio_vs_streams``: 10,000 messages put in units of work of 100 and then
  gotten in units of 100 (``Queue.put_many`` and ``Queue.get_many`` when the queue has
  them, else 100 puts and 100 gets; ``batch_put_path``/``batch_get_path`` say which),
  against the same messages sent as pipelines of 100 ``XADD`` and taken with
  ``XREADGROUP COUNT 100`` + ``XACK`` of the hundred ids.

Accounting, in a pass of its own (counting costs the client time, so no rate is taken
there): ``redis_round_trips_per_cycle`` counts the requests the client sends (each
``send_packed_command`` of a redis-py connection; ``harness.RoundTrips``, no
``MONITOR``); ``redis_calls_per_cycle`` every command the server ran, those inside
functions included, and ``redis_server_us_per_cycle`` the server's time in the commands
the client sent (``FCALL`` mostly: a function's time includes the commands it runs),
both from ``INFO commandstats`` after ``CONFIG RESETSTAT``.  ``redis_server_us_per_request_*``
is that time per function call during the timed rounds.  The client's side:
``redis_client_cpu_us_per_cycle`` is this process's CPU time per cycle (median of five
runs, socket calls included), ``lpush_rpop_client_cpu_us_per_pair`` the same for a bare
LPUSH + RPOP over the backend's connection path, and
``redis_client_cpu_us_over_transport`` the first less one and a half of the second
(three requests' bare transport): the Python of the queue manager, seam and backend
layers.  CPU time, unlike the wall clock, hardly moves when other work shares the cores.

Memory per message: ``redis_bytes_per_message`` is the growth of ``used_memory``
(``INFO memory``) per 100-byte persistent message with ``BYTES_MESSAGES`` of them left
queued, against ``redis_list_bytes_per_message`` for the same bodies in a Redis list,
and ``redis_bytes_floor_per_message``: what the server spends on a 12-byte hash field
holding only a 100-byte message's data and adjunct plus a 12-byte sorted-set member,
the least any layout that finds entries by id and keeps them in order can take.
``lua_floor_server_us_per_cycle`` is the server time of the same cycle done by three
bare Redis functions with the ten commands any such layout needs (``lua_floor.py``),
measured in the accounting pass: the least a cycle made of Redis functions costs on
this machine, against which ``redis_server_us_per_cycle``'s target can be read.  The
same bare cycle is timed with the others (``lua_floor_cycles_per_s_*``, sent over the
backend's own connection path), so ``lua_floor_ratio_vs_lpush_rpop`` and
``lua_floor_ratio_vs_streams`` say whether a target is within reach of three Lua
functions at all, and ``lua_floor_client_cpu_us_per_cycle`` (with
``redis_client_cpu_us_over_lua_floor``) how much of the client's CPU is our layers'.

Get-wait: a getter thread already waiting in ``Queue.get(wait=...)`` (out of
syncpoint), a putter putting one message at a time once the getter sleeps in its
wait; ``wait_p50_ratio_vs_brpop`` is the median put-to-delivery latency against
``LPUSH`` to a thread blocked in ``BRPOP``, and ``wait_round_trips_per_message`` the
getter's round trips per message delivered (counted in a pass of its own before the
timed ones: counting slows the client).  ``lua_floor_wait_p50_ms`` is the same latency
of the bare Lua wait (``lua_floor.waiter``: a put function that queues an event for the
getter, a getter sending ``XREAD BLOCK`` and a bare take function in one write), the
least a waiting get made of Redis functions can reach; ``lua_floor_wait_p50_ratio_vs_brpop``
says whether the target is within its reach, ``wait_p50_ratio_vs_lua_floor`` how far
sharedq is from it.  The three are timed in turns of ``WAIT_TURN`` messages each, the
same harness for all (``_deliveries``), so that a busy moment hits all three alike.

Then aggregate cycles per second with 1, 2 and 4 managers in separate processes
(``--processes``), all on one shared queue, each process with its own facility and
connection, started together and run for the same time.  Everything shares the
machine's cores with the server.

Queue depth events (``bench/mq_events.py``): ``events_ratio_vs_off``, the cycle on a
queue with every depth event enabled and its depth just under the High limit against
events disabled (target >= 0.9), and ``event_cost_ms_3_managers``, one High event with
three managers until the three messages are on the event queue, with its round trips.

Request/reply (``reply``): the server side of the canonical MQ pattern, a request
queue pre-filled (untimed) and, per cycle, a get of a request in a unit of work, a put
of a 100-byte reply to a reply queue in the same unit, and the unit's commit (one
``move_and_delete_entries`` request when the mixed commit is in one request).  Against
Redis Streams in the same run, turn about: ``XREADGROUP COUNT 1`` on a pre-filled
request stream, then ``XADD`` of the reply and ``XACK`` of the request in one pipeline
(two round trips).  ``reply_ratio_vs_streams``; round trips, server calls and server
time per cycle of both, counted in a pass of their own as for the cycle.

``--parts`` runs only some figures (memory, cycle, accounting, batch, bytes, wait,
reply, events, aggregate), e.g. to compare two source trees in turns.

Rounds of sharedq and of the baselines alternate, and each figure is the best round,
so that a busy moment on a shared machine does not decide a ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import statistics
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import lua_floor, mq_events
from bench.harness import (
    Report,
    RoundTrips,
    best_rates_in_turns,
    parse_args,
    rate,
    redis_url,
    server_stats,
)
from sharedq.cf import CouplingFacility, open_facility
from sharedq.cf.redis import RedisFacility
from sharedq.mq import QueueExists, QueueManager, structure_params
from sharedq.testing.waits import asleep_in_wait_events

SIZES = {"100b": 100, "4k": 4096}
#: Cycles in one timed round on memory, for sharedq and persist-queue alike.
ROUND = 10_000
#: The same with ``--quick``: persist-queue is faster in shorter rounds (fewer acked
#: rows piled up), so a quick run's memory ratios are the lower ones.
QUICK_ROUND = 5_000
#: Cycles in one timed round on Redis (quick, full), and rounds.
REDIS_ROUND = (2_000, 10_000)
REDIS_ROUNDS = (2, 6)
#: Messages of the batched figure, the size of its units, and its rounds (quick, full).
BATCH_MESSAGES = 10_000
BATCH_UNIT = 100
BATCH_ROUNDS = (1, 4)
#: Cycles of the accounting pass; messages left queued to measure memory.
ACCOUNTED_CYCLES = 1_000
BYTES_MESSAGES = 10_000
#: Messages delivered to a waiting getter (quick, full), in turns of this many for each
#: of sharedq, the bare Lua wait and BRPOP; messages of the pass counting round trips.
WAIT_MESSAGES = (300, 1_500)
WAIT_TURN = 100
WAIT_COUNTED = 100
#: Seconds the manager processes run together (quick, full).
AGGREGATE_SECONDS = (1.0, 5.0)
ADMIN = "BENCHADM"
QUEUE = "BENCH.Q"
#: The figures ``--parts`` can choose among (all by default).
PARTS = (
    "memory", "cycle", "accounting", "batch", "bytes", "wait", "reply", "events", "aggregate",
)  # fmt: skip
#: The request/reply figure: its structure and queues, and cycles per round (quick, full).
REPLY_ADMIN = "BENCHRPL"
REQUESTS, REPLIES = "BENCH.REQUEST", "BENCH.REPLY"
REPLY_ROUND = (1_000, 10_000)
#: Commands a client sends that run others inside them (their time includes those).
SCRIPTS = ("fcall", "fcall_ro", "eval", "evalsha", "eval_ro", "evalsha_ro")
DURABILITY = (
    "none on either side: sharedq memory backend (structures in process memory) vs "
    "persist-queue SQLiteAckQueue(':memory:', auto_commit=True) (in-memory SQLite)"
)
BASELINE_CLIENT = (
    "the backend's own redis-py client: same URL and settings, hiredis parser, RESP2, "
    "one connection"
)
PATH = "Queue.put(persistent=True) out of syncpoint -> get in a unit of work -> commit"


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--redis", metavar="URL", help="measure on this Redis server (default: a private one)"
    )
    parser.add_argument(
        "--processes", default="1,2,4", help="manager processes for the aggregate (Redis)"
    )
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help=f"only these figures, comma-separated, of: {','.join(PARTS)}",
    )


def prepare_group(facility: CouplingFacility, body_bytes: int, messages: int) -> None:
    """The administrative structure and the queue, if not there already."""
    if not facility.exists(ADMIN):
        facility.create(
            structure_params(
                ADMIN, queues=2, managers=8, messages=messages, message_bytes=body_bytes
            )
        )


def cycler(qm: QueueManager, body: bytes) -> Callable[[int], None]:
    """A function doing ``n`` cycles of the user's path: a persistent put (out of
    syncpoint), a get in a unit of work, the unit's commit."""
    return mq_events.cycler(qm, QUEUE, body)


def start_manager(
    facility: CouplingFacility, body_bytes: int, qm_id: int = 1, messages: int = 20_000
) -> QueueManager:
    prepare_group(facility, body_bytes, messages)
    qm = QueueManager(facility, f"BENCH{qm_id}", qm_id, admin=ADMIN)
    with contextlib.suppress(QueueExists):  # another process may define it first
        qm.define_queue(QUEUE, max_depth=1_000_000)
    return qm


def sharedq_runner(url: str, body: bytes) -> tuple[Callable[[int], None], Callable[[], None]]:
    facility = open_facility(url)
    qm = start_manager(facility, len(body))

    def close() -> None:
        qm.close()
        facility.close()

    return cycler(qm, body), close


def persistqueue_runner(body: bytes, *, clear_every: int | None = None) -> Callable[[int], None]:
    """``n`` put -> get -> ack cycles on a fresh in-memory ``SQLiteAckQueue``."""
    from persistqueue import SQLiteAckQueue

    def cycles(n: int) -> None:
        queue = SQLiteAckQueue(":memory:", auto_commit=True)
        put, get, ack = queue.put, queue.get, queue.ack
        for i in range(1, n + 1):
            put(body)
            ack(get())
            if clear_every is not None and i % clear_every == 0:
                queue.clear_acked_data()

    return cycles


def duel(
    ours: Callable[[int], None], theirs: Callable[[int], None], n: int, rounds: int
) -> tuple[float, float]:
    """Best rates of alternating rounds: (ours, theirs)."""
    ours(500)
    best_ours = best_theirs = 0.0
    for _ in range(rounds):
        best_ours = max(best_ours, rate(n, lambda: ours(n)))
        best_theirs = max(best_theirs, rate(n, lambda: theirs(n)))
    return best_ours, best_theirs


def memory_figures(report: Report, n: int, rounds: int) -> None:
    ratios, cleared_ratios = [], []
    for label, size in SIZES.items():
        body = b"x" * size
        ours, close = sharedq_runner("memory://", body)
        try:
            mine, baseline = duel(ours, persistqueue_runner(body), n, rounds)
            mine_again, cleared = duel(ours, persistqueue_runner(body, clear_every=1000), n, rounds)
        finally:
            close()
        mine = max(mine, mine_again)
        ratios.append(mine / baseline)
        cleared_ratios.append(mine / cleared)
        report.add(f"memory_cycles_per_s_{label}", mine, "cycles/s", PATH)
        report.add(
            f"persistqueue_cycles_per_s_{label}",
            baseline,
            "cycles/s",
            "SQLiteAckQueue put -> get -> ack, in-memory SQLite",
        )
        report.add(
            f"persistqueue_cleared_cycles_per_s_{label}",
            cleared,
            "cycles/s",
            "the same, clear_acked_data() every 1,000 acks",
        )
        report.add(f"memory_ratio_vs_persistqueue_{label}", mine / baseline, "x")
        report.add(f"memory_ratio_vs_persistqueue_cleared_{label}", mine / cleared, "x")
    report.add("memory_ratio_vs_persistqueue", min(ratios), "x", "target >= 3 (smaller of both)")
    report.add(
        "memory_ratio_vs_persistqueue_cleared",
        min(cleared_ratios),
        "x",
        "against SQLiteAckQueue with its acked rows cleared",
    )
    report.add("memory_durability", DURABILITY)
    report.add("cycles_per_round", n)


# -- Redis ---------------------------------------------------------------------------------


def _fcall_totals(facility: RedisFacility) -> tuple[int, int]:
    """The server's function calls so far and the microseconds they took."""
    stats = server_stats(facility.client.redis)
    calls, usec = stats.get("fcall", (0, 0))
    return calls, usec


def fresh_manager(facility: RedisFacility, body_bytes: int, messages: int = 20_000) -> QueueManager:
    """A manager on a structure created afresh (one an earlier figure left is deleted)."""
    if facility.exists(ADMIN):
        facility.delete(ADMIN, force=True)
    return start_manager(facility, body_bytes, messages=messages)


def redis_figures(
    report: Report, url: str, quick: bool, processes: list[int], parts: set[str]
) -> None:
    n, rounds = REDIS_ROUND[not quick], REDIS_ROUNDS[not quick]
    with RedisFacility.from_url(url) as facility:
        if "cycle" in parts:
            cycle_figures(report, facility, n, rounds)
        if "accounting" in parts:
            accounting_figures(report, facility)
        if "batch" in parts:
            batch_figures(report, facility, BATCH_ROUNDS[not quick])
        if "bytes" in parts:
            memory_use_figures(report, facility)
        if "wait" in parts:
            wait_figures(report, facility, WAIT_MESSAGES[not quick])
        if "reply" in parts:
            reply_figures(report, facility, REPLY_ROUND[not quick], rounds)
        if facility.exists(ADMIN):
            facility.delete(ADMIN, force=True)
        if "events" in parts:
            mq_events.cycle_figures(
                report, facility, 1_000 if quick else n, 3 if quick else 6, "redis"
            )
    if "events" in parts:
        mq_events.event_cost_figures(report, url, quick)
    seconds = AGGREGATE_SECONDS[not quick]
    for count in processes if "aggregate" in parts else []:
        plural = "manager" if count == 1 else "managers"
        report.add(
            f"redis_aggregate_cycles_per_s_{count}_{plural}",
            aggregate_rate(url, count, seconds),
            "cycles/s",
            f"{count} {plural} in processes of their own, one shared queue, 100-byte bodies",
        )


def cycle_figures(report: Report, facility: RedisFacility, n: int, rounds: int) -> None:
    """The single cycle against LPUSH+RPOP and Streams, with both body sizes."""
    report.add("redis_cycles_per_round", n)
    report.add("redis_path", PATH)
    ratios = [
        redis_size_figures(report, facility, label, b"x" * size, n, rounds)
        for label, size in SIZES.items()
    ]
    report.add(
        "redis_ratio_vs_lpush_rpop",
        min(api for api, _, _ in ratios),
        "",
        "target >= 0.55 (smaller of both sizes; baseline: redis-py client API)",
    )
    report.add(
        "redis_ratio_vs_lpush_rpop_same_path",
        min(lane for _, lane, _ in ratios),
        "",
        "baseline over the backend's own connection path",
    )
    report.add(
        "redis_ratio_vs_streams",
        min(streams for _, _, streams in ratios),
        "",
        "target >= 1.0 (smaller of both sizes; XADD, XREADGROUP COUNT 1, XACK)",
    )
    for name, target in (("lpush_rpop", 0.55), ("streams", 1.0)):
        report.add(
            f"lua_floor_ratio_vs_{name}",
            min(float(report.figures[f"lua_floor_ratio_vs_{name}_{label}"]) for label in SIZES),
            "",
            f"the bare functions: below {target}, no cycle of three Lua functions reaches it",
        )
    report.add("redis_baseline_client", BASELINE_CLIENT)


def streams_cycler(public: Any, body: bytes, key: str) -> Callable[[int], None]:
    """``n`` cycles of Redis Streams with a consumer group: XADD, XREADGROUP, XACK."""
    public.delete(key)
    public.xgroup_create(key, "g", id="$", mkstream=True)

    def cycles(n: int) -> None:
        xadd, xreadgroup, xack = public.xadd, public.xreadgroup, public.xack
        streams = {key: ">"}
        for _ in range(n):
            xadd(key, {"b": body})
            reply = xreadgroup("g", "c", streams, count=1)
            xack(key, "g", reply[0][1][0][0])

    return cycles


def redis_size_figures(
    report: Report, facility: RedisFacility, label: str, body: bytes, n: int, rounds: int
) -> tuple[float, float, float]:
    """The cycle and the baselines with one body size; returns the three ratios."""
    qm = fresh_manager(facility, len(body))
    ours = cycler(qm, body)
    public, lane = facility.client.redis, facility.client.command
    baseline_key = "sharedq:bench:lpush-rpop"
    stream_key = "sharedq:bench:stream"
    streams = streams_cycler(public, body, stream_key)

    def sharedq() -> None:
        ours(n)

    def lpush_rpop() -> None:
        # The redis-py client API, as an application calls it.
        for _ in range(n):
            public.lpush(baseline_key, body)
            public.rpop(baseline_key)

    def lpush_rpop_same_path() -> None:
        # The same commands over the backend's own per-thread connection path.
        for _ in range(n):
            lane("LPUSH", baseline_key, body)
            lane("RPOP", baseline_key)

    def xadd_xreadgroup_xack() -> None:
        streams(n)

    floor = lua_floor.cycler(public, body, lane)

    def bare_functions() -> None:
        floor(n)

    ours(500)
    streams(500)
    floor(500)
    calls, usec = _fcall_totals(facility)
    best = best_rates_in_turns(
        n,
        {
            "ours": sharedq,
            "api": lpush_rpop,
            "lane": lpush_rpop_same_path,
            "streams": xadd_xreadgroup_xack,
            "floor": bare_functions,
        },
        rounds,
    )
    calls_after, usec_after = _fcall_totals(facility)
    qm.close()
    public.delete(stream_key)
    lua_floor.drop(public)
    report.add(f"redis_cycles_per_s_{label}", best["ours"], "cycles/s", PATH)
    report.add(
        f"redis_lpush_rpop_per_s_{label}", best["api"], "pairs/s", "LPUSH + RPOP, redis-py API"
    )
    report.add(
        f"redis_lpush_rpop_same_path_per_s_{label}",
        best["lane"],
        "pairs/s",
        "LPUSH + RPOP, the backend's connection path",
    )
    report.add(
        f"redis_streams_cycles_per_s_{label}",
        best["streams"],
        "cycles/s",
        "XADD -> XREADGROUP COUNT 1 -> XACK, redis-py API",
    )
    report.add(
        f"lua_floor_cycles_per_s_{label}",
        best["floor"],
        "cycles/s",
        "3 bare functions (lua_floor.py), the backend's connection path",
    )
    api, same_path = best["ours"] / best["api"], best["ours"] / best["lane"]
    against_streams = best["ours"] / best["streams"]
    report.add(f"redis_ratio_vs_lpush_rpop_{label}", api)
    report.add(f"redis_ratio_vs_lpush_rpop_same_path_{label}", same_path)
    report.add(f"redis_ratio_vs_streams_{label}", against_streams)
    report.add(f"redis_ratio_vs_lua_floor_{label}", best["ours"] / best["floor"])
    report.add(f"lua_floor_ratio_vs_lpush_rpop_{label}", best["floor"] / best["api"])
    report.add(f"lua_floor_ratio_vs_streams_{label}", best["floor"] / best["streams"])
    report.add(
        f"redis_server_us_per_request_{label}",
        (usec_after - usec) / max(1, calls_after - calls),
        "us",
        "server time of one sharedq function call",
    )
    return api, same_path, against_streams


def accounted(public: Any, work: Callable[[], None], per: int) -> tuple[float, float, float]:
    """Round trips, server calls and server microseconds of ``work`` per ``per``.

    The server's time is that of the commands the client sent (a function's includes
    the commands it runs); its calls are every command it ran, nested ones included.
    """
    public.config_resetstat()
    with RoundTrips() as trips:
        work()
        sent = trips.of()
        names = set(trips.commands)
    stats = server_stats(public)
    stats.pop("config|resetstat", None)
    calls = sum(c for c, _ in stats.values())
    usec = sum(u for name, (_, u) in stats.items() if name.split("|")[0] in names)
    return sent / per, calls / per, usec / per


def client_cpu_us(work: Callable[[int], None], n: int) -> float:
    """Median CPU microseconds of this process per ``work(1)``, over 5 runs of ``n``: a
    machine shared with other work slows the wall clock more than a process's CPU."""
    samples = []
    for _ in range(5):
        started = time.process_time()
        work(n)
        samples.append((time.process_time() - started) / n * 1e6)
    return statistics.median(samples)


def accounting_figures(report: Report, facility: RedisFacility) -> None:
    """Round trips, server calls and server time of one cycle, sharedq and Streams."""
    public: Any = facility.client.redis
    body = b"x" * 100
    qm = fresh_manager(facility, len(body))
    ours = cycler(qm, body)
    ours(200)
    trips, calls, usec = accounted(public, lambda: ours(ACCOUNTED_CYCLES), ACCOUNTED_CYCLES)
    lane = facility.client.command

    def lpush_rpop(n: int) -> None:
        for _ in range(n):
            lane("LPUSH", "sharedq:bench:lpush-rpop", body)
            lane("RPOP", "sharedq:bench:lpush-rpop")

    client_us = client_cpu_us(ours, ACCOUNTED_CYCLES)
    pair_us = client_cpu_us(lpush_rpop, ACCOUNTED_CYCLES)
    qm.close()
    report.add(
        "redis_client_cpu_us_per_cycle",
        client_us,
        "us",
        "this process's CPU (user + system, socket calls included) per cycle, median of 5",
    )
    report.add(
        "lpush_rpop_client_cpu_us_per_pair",
        pair_us,
        "us",
        "the same for LPUSH + RPOP over the backend's connection path",
    )
    report.add(
        "redis_client_cpu_us_over_transport",
        client_us - 1.5 * pair_us,
        "us",
        "the cycle's CPU less three requests' worth of bare transport: our layers' own",
    )
    report.add("redis_round_trips_per_cycle", trips, "", "requests the client sent, per cycle")
    report.add("redis_calls_per_cycle", calls, "", "commands the server ran, nested included")
    report.add(
        "redis_server_us_per_cycle", usec, "us", "target <= 25 (INFO commandstats, 100-byte)"
    )
    streams = streams_cycler(public, body, "sharedq:bench:stream")
    streams(200)
    s_trips, s_calls, s_usec = accounted(
        public, lambda: streams(ACCOUNTED_CYCLES), ACCOUNTED_CYCLES
    )
    public.delete("sharedq:bench:stream")
    report.add("streams_round_trips_per_cycle", s_trips)
    report.add("streams_calls_per_cycle", s_calls)
    report.add("streams_server_us_per_cycle", s_usec, "us", "XADD + XREADGROUP + XACK")
    report.add(
        "redis_server_us_ratio_vs_streams",
        usec / s_usec,
        "",
        "the cycle's server time over Streams' (a loaded machine slows both alike)",
    )
    floor = lua_floor.cycler(public, body, lane)
    floor(200)
    _, f_calls, f_usec = accounted(public, lambda: floor(ACCOUNTED_CYCLES), ACCOUNTED_CYCLES)
    floor_client_us = client_cpu_us(floor, ACCOUNTED_CYCLES)
    lua_floor.drop(public)
    report.add(
        "lua_floor_client_cpu_us_per_cycle",
        floor_client_us,
        "us",
        "this process's CPU per cycle of the bare functions, same connection path",
    )
    report.add(
        "redis_client_cpu_us_over_lua_floor",
        client_us - floor_client_us,
        "us",
        "the cycle's client CPU less the bare functions': our layers and larger replies",
    )
    report.add(
        "lua_floor_server_us_per_cycle",
        f_usec,
        "us",
        f"3 bare functions, {f_calls:.0f} commands with them: any Lua layout's least",
    )
    report.add(
        "redis_server_us_ratio_vs_lua_floor",
        usec / f_usec,
        "",
        "the cycle's server time over that floor's",
    )


def batch_figures(report: Report, facility: RedisFacility, rounds: int) -> None:
    """10,000 messages put in units of 100, then gotten in units of 100, against
    pipelined XADD and XREADGROUP COUNT 100 + XACK."""
    public: Any = facility.client.redis
    body = b"x" * 100
    qm = fresh_manager(facility, len(body), messages=4 * BATCH_MESSAGES)
    queue = qm.open(QUEUE)
    # The batch calls of the queue manager when it has them (put_many, get_many), else
    # what a unit of 100 is without them: 100 puts, 100 gets.
    put_many = getattr(queue, "put_many", None)
    get_many = getattr(queue, "get_many", None)
    bodies = [body] * BATCH_UNIT
    units = BATCH_MESSAGES // BATCH_UNIT
    stream_key = "sharedq:bench:batch"

    def sharedq() -> None:
        for _ in range(units):
            uow = qm.unit_of_work()
            if put_many is not None:
                put_many(bodies, uow=uow, persistent=True)
            else:
                for _ in range(BATCH_UNIT):
                    queue.put(body, uow=uow, persistent=True)
            uow.commit()
        for _ in range(units):
            uow = qm.unit_of_work()
            if get_many is not None:
                got = len(get_many(BATCH_UNIT, uow=uow))
            else:
                for _ in range(BATCH_UNIT):
                    queue.get(uow=uow)
                got = BATCH_UNIT
            assert got == BATCH_UNIT, got
            uow.commit()

    def streams() -> None:
        public.delete(stream_key)
        public.xgroup_create(stream_key, "g", id="$", mkstream=True)
        for _ in range(units):
            pipe = public.pipeline(transaction=False)
            for _ in range(BATCH_UNIT):
                pipe.xadd(stream_key, {"b": body})
            pipe.execute()
        streams_ = {stream_key: ">"}
        for _ in range(units):
            reply = public.xreadgroup("g", "c", streams_, count=BATCH_UNIT)
            ids = [entry[0] for entry in reply[0][1]]
            assert len(ids) == BATCH_UNIT
            public.xack(stream_key, "g", *ids)

    best = best_rates_in_turns(BATCH_MESSAGES, {"ours": sharedq, "streams": streams}, rounds)
    trips, _, usec = accounted(public, sharedq, BATCH_MESSAGES)
    public.delete(stream_key)
    qm.close()
    report.add("batch_put_path", "put_many" if put_many is not None else "put x100")
    report.add("batch_get_path", "get_many" if get_many is not None else "get x100")
    report.add(
        "batch_messages_per_s", best["ours"], "msgs/s", "10,000 put in units of 100, then gotten"
    )
    report.add(
        "batch_streams_messages_per_s",
        best["streams"],
        "msgs/s",
        "pipelined XADD x100; XREADGROUP COUNT 100 + XACK",
    )
    report.add("batch_ratio_vs_streams", best["ours"] / best["streams"], "", "target >= 0.3")
    report.add("batch_round_trips_per_message", trips, "", "put and get in units of 100")
    report.add("batch_server_us_per_message", usec, "us")


def _used_memory(public: Any) -> int:
    return int(public.info("memory")["used_memory"])


def memory_use_figures(report: Report, facility: RedisFacility) -> None:
    """Server memory per queued 100-byte message, and per element of a Redis list."""
    public: Any = facility.client.redis
    body = b"x" * 100
    qm = fresh_manager(facility, len(body), messages=2 * BYTES_MESSAGES)
    queue = qm.open(QUEUE)
    queue.put(body, persistent=True)
    before = _used_memory(public)
    for _ in range(BYTES_MESSAGES):
        queue.put(body, persistent=True)
    ours = (_used_memory(public) - before) / BYTES_MESSAGES
    qm.close()
    key = "sharedq:bench:list"
    public.delete(key)
    public.lpush(key, body)
    before = _used_memory(public)
    for first in range(0, BYTES_MESSAGES, 1000):
        public.lpush(key, *([body] * min(1000, BYTES_MESSAGES - first)))
    plain = (_used_memory(public) - before) / BYTES_MESSAGES
    public.delete(key)
    report.add(
        "redis_bytes_per_message",
        ours,
        "bytes",
        f"target <= 300: used_memory per 100-byte message, {BYTES_MESSAGES:,} queued",
    )
    report.add("redis_list_bytes_per_message", plain, "bytes", "the same bodies in a Redis list")
    report.add("redis_bytes_ratio_vs_list", ours / plain)
    floor_figures(report, public)


def _bytes_per_member(public: Any, key: str, add: Callable[[Any, str, int], None]) -> float:
    """``used_memory`` growth per member of one key holding ``BYTES_MESSAGES`` of them."""
    public.delete(key)
    before = _used_memory(public)
    for first in range(0, BYTES_MESSAGES, 1000):
        pipe = public.pipeline(transaction=False)
        for i in range(first, min(first + 1000, BYTES_MESSAGES)):
            add(pipe, key, i)
        pipe.execute()
    grown = (_used_memory(public) - before) / BYTES_MESSAGES
    public.delete(key)
    return grown


def floor_figures(report: Report, public: Any) -> None:
    """What the server itself spends on the two members every entry has (docs/redis.md,
    "a measured floor"): a hash field found by the 12-byte id holding only a 100-byte
    message's data and adjunct (129 bytes), and the shortest sorted-set member (12
    bytes).  Their sum bounds from below any layout keeping each entry in both."""
    value = b"x" * 129
    hashed = _bytes_per_member(
        public, "sharedq:bench:floor-hash", lambda p, k, i: p.hset(k, i.to_bytes(12, "big"), value)
    )
    ordered = _bytes_per_member(
        public, "sharedq:bench:floor-zset", lambda p, k, i: p.zadd(k, {i.to_bytes(12, "big"): 0})
    )
    report.add("redis_hash_member_bytes", hashed, "bytes", "12-byte field, 129-byte value")
    report.add("redis_zset_member_bytes", ordered, "bytes", "12-byte member, score 0")
    report.add(
        "redis_bytes_floor_per_message",
        hashed + ordered,
        "bytes",
        "the two together: the least an entry found by id and kept in order can take",
    )


def _blocked_in_read(thread: threading.Thread) -> bool:
    """Whether ``thread`` sits in a socket read (a BRPOP waiting for its reply)."""
    frame = sys._current_frames().get(thread.ident or 0)
    return frame is not None and "read" in frame.f_code.co_name


def _deliveries(
    put: Callable[[], None],
    getter: Callable[[list[float], int], None],
    asleep: Callable[[threading.Thread], bool],
    count: int,
) -> tuple[list[float], threading.Thread]:
    """Latencies (seconds) of ``count`` messages put one at a time to a waiting getter.

    Each put waits until the getter sleeps in its wait again, so that every message
    finds a getter already waiting.  ``getter(arrivals, count)`` takes ``count``
    messages, appending ``perf_counter()`` at each.
    """
    arrivals: list[float] = []
    thread = threading.Thread(target=getter, args=(arrivals, count), name="getter")
    thread.start()
    sent: list[float] = []
    for i in range(count):
        deadline = time.monotonic() + 10
        while len(arrivals) < i or not asleep(thread):
            if time.monotonic() > deadline:
                raise RuntimeError("the getter does not wait")
            time.sleep(0.0002)
        sent.append(time.perf_counter())
        put()
    thread.join(timeout=30)
    return [a - s for s, a in zip(sent, arrivals, strict=True)], thread


def wait_figures(report: Report, facility: RedisFacility, count: int) -> None:
    """A getter already waiting, a putter putting one message at a time: sharedq, the
    bare Lua wait (``lua_floor.waiter``) and ``BRPOP``, in turns of ``WAIT_TURN``."""
    public: Any = facility.client.redis
    body = b"x" * 100
    qm = fresh_manager(facility, len(body))
    queue = qm.open(QUEUE)
    lane = facility.client.command
    key = "sharedq:bench:brpop"
    public.delete(key)

    def sharedq_getter(arrivals: list[float], n: int) -> None:
        for _ in range(n):
            queue.get(wait=30)
            arrivals.append(time.perf_counter())

    def sharedq_put() -> None:
        queue.put(body, persistent=True)

    def brpop_getter(arrivals: list[float], n: int) -> None:
        for _ in range(n):
            public.brpop([key], timeout=30)
            arrivals.append(time.perf_counter())

    def lpush() -> None:
        lane("LPUSH", key, body)

    floor_put, floor_getter = lua_floor.waiter(
        public, body, lane, lambda: facility.client.nodes.connection(lua_floor.KEYS[0])
    )
    # Round trips counted in a pass of their own: counting slows the client.
    counted = min(count, WAIT_COUNTED)
    with RoundTrips() as trips:
        _, thread = _deliveries(sharedq_put, sharedq_getter, asleep_in_wait_events, counted)
        getter_trips = trips.of(thread)
    runs: dict[str, list[float]] = {"ours": [], "floor": [], "brpop": []}
    for at in range(0, count, WAIT_TURN):
        n = min(WAIT_TURN, count - at)
        runs["ours"] += _deliveries(sharedq_put, sharedq_getter, asleep_in_wait_events, n)[0]
        runs["floor"] += _deliveries(floor_put, floor_getter, _blocked_in_read, n)[0]
        runs["brpop"] += _deliveries(lpush, brpop_getter, _blocked_in_read, n)[0]
    qm.close()
    lua_floor.drop(public)
    public.delete(key)
    ours_p50, floor_p50, theirs_p50 = (statistics.median(runs[k]) for k in runs)
    report.add(
        "wait_round_trips_per_message",
        getter_trips / counted,
        "",
        "target <= 3: the waiting getter's requests per message delivered",
    )
    report.add("wait_p50_ms", ours_p50 * 1000, "ms", "put -> a waiting get returns it")
    report.add("wait_brpop_p50_ms", theirs_p50 * 1000, "ms", "LPUSH -> a waiting BRPOP returns")
    report.add("wait_p50_ratio_vs_brpop", ours_p50 / theirs_p50, "", "target <= 1.3")
    report.add(
        "lua_floor_wait_p50_ms",
        floor_p50 * 1000,
        "ms",
        "bare put with notify -> XREAD BLOCK + bare take in one write (lua_floor.py)",
    )
    report.add(
        "lua_floor_wait_p50_ratio_vs_brpop",
        floor_p50 / theirs_p50,
        "",
        "the least any Lua layout's waiting get can reach against BRPOP",
    )
    report.add("wait_p50_ratio_vs_lua_floor", ours_p50 / floor_p50)
    report.add("wait_messages", count)


def _reply_manager(facility: RedisFacility, messages: int) -> QueueManager:
    """A manager on a fresh structure of its own holding the request and reply queues."""
    if facility.exists(REPLY_ADMIN):
        facility.delete(REPLY_ADMIN, force=True)
    facility.create(
        structure_params(REPLY_ADMIN, queues=4, managers=2, messages=messages, message_bytes=100)
    )
    qm = QueueManager(facility, "BENCHRPL1", 1, admin=REPLY_ADMIN)
    for name in (REQUESTS, REPLIES):
        qm.define_queue(name, max_depth=1_000_000)
    return qm


def reply_figures(report: Report, facility: RedisFacility, n: int, rounds: int) -> None:
    """Request/reply cycles (get in a unit, put the reply, commit) against Streams
    (XREADGROUP COUNT 1, then XADD + XACK pipelined), in turns; then their accounting."""
    public: Any = facility.client.redis
    body = b"x" * 100
    qm = _reply_manager(facility, 2 * n + 1_000)
    requests, replies = qm.open(REQUESTS), qm.open(REPLIES)
    request_key, reply_key = "sharedq:bench:requests", "sharedq:bench:replies"

    def fill(count: int) -> None:
        for first in range(0, count, BATCH_UNIT):
            requests.put_many([body] * min(BATCH_UNIT, count - first), persistent=True)

    def drain_replies() -> None:
        while replies.get_many(BATCH_UNIT):
            pass

    def ours(count: int) -> None:
        get, put, unit = requests.get, replies.put, qm.unit_of_work
        for _ in range(count):
            uow = unit()
            get(uow=uow)
            put(body, persistent=True, uow=uow)
            uow.commit()

    def fill_stream(count: int) -> None:
        public.delete(request_key, reply_key)
        public.xgroup_create(request_key, "g", id="$", mkstream=True)
        for first in range(0, count, BATCH_UNIT):
            pipe = public.pipeline(transaction=False)
            for _ in range(min(BATCH_UNIT, count - first)):
                pipe.xadd(request_key, {"b": body})
            pipe.execute()

    def streams(count: int) -> None:
        xreadgroup, pipeline = public.xreadgroup, public.pipeline
        wanted = {request_key: ">"}
        for _ in range(count):
            reply = xreadgroup("g", "c", wanted, count=1)
            pipe = pipeline(transaction=False)
            pipe.xadd(reply_key, {"b": body})
            pipe.xack(request_key, "g", reply[0][1][0][0])
            pipe.execute()

    fill(500)
    ours(500)
    drain_replies()
    best_ours = best_streams = 0.0
    for _ in range(rounds):
        fill(n)
        best_ours = max(best_ours, rate(n, lambda: ours(n)))
        drain_replies()
        fill_stream(n)
        best_streams = max(best_streams, rate(n, lambda: streams(n)))
    fill(ACCOUNTED_CYCLES)
    trips, calls, usec = accounted(public, lambda: ours(ACCOUNTED_CYCLES), ACCOUNTED_CYCLES)
    drain_replies()
    fill_stream(ACCOUNTED_CYCLES)
    s_trips, s_calls, s_usec = accounted(
        public, lambda: streams(ACCOUNTED_CYCLES), ACCOUNTED_CYCLES
    )
    public.delete(request_key, reply_key)
    qm.close()
    facility.delete(REPLY_ADMIN, force=True)
    report.add(
        "reply_cycles_per_s",
        best_ours,
        "cycles/s",
        "get a request in a unit, put a 100-byte reply in it, commit",
    )
    report.add(
        "reply_streams_cycles_per_s",
        best_streams,
        "cycles/s",
        "XREADGROUP COUNT 1; XADD reply + XACK pipelined",
    )
    report.add("reply_ratio_vs_streams", best_ours / best_streams)
    report.add("reply_round_trips_per_cycle", trips, "", "requests the client sent, per cycle")
    report.add("reply_calls_per_cycle", calls, "", "commands the server ran, nested included")
    report.add("reply_server_us_per_cycle", usec, "us", "INFO commandstats")
    report.add("reply_streams_round_trips_per_cycle", s_trips)
    report.add("reply_streams_calls_per_cycle", s_calls)
    report.add("reply_streams_server_us_per_cycle", s_usec, "us")
    report.add("reply_cycles_per_round", n)


def _manager_process(
    url: str, qm_id: int, seconds: float, ready: Queue[int], go: Queue[float], counts: Queue[int]
) -> None:
    """One manager in a process of its own: cycles from the common start to the common
    end, then its count."""
    with open_facility(url) as facility:
        qm = start_manager(facility, 100, qm_id)
        cycles = cycler(qm, b"x" * 100)
        cycles(50)
        ready.put(qm_id)
        start = go.get(timeout=300)
        while time.time() < start:
            time.sleep(0.001)
        done = 0
        while time.time() < start + seconds:
            cycles(50)
            done += 50
        counts.put(done)
        qm.close()


def aggregate_rate(url: str, processes: int, seconds: float) -> float:
    """Cycles per second of ``processes`` managers, each in its own process, together.

    They start when every one of them has started and connected (on a busy machine
    that may take seconds), so that all run for the same time."""
    with open_facility(url) as facility:  # the group, before the managers race for it
        start_manager(facility, 100, 9).close()
    context = multiprocessing.get_context("spawn")
    ready: Queue[int] = context.Queue()
    go: Queue[float] = context.Queue()
    counts: Queue[int] = context.Queue()
    workers = [
        context.Process(target=_manager_process, args=(url, 10 + i, seconds, ready, go, counts))
        for i in range(processes)
    ]
    for worker in workers:
        worker.start()
    for _ in workers:
        ready.get(timeout=300)
    start = time.time() + 0.1
    for _ in workers:
        go.put(start)
    total = sum(counts.get(timeout=300) for _ in workers)
    for worker in workers:
        worker.join(timeout=60)
    return total / seconds


def main() -> None:
    args = parse_args(__doc__.splitlines()[0] if __doc__ else "mq cycle", _options)
    report = Report("sharedq.mq message cycle", args.quick)
    # Quick: one round of persist-queue (its 4 KiB rounds take seconds each) and half
    # the paired turns of the events figures; every key is still reported.
    parts = {p for p in args.parts.split(",") if p}
    if parts - set(PARTS):
        raise SystemExit(f"unknown parts: {', '.join(sorted(parts - set(PARTS)))}")
    if "memory" in parts:
        memory_figures(report, QUICK_ROUND if args.quick else ROUND, 1 if args.quick else 5)
    if "events" in parts:
        mq_events.memory_figures(report, 2_000 if args.quick else ROUND, 3 if args.quick else 6)
    counts = [int(c) for c in args.processes.split(",") if c]
    with redis_url(args.redis) as url:
        redis_figures(report, url, args.quick, counts, parts)
    report.emit(args.json)


if __name__ == "__main__":
    main()
