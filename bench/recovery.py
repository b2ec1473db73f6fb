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
    several rounds, all settings in turns.  ``duplex_ms_100`` is ``Durability.duplex``
    with the logging structure on a second private Redis: a commit waits for its push
    there instead of an fsync (on this one machine, standing in for another's).
(d) **four producers**.  The same cycle on Redis by four producers at once, each on a
    queue of its own, with the recovery log (``every_commit``, one figure per group
    commit setting: ``host``, the default, and ``writer``) against a group without
    one, measured in turns: as four threads of one manager, four managers of one
    process (a thread each), and four processes (a manager each, started with
    ``spawn``).  ``logged_ratio_vs_unlogged_4_<kind>`` is logged cycles/s over
    unlogged; ``fsyncs_per_commit_4_<kind>`` the syncs the log made
    (``sharedq.log.sync_statistics``, summed over the processes) per commit that
    waited for one (two a cycle: the put out of syncpoint and the unit's commit).
    ``sync_ms_4_<kind>`` is what one sync took and ``logged_ratio_sync_bound_4_<kind>``
    the ratio the producers would reach if the syncs were all the log cost them (two
    waits a cycle, one after the other): the gap between it and the ratio measured is
    the logged path's other work.  ``_per_writer`` figures are ``group_commit=writer``.
    The ``_4_producers`` figures are the processes': the managers of one host.
    ``cpu_us_per_cycle_<logged|unlogged>_4_<kind>`` is the producers' CPU time (user +
    system, summed over their threads or processes) per cycle, and
    ``logged_ratio_cpu_bound_4_<kind>`` unlogged's over logged's: on a host with fewer
    cores than producers (and Redis), the ratio cannot pass it.
    ``switches_per_cycle_*`` counts the producers' voluntary context switches (each a
    wait: for Redis, a sync, a lock) per cycle.
    ``--only PART`` measures only some parts.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import multiprocessing
import os
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from multiprocessing.connection import Connection
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
from sharedq.log import (
    Durability,
    GroupCommit,
    LogConfig,
    MessageInfo,
    RecordType,
    SyncStatistics,
    sync_statistics,
)
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
    logging_url: str,
) -> None:
    settings = {
        "unlogged": None,
        "every_commit": Durability.every_commit(),
        "interval_ms_50": Durability.interval(50),
        "every_record": Durability.every_record(),
        "duplex_ms_100": Durability.duplex(100),
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
                    base / f"cycles-{backend}" / label,
                    durability=durability,
                    strchkpt=None,
                    logging_structure=logging_url,
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


# -- (d) four producers ------------------------------------------------------------------------

#: The producers of (d): each a put -> get -> commit loop on a queue of its own.
PRODUCERS = 4
#: The two groups of (d): one whose managers log (durable, every_commit), one without.
PRODUCER_GROUPS: dict[str, tuple[str, GroupCommit | None]] = {
    "unlogged": ("PUNLOG", None),
    "logged": ("PHOST", GroupCommit.HOST),
    "logged_per_writer": ("PWRITER", GroupCommit.WRITER),
}


def _producer_manager(
    facility: CouplingFacility, label: str, index: int, root: Path
) -> QueueManager:
    """Manager ``index`` (1-based) of group ``label``: a group's managers share one log."""
    admin, group_commit = PRODUCER_GROUPS[label]
    recovery = None
    if group_commit is not None:
        recovery = RecoverySettings(
            root / admin,
            durability=Durability.every_commit(),
            strchkpt=None,
            log_config=LogConfig(group_commit=group_commit),
        )
    return QueueManager(facility, f"{admin}{index}", index, admin=admin, recovery=recovery)


def _setup_producer_groups(facility: CouplingFacility, root: Path) -> None:
    for label, (admin, _) in PRODUCER_GROUPS.items():
        facility.create(
            structure_params(admin, queues=PRODUCERS + 1, managers=8, messages=4 * PRODUCERS)
        )
        qm = _producer_manager(facility, label, PRODUCERS + 1, root)
        for n in range(1, PRODUCERS + 1):
            qm.define_queue(f"PROD.{n}")
        qm.close()


def _cycles(qm: QueueManager, queue_name: str, count: int) -> None:
    """The path users take: a persistent put, a get in a unit of work, commit."""
    queue = qm.open(queue_name)
    body = b"x" * 100
    for _ in range(count):
        queue.put(body, persistent=True)
        with qm.unit_of_work() as uow:
            queue.get(uow=uow)


def _syncs() -> SyncStatistics:
    return sync_statistics()


def _spent(before: SyncStatistics, after: SyncStatistics) -> tuple[int, int, float]:
    """Commits that waited, syncs made and seconds in syncs between two readings."""
    return (
        after.commits - before.commits,
        after.syncs - before.syncs,
        after.sync_seconds - before.sync_seconds,
    )


def _cpu_seconds() -> float:
    """This process's CPU time, user and system (every thread; to the nanosecond,
    where ``os.times`` counts clock ticks)."""
    return time.process_time()


def _switches() -> int:
    """The context switches this process's threads made so far (voluntary: waits)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw


def _producer_process(
    url: str, root: str, index: int, count: int, barrier: Any, conn: Connection
) -> None:
    """A process with one manager in each group; runs ``count`` cycles when told which."""
    facility = open_facility(url)
    managers = {
        label: _producer_manager(facility, label, index, Path(root)) for label in PRODUCER_GROUPS
    }
    try:
        conn.send("ready")
        while True:
            label = conn.recv()
            if label is None:
                break
            before = _syncs()
            barrier.wait()
            cpu, switches = _cpu_seconds(), _switches()
            started = time.monotonic()
            _cycles(managers[label], f"PROD.{index}", count)
            ended = time.monotonic()
            cpu, switches = _cpu_seconds() - cpu, _switches() - switches
            after = _syncs()
            conn.send((started, ended, *_spent(before, after), cpu, switches))
    finally:
        for qm in managers.values():
            qm.close()
        facility.close()


class _Run:
    """One measured round: cycles per second and the syncs the log made for them."""

    def __init__(
        self,
        cycles: int,
        seconds: float,
        commits: int,
        syncs: int,
        sync_seconds: float,
        cpu_seconds: float,
        switches: int,
    ) -> None:
        self.rate = cycles / seconds
        self.commits = commits
        self.syncs = syncs
        #: The producers' CPU time (user + system, all of them) per cycle.
        self.cpu_per_cycle = cpu_seconds / cycles
        #: The producers' voluntary context switches (waits: Redis, syncs, locks) per cycle.
        self.switches_per_cycle = switches / cycles
        #: What one sync took on average (0 without any).
        self.sync_s = sync_seconds / syncs if syncs else 0.0

    def sync_bound(self) -> float:
        """The most cycles/s the producers could make if syncs were all they waited
        for: each waits for two a cycle (its put's and its commit's), one after the
        other, however many commits share them."""
        return PRODUCERS / (2 * self.sync_s) if self.sync_s else float("inf")


def _in_threads(targets: Sequence[Callable[[], None]], cycles: int) -> _Run:
    barrier = threading.Barrier(len(targets) + 1)
    errors: list[BaseException] = []

    def run(target: Callable[[], None]) -> None:
        try:
            barrier.wait()
            target()
        except BaseException as error:  # reported below, not lost in the thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    before = _syncs()
    barrier.wait()
    cpu, switches = _cpu_seconds(), _switches()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    cpu, switches = _cpu_seconds() - cpu, _switches() - switches
    after = _syncs()
    if errors:
        raise errors[0]
    return _Run(cycles, elapsed, *_spent(before, after), cpu, switches)


@contextmanager
def _opened(managers: list[QueueManager]) -> Iterator[None]:
    try:
        yield
    finally:
        for qm in managers:
            qm.close()


def _threads_of_one_manager(
    facility: CouplingFacility, root: Path, count: int, opened: list[QueueManager]
) -> dict[str, Callable[[], _Run]]:
    runs: dict[str, Callable[[], _Run]] = {}
    for label in PRODUCER_GROUPS:
        qm = _producer_manager(facility, label, 1, root)
        opened.append(qm)

        def measure(qm: QueueManager = qm) -> _Run:
            targets = [lambda n=n: _cycles(qm, f"PROD.{n}", count) for n in range(1, PRODUCERS + 1)]
            return _in_threads(targets, count * PRODUCERS)

        runs[label] = measure
    return runs


def _managers_of_one_process(
    facility: CouplingFacility, root: Path, count: int, opened: list[QueueManager]
) -> dict[str, Callable[[], _Run]]:
    runs: dict[str, Callable[[], _Run]] = {}
    for label in PRODUCER_GROUPS:
        qms = [_producer_manager(facility, label, n, root) for n in range(1, PRODUCERS + 1)]
        opened.extend(qms)

        def measure(qms: list[QueueManager] = qms) -> _Run:
            targets = [
                partial(_cycles, qm, f"PROD.{n}", count) for n, qm in enumerate(qms, start=1)
            ]
            return _in_threads(targets, count * PRODUCERS)

        runs[label] = measure
    return runs


@contextmanager
def _processes(url: str, root: Path, count: int) -> Iterator[dict[str, Callable[[], _Run]]]:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(PRODUCERS)
    pipes = []
    children = []
    for index in range(1, PRODUCERS + 1):
        ours, theirs = context.Pipe()
        child = context.Process(
            target=_producer_process, args=(url, str(root), index, count, barrier, theirs)
        )
        child.start()
        pipes.append(ours)
        children.append(child)
    for pipe in pipes:
        assert pipe.recv() == "ready"

    def measure(label: str) -> _Run:
        for pipe in pipes:
            pipe.send(label)
        results = [pipe.recv() for pipe in pipes]
        seconds = max(r[1] for r in results) - min(r[0] for r in results)
        return _Run(
            count * PRODUCERS,
            seconds,
            sum(r[2] for r in results),
            sum(r[3] for r in results),
            sum(r[4] for r in results),
            sum(r[5] for r in results),
            sum(r[6] for r in results),
        )

    try:
        yield {label: partial(measure, label) for label in PRODUCER_GROUPS}
    finally:
        for pipe in pipes:
            pipe.send(None)
        for child in children:
            child.join(60)


def producer_figures(report: Report, base: Path, url: str, count: int, rounds: int) -> None:
    """(d): four producers at once, logged (durable) and not, as threads of one manager,
    managers of one process, and processes (one manager each)."""
    root = base / "producers"
    facility = open_facility(url)
    _setup_producer_groups(facility, root)
    headline: dict[str, float] = {}
    try:
        for kind in ("threads", "managers", "processes"):
            with contextlib.ExitStack() as stack:
                opened: list[QueueManager] = []
                stack.enter_context(_opened(opened))
                if kind == "threads":
                    runs = _threads_of_one_manager(facility, root, count, opened)
                elif kind == "managers":
                    runs = _managers_of_one_process(facility, root, count, opened)
                else:
                    runs = stack.enter_context(_processes(url, root, count))
                best: dict[str, _Run] = {}
                for _ in range(rounds):
                    for label, measure in runs.items():
                        run = measure()
                        if label not in best or run.rate > best[label].rate:
                            best[label] = run
            unlogged = best["unlogged"]
            report.add(f"cycles_per_s_unlogged_4_{kind}", unlogged.rate, "cycles/s", "redis")
            report.add(
                f"cpu_us_per_cycle_unlogged_4_{kind}",
                unlogged.cpu_per_cycle * 1e6,
                "us",
                "the producers' CPU (user + system) per cycle",
            )
            report.add(
                f"switches_per_cycle_unlogged_4_{kind}",
                unlogged.switches_per_cycle,
                "",
                "the producers' voluntary context switches per cycle",
            )
            for label, (_, group_commit) in PRODUCER_GROUPS.items():
                if group_commit is None:
                    continue
                run = best[label]
                suffix = "" if group_commit is GroupCommit.HOST else "_per_writer"
                ratio = run.rate / unlogged.rate
                per_commit = run.syncs / max(run.commits, 1)
                report.add(
                    f"cycles_per_s_logged{suffix}_4_{kind}",
                    run.rate,
                    "cycles/s",
                    f"every_commit, group_commit={group_commit.value}",
                )
                report.add(f"logged{suffix}_ratio_vs_unlogged_4_{kind}", ratio, "", "target >= 0.5")
                report.add(
                    f"fsyncs{suffix}_per_commit_4_{kind}",
                    per_commit,
                    "",
                    f"{run.syncs} syncs for {run.commits} commits; target <= 0.5",
                )
                report.add(
                    f"sync_ms{suffix}_4_{kind}", run.sync_s * 1000, "ms", "mean time of one sync"
                )
                report.add(
                    f"logged{suffix}_ratio_sync_bound_4_{kind}",
                    min(run.sync_bound() / unlogged.rate, 1.0),
                    "",
                    "the ratio if syncs were all the log cost (two waits a cycle)",
                )
                report.add(
                    f"cpu_us_per_cycle_logged{suffix}_4_{kind}",
                    run.cpu_per_cycle * 1e6,
                    "us",
                    "the producers' CPU (user + system) per cycle",
                )
                report.add(
                    f"switches_per_cycle_logged{suffix}_4_{kind}",
                    run.switches_per_cycle,
                    "",
                    "the producers' voluntary context switches per cycle",
                )
                report.add(
                    f"logged{suffix}_ratio_cpu_bound_4_{kind}",
                    unlogged.cpu_per_cycle / run.cpu_per_cycle,
                    "",
                    "CPU per unlogged cycle over per logged: the ratio if the cores were "
                    "all that limited both",
                )
                headline[f"ratio{suffix}_{kind}"] = ratio
                headline[f"fsyncs{suffix}_{kind}"] = per_commit
    finally:
        facility.close()
    report.add(
        "logged_ratio_vs_unlogged_4_producers",
        headline["ratio_processes"],
        "",
        "4 processes, a manager each; target >= 0.5",
    )
    report.add(
        "fsyncs_per_commit_4_producers",
        headline["fsyncs_processes"],
        "",
        "4 processes, a manager each; target <= 0.5",
    )


PARTS = ("replay", "checkpoint", "cycles", "producers")


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--redis", metavar="URL", help="a server to measure on")
    parser.add_argument(
        "--only", choices=PARTS, action="append", help="measure only these parts (repeatable)"
    )


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], _options)
    quick = args.quick
    parts = set(args.only or PARTS)
    logging.getLogger("sharedq").setLevel(logging.ERROR)  # recoveries say what they did
    report = Report("sharedq recovery", quick)
    base = Path(tempfile.mkdtemp(prefix="sharedq-bench-recovery-"))
    started = time.perf_counter()
    try:
        with redis_url(args.redis) as url, _facilities(url) as facilities:
            if "replay" in parts:
                replay_figures(report, base, facilities, 100_000 if quick else 1_000_000)
            if "checkpoint" in parts:
                checkpoint_figures(
                    report,
                    base,
                    facilities,
                    (10_000,) if quick else (10_000, 100_000),
                    2 if quick else 3,
                )
            if "cycles" in parts:
                counts = (
                    {
                        "unlogged": 1000,
                        "every_commit": 150,
                        "interval_ms_50": 1000,
                        "every_record": 100,
                        "duplex_ms_100": 400,
                    }
                    if quick
                    else {
                        "unlogged": 5000,
                        "every_commit": 600,
                        "interval_ms_50": 5000,
                        "every_record": 400,
                        "duplex_ms_100": 2000,
                    }
                )
                with redis_url(None) as logging_url:  # the logging structure's own Redis
                    cycle_figures(report, base, facilities, counts, 3 if quick else 5, logging_url)
            if "producers" in parts:
                producer_figures(report, base, url, 100 if quick else 1000, 3 if quick else 5)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    report.add("seconds", time.perf_counter() - started, "s")
    report.emit(args.json)


if __name__ == "__main__":
    main()
