"""A CQS in a process of its own against one in its client's process, cycles per second.

The cycle is ``bench/cqs_cycle.py``'s: ``put`` of a 1 KiB body, ``read``, ``delete``,
on a private ``redis-server`` (or ``--redis URL``), no log.  ``in_process``: a ``CQS``
in this process.  ``remote``: a ``RemoteCQS`` in this process, its CQS served by
``sharedq cqs serve`` in another (three socket round trips more per cycle, msgpack
bodies, the server's thread pool).  The two are measured in turns; ``remote_ratio``
is the remote rate over the in-process one.  ``remote_4_threads``: four client threads
sharing one ``RemoteCQS`` (requests in flight together on one socket), cycles/s in all.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import Report, best_rates_in_turns, parse_args, rate, redis_url
from sharedq.cf import open_facility
from sharedq.cqs import CQS, CQSService, RemoteCQS, authkey_file, make_name, structure_params

MSGQ = "MSGQ01"
QUEUE = make_name(1, "BENCHTR")
BODY = b"x" * 1024
#: Cycles per timed round (quick, full) and rounds.
CYCLES = (300, 3_000)
ROUNDS = (3, 5)


def cycles(cqs: CQSService, n: int) -> None:
    for _ in range(n):
        cqs.put(QUEUE, BODY)
        got = cqs.read(QUEUE)
        assert got is not None and got.token is not None
        cqs.delete(got.token)


def threaded(cqs: CQSService, n: int, threads: int) -> None:
    workers = [threading.Thread(target=cycles, args=(cqs, n // threads)) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def main() -> None:
    args = parse_args(__doc__.splitlines()[0] if __doc__ else "cqs remote", _options)
    report = Report("sharedq.cqs: remote vs in-process, put -> read -> delete", args.quick)
    n, rounds = CYCLES[not args.quick], ROUNDS[not args.quick]
    report.add("cycles_per_round", n)
    with redis_url(args.redis) as url, tempfile.TemporaryDirectory(prefix="cqsb") as tmp:
        facility = open_facility(url)
        facility.create(structure_params(MSGQ, messages=2_000))
        socket, key = str(Path(tmp) / "s" / "cqs.sock"), Path(tmp) / "key"
        command = [sys.executable, "-m", "sharedq", "cqs", "serve", "--facility", url]
        command += ["--name", "CQSREM", "--system", "REM", "--socket", socket]
        command += ["--authkey-file", str(key)]
        server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None and "serving on" in server.stdout.readline()
            remote = RemoteCQS(socket, authkey_file(key)).connect()
            local = CQS(facility, "CQSLOC", system="LOC", msgq=MSGQ).connect()
            best = best_rates_in_turns(
                n,
                {"in_process": lambda: cycles(local, n), "remote": lambda: cycles(remote, n)},
                rounds,
            )
            four = max(rate(n, lambda: threaded(remote, n, 4)) for _ in range(rounds))
            report.add("in_process", best["in_process"], "cycles/s", "CQS in this process")
            report.add("remote", best["remote"], "cycles/s", "RemoteCQS, CQS in another")
            report.add("remote_ratio", best["remote"] / best["in_process"], "", "remote / in")
            report.add("remote_4_threads", four, "cycles/s", "one RemoteCQS, 4 threads")
            remote.disconnect()
            local.disconnect()
        finally:
            server.terminate()
            server.wait(60)
            facility.close()
    report.emit(args.json)


def _options(parser: Any) -> None:
    parser.add_argument("--redis", metavar="URL", help="measure on this Redis server")


if __name__ == "__main__":
    main()
