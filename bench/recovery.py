"""Recovery: replay against reading, the quiesced share of a checkpoint, logged cycles.

Three measurements, each against a baseline measured in the same run, on the memory
backend and on Redis (a private ``redis-server`` unless ``--redis URL`` names one):

(a) **replay**.  A structure's SRDS (10,000 messages) and its log after it (100,000
    records with ``--quick``, 1,000,000 without: a queue workload where 90 % of the
    messages put are read and then deleted) are written once.  Then structure recovery
    (``sharedq.recovery.structure_recovery.ensure``, what a manager runs when it finds
    its structure gone: the decision table, the newest SRDS read and verified, its
    entries loaded, the log after it folded and replayed) runs onto an empty facility,
    against merely reading and decoding the same log records
    (``LogStream.records(from_seq=S + 1)``).  ``replay_ratio_vs_read_<backend>`` is
    read time / recovery time; ``replay_ratio_vs_read`` the smaller of the two.
(b) **checkpoint**.  A structure holding 10,000 and (without ``--quick``) 100,000
    messages of 1 KiB (written by the queue manager's format, loaded in bulk) is
    checkpointed by a queue manager (``qm.checkpoint``): ``quiesce_share_of_checkpoint``
    is the time the structure was quiesced (quiesce lock held: the copy) over the whole
    checkpoint (election, quiesce, copy, SRDS written and synced, log record, system
    checkpoint, log deletion); the median of the runs of each size and backend, and
    the figure itself is the worst of those.
(c) **logged cycles**.  put (out of syncpoint, persistent) -> get (in a unit of work)
    -> commit, by a manager with a recovery log at each durability setting, against
    the same manager without one.  ``logged_commit_ratio_vs_unlogged`` is the
    ``every_commit`` setting on memory; the others are named figures.  One thread: a
    per-commit fsync is paid by each cycle alone (two per cycle: the put out of
    syncpoint and the commit each end a unit; ``every_record`` pays four).  These
    figures are as steady as the disk's fsync: on a shared virtual disk its latency
    varies several times over from one round to the next, so each is the best of
    several rounds, all settings in turns.
"""

from __future__ import annotations

import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import Report, best_rates_in_turns, parse_args, redis_url
from sharedq.cf import (
    BulkWrite,
    ById,
    CouplingFacility,
    ListEntry,
    StructureParams,
    open_facility,
)
from sharedq.cf.memory import MemoryFacility
from sharedq.log import Durability, LogConfig, MessageInfo, RecordType
from sharedq.mq import QueueManager, keys, structure_params
from sharedq.recovery import PairRecovery, RecoverySettings
from sharedq.recovery.restore import write_all
from sharedq.recovery.structure_recovery import ensure

NOISE = os.urandom(1 << 21)
BENCH = "BENCH"
#: Messages in the SRDS the replay starts from.
IMAGE_MESSAGES = 10_000


def _noise(n: int, size: int) -> bytes:
    at = (n * 7919) % (len(NOISE) - size)
    return NOISE[at : at + size]


class _Everything:
    """A recovery client for a structure of plain entries: all recoverable."""

    def classifier(self, structure: str, control_entries: Sequence[ListEntry]) -> Any:
        return lambda entry: (True, None, None)

    def restart_state(self) -> dict[str, Any]:
        return {}


@contextmanager
def _facilities(url: str) -> Iterator[dict[str, Callable[[], CouplingFacility]]]:
    opened: list[CouplingFacility] = []

    def redis() -> CouplingFacility:
        facility = open_facility(url)
        for name in facility.structure_names():
            facility.delete(name, force=True)
        opened.append(facility)
        return facility

    try:
        yield {"memory": MemoryFacility, "redis": redis}
    finally:
        for facility in opened:
            facility.close()


# -- (a) replay -------------------------------------------------------------------------


def _replay_params(n: int) -> StructureParams:
    room = IMAGE_MESSAGES * 2 + n // 20  # a tenth of the n // 3 messages stay
    return StructureParams.for_capacity(BENCH, list_count=8, entries=room, elements=room)


def _write_log(root: Path, n: int) -> int:
    """An SRDS of IMAGE_MESSAGES messages, then ``n`` log records; the image's seq."""
    facility = MemoryFacility()
    facility.create(_replay_params(n))
    settings = RecoverySettings(root, log_config=LogConfig(row_group_rows=65_536))
    pair = PairRecovery(facility, settings, [BENCH], "WRITER", _Everything())
    writer = pair.stream.writer("WRITER")
    pair.prepare(writer)
    conn = facility.connect(BENCH, "WRITER")
    pair.attach(BENCH, conn)
    writes = [
        BulkWrite(
            1, b"\x04" + n.to_bytes(15, "big"), _noise(n, 200), entry_id=n.to_bytes(12, "big")
        )
        for n in range(1, IMAGE_MESSAGES + 1)
    ]
    for start in range(0, len(writes), 1024):
        write_all(conn, writes[start : start + 1024])
    checkpoint = pair.structure_checkpoint("bench")
    assert checkpoint is not None
    info = MessageInfo(uow=b"U" * 8, queue=b"Q", message_id=b"M" * 24)
    written = 0
    message = IMAGE_MESSAGES
    old = 1
    while written < n:
        message += 1
        entry_id = message.to_bytes(12, "big")
        put = conn.write(1, b"\x04" + message.to_bytes(15, "big"), _noise(message, 200),
                         entry_id=entry_id)  # fmt: skip
        writer.log_write(put, message=info)
        read = conn.move(ById(entry_id), 2)
        assert read is not None
        writer.log_move(read, record_type=RecordType.READ, from_list=1, message=info)
        written += 2
        if message % 10:  # nine in ten are consumed
            gone = conn.delete(ById(entry_id))
            assert gone is not None
            writer.log_delete(gone, message=info)
            written += 1
        elif old <= IMAGE_MESSAGES // 2:  # and now and then one from the image
            gone = conn.delete(ById(old.to_bytes(12, "big")))
            assert gone is not None
            writer.log_delete(gone, message=info)
            old += 1
            written += 1
    pair.close()
    writer.close()
    conn.disconnect()
    return checkpoint.seq


def replay_figures(
    report: Report, base: Path, facilities: dict[str, Callable[[], CouplingFacility]], n: int
) -> None:
    root = base / "replay"
    image_seq = _write_log(root, n)
    settings = RecoverySettings(root)
    pair = PairRecovery(MemoryFacility(), settings, [BENCH], "READER", _Everything())
    stream = pair.stream
    records = sum(1 for r in stream.records(structures={BENCH}, from_seq=image_seq + 1))

    def read() -> None:
        # Recoveries add a REBUILD record each: the same records, and those.
        count = sum(1 for _ in stream.records(structures={BENCH}, from_seq=image_seq + 1))
        assert count >= records

    writer = stream.writer("RECOVERER")
    ratios = {}
    for backend, open_one in facilities.items():

        def recover(open_one: Callable[[], CouplingFacility] = open_one) -> None:
            facility = open_one()
            outcome = ensure(
                facility,
                layout=pair.layout,
                structure=BENCH,
                stream=stream,
                writer=writer,
                area=pair.area,
                server="RECOVERER",
                params_hint=None,
                timeout=60,
            )
            assert outcome.action == "recovered" and outcome.records >= n, outcome
            if not isinstance(facility, MemoryFacility):
                facility.close()

        best = best_rates_in_turns(records, {"read": read, "recover": recover}, rounds=3)
        ratio = best["recover"] / best["read"]
        ratios[backend] = ratio
        report.add(f"replay_read_records_per_s_{backend}", best["read"], "records/s")
        report.add(
            f"replay_recover_records_per_s_{backend}",
            best["recover"],
            "records/s",
            f"SRDS of {IMAGE_MESSAGES:,} + {records:,} records",
        )
        report.add(f"replay_ratio_vs_read_{backend}", ratio, "", "target >= 0.25")
    writer.close()
    report.add("replay_ratio_vs_read", min(ratios.values()), "", "worst backend; target >= 0.25")
    report.add("replay_log_records", records, "records")


# -- (b) checkpoint -----------------------------------------------------------------------


def _load_messages(facility: CouplingFacility, qm: QueueManager, count: int) -> None:
    """``count`` 1 KiB persistent messages on one queue, in the manager's format."""
    qm.define_queue("CHK.Q", structure=BENCH, max_depth=count + 10)
    queue = qm.open("CHK.Q")
    sample = queue.put(_noise(0, 1024), persistent=True)
    with facility.connect(BENCH, "LOADER") as conn:
        (entry,) = [e for e in conn.scan(_put_list(qm)) if e.key != keys.LHQC_KEY]
        header = entry.data[: len(entry.data) - len(sample.body)]
        writes = [
            BulkWrite(
                entry.list_number,
                keys.committed_key(4, entry.version + n, 1),
                header + _noise(n, 1024),
                entry.adjunct,
                entry_id=b"\x01" + n.to_bytes(11, "big"),
            )
            for n in range(1, count)
        ]
        for start in range(0, len(writes), 1024):
            write_all(conn, writes[start : start + 1024])


def _put_list(qm: QueueManager) -> int:
    return qm.view().queue("CHK.Q").put_list


def checkpoint_figures(
    report: Report,
    base: Path,
    facilities: dict[str, Callable[[], CouplingFacility]],
    sizes: Sequence[int],
    runs: int,
) -> None:
    shares = []
    for backend, open_one in facilities.items():
        for size in sizes:
            facility = open_one()
            facility.create(
                structure_params(BENCH, queues=2, managers=2, messages=size, message_bytes=1100)
            )
            root = base / f"checkpoint-{backend}-{size}"
            qm = QueueManager(facility, "BQM", 1, admin=BENCH, recovery=RecoverySettings(root))
            _load_messages(facility, qm, size)
            results = []
            for _ in range(runs):
                (result,) = qm.checkpoint(BENCH)
                assert result is not None and result.entries >= size
                results.append(result)
            qm.close()
            if not isinstance(facility, MemoryFacility):
                facility.close()
            shutil.rmtree(root, ignore_errors=True)
            share = statistics.median(r.quiesce_share for r in results)
            quiesced = statistics.median(r.quiesced_seconds for r in results)
            total = statistics.median(r.total_seconds for r in results)
            label = f"{backend}_{size // 1000}k"
            report.add(f"checkpoint_quiesced_ms_{label}", quiesced * 1000, "ms", "copy")
            report.add(f"checkpoint_total_ms_{label}", total * 1000, "ms", "whole checkpoint")
            report.add(
                f"quiesce_share_of_checkpoint_{label}",
                share,
                "",
                f"median of {runs}; target <= 0.1",
            )
            shares.append(share)
    report.add("quiesce_share_of_checkpoint", max(shares), "", "worst measured; target <= 0.1")


# -- (c) logged cycles -------------------------------------------------------------------------


def cycle_figures(
    report: Report,
    base: Path,
    facilities: dict[str, Callable[[], CouplingFacility]],
    counts: dict[str, int],
    rounds: int,
) -> None:
    settings = {
        "unlogged": None,
        "every_commit": Durability.every_commit(),
        "interval_ms_50": Durability.interval(50),
        "every_record": Durability.every_record(),
    }
    for backend, open_one in facilities.items():
        managers: dict[str, QueueManager] = {}
        facility = open_one()
        for number, (label, durability) in enumerate(settings.items(), start=1):
            admin = f"CYC{number}"
            facility.create(structure_params(admin, queues=2, managers=2, messages=2000))
            recovery = None
            if durability is not None:
                recovery = RecoverySettings(
                    base / f"cycles-{backend}" / label, durability=durability, strchkpt=None
                )
            qm = QueueManager(facility, f"C{number}", number, admin=admin, recovery=recovery)
            qm.define_queue("CYCLE")
            managers[label] = qm

        def cycle(qm: QueueManager, count: int) -> Callable[[], None]:
            queue = qm.open("CYCLE")
            body = b"x" * 100

            def run() -> None:
                for _ in range(count):
                    queue.put(body, persistent=True)
                    with qm.unit_of_work() as uow:
                        queue.get(uow=uow)

            return run

        # Every setting in turns, round after round, so that a slow moment of the disk
        # (fsync times vary a lot on a shared machine) hits them all alike.
        rates = dict.fromkeys(managers, 0.0)
        for _ in range(rounds):
            for label, qm in managers.items():
                count = counts[label]
                rates[label] = max(
                    rates[label], best_rates_in_turns(count, {label: cycle(qm, count)}, 1)[label]
                )
        for qm in managers.values():
            qm.close()
        if not isinstance(facility, MemoryFacility):
            facility.close()
        report.add(f"cycles_per_s_unlogged_{backend}", rates["unlogged"], "cycles/s")
        for label in list(settings)[1:]:
            ratio = rates[label] / rates["unlogged"]
            report.add(f"cycles_per_s_{label}_{backend}", rates[label], "cycles/s")
            report.add(f"logged_commit_ratio_vs_unlogged_{label}_{backend}", ratio, "")
        if backend == "memory":
            report.add(
                "logged_commit_ratio_vs_unlogged",
                rates["every_commit"] / rates["unlogged"],
                "",
                "every_commit, memory: two fsyncs a cycle",
            )


def main() -> None:
    args = parse_args(
        __doc__.splitlines()[0],
        lambda p: p.add_argument("--redis", metavar="URL", help="a server to measure on"),
    )
    quick = args.quick
    logging.getLogger("sharedq").setLevel(logging.ERROR)  # recoveries say what they did
    report = Report("sharedq recovery", quick)
    base = Path(tempfile.mkdtemp(prefix="sharedq-bench-recovery-"))
    started = time.perf_counter()
    try:
        with redis_url(args.redis) as url, _facilities(url) as facilities:
            replay_figures(report, base, facilities, 100_000 if quick else 1_000_000)
            checkpoint_figures(
                report,
                base,
                facilities,
                (10_000,) if quick else (10_000, 100_000),
                2 if quick else 3,
            )
            counts = (
                {"unlogged": 1000, "every_commit": 150, "interval_ms_50": 1000, "every_record": 100}
                if quick
                else {
                    "unlogged": 5000,
                    "every_commit": 600,
                    "interval_ms_50": 5000,
                    "every_record": 400,
                }
            )
            cycle_figures(report, base, facilities, counts, 3 if quick else 5)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    report.add("seconds", time.perf_counter() - started, "s")
    report.emit(args.json)


if __name__ == "__main__":
    main()
