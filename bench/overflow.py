"""Structure overflow: what the threshold check costs, how long a process takes, and
reads from a queue in the overflow structure.

On Redis (a private ``redis-server``, or ``--redis URL``):

* ``put_ratio_checking_vs_off``: CQSPUT of 1 KiB with the overflow check every 32
  puts (the default) over the same with checking off (``check_every`` 10**9), the
  median of paired short turns (target >= 0.9);
* ``overflow_s_<n>_queues``: one overflow process (alter refused, selection of at
  most 512 queues, their moves, the table) on a primary holding ``n`` one-message
  queues at 70 % of its elements, and the queues it moved;
* ``read_ratio_overflow_vs_primary``: read + delete from a queue in the overflow
  structure over the same from a queue in the primary (target >= 0.9).
"""

from __future__ import annotations

import statistics
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import Report, parse_args, rate, redis_url
from sharedq.cf import CouplingFacility
from sharedq.cf.params import StructureParams
from sharedq.cf.redis import RedisFacility
from sharedq.cqs import CQS, Kind, StructurePair, make_name, structure_params
from sharedq.cqs.overflow import OverflowOptions

PRIMARY, OVERFLOW = "BENCHOV1", "BENCHOV2"
BODY = b"x" * 1024
QUEUES = ((1_000, 3_000), (1_000, 3_000, 10_000))


def _options(parser: Any) -> None:
    parser.add_argument("--redis", metavar="URL", help="measure on this server")


def paired(ours: Any, theirs: Any, quick: bool) -> float:
    chunk, turns = (100, 16) if quick else (250, 40)
    pairs = []
    for turn in range(turns):
        first, second = (ours, theirs) if turn % 2 == 0 else (theirs, ours)
        one, two = rate(chunk, partial(first, chunk)), rate(chunk, partial(second, chunk))
        pairs.append(one / two if turn % 2 == 0 else two / one)
    return statistics.median(pairs)


def put_ratio(facility: CouplingFacility, quick: bool) -> float:
    facility.create(structure_params(PRIMARY, messages=40_000))
    on = CQS(facility, "CQSON", system="ON", msgq=PRIMARY).connect()
    off = CQS(
        facility,
        "CQSOFF",
        system="OFF",
        msgq=PRIMARY,
        overflow=OverflowOptions(check_every=10**9),
    ).connect()
    queue = make_name(1, "BENCHPUT")

    def puts(cqs: CQS, n: int) -> None:
        for _ in range(n):
            cqs.put(queue, BODY)

    try:
        return paired(partial(puts, on), partial(puts, off), quick)
    finally:
        on.disconnect()
        off.disconnect()
        facility.delete(PRIMARY, force=True)


def allocate(facility: CouplingFacility, elements: int) -> None:
    facility.create(
        StructureParams.for_capacity(
            PRIMARY,
            list_count=192,
            entries=elements + 400,
            elements=elements,
            element_size=512,
            lock_count=16,
        )
    )


def overflow_time(facility: CouplingFacility, queues: int) -> tuple[float, int]:
    allocate(facility, queues * 10 // 7 - 1)  # the queues fill just over 70 %
    pair = StructurePair(PRIMARY, OVERFLOW)
    cqs = CQS(
        facility, "CQSA", system="A", msgq=pair, overflow=OverflowOptions(check_every=10**9)
    ).connect()
    try:
        for i in range(queues):
            cqs.put(make_name(1, f"Q{i:06d}"), b"x")
        started = time.perf_counter()
        report = cqs.overflow[Kind.MSGQ].check()
        took = time.perf_counter() - started
        return took, 0 if report is None else len(report.approved)
    finally:
        cqs.disconnect()
        facility.delete(PRIMARY, force=True)
        facility.delete(OVERFLOW, force=True)


def read_ratio(facility: CouplingFacility, quick: bool) -> float:
    allocate(facility, 1000)
    big, small = make_name(1, "BIGQ"), make_name(1, "SMALLQ")
    cqs = CQS(
        facility,
        "CQSA",
        system="A",
        msgq=StructurePair(PRIMARY, OVERFLOW),
        overflow=OverflowOptions(check_every=10**9),
    ).connect()
    try:
        for _ in range(70):
            cqs.put(big, b"x" * (10 * 512 - 62))
        report = cqs.overflow[Kind.MSGQ].check()
        assert report is not None and report.approved == (big,)
        while (message := cqs.read(big)) is not None:
            assert message.token is not None
            cqs.delete(message.token)

        def cycle(queue: bytes, n: int) -> None:
            for _ in range(n):
                cqs.put(queue, BODY)
            for _ in range(n):
                message = cqs.read(queue)
                assert message is not None and message.token is not None
                cqs.delete(message.token)

        return paired(partial(cycle, big), partial(cycle, small), quick)
    finally:
        cqs.disconnect()
        facility.delete(PRIMARY, force=True)
        facility.delete(OVERFLOW, force=True)


def main() -> None:
    args = parse_args(__doc__.splitlines()[0] if __doc__ else "overflow", _options)
    report = Report("sharedq.cqs structure overflow", args.quick)
    with redis_url(args.redis) as url, RedisFacility.from_url(url) as facility:
        report.add(
            "put_ratio_checking_vs_off",
            put_ratio(facility, args.quick),
            "",
            "check every 32 puts; median of paired turns; target 0.9",
        )
        for queues in QUEUES[not args.quick]:
            took, moved = overflow_time(facility, queues)
            report.add(f"overflow_s_{queues}_queues", took, "s", f"{moved} queues moved")
        report.add(
            "read_ratio_overflow_vs_primary",
            read_ratio(facility, args.quick),
            "",
            "put + read + delete cycles; target 0.9",
        )
    report.emit(args.json)


if __name__ == "__main__":
    main()
