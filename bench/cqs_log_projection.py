"""What a logging-structure log mode would give the CQS, measured without building it.

Issue 17 waits for a decision on the CQS's logged target (``logged_ratio_vs_unlogged``
>= 0.6, ``bench/cqs_cycle.py``): docs/cqs.md, "The seed's logger".  The seed's CQS
does not wait for a disk per request: its records go to a logging structure in the
coupling facility, with a second copy in memory.  Our equivalent would append each
request's records to a Redis list instead of waiting for an ``fdatasync``.  This
benchmark measures, in paired turns against the unlogged cycle (put, read, delete of
1 KiB, one CQS, Redis), what such a mode could reach:

- ``strict_ratio``: today's strict setting (every request waits for its sync);
- ``no_sync_ratio``: the same cycle with its log on a RAM file system (``/dev/shm``),
  where a sync has no device to wait for (the log's own work alone: records built,
  framed, written and "synced"): the most any mode that keeps the records can reach;
- ``one_append_ratio`` and ``three_appends_ratio``: that, plus one or three Redis
  round trips a cycle (``RPUSH`` of a 1.2 KB record to a list): a logging structure
  written once a cycle (a batch, or only the put waiting as ``Sync.PUTS`` does) and
  once per request.  A mode whose appends rode in the structure's own requests would
  sit near ``no_sync_ratio``.

Experiment only: nothing here is a log mode sharedq offers (a log in RAM survives no
machine failure).  The host group-commit files are private to the run.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.cqs_cycle import BODY, QUEUE, _options, cycler, group, paired_ratio
from bench.harness import Report, parse_args, redis_url
from sharedq.cf import open_facility

#: A RAM file system for the log whose syncs have no device to wait for.
RAM_DIR = Path("/dev/shm")
#: The size of the record a logging structure would receive per request.
RECORD = b"r" * 1200
LIST_KEY = "sharedq:bench:logging-structure"


def _with_appends(cqs: Any, lane: Callable[..., Any], appends: int) -> Callable[[int], None]:
    """The cycle with ``appends`` Redis round trips in it (after the put, the read, the
    delete, in that order)."""

    def cycles(n: int) -> None:
        for _ in range(n):
            cqs.put(QUEUE, BODY)
            if appends >= 1:
                lane("RPUSH", LIST_KEY, RECORD)
            message = cqs.read(QUEUE)
            if appends >= 2:
                lane("RPUSH", LIST_KEY, RECORD)
            cqs.delete(message.token)
            if appends >= 3:
                lane("RPUSH", LIST_KEY, RECORD)
        lane("DEL", LIST_KEY)

    return cycles


def main() -> None:
    args = parse_args(__doc__.splitlines()[0] if __doc__ else "projection", _options)
    report = Report("CQS: a logging-structure log mode, projected", args.quick)
    import sharedq.log.groupsync as groupsync

    if not RAM_DIR.is_dir():
        sys.exit(f"cqs_log_projection: no RAM file system at {RAM_DIR} to put a log on")
    with (
        tempfile.TemporaryDirectory() as tmp,
        tempfile.TemporaryDirectory(dir=RAM_DIR) as ram,
        redis_url(args.redis) as url,
    ):
        host_dir = Path(tmp) / "host"
        host_dir.mkdir()
        groupsync.HOST_DIR = host_dir
        facility = open_facility(url)
        lane = facility.client.command  # type: ignore[attr-defined]
        plain, close_plain = group(facility, 1, None)
        on_disk, close_disk = group(facility, 1, Path(tmp) / "log", structure="BENCHLOG1")
        in_ram, close_ram = group(facility, 1, Path(ram) / "log", structure="BENCHLOG2")
        try:
            unlogged = cycler(plain[0], BODY)
            for cycle in (unlogged, cycler(on_disk[0], BODY), cycler(in_ram[0], BODY)):
                cycle(50)
            figures = {
                "strict_ratio": paired_ratio(cycler(on_disk[0], BODY), unlogged, args.quick),
                "no_sync_ratio": paired_ratio(cycler(in_ram[0], BODY), unlogged, args.quick),
            }
            for name, appends in (("one_append_ratio", 1), ("three_appends_ratio", 3)):
                figures[name] = paired_ratio(
                    _with_appends(in_ram[0], lane, appends), unlogged, args.quick
                )
        finally:
            close_ram()
            close_disk()
            close_plain()
            for name in ("BENCHLOG1", "BENCHLOG2"):
                facility.delete(name, force=True)
    notes = {
        "strict_ratio": "every request waits for its sync (today's Sync.EVERY_REQUEST)",
        "no_sync_ratio": "the log in RAM: its own work, the most a mode keeping records reaches",
        "one_append_ratio": "the log in RAM, and one Redis append a cycle",
        "three_appends_ratio": "the log in RAM, and one Redis append per request",
    }
    for name, value in figures.items():
        report.add(name, value, "", notes[name])
    report.emit(args.json)


if __name__ == "__main__":
    main()
