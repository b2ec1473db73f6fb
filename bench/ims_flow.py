"""IMS full-function transactions per second, local against global processing.

One transaction is the whole of Appendix A's flow: a terminal enters it, its IMS
routes it (local: straight to the lock queue; global: to the transaction ready queue,
every registered IMS told, the first to read wins), a region runs the program (GU,
ISRT of the reply, sync point: reply put, input deleted), the terminal's IMS is told
of the LTERM output, reads it, sends it, and deletes it on the terminal's
acknowledgement.  Each terminal enters its next transaction when the reply to the
last is acknowledged (request-response, as a user at a terminal).

Measured on memory and on Redis (a private ``redis-server``, or ``--redis URL``), with
one IMS and with three (threads of this process, each its own CQS; one terminal per
IMS), each IMS with two regions for the class, so that one is waiting when input comes.
Global processing is forced with ``SystemDefinition(local_processing=False)``: the same
systems, every input to the ready queue.  ``local_ratio_vs_global`` is the local rate
over the global one (Redis, one IMS): what the seed says local processing saves (a put
to the ready queue, the notification of every registered IMS and the move to the lock
queue: §3.1.1, §17.2).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import Report, parse_args, redis_url
from sharedq.cf import CouplingFacility, open_facility
from sharedq.cf.redis import RedisFacility
from sharedq.cqs import structure_params
from sharedq.ims import DLI, IMS, Lterm, Program, Region, SystemDefinition, Transaction

MSGQ = "BENCHIMS"
#: Transactions per terminal (quick, full) and rounds (the best is kept).
TRANSACTIONS = (60, 400)
ROUNDS = (2, 3)


def _program(dli: DLI) -> None:
    while (segment := dli.io.gu()) is not None:
        dli.io.isrt(b"OUT " + segment)


def _definition(imsid: str, node: str, local: bool) -> SystemDefinition:
    return SystemDefinition(
        imsid,
        transactions=(Transaction("TRANA", 1, "PGMA"),),
        programs=(Program("PGMA"),),
        regions=(Region("MPR1", (1,)), Region("MPR2", (1,))),
        lterms=(Lterm(f"LT{node}", node),),
        local_processing=local,
    )


def run(facility: CouplingFacility, systems: int, local: bool, n: int) -> tuple[float, float]:
    """Transactions per second over all terminals, and the share processed locally."""
    facility.create(structure_params(MSGQ, messages=2_000))
    programs: dict[str, Callable[[DLI], object]] = {"PGMA": _program}
    group = [
        IMS(facility, _definition(f"IMS{i}", f"NODE{i}", local), programs, msgq=MSGQ).start()
        for i in range(systems)
    ]
    try:
        terminals = [ims.logon(f"NODE{i}") for i, ims in enumerate(group)]
        failures: list[BaseException] = []

        def user(terminal: Any) -> None:
            try:
                for k in range(n):
                    terminal.enter(f"TRANA {k}")
                    out = terminal.receive(60)
                    assert out is not None, "no reply in 60 s"
                    terminal.ack(out)
            except BaseException as error:  # reported after the join
                failures.append(error)

        threads = [threading.Thread(target=user, args=(t,)) for t in terminals]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        if failures:
            raise failures[0]
        done = sum(ims.counts["processed"] for ims in group)
        local_share = sum(ims.counts["local"] for ims in group) / max(1, systems * n)
        assert done == systems * n, (done, systems * n)
        return systems * n / elapsed, local_share
    finally:
        for ims in group:
            ims.shutdown()
        facility.delete(MSGQ, force=True)


def measure(
    facility: CouplingFacility, backend: str, report: Report, n: int, rounds: int
) -> dict[str, float]:
    rates: dict[str, float] = {}
    for systems in (1, 3):
        for local in (True, False):
            name = f"{backend}_{systems}ims_{'local' if local else 'global'}"
            best, share = 0.0, 0.0
            for _ in range(rounds):
                rate, share = run(facility, systems, local, n)
                best = max(best, rate)
            rates[name] = best
            report.add(name, best, "tx/s", f"local share {share:.2f}")
    return rates


def main() -> None:
    args = parse_args(__doc__.splitlines()[0] if __doc__ else "ims flow", _options)
    report = Report("sharedq.ims: enter -> schedule -> program -> reply -> ack", args.quick)
    n, rounds = TRANSACTIONS[not args.quick], ROUNDS[not args.quick]
    report.add("transactions_per_terminal", n)
    with open_facility("memory://") as memory:
        mem = measure(memory, "memory", report, n, rounds)
    with redis_url(args.redis) as url, RedisFacility.from_url(url) as facility:
        red = measure(facility, "redis", report, n, rounds)
    report.add(
        "local_ratio_vs_global",
        red["redis_1ims_local"] / red["redis_1ims_global"],
        "",
        "Redis, 1 IMS: local over global processing",
    )
    report.add(
        "local_ratio_vs_global_3ims",
        red["redis_3ims_local"] / red["redis_3ims_global"],
        "",
        "Redis, 3 IMSs",
    )
    report.add(
        "memory_local_ratio_vs_global",
        mem["memory_1ims_local"] / mem["memory_1ims_global"],
        "",
        "memory, 1 IMS",
    )
    report.emit(args.json)


def _options(parser: Any) -> None:
    parser.add_argument("--redis", metavar="URL", help="measure on this Redis server")


if __name__ == "__main__":
    main()
