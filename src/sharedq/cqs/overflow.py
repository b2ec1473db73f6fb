"""Structure overflow (seed 000, redbook §2.8): a CQS keeps working when a primary fills.

One :class:`Overflow` per CQS and structure pair.  Every ``check_every`` puts the CQS
reads the primary's statistics (one request, not one per put); the first CQS to see
data-element usage at or over ``OVFLWMAX`` takes the overflow master lock (lock-table
entry 2 of the primary, beside the control and quiesce locks) and:

1. tries to alter the primary to its maximum size: if usage is then below the
   threshold, that is all (OV-1, OV-2);
2. otherwise quiesces the pair (the checkpoint's quiesce lock: every other CQS's
   changes are held, never rejected) and selects the queues using the most elements
   (:mod:`sharedq.cqs.overflow_select`);
3. asks the Queue Overflow exit about each candidate; only approved ones overflow;
4. with an overflow structure, moves each approved queue whole to it through the
   primary's move queue (a move a new master finishes is looked for first, so it is
   never copied twice),
   records it in the overflow table and resumes; then a structure checkpoint.
   Without one, the approved queues' puts are refused (``QUEUE_IN_OVERFLOW``) until
   usage is 20 % below the threshold again.

The table (which queues are in overflow, since when) is one entry of the primary's
control queue, so every CQS routes the same way and structure recovery restores it
with the rest of the control queue.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

from sharedq.cf import CFError, LockHeld
from sharedq.cf.errors import AlterRejected
from sharedq.cf.types import HIGHEST_KEY, LOWEST_KEY, ById, ByKey
from sharedq.clock import Clock
from sharedq.cqs import overflow_parts as parts
from sharedq.cqs.errors import CQSReason, cqs_error
from sharedq.cqs.journal import Request
from sharedq.cqs.layout import Private
from sharedq.cqs.messages import unpack
from sharedq.cqs.names import text
from sharedq.cqs.overflow_room import FULL, NoRoom, fitting, move_back
from sharedq.cqs.overflow_select import MAX_QUEUES, Selection, Target, select
from sharedq.cqs.site import Site
from sharedq.recovery.control import ControlArea
from sharedq.recovery.master import release_if_failed
from sharedq.recovery.quiesce import hold_quiesce, release_quiesce

logger = logging.getLogger("sharedq.cqs.overflow")

#: The control-queue key of the overflow table (16 bytes, outside the recovery
#: machinery's X'FF' keys).
TABLE_KEY = b"CQSOVERFLOWTABLE"
#: The lock-table entry whose holder is the overflow master.
MASTER_LOCK = 2
#: Secondary key of a message on the move queue on its way to the overflow structure:
#: whichever CQS is master next finishes it.
MOVING = b"*OVERFLOW"

#: The Queue Overflow exit: given the pair's primary and a candidate queue, approve it.
OverflowExit = Callable[[str, bytes], bool]
#: The client's notification: ``(primary, event, queues)``, event ``"overflow"``,
#: ``"altered"`` or ``"normal"`` (the pair left overflow mode).
OverflowNotice = Callable[[str, str, tuple[bytes, ...]], None]


@dataclass(frozen=True)
class OverflowReport:
    """What one overflow process did."""

    altered: bool
    candidates: tuple[bytes, ...] = ()
    approved: tuple[bytes, ...] = ()
    moved: int = 0
    target: float = 0.0
    left: float = 0.0
    #: Approved queues left in the primary: the overflow structure had no room for them.
    full: tuple[bytes, ...] = ()


@dataclass
class Table:
    """Which queues are in overflow (name -> since, microseconds) and the pair's mode."""

    mode: bool = False
    queues: dict[bytes, int] = field(default_factory=dict)
    sizes: dict[bytes, int] = field(default_factory=dict)

    def pack(self) -> bytes:
        queues = {q.hex(): [t, self.sizes.get(q, 0)] for q, t in self.queues.items()}
        return json.dumps({"mode": self.mode, "queues": queues}).encode()

    @classmethod
    def unpack(cls, data: bytes) -> Table:
        raw = json.loads(data)
        queues = {bytes.fromhex(q): v for q, v in raw["queues"].items()}
        return cls(
            raw["mode"], {q: v[0] for q, v in queues.items()}, {q: v[1] for q, v in queues.items()}
        )


class Overflow:
    """Overflow processing of one structure pair, as one CQS takes part in it."""

    def __init__(
        self,
        owner: str,
        primary: Site,
        overflow: Site | None,
        *,
        threshold: int,
        target: Target,
        clock: Clock,
        check_every: int = 32,
        scan_interval_s: float = 900.0,
        exit: OverflowExit | None = None,
        notify: OverflowNotice | None = None,
        checkpoint: Callable[[], object] | None = None,
        faults: Callable[[str], None] | None = None,
        max_wait_s: float = 60.0,
        refresh_s: float = 1.0,
        record: Callable[..., None] | None = None,
    ) -> None:
        self.owner = owner
        self.primary = primary
        self.overflow = overflow
        self.threshold = threshold
        self.target = target
        self.clock = clock
        self.check_every = check_every
        self.scan_interval_s = scan_interval_s
        self.exit = exit
        self.notify = notify
        self.checkpoint = checkpoint
        self.faults = faults
        self.max_wait_s = max_wait_s
        self.refresh_s = refresh_s
        #: Logs an OVERFLOW record (type 44) to the pair's log stream, when it has one.
        self.record = record
        self.refreshed_s = clock.monotonic_s()
        self.table = Table()
        self.puts = 0
        self.checks = 0
        self.last_scan_s = clock.monotonic_s()
        self.refresh()
        if not self.table.mode and overflow is not None:
            self.rebuild_table()

    @property
    def name(self) -> str:
        return self.primary.acc.name

    # -- routing ---------------------------------------------------------------------------

    def site(self, queue: bytes) -> Site:
        """The structure a request for ``queue`` goes to (the table read again when
        ``refresh_s`` passed: what another CQS's process changed)."""
        if self.clock.monotonic_s() - self.refreshed_s >= self.refresh_s:
            self.refresh()
        if self.overflow is not None and queue in self.table.queues:
            return self.overflow
        return self.primary

    def before_put(self, queue: bytes) -> Site:
        """Where a put goes; refused for a queue in overflow on a pair without an
        overflow structure (OV-8)."""
        site = self.site(queue)
        if self.overflow is None and queue in self.table.queues:
            raise cqs_error(
                CQSReason.QUEUE_IN_OVERFLOW,
                f"{text(queue)} is in overflow on {self.name}, which has no overflow structure",
            )
        return site

    def after_put(self) -> None:
        """Count a put; every ``check_every`` puts, check usage (one request)."""
        self.puts += 1
        if self.puts % self.check_every == 0:
            self.check()

    # -- the check, the process and the scan -------------------------------------------------

    def usage(self) -> tuple[int, int]:
        stats = self.primary.acc.conn.statistics()
        return stats.elements, stats.max_elements

    def check(self) -> OverflowReport | None:
        """Read usage (one request); at or over the threshold, or in overflow mode (as
        this CQS last read the table), read the table, take over a failed master, run
        the process if the threshold is reached, leave overflow mode when the rule for
        this pair says so, and scan when due."""
        self.checks += 1
        used, capacity = self.usage()
        percent = 100.0 * used / capacity
        if percent < self.threshold and not self.table.mode:
            return None  # the usual case: one request
        self.refresh()
        self.take_over()
        report = None
        if percent >= self.threshold:
            report = self.run()
        elif self.overflow is None and self.table.mode:
            goal = self.target.percent(self.threshold, percent)
            if percent <= goal:
                self._leave_mode()
        if self.overflow is not None and self.table.mode:
            self.scan()
        return report

    def refresh(self) -> None:
        self.refreshed_s = self.clock.monotonic_s()
        entry = self.primary.acc.conn.read(ByKey(Private.CONTROL.first, TABLE_KEY))
        self.table = Table() if entry is None else Table.unpack(entry.data)

    def rebuild_table(self) -> tuple[bytes, ...]:
        """After structure recovery the table may be missing (an SRDS holds messages,
        not the control queue's overflow entry): every client queue with messages in
        the overflow structure is in overflow.  Empty ones would have left at the next
        scan anyway."""
        assert self.overflow is not None
        found = {
            entry.key
            for header in self.overflow.layout.client_headers()
            for entry in self.overflow.acc.scan(header, LOWEST_KEY, HIGHEST_KEY)
            if entry.key[0] not in (2, 6)
        }
        if found:
            now = self.clock.now_us()
            self.table = Table(True, dict.fromkeys(sorted(found), now))
            self._store()
            logger.info("%s: overflow table rebuilt: %d queues", self.name, len(found))
        return tuple(sorted(found))

    def _store(self) -> None:
        conn = self.primary.acc.conn
        entry = conn.read(ByKey(Private.CONTROL.first, TABLE_KEY))
        if entry is not None:
            conn.delete(ById(entry.entry_id, Private.CONTROL.first))
        conn.write(Private.CONTROL.first, TABLE_KEY, self.table.pack())

    def _fault(self, point: str) -> None:
        if self.faults is not None:
            self.faults(point)

    @contextmanager
    def _unless_dead(self, release: Callable[[], None]) -> Iterator[None]:
        """Release a lock when the block ends or fails, but not when the server is
        stopped dead (a ``BaseException``: a killed process releases nothing; its
        locks go with its user when it is declared failed)."""
        try:
            yield
        except Exception:
            release()
            raise
        release()

    def _unlock_master(self) -> None:
        with suppress(CFError):
            self.primary.acc.conn.unlock(MASTER_LOCK)

    def _master(self) -> bool:
        conn = self.primary.acc.conn
        try:
            conn.lock(MASTER_LOCK)
            return True
        except LockHeld:
            holder = conn.lock_holder(MASTER_LOCK)
            if holder is not None and release_if_failed(conn, holder):
                with suppress(LockHeld):
                    conn.lock(MASTER_LOCK)
                    return True
            return False

    def take_over(self) -> bool:
        """A master that died mid-way (its user failed, holding the master lock): take
        the lock, finish what it moved and what it left of the queues it recorded, and
        resume the structure (its quiesce lock went with its user).  One request when
        no process is under way."""
        conn = self.primary.acc.conn
        holder = conn.lock_holder(MASTER_LOCK)
        if holder is None or holder == conn.user_id or not self._master():
            return False
        with self._unless_dead(self._unlock_master):
            logger.warning("%s: overflow master (user %d) failed: taken over", self.name, holder)
            self.refresh()
            self.finish_moves()
            self.finish_queues()
            self._fault("taken-over")
        if self.checkpoint is not None:
            self.checkpoint()
        self._tell("overflow", tuple(self.table.queues))
        return True

    def finish_queues(self) -> int:
        """Whatever of a queue in overflow is still on the primary goes over too, while
        the overflow structure has room."""
        if self.overflow is None:
            return 0
        return self._move_while_room(tuple(self.table.queues))

    def _move_while_room(self, queues: tuple[bytes, ...]) -> int:
        """:meth:`move_queue` of each queue until the overflow structure is full; the
        rest stays on the primary, readable (reads look at both structures while the
        pair is in overflow mode), and the next scan moves it when there is room."""
        moved = 0
        for queue in queues:
            try:
                moved += self.move_queue(queue)
            except NoRoom as stop:
                logger.warning(
                    "%s: %s full while moving %s: the rest stays in the primary for now",
                    self.name,
                    self.overflow.acc.name if self.overflow is not None else "",
                    text(queue),
                )
                return moved + stop.moved
        return moved

    def run(self) -> OverflowReport | None:
        """The overflow process as master; ``None`` when another CQS is master."""
        if not self._master():
            return None
        conn = self.primary.acc.conn
        with self._unless_dead(self._unlock_master):
            self._fault("master")
            self.refresh()
            self.finish_moves()
            self.finish_queues()
            used, capacity = self.usage()
            if 100.0 * used / capacity < self.threshold:
                return None
            if self._alter():
                logger.info("%s: altered larger, no overflow", self.name)
                self._tell("altered", ())
                return OverflowReport(altered=True)
            area = ControlArea()
            hold_quiesce(conn, area, timeout=self.max_wait_s, clock=self.clock)
            with self._unless_dead(lambda: release_quiesce(conn, area)):
                self._fault("quiesced")
                selection = self._select()
                self._fault("selected")
                approved = tuple(q for q in selection.queues if self._approved(q))
                if not approved:
                    logger.warning("%s: overflow mode, no queue approved by the exit", self.name)
                moving, full = approved, tuple[bytes, ...]()
                if self.overflow is not None:
                    moving, full = fitting(self.primary, self.overflow, approved)
                if full:
                    logger.warning(
                        "%s: no room on %s for %s: they stay in the primary",
                        self.name,
                        self.overflow.acc.name if self.overflow is not None else "",
                        ", ".join(text(q) for q in full),
                    )
                now = self.clock.now_us()
                self.table.mode = True
                sizes = self._sizes()
                for queue in moving:
                    self.table.queues[queue] = now
                    self.table.sizes[queue] = sizes.get(queue, 0)
                self._store()  # first: a master that takes over knows what to finish
                self._fault("recorded")
                moved = self._move_while_room(moving) if self.overflow is not None else 0
                self._fault("moved")
            if self.checkpoint is not None:
                self.checkpoint()
            self._tell("overflow", moving)
            return OverflowReport(
                False, selection.queues, approved, moved, selection.target, selection.left, full
            )

    def _alter(self) -> bool:
        conn = self.primary.acc.conn
        stats = conn.statistics()
        if stats.size >= stats.max_size:
            return False
        try:
            conn.alter(size=stats.max_size)
        except AlterRejected:
            return False
        used, capacity = self.usage()
        return 100.0 * used / capacity < self.threshold

    def _approved(self, queue: bytes) -> bool:
        if self.exit is None:
            return True
        return bool(self.exit(self.name, queue))

    def _sizes(self) -> dict[bytes, int]:
        """Elements each client queue uses in the primary (one scan per header)."""
        acc, size = self.primary.acc, self.primary.acc.conn.statistics().element_size
        sizes: dict[bytes, int] = {}
        for header in self.primary.layout.client_headers():
            for entry in acc.scan(header, LOWEST_KEY, HIGHEST_KEY):
                used = max(1, -(-len(entry.data) // size))
                sizes[entry.key] = sizes.get(entry.key, 0) + used
        return sizes

    def _select(self) -> Selection:
        used, capacity = self.usage()
        sizes = {q: n for q, n in self._sizes().items() if q[0] not in (2, 6)}
        return select(
            used,
            capacity,
            sizes,
            threshold=self.threshold,
            target=self.target,
            limit=MAX_QUEUES,
            exclude=frozenset(self.table.queues),
        )

    # -- moving a queue whole --------------------------------------------------------------------

    def move_queue(self, queue: bytes) -> int:
        """Every message of ``queue`` from the primary to the overflow structure, each
        whole (its staged parts too: :mod:`sharedq.cqs.overflow_parts`) through the
        primary's move queue; returns how many."""
        primary = self.primary
        header, via = primary.layout.header(queue), Private.MOVE.header(queue)
        moved = 0
        while (entry := primary.acc.read(ByKey(header, queue))) is not None:
            primary.acc.move(
                ById(entry.entry_id, header),
                via,
                new_key=queue,
                new_secondary_key=MOVING,
                kind=primary.means(Request.MOVE_STEP),
                queue=text(queue),
                uow=unpack(entry.data)[0].uow,
            )
            self._fault("on-move-queue")
            try:
                self._finish(entry.entry_id, via)
            except NoRoom as stop:
                stop.moved += moved
                raise
            moved += 1
        return moved

    def _finish(self, entry_id: bytes, via: int, *, taken_over: bool = False) -> None:
        """From the primary's move queue to the overflow structure with its staged
        parts, then deleted from the move queue.  No room: the parts written go back,
        then part 1 to the head of its queue (:class:`NoRoom`), so the message stays
        whole on the primary; if the primary has no room for the parts either, part 1
        stays on the move queue, unread, for the next scan.  ``taken_over``: a dead
        master's move, which may have been written already."""
        assert self.overflow is not None
        primary, overflow = self.primary, self.overflow
        entry = primary.acc.read(ById(entry_id, via))
        if entry is None:
            return
        prefix, _ = unpack(entry.data)
        try:
            parts.write_whole(primary, overflow, entry, look=taken_over, fault=self._fault)
        except FULL:
            if prefix.staging is not None:
                try:
                    parts.take_back(primary, overflow, prefix.staging, self._fault)
                except FULL:
                    logger.warning("%s: no room to take back %s", self.name, text(entry.key))
                    raise NoRoom(0) from None
            move_back(primary, entry_id, via, entry.key, prefix.uow)
            raise NoRoom(0) from None
        self._fault("written")
        primary.acc.delete(
            ById(entry_id, via),
            kind=primary.means(Request.DELETE),
            queue=text(entry.key),
            uow=prefix.uow,
            data_wanted=False,
        )

    def finish_moves(self) -> int:
        """A master that died mid-way left messages on the move queue: finish them."""
        if self.overflow is None:
            return 0
        done = 0
        for via in Private.MOVE.headers():
            for entry in self.primary.acc.scan(via, LOWEST_KEY, HIGHEST_KEY):
                if entry.secondary_key == MOVING:
                    try:
                        self._finish(entry.entry_id, via, taken_over=True)
                    except NoRoom:
                        return done  # back on the primary: the next scan moves it
                    done += 1
        return done

    # -- the scan and leaving overflow mode -----------------------------------------------------

    def scan(self, *, force: bool = False) -> tuple[bytes, ...]:
        """Every ``scan_interval_s``: queues in overflow with no entries left (ready,
        locked or moving) go back to the primary; none left, the pair leaves overflow
        mode (OV-9).  Returns the queues returned."""
        now = self.clock.monotonic_s()
        if not force and now - self.last_scan_s < self.scan_interval_s:
            return ()
        if not self._master():
            return ()
        self.last_scan_s = now
        with self._unless_dead(self._unlock_master):
            self.refresh()
            self.finish_moves()  # one left on the move queue when no room was anywhere
            self.finish_queues()  # what a CQS put to the primary before it saw the table
            empty = tuple(q for q in self.table.queues if self._empty(q))
            for queue in empty:
                del self.table.queues[queue]
                self.table.sizes.pop(queue, None)
            if empty:
                self._store()
                self._tell("returned", empty)
            if self.table.mode and not self.table.queues:
                self._leave_mode()
            return empty

    def _empty(self, queue: bytes) -> bool:
        assert self.overflow is not None
        acc, layout = self.overflow.acc, self.overflow.layout
        for locator in (
            ByKey(layout.header(queue), queue),
            ByKey(Private.LOCK.header(queue), queue),
            ByKey(Private.MOVE.header(queue), queue),
        ):
            if acc.read(locator) is not None:
                return False
        return True

    def _leave_mode(self) -> None:
        left = tuple(self.table.queues)
        self.table = Table()
        self._store()
        logger.info("%s: overflow mode ended", self.name)
        self._tell("normal", left)

    def _tell(self, event: str, queues: tuple[bytes, ...]) -> None:
        if self.record is not None:
            used, capacity = self.usage()
            names = [text(q) for q in queues]
            self.record(event=event, queues=names, elements=used, max_elements=capacity)
        if self.notify is not None:
            self.notify(self.name, event, queues)

    # -- what an operator sees ----------------------------------------------------------------

    def state(self) -> dict[str, object]:
        """``/DISPLAY OVERFLOWQ STRUCTURE``: the mode and each queue, since when, size."""
        self.refresh()
        return {
            "structure": self.name,
            "overflow_structure": None if self.overflow is None else self.overflow.acc.name,
            "mode": self.table.mode,
            "queues": [
                {"queue": q, "since_us": t, "elements": self.table.sizes.get(q, 0)}
                for q, t in sorted(self.table.queues.items())
            ],
        }


@dataclass(frozen=True)
class OverflowOptions:
    """A CQS's part in overflow processing (the threshold and the target reading are
    the pair's: :class:`~sharedq.cqs.pair.StructurePair`).

    ``exit``: the Queue Overflow exit; ``notify``: the client's notification;
    ``check_every``: puts between two usage checks; ``scan_interval_s``: how often
    queues in overflow are looked at for emptiness (15 minutes); ``faults``: called
    at each step of a process this CQS runs as master (crash and hold tests)."""

    exit: OverflowExit | None = None
    notify: OverflowNotice | None = None
    check_every: int = 32
    scan_interval_s: float = 900.0
    faults: Callable[[str], None] | None = None
    #: Seconds between two reads of the overflow table (0: before every request).
    refresh_s: float = 1.0

    def __post_init__(self) -> None:
        if type(self.check_every) is not int or self.check_every < 1:
            raise cqs_error(CQSReason.BAD_ARGUMENT, f"check_every {self.check_every!r}")
        if not isinstance(self.scan_interval_s, int | float) or self.scan_interval_s < 0:
            raise cqs_error(CQSReason.BAD_ARGUMENT, f"scan_interval_s {self.scan_interval_s!r}")
