"""Common Queue Server cycles per second, against raw Redis measured in the same run.

The cycle is what a client of a CQS does per message: ``put`` (CQSPUT) of a 1 KiB
body, ``read`` (CQSREAD: to the lock queue) and ``delete`` (CQSDEL: through the delete
queue).  It is measured on the memory backend and on Redis (a private
``redis-server``, or ``--redis URL``), with one CQS and with three (threads of this
process, each its own CQS and connection, all on one queue), without a log and with a
recovery log (``RecoverySettings`` in a temporary directory, records synced at each
request's end: a quarter of the cycles per round, they wait for the disk; once with
only puts waiting for the sync, ``Sync.PUTS``; once synced every 10 ms instead; and
once under ``Durability.duplex``, the seed's logging structure: each request waits
for its records' push to a second private Redis, the segment syncs every 100 ms;
and once more with ``replicas=1``, each push also waiting, ``WAIT``, until a replica
of that Redis holds it: a third private Redis, a replica of the second),
and with a multi-part variant: a 4 KiB body in eight 512-byte parts (seven staged,
one on the ready queue).

Baseline: ``LPUSH`` then ``RPOP`` of the same body through redis-py, on the facility's
own client (same URL, one connection), in turns with the cycle.
``redis_ratio_vs_lpush_rpop`` is the one-CQS unlogged Redis rate over it;
``logged_ratio_vs_unlogged`` the logged rate over the unlogged, on Redis.
``redis_round_trips_per_cycle`` counts the requests the client sends per cycle
(``harness.RoundTrips``), in a pass of its own.

Notes.  The strict logged cycle waits for three syncs (put, read, delete: each
request's records are durable before it returns; docs/cqs.md, "Why a read still
waits", says why the read's cannot ride the delete's).  What one sync costs is the
disk's: segments are preallocated (``LogConfig.preallocate``), so each is a data-only
``fdatasync``; ``logged_appended_ratio_vs_unlogged`` is the same cycle with segments
appended to, and ``logged_preallocated_vs_appended`` the two against each other in
paired turns.  Under ``GroupCommit.HOST`` (the default) a commit runs a ``syncfs`` of
the whole file system when another committer of the host (any process of this user)
is active: on a machine where other jobs commit to the same disk, the logged figures
measure their write-back too.  Measure the logged figures on an otherwise idle disk.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import Report, RoundTrips, best_rates_in_turns, parse_args, rate, redis_url
from sharedq.cf import CouplingFacility, open_facility
from sharedq.cf.redis import RedisFacility
from sharedq.cqs import CQS, Sync, make_name, structure_params
from sharedq.log import Durability, LogConfig
from sharedq.recovery import RecoverySettings

MSGQ = "BENCHMSGQ"
QUEUE = make_name(1, "BENCHTR")
BODY = b"x" * 1024
PARTS = [b"y" * 512] * 8
#: Cycles per timed round (quick, full) and rounds.
CYCLES = (200, 2_000)
ROUNDS = (2, 4)
#: How often a duplex writer syncs its segment (ms): the logging structure holds at
#: most this much of its records.
DUPLEX_SYNC_MS = 100


def _options(parser: Any) -> None:
    parser.add_argument("--redis", metavar="URL", help="measure on this Redis server")
    parser.add_argument(
        "--logging-redis",
        metavar="URL",
        help="the logging structure's Redis for the duplex figures (default: a private one)",
    )


def cycler(cqs: CQS, body: bytes | list[bytes]) -> Callable[[int], None]:
    def cycles(n: int) -> None:
        put, read, delete = cqs.put, cqs.read, cqs.delete
        for _ in range(n):
            put(QUEUE, body)
            message = read(QUEUE)
            assert message is not None and message.token is not None
            delete(message.token)

    return cycles


def fresh(facility: CouplingFacility, structure: str = MSGQ) -> None:
    if facility.exists(structure):
        facility.delete(structure, force=True)
    facility.create(structure_params(structure, messages=2_000, message_bytes=4096))


def group(
    facility: CouplingFacility,
    count: int,
    root: Path | None,
    durability: Durability | None = None,
    sync: Sync = Sync.EVERY_REQUEST,
    structure: str = MSGQ,
    preallocate: bool = True,
    logging_structure: str | None = None,
) -> tuple[list[CQS], Callable[[], None]]:
    fresh(facility, structure)
    settings = (
        None
        if root is None
        else RecoverySettings(
            root,
            strchkpt=None,
            durability=durability or Durability.every_commit(),
            log_config=LogConfig(preallocate=preallocate),
            logging_structure=logging_structure,
        )
    )
    cqss = [
        CQS(
            facility,
            f"BENCHCQS{i}",
            system=f"IMS{i}",
            msgq=structure,
            recovery=settings,
            sync=sync,
        ).connect()
        for i in range(count)
    ]

    def close() -> None:
        for cqs in cqss:
            cqs.disconnect()

    return cqss, close


def together(cqss: list[CQS], body: bytes | list[bytes], n: int) -> Callable[[], None]:
    """``n`` cycles of each CQS, all at once in threads of their own."""
    loops = [cycler(c, body) for c in cqss]
    if len(loops) == 1:
        return lambda: loops[0](n)

    def run() -> None:
        threads = [threading.Thread(target=loop, args=(n,)) for loop in loops]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    return run


def measure(
    facility: CouplingFacility,
    backend: str,
    report: Report,
    n: int,
    rounds: int,
    baseline: dict[str, Callable[[], object]],
) -> dict[str, float]:
    rates: dict[str, float] = {}
    for count in (1, 3):
        for logged in (False, True):
            for label, body in (("1k", BODY), ("4k_parts", PARTS)):
                with tempfile.TemporaryDirectory() as tmp:
                    cqss, close = group(facility, count, Path(tmp) if logged else None)
                    try:
                        cycler(cqss[0], body)(20)  # warm
                        # Logged cycles wait for the disk: fewer of them make a round.
                        m = max(50, n // 4) if logged else n
                        fns: dict[str, Callable[[], object]] = {
                            "cqs": together(cqss, body, m),
                            **({} if logged else baseline),
                        }
                        best = best_rates_in_turns(m * count, fns, rounds)
                    finally:
                        close()
                name = f"{backend}_{label}_{count}cqs_{'logged' if logged else 'unlogged'}"
                rates[name] = best["cqs"]
                report.add(name, best["cqs"], "cycles/s")
                if "lpush_rpop" in best:
                    rates.setdefault("lpush_rpop", 0.0)
                    rates["lpush_rpop"] = max(rates["lpush_rpop"], best["lpush_rpop"] / count)
    return rates


def lpush_rpop(public: Any, n: int) -> Callable[[int], None]:
    """``n`` LPUSH + RPOP of the 1 KiB body (or as many as the call says)."""

    def run(count: int = n) -> None:
        lpush, rpop = public.lpush, public.rpop
        for _ in range(count):
            lpush("sharedq:bench:cqs", BODY)
            rpop("sharedq:bench:cqs")

    return run


def interval_logged(facility: RedisFacility, n: int, rounds: int) -> float:
    """One CQS, 1 KiB, logged with records synced every 10 ms rather than per request."""
    with tempfile.TemporaryDirectory() as tmp:
        cqss, close = group(facility, 1, Path(tmp), Durability.interval(10))
        try:
            return best_rates_in_turns(n, {"cqs": together(cqss, BODY, n)}, rounds)["cqs"]
        finally:
            close()


def puts_synced(facility: RedisFacility, n: int, rounds: int) -> float:
    """One CQS, 1 KiB, logged with ``Sync.PUTS``: a put waits for the sync, a read and a
    delete ride the next one (one sync per cycle, not three)."""
    with tempfile.TemporaryDirectory() as tmp:
        cqss, close = group(facility, 1, Path(tmp), sync=Sync.PUTS)
        try:
            m = max(50, n // 2)
            return best_rates_in_turns(m, {"cqs": together(cqss, BODY, m)}, rounds)["cqs"]
        finally:
            close()


def paired_ratio(ours: Callable[[int], None], theirs: Callable[[int], None], quick: bool) -> float:
    """The median, over many short turns in both orders, of ``ours``'s rate over
    ``theirs``'s measured right after (or before) it: each pair of turns sees the same
    load of a busy machine (the development machine is shared), as ``mq_events`` does."""
    chunk, turns = (100, 24) if quick else (250, 60)
    pairs: list[float] = []
    for turn in range(turns):
        first, second = (ours, theirs) if turn % 2 == 0 else (theirs, ours)
        one = rate(chunk, partial(first, chunk))
        two = rate(chunk, partial(second, chunk))
        pairs.append(one / two if turn % 2 == 0 else two / one)
    return statistics.median(pairs)


@contextmanager
def logging_redis(given: str | None) -> Iterator[tuple[str, int]]:
    """The logging structure's Redis and how many replicas it has: the one given (its
    replicas as it reports them), or a private one with a private replica, linked and
    acknowledging before the first figure."""
    if given:
        import redis

        with redis.Redis.from_url(given) as client:
            yield given, int(client.info("replication").get("connected_slaves", 0))
        return
    from sharedq.testing.redis_server import RedisServer

    no_delay = ["--repl-diskless-sync-delay", "0"]
    with RedisServer(no_delay) as primary:
        args = [*no_delay, "--replicaof", "127.0.0.1", str(primary.port)]
        with RedisServer(args):
            import redis

            with redis.Redis.from_url(primary.url) as client:
                deadline = time.monotonic() + 30
                while client.set("sharedq:bench:ping", 1) and client.wait(1, 1000) < 1:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the logging structure's replica never linked")
                client.delete("sharedq:bench:ping")
            yield primary.url, 1


def paired_figures(
    facility: RedisFacility, public: Any, quick: bool, logging_url: str, replicas: int = 0
) -> dict[str, float]:
    """The two target ratios as medians of paired turns (see :func:`paired_ratio`), and
    the logged cycle under each durability (``logging_url``: the logging structure's
    Redis, another server than the queues'; with ``replicas``, also duplex pushes
    waiting for them).

    The unlogged ratio is measured first, with no logged CQS connected yet: their
    background threads (checkpoint watchers) would take their share of two cores."""
    plain, close_plain = group(facility, 1, None)
    try:
        unlogged = cycler(plain[0], BODY)
        unlogged(50)
        found = {"redis": paired_ratio(unlogged, lpush_rpop(public, 0), quick)}
        with tempfile.TemporaryDirectory() as tmp:
            strict, close_strict = group(facility, 1, Path(tmp) / "s", structure="BENCHLOG1")
            puts, close_puts = group(
                facility, 1, Path(tmp) / "p", sync=Sync.PUTS, structure="BENCHLOG2"
            )
            appended, close_appended = group(
                facility, 1, Path(tmp) / "a", structure="BENCHLOG3", preallocate=False
            )
            duplex, close_duplex = group(
                facility,
                1,
                Path(tmp) / "d",
                Durability.duplex(DUPLEX_SYNC_MS),
                structure="BENCHLOG4",
                logging_structure=logging_url,
            )
            duplex_puts, close_duplex_puts = group(
                facility,
                1,
                Path(tmp) / "dp",
                Durability.duplex(DUPLEX_SYNC_MS),
                sync=Sync.PUTS,
                structure="BENCHLOG5",
                logging_structure=logging_url,
            )
            # With replicas: duplex pushes that wait for one (else the plain duplex again).
            replicated, close_replicated = (
                group(
                    facility,
                    1,
                    Path(tmp) / "dr",
                    Durability.duplex(DUPLEX_SYNC_MS, replicas=replicas),
                    structure="BENCHLOG6",
                    logging_structure=logging_url,
                )
                if replicas
                else (duplex, lambda: None)
            )
            try:
                for logger in (strict, puts, appended, duplex, duplex_puts, replicated):
                    cycler(logger[0], BODY)(50)
                found["strict"] = paired_ratio(cycler(strict[0], BODY), unlogged, quick)
                found["puts"] = paired_ratio(cycler(puts[0], BODY), unlogged, quick)
                found["appended"] = paired_ratio(cycler(appended[0], BODY), unlogged, quick)
                found["duplex"] = paired_ratio(cycler(duplex[0], BODY), unlogged, quick)
                found["duplex_puts"] = paired_ratio(cycler(duplex_puts[0], BODY), unlogged, quick)
                if replicas:
                    found["duplex_replicas"] = paired_ratio(
                        cycler(replicated[0], BODY), unlogged, quick
                    )
                    found["duplex_replicas_vs_duplex"] = paired_ratio(
                        cycler(replicated[0], BODY), cycler(duplex[0], BODY), quick
                    )
                found["duplex_vs_strict"] = paired_ratio(
                    cycler(duplex[0], BODY), cycler(strict[0], BODY), quick
                )
                found["preallocated_vs_appended"] = paired_ratio(
                    cycler(strict[0], BODY), cycler(appended[0], BODY), quick
                )
            finally:
                close_strict()
                close_puts()
                close_appended()
                close_duplex()
                close_duplex_puts()
                close_replicated()
                for name in ("BENCHLOG1", "BENCHLOG2", "BENCHLOG3", "BENCHLOG4", "BENCHLOG5"):
                    facility.delete(name, force=True)
        return found
    finally:
        close_plain()


def round_trips(facility: RedisFacility, body: bytes | list[bytes]) -> float:
    cqss, close = group(facility, 1, None)
    try:
        loop = cycler(cqss[0], body)
        loop(20)
        with RoundTrips() as trips:
            loop(200)
            return trips.of() / 200
    finally:
        close()


def main() -> None:
    args = parse_args(__doc__.splitlines()[0] if __doc__ else "cqs cycle", _options)
    report = Report("sharedq.cqs message cycle: put -> read -> delete", args.quick)
    n, rounds = CYCLES[not args.quick], ROUNDS[not args.quick]
    report.add("cycles_per_round", n)
    with open_facility("memory://") as memory:
        measure(memory, "memory", report, n, rounds, {})
    with redis_url(args.redis) as url, RedisFacility.from_url(url) as facility:
        public: Any = facility.client.redis
        raw = lpush_rpop(public, n)
        rates = measure(facility, "redis", report, n, rounds, {"lpush_rpop": partial(raw, n)})
        report.add("lpush_rpop_per_s", rates["lpush_rpop"], "cycles/s", "raw redis-py, 1 KiB")
        with logging_redis(args.logging_redis) as (logging_url, replicas):
            paired = paired_figures(facility, public, args.quick, logging_url, replicas)
        report.add(
            "redis_ratio_vs_lpush_rpop",
            paired["redis"],
            "",
            "target >= 0.45 (1 CQS, 1 KiB, no log; median of paired turns)",
        )
        report.add(
            "redis_ratio_vs_lpush_rpop_best",
            rates["redis_1k_1cqs_unlogged"] / rates["lpush_rpop"],
            "",
            "best rounds of each",
        )
        report.add(
            "logged_ratio_vs_unlogged",
            paired["strict"],
            "",
            "target >= 0.6 (Redis, 1 CQS, 1 KiB; synced per request; median of paired turns)",
        )
        report.add(
            "logged_duplex_ratio_vs_unlogged",
            paired["duplex"],
            "",
            f"Durability.duplex({DUPLEX_SYNC_MS}): the seed's logging structure on a second "
            "Redis, every request waits for its push (median of paired turns)",
        )
        report.add(
            "logged_duplex_puts_ratio_vs_unlogged",
            paired["duplex_puts"],
            "",
            "duplex with Sync.PUTS: only a put waits for its push (median of paired turns)",
        )
        if "duplex_replicas" in paired:
            report.add(
                "logged_duplex_replicas_ratio_vs_unlogged",
                paired["duplex_replicas"],
                "",
                "duplex, each push also waiting until a replica of the logging structure "
                "holds it (replicas=1; median of paired turns)",
            )
            report.add(
                "logged_duplex_replicas_vs_duplex",
                paired["duplex_replicas_vs_duplex"],
                "",
                "the cost of the replica's acknowledgement (paired)",
            )
        report.add(
            "logged_duplex_vs_strict",
            paired["duplex_vs_strict"],
            "",
            "the duplex logged cycle over the strict one (paired)",
        )
        report.add(
            "logged_appended_ratio_vs_unlogged",
            paired["appended"],
            "",
            "as logged_ratio_vs_unlogged, segments appended to (LogConfig(preallocate=False))",
        )
        report.add(
            "logged_preallocated_vs_appended",
            paired["preallocated_vs_appended"],
            "",
            "strict logged cycle, preallocated segments over appended ones (paired)",
        )
        report.add(
            "logged_ratio_vs_unlogged_best",
            rates["redis_1k_1cqs_logged"] / rates["redis_1k_1cqs_unlogged"],
            "",
            "best rounds of each",
        )
        report.add(
            "logged_puts_synced_ratio_vs_unlogged_paired",
            paired["puts"],
            "",
            "Sync.PUTS; median of paired turns",
        )
        interval = interval_logged(facility, n, rounds)
        report.add("redis_1k_1cqs_logged_interval_10ms", interval, "cycles/s")
        report.add(
            "logged_interval_ratio_vs_unlogged",
            interval / rates["redis_1k_1cqs_unlogged"],
            "",
            "records synced every 10 ms (Durability.interval(10))",
        )
        puts = puts_synced(facility, n, rounds)
        report.add("redis_1k_1cqs_logged_puts_synced", puts, "cycles/s")
        report.add(
            "logged_puts_synced_ratio_vs_unlogged",
            puts / rates["redis_1k_1cqs_unlogged"],
            "",
            "Sync.PUTS: only puts wait for the sync",
        )
        report.add("redis_round_trips_per_cycle", round_trips(facility, BODY), "", "1 KiB")
        report.add(
            "redis_round_trips_per_cycle_4k_parts", round_trips(facility, PARTS), "", "8 parts"
        )
        public.delete("sharedq:bench:cqs")
        facility.delete(MSGQ, force=True)
    report.emit(args.json)


if __name__ == "__main__":
    main()
