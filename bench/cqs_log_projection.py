"""What a logging-structure log mode would give the CQS, measured without building it.

Issue 17 waits for a decision on the CQS's logged target (``logged_ratio_vs_unlogged``
>= 0.6, ``bench/cqs_cycle.py``): docs/cqs.md, "The seed's logger".  The seed's CQS
does not wait for a disk per request: its records go to a logging structure in the
coupling facility, with a second copy in memory.  Our equivalent would append each
request's records to a Redis list instead of waiting for an ``fdatasync``.  This
benchmark measures, in paired turns against the unlogged cycle (put, read, delete of
1 KiB, one CQS, Redis), what such a mode could reach:

- ``strict_ratio``: today's strict setting (every request waits for its sync);
- ``no_sync_ratio``: the same cycle with every sync of this process replaced by
  nothing (the log's own work alone: records built, framed and written): the most
  any mode that keeps the records can reach;
- ``one_append_ratio`` and ``three_appends_ratio``: that, plus one or three Redis
  round trips a cycle (``RPUSH`` of a 1.2 KB record to a list): a logging structure
  written once a cycle (a batch, or only the put waiting as ``Sync.PUTS`` does) and
  once per request.  A mode whose appends rode in the structure's own requests would
  sit near ``no_sync_ratio``.

Experiment only: the syncs are replaced in this process (``sharedq.log.segment._sync``
and the host group commit's ``syncfs``), which nothing else does; the host
group-commit files are private to the run.
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
    import sharedq.log.segment as segment

    with tempfile.TemporaryDirectory() as tmp, redis_url(args.redis) as url:
        host_dir = Path(tmp) / "host"
        host_dir.mkdir()
        groupsync.HOST_DIR = host_dir
        facility = open_facility(url)
        lane = facility.client.command  # type: ignore[attr-defined]
        plain, close_plain = group(facility, 1, None)
        logged, close_logged = group(facility, 1, Path(tmp) / "log", structure="BENCHLOG1")
        try:
            unlogged = cycler(plain[0], BODY)
            unlogged(50)
            cycler(logged[0], BODY)(50)
            figures = {"strict_ratio": paired_ratio(cycler(logged[0], BODY), unlogged, args.quick)}
            real_sync, real_syncfs = segment._sync, groupsync._SYNCFS
            segment._sync = lambda fd: None
            groupsync._SYNCFS = lambda fd: 0
            try:
                figures["no_sync_ratio"] = paired_ratio(
                    cycler(logged[0], BODY), unlogged, args.quick
                )
                for name, appends in (("one_append_ratio", 1), ("three_appends_ratio", 3)):
                    figures[name] = paired_ratio(
                        _with_appends(logged[0], lane, appends), unlogged, args.quick
                    )
            finally:
                segment._sync, groupsync._SYNCFS = real_sync, real_syncfs
        finally:
            close_logged()
            close_plain()
            facility.delete("BENCHLOG1", force=True)
    notes = {
        "strict_ratio": "every request waits for its sync (today's Sync.EVERY_REQUEST)",
        "no_sync_ratio": "the log's own work alone: the most a mode keeping records reaches",
        "one_append_ratio": "no sync, one Redis append a cycle",
        "three_appends_ratio": "no sync, one Redis append per request",
    }
    for name, value in figures.items():
        report.add(name, value, "", notes[name])
    report.emit(args.json)


if __name__ == "__main__":
    main()
