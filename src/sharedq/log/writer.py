"""A log writer: one server's (or queue manager's) appends to the stream.

Each writer owns a staging directory (held with an exclusive ``flock``, so a second
owner of the same name, in this process or another, is refused) and appends framed
records to its open segment; the structure's sequence numbers order the records of
all writers when they are read (``reader.py``).  Appends from several threads are
safe: the lsn is taken and the frame written under one lock, so a writer's file order
is its lsn order.

The writer's state file (``WRITER``, a self-checking state file in its staging
directory, in both roots with dual logging) says which segment it appends to, and,
when it closed cleanly, its last lsn.  It is rewritten when the writer opens, at each
segment switch and at close: readers learn from it where the writer's records end,
so that a missing last segment or a damaged tail of a cleanly closed writer is seen
as the loss it is.

Reopening.  A writer that starts where a previous owner of its name stopped reads
its newest segment.  A *torn tail* (bytes after the last sound frame, nothing sound
after them) of a writer that did not close cleanly is a frame it was writing when it
died: never acknowledged, it is copied to ``damaged/`` and cut off.  Any other damage
stays where it is for the readers (who skip it, repair it from the other copy, or
report the loss) and the writer starts a new segment at once, so that nothing is
ever appended after damage.  The lsn always goes on past every lsn the writer ever
gave: past its last sound record, and past the last lsn its state file records.  If
the segment the state file names is gone altogether, the lsns it held are unknown:
the writer jumps :data:`LSN_JUMP` ahead and records the skipped range in its state as
lost, for recovery to refuse or an operator to accept.  :attr:`LogWriter.repaired`
says what was cut off, :attr:`LogWriter.found_damage` what was left in place.

Duplex.  Under ``Durability.duplex`` a commit pushes the frames written since the last
push to the stream's logging structure instead of syncing (:mod:`.duplex`), and a
reopening writer whose machine booted since it stopped copies back what only the
logging structure holds before it appends.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import MethodType
from typing import Any, TextIO

import google_crc32c
import msgpack

from sharedq.clock import SYSTEM_CLOCK, Clock, SystemClock
from sharedq.log.changes import ChangeLogging, blank
from sharedq.log.codec import FRAME, FRAME_HEADER_BYTES, MAX_BODY_BYTES, Damage
from sharedq.log.config import DurabilityMode, GroupCommit, LogConfig
from sharedq.log.datasets import arrow_exception, read_dataset_meta
from sharedq.log.duplex import DuplexCopy, held_frames
from sharedq.log.errors import LogError, LogReason, log_error
from sharedq.log.files import make_dirs
from sharedq.log.groupsync import HostSync, count_commit, host_sync
from sharedq.log.layout import (
    Layout,
    check_writer_name,
    segment_copies,
    segment_name,
    take_ownership,
)
from sharedq.log.logging_structure import (
    LoggingStructure,
    LoggingUnavailable,
    needs_copy_back,
    this_boot,
)
from sharedq.log.offload import (
    ClosedSegment,
    Offloader,
    OffloadResult,
    choose_segments,
    offload_segments,
)
from sharedq.log.records import (
    ALL_FIELDS,
    FIELD_NAMES,
    LSN_JUMP,
    ChangeOp,
    Checker,
    LogPosition,
    PackedPayload,
    RecordType,
    check_values,
    pack_payload,
)
from sharedq.log.retention import LogSpace
from sharedq.log.segment import (
    PREALLOCATE_BYTES,
    SegmentContents,
    SegmentFile,
    read_segment,
    set_aside_tail,
)
from sharedq.log.statefile import read_state, write_state

logger = logging.getLogger("sharedq.log")


_SEQ, _OP, _WRITER, _LSN, _TYPE, _STRUCTURE, _TIME = range(7)
_time_ns = time.time_ns
_frame_header = FRAME.pack
_crc = google_crc32c.value
#: A record's position made by C (a named tuple's ``__new__`` is a Python call).
_position: Callable[[tuple[Any, ...]], LogPosition] = MethodType(tuple.__new__, LogPosition)
_PAYLOAD = FIELD_NAMES.index("payload")
_NONE = int(ChangeOp.NONE)
#: ``os.access`` checks with the effective ids (as ``stat`` would) where it can.
_EFFECTIVE_IDS = os.access in os.supports_effective_ids


class LogWriter(ChangeLogging):
    """Appends one writer's records; create it with ``LogStream.writer``."""

    def __init__(
        self,
        *,
        layout: Layout,
        config: LogConfig,
        space: LogSpace,
        name: str,
        structure: str,
        clock: Clock = SYSTEM_CLOCK,
        copy: Layout | None = None,
        logging: LoggingStructure | None = None,
    ) -> None:
        self.name = check_writer_name(name)
        duplex = config.durability.mode is DurabilityMode.DUPLEX
        if duplex and logging is None:
            raise log_error(
                LogReason.BAD_CONFIG,
                f"writer {name}: duplex durability needs the stream's logging structure "
                "(LogStream(logging_structure=...))",
            )
        self.structure = structure
        self._layout = layout
        self._copy = copy
        self._layouts = [layout] if copy is None else [layout, copy]
        self._config = config
        self._space = space
        self._clock = clock
        #: The host's clock: a record's time read without a call to it.
        self._system_clock = type(clock) is SystemClock
        self._dir = layout.writer_dir(name)
        make_dirs(self._dir)
        self._lock_file: TextIO | None = take_ownership(self._dir, name, clock)
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._offload_mutex = threading.Lock()
        self._closed = False
        self._offload_pending = False
        self._observed: dict[str, int] = {}
        #: A torn tail found (and cut off) at the end of the newest segment when reopening.
        self.repaired: Damage | None = None
        #: Damage found when reopening and left in place for the readers.
        self.found_damage: list[Damage] = []
        #: Lsn ranges this writer knows are lost: ``(first, last, why)``.
        self.lost: list[tuple[int, int, str]] = []
        #: What the most recent offload did.
        self.last_offload: OffloadResult | None = None
        #: The state file the previous owner left (read when reopening).
        self._stopped: dict[str, Any] | None = None
        #: The copy of unsynced records in the logging structure (duplex durability).
        self._duplex = (
            DuplexCopy(logging, self.name, replicas=config.durability.replicas)
            if logging is not None and duplex
            else None
        )
        self._boot = this_boot()
        #: What the state file says: commits push to the logging structure.
        self._pushing = False
        try:
            self._active = self._recover()
            if logging is not None and needs_copy_back(self._stopped):
                self._copy_back(logging)
            if self._duplex is not None:
                self._duplex.start()
            self._write_state(closed=False)
        except BaseException:
            self._release_ownership()
            raise
        self._roll_request = layout.roll_request(name)
        # Looked for after every sync: a plain ``os.path.exists`` of a str is one stat,
        # without pathlib's few microseconds around it.
        self._roll_request_path = os.fspath(self._roll_request)
        self._written_lsn = self._next_lsn - 1
        self._durable_lsn = self._written_lsn
        self._staging = self._measure_staging()
        space.count_room(name, self._unused_room)
        #: The stream has no maximum size: no record waits for room.
        self._unlimited = space.max_bytes is None
        # Settings read on every append, kept at hand.
        self._segment_bytes = config.segment_bytes
        self._high_bytes = config.high_offload_bytes
        self._sync_each = config.durability.mode is DurabilityMode.EVERY_RECORD
        self._packer = msgpack.Packer(use_bin_type=True)
        self._groups = self._host_syncs() if config.group_commit is GroupCommit.HOST else []
        if len(self._groups) == 1:
            self._groups[0].join(self)
        self._window_s = config.group_commit_window_us / 1e6
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        durability = config.durability
        if durability.interval_ms is not None:  # interval, duplex
            assert durability.interval_ms is not None
            self._flusher = threading.Thread(
                target=self._flush_every,
                args=(durability.interval_ms / 1000.0,),
                name=f"sharedq-log-flush-{name}",
                daemon=True,
            )
            self._flusher.start()
        self._offloader = Offloader(self._offload_work, name) if config.background_offload else None

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return (
            f"<LogWriter {self.name!r} {state} lsn={self._written_lsn} "
            f"durable={self._durable_lsn} staging={self._staging}>"
        )

    # -- opening ---------------------------------------------------------------------

    def _recover(self) -> SegmentFile:
        """Find where the previous owner stopped; repair and reopen, or start a segment."""
        for layout in self._layouts:
            directory = layout.writer_dir(self.name)
            make_dirs(directory)
            for leftover in directory.glob(".*.tmp"):  # a segment being created at a crash
                leftover.unlink(missing_ok=True)
        state = self._stopped = self._read_state()
        last_lsn = 0
        own = [(d, p) for d, p in self._layout.dataset_files() if d.writer == self.name]
        if own:
            newest_name, newest_path = max(own, key=lambda item: item[0].last_lsn)
            last_lsn = newest_name.last_lsn
            try:
                meta = read_dataset_meta(newest_path)
                self._observed = {k: high for k, (_, high) in meta.ranges.items()}
            except Exception:  # a damaged data set is reported by readers
                pass
        closed_cleanly = False
        if state is not None:
            closed_cleanly = bool(state.get("closed"))
            last_lsn = max(last_lsn, int(state.get("last_lsn", 0)))
            for structure, seq in dict(state.get("observed", {})).items():
                self._note_observed(structure, int(seq))
            self.lost = [(int(a), int(b), str(why)) for a, b, why in state.get("lost", [])]
        segments = self._segment_copies()
        expected = None if state is None else int(state["segment"])
        if (
            expected is not None
            and not any(first >= expected for first, _ in segments)
            and not any(d.last_lsn >= expected for d, _ in own)
        ):
            return self._after_vanished_segment(expected, last_lsn)
        if not segments:
            self._next_lsn = last_lsn + 1
            return self._create_segment()
        first_lsn, paths = segments[-1]
        copies = [read_segment(path) for path in paths if path.exists()]
        last_lsn = max([last_lsn, first_lsn - 1, *(c.last_lsn for c in copies)])
        for contents in copies:
            for record in contents.records:
                if record.op != _NONE:
                    self._note_observed(record.structure, record.seq)
        self._next_lsn = last_lsn + 1
        left_in_place = False
        torn: list[SegmentContents] = []
        for contents in copies:
            tail = contents.tail
            if tail is not None and not closed_cleanly:
                torn.append(contents)
                self.repaired = tail
                kept = set_aside_tail(contents, self._layout.damaged, self.name)
                logger.warning(
                    "writer %s reopened a segment with a torn tail (a frame being written "
                    "when it stopped): %s; the bytes are kept in %s and cut off",
                    self.name,
                    tail,
                    kept,
                )
                found = [d for d in contents.damages if d is not tail]
            else:
                found = list(contents.damages)
            if found:
                left_in_place = True
                self.found_damage.extend(found)
                logger.warning(
                    "writer %s found damage in its segment %s and leaves it for the "
                    "readers; appending goes on in a new segment: %s",
                    self.name,
                    contents.path,
                    "; ".join(map(str, found)),
                )
        if len(copies) == 1 and len(self._layouts) == 1 and not left_in_place:
            segment = SegmentFile.reopen(copies[0], **self._room())
            if segment.size < self._config.segment_bytes or not copies[0].records:
                return segment
            segment.close()
            return self._create_segment()
        for contents in copies:
            room = (
                contents.preallocated
                and contents.tail is None
                and contents.size > contents.good_end
            )
            if room or any(contents is t for t in torn):
                # Cut the torn tail, or the room allocated ahead (zeros only), of this
                # copy: the segment is closed now, and its copies alike.
                SegmentFile.reopen(contents).close()
        return self._create_segment()

    def _after_vanished_segment(self, expected: int, last_lsn: int) -> SegmentFile:
        """The segment the state file names is gone, and no data set holds it."""
        self._next_lsn = max(last_lsn + 1, expected + LSN_JUMP)
        why = (
            f"segment {segment_name(expected)} of writer {self.name} was missing when the "
            "writer reopened: the records it held are lost"
        )
        self.lost.append((expected, self._next_lsn - 1, why))
        logger.error("%s; lsns %d and on are skipped", why, expected)
        return self._create_segment()

    def _copy_back(self, logging: LoggingStructure) -> None:
        """Append, synced, what only the logging structure holds of the previous
        owner's records: it pushed instead of syncing and its machine booted since.

        If the structure lost the writer's set, the records after the last sync may be
        gone: the lsn jumps as for a vanished segment and the range is recorded lost.
        """
        try:
            held = held_frames(logging, self.name)
        except LoggingUnavailable as exc:
            raise log_error(
                LogReason.LOGGING_UNAVAILABLE,
                f"writer {self.name} stopped without closing on a machine that has booted "
                "since: its last records may be only in the logging structure, which does "
                f"not answer ({exc}); start it again once the logging structure is back",
                writer=self.name,
            ) from exc
        if held is None:
            self._skip_unknown(
                f"writer {self.name} stopped without closing on a machine that has booted "
                f"since, and the logging structure {logging.url} lost its copy: records "
                "written after its last sync (if any) are lost"
            )
            return
        frames, problem = held
        active = self._active
        copied = 0
        for record, frame in frames:
            if record.lsn < self._next_lsn:
                continue  # on disk already
            if record.lsn > self._next_lsn:
                why = (
                    f"writer {self.name}: lsns {self._next_lsn}..{record.lsn - 1} are neither "
                    f"in its segment nor in the logging structure {logging.url}"
                )
                self.lost.append((self._next_lsn, record.lsn - 1, why))
                logger.error("%s", why)
            active.write(frame)
            active.last_lsn = record.lsn
            self._next_lsn = record.lsn + 1
            if record.op != _NONE:
                self._note_observed(record.structure, record.seq)
            copied += 1
        active.sync()
        logger.warning(
            "writer %s: copied back %d records from the logging structure %s (its machine "
            "booted since it stopped)",
            self.name,
            copied,
            logging.url,
        )
        if problem is not None:  # what followed the bad batch is unknown
            self._skip_unknown(
                f"writer {self.name}: the logging structure {logging.url} holds its records "
                f"only up to lsn {self._next_lsn - 1}: {problem}; any later are lost"
            )
        with contextlib.suppress(LoggingUnavailable):
            logging.drop(self.name)

    def _skip_unknown(self, why: str) -> None:
        """Records from the next lsn on may have existed and are nowhere: jump past any
        lsn they could have had, record the range lost, and start a new segment."""
        first = self._next_lsn
        self._next_lsn += LSN_JUMP
        self.lost.append((first, self._next_lsn - 1, why))
        logger.error("%s; lsns %d and on are skipped", why, first)
        self._active.close(sync=True)
        self._active = self._create_segment()

    def _segment_copies(self) -> list[tuple[int, list[Path]]]:
        return segment_copies(self._layouts, self.name)

    def _read_state(self) -> dict[str, Any] | None:
        """The writer's state file, from the first copy that reads; damaged ones set aside."""
        for layout in self._layouts:
            path = layout.writer_state(self.name)
            try:
                return read_state(path)
            except LogError as exc:
                logger.error("%s; the writer goes on without it", exc)
                with contextlib.suppress(OSError):
                    path.replace(layout.damaged / f"{self.name}.WRITER.{os.getpid()}")
        return None

    def _write_state(self, *, closed: bool) -> None:
        """Record where the writer stands (open segment, last lsn, lost ranges)."""
        body = {
            "writer": self.name,
            "segment": self._active.first_lsn,
            "closed": closed,
            "last_lsn": self._next_lsn - 1,
            "observed": dict(self._observed),
            "lost": [list(item) for item in self.lost],
            # Only while commits push: a reopening writer then needs the logging
            # structure's copy; while they sync to disk (structure down), it does not.
            "duplex": self._duplex is not None and self._duplex.whole,
            "boot": self._boot,
        }
        for layout in self._layouts:
            write_state(layout.writer_state(self.name), body)
        self._pushing = bool(body["duplex"])

    def _note_observed(self, structure: str, seq: int) -> None:
        if seq > self._observed.get(structure, 0):
            self._observed[structure] = seq

    def _create_segment(self) -> SegmentFile:
        name = segment_name(self._next_lsn)
        paths = [layout.writer_dir(self.name) / name for layout in self._layouts]
        return SegmentFile.create(paths, self._next_lsn, **self._room())

    def _room(self) -> dict[str, int]:
        """How the open segment allocates room ahead (none unless configured)."""
        config = self._config
        return {
            "preallocate": PREALLOCATE_BYTES if config.preallocate else 0,
            "limit": config.segment_bytes,
        }

    def _unused_room(self) -> int:
        """Bytes allocated ahead in the open segment: on disk, but no records."""
        active = getattr(self, "_active", None)
        return 0 if active is None or active.closed else active.allocated - active.size

    def _host_syncs(self) -> list[HostSync]:
        """The host's group commit of each file system the writer's segments are on
        (one, or two with dual logging on two); none where ``syncfs`` is missing."""
        groups: dict[int, HostSync] = {}
        for layout in self._layouts:
            group = host_sync(layout.writer_dir(self.name))
            if group is None:
                return []
            groups.setdefault(group.device, group)
        return list(groups.values())

    def _measure_staging(self) -> int:
        """The bytes of this writer's records in staging (room allocated ahead is not
        counted: it would start offloads, and fill the log, with nothing)."""
        total = 0
        for _, path in self._layout.segments(self.name):
            with contextlib.suppress(FileNotFoundError):
                total += path.stat().st_size
        return total - self._unused_room()

    # -- appending -------------------------------------------------------------------

    def append(
        self,
        record_type: RecordType,
        *,
        op: ChangeOp = ChangeOp.NONE,
        seq: int | None = None,
        structure: str | None = None,
        entry_id: bytes | None = None,
        list_number: int | None = None,
        from_list: int | None = None,
        key: bytes | None = None,
        secondary_key: bytes | None = None,
        set_secondary_key: bool | None = None,
        version: int | None = None,
        increment_version: bool | None = None,
        data: bytes | None = None,
        adjunct: bytes | None = None,
        at_head: bool | None = None,
        limit: int | None = None,
        increment_authority: bool | None = None,
        ignore_limit: bool | None = None,
        uow: bytes | None = None,
        queue: bytes | None = None,
        message_id: bytes | None = None,
        correl_id: bytes | None = None,
        priority: int | None = None,
        persistent: bool | None = None,
        payload: Any = None,
        commit: bool = False,
    ) -> LogPosition | None:
        """Append a record given field by field (see ``docs/log-records.md``).

        The ``log_*`` helpers build these fields from what ``sharedq.cf`` returned and
        are what servers normally call.  A change (``op`` other than ``NONE``) must
        give its ``seq``; other records default to the last seq observed.  Returns the
        record's position, or ``None`` when ``persistent`` is false (not logged).
        """
        if persistent is False:
            return None
        try:
            values = blank(record_type, op, None)
        except (TypeError, ValueError):  # int() of text, None, nan: no type or op
            raise log_error(
                LogReason.BAD_RECORD, f"record type {record_type!r} or op {op!r} is no number"
            ) from None
        values[_SEQ] = seq
        values[7:] = (
            entry_id,
            list_number,
            from_list,
            key,
            secondary_key,
            set_secondary_key,
            version,
            increment_version,
            data,
            adjunct,
            at_head,
            limit,
            increment_authority,
            ignore_limit,
            uow,
            queue,
            message_id,
            correl_id,
            priority,
            persistent,
            None,
        )
        return self._emit(values, structure, payload, commit, ALL_FIELDS)

    def _emit(
        self,
        values: list[Any],
        structure: str | None,
        payload: Any,
        commit: bool,
        check: tuple[int, ...] | range,
        passes: Checker | None = None,
    ) -> LogPosition:
        # The path of every record: kept to a few calls (each costs more in a server's
        # cycle, where little of this code stays in the CPU's caches, than here alone).
        if commit is not True and commit is not False:  # "no" would sync: it is truthy
            raise log_error(LogReason.BAD_ARGUMENT, f"commit must be True or False, not {commit!r}")
        name = self.structure if structure is None else structure
        values[_WRITER] = self.name
        values[_STRUCTURE] = name
        if payload is not None:
            values[_PAYLOAD] = (
                payload.packed if type(payload) is PackedPayload else pack_payload(payload)
            )
        op = values[_OP]
        defaulted_seq = values[_SEQ] is None
        if defaulted_seq:
            if op != _NONE:
                raise log_error(LogReason.BAD_RECORD, "a structure change must give its seq")
            values[_SEQ] = 0
        values[_LSN] = 1
        values[_TIME] = 0
        if passes is None or not passes(values):
            check_values(values, check)
        while True:
            with self._lock:
                if self._closed:
                    raise log_error(LogReason.WRITER_CLOSED, f"writer {self.name} is closed")
                lsn = self._next_lsn
                values[_LSN] = lsn
                values[_TIME] = _time_ns() // 1000 if self._system_clock else self._clock.now_us()
                if defaulted_seq:
                    values[_SEQ] = self._observed.get(name, 0)
                body = self._packer.pack(values)
                length = len(body)
                if length > MAX_BODY_BYTES:
                    raise log_error(
                        LogReason.BAD_RECORD,
                        f"record of {length + FRAME_HEADER_BYTES} bytes is too large",
                    )
                size = length + FRAME_HEADER_BYTES
                if self._unlimited or self._space.fits(size):
                    active = self._active
                    if active.size + size > self._segment_bytes:
                        self._roll_locked()  # unless empty: a larger record goes alone
                        active = self._active
                    frame = _frame_header(length, _crc(body)) + body
                    try:
                        active.write(frame)
                    except OSError as exc:
                        if active.broken:
                            self._closed = True
                        raise log_error(
                            LogReason.IO_FAILED,
                            f"writer {self.name} could not write {active.path}: {exc}",
                        ) from exc
                    self._next_lsn = lsn + 1
                    self._written_lsn = lsn
                    active.last_lsn = lsn
                    seq = values[_SEQ]
                    if op != _NONE and seq > self._observed.get(name, 0):
                        self._observed[name] = seq
                    self._space.add(size)
                    self._staging += size
                    if self._duplex is not None:
                        self._duplex.unpushed.append((lsn, frame))
                    offload = self._staging >= self._high_bytes and not self._offload_pending
                    if offload:
                        self._offload_pending = True
                        self._roll_locked()
                    break
            self._space.make_room(self.name, size)
        position = _position((seq, op, self.name, lsn))
        if commit or self._sync_each:
            self._sync_through(lsn, waiting=True)
        if offload:
            self._start_offload()
        return position

    def _roll_locked(self) -> None:
        """Close the open segment (synced) and start the next; the writer lock is held."""
        if self._active.last_lsn < self._active.first_lsn:
            return  # empty: nothing to close
        with self._sync_lock:
            self._active.close(sync=True)
            self._durable_lsn = max(self._durable_lsn, self._written_lsn)
        try:
            self._active = self._create_segment()
            self._write_state(closed=False)
        except OSError as exc:
            self._closed = True
            raise log_error(
                LogReason.IO_FAILED, f"writer {self.name} could not start a segment: {exc}"
            ) from exc
        self._staging += self._active.size
        self._space.refresh()

    # -- durability ------------------------------------------------------------------

    def commit(self) -> None:
        """Make every record appended so far durable before returning.

        With ``GroupCommit.HOST`` the sync is shared with every writer of the host
        committing meanwhile (:mod:`sharedq.log.groupsync`); with ``WRITER``, with
        the other threads committing on this writer.
        """
        self._sync_through(self._written_lsn, waiting=True)

    def _sync_through(self, lsn: int, *, waiting: bool = False) -> None:
        if self._durable_lsn >= lsn:
            return
        if waiting:
            count_commit()
        if waiting and self._duplex is not None:
            self._push_through(lsn)
        elif self._groups:
            self._group_sync(lsn, committer=waiting)
        else:
            self._own_sync(lsn)
        # (os.access: no exception built when it is absent, as it almost always is)
        if os.access(self._roll_request_path, os.F_OK, effective_ids=_EFFECTIVE_IDS):
            self._roll_on_request()

    def _push_through(self, lsn: int) -> None:
        """Duplex: the records up to ``lsn`` are safe once pushed to the logging
        structure (with every unpushed one before them); where it cannot take them,
        once synced to disk, as a strict commit."""
        duplex = self._duplex
        assert duplex is not None
        with duplex.lock:
            if duplex.pushed_lsn >= lsn or self._durable_lsn >= lsn:
                return  # another commit's push or a sync covered it
            with self._lock:
                batch, duplex.unpushed = duplex.unpushed, []
                target = self._written_lsn
            durable = self._durable_lsn
            frames = b"".join([frame for at, frame in batch if at > durable])
            if frames and not duplex.push(frames, target):
                pushing = self._pushing
                if self._groups:
                    self._group_sync(target, committer=True)
                else:
                    self._own_sync(target)
                duplex.after_sync()
                if duplex.whole is not pushing:  # what a reopening writer must know
                    with self._lock:
                        self._write_state(closed=False)
            duplex.pushed_lsn = target

    def _group_sync(self, lsn: int, *, committer: bool) -> None:
        """Every record written so far (``target``) is durable once a sync of its file
        system that started after it was written completed: the group's (or, when it
        commits alone on the host, this writer's own ``fdatasync``)."""
        target = self._written_lsn
        alone = partial(self._own_sync, lsn) if len(self._groups) == 1 else None
        try:
            for group in self._groups:
                group.sync(self._window_s, committer=committer, alone=alone)
        except OSError as exc:
            raise log_error(
                LogReason.IO_FAILED, f"writer {self.name} could not sync its log: {exc}"
            ) from exc
        self.synced_through(target)

    def synced_through(self, lsn: int) -> None:
        """A sync of the file system, asked for by another writer of this process,
        started after this writer's records up to ``lsn`` were written."""
        with self._sync_lock:
            if lsn > self._durable_lsn:
                self._durable_lsn = lsn

    def _own_sync(self, lsn: int) -> None:
        with self._sync_lock:
            if self._durable_lsn >= lsn:
                return  # another thread's fsync covered it: group commit
            target = self._written_lsn
            active = self._active
            if active.closed:
                return  # closed segments were synced when closed
            try:
                active.sync()
            except OSError as exc:
                raise log_error(
                    LogReason.IO_FAILED, f"writer {self.name} could not sync {active.path}: {exc}"
                ) from exc
            self._durable_lsn = max(self._durable_lsn, target)

    def _roll_on_request(self) -> None:
        """A reader found damage in the open segment: go on in a new one at once."""
        with self._lock:
            if self._closed or not self._roll_request.exists():
                return
            logger.warning(
                "writer %s: a reader found damage in %s; starting a new segment",
                self.name,
                self._active.path,
            )
            self._roll_locked()
            self._roll_request.unlink(missing_ok=True)

    def _flush_every(self, seconds: float) -> None:
        duplex = self._duplex
        while not self._stop.wait(seconds):
            try:
                self._sync_through(self._written_lsn)
                if duplex is not None:  # what is on disk leaves the logging structure
                    durable = self._durable_lsn
                    with self._lock:
                        duplex.unpushed = [item for item in duplex.unpushed if item[0] > durable]
                    duplex.synced(durable)
            except LogError:
                logger.exception("writer %s: interval sync failed", self.name)

    # -- offload -------------------------------------------------------------------

    def _start_offload(self) -> None:
        if self._offloader is not None:
            self._offloader.request()
        else:
            self._offload_work()

    def offload(self) -> OffloadResult:
        """Close the open segment and offload every closed segment down to LOWOFFLOAD now."""
        with self._lock:
            if self._closed:
                raise log_error(LogReason.WRITER_CLOSED, f"writer {self.name} is closed")
            self._roll_locked()
        if self._offloader is not None:
            self._offloader.wait()
        return self._offload_work()

    def wait_offload(self, timeout: float | None = None) -> bool:
        """Wait for a background offload to finish; ``False`` on timeout."""
        return True if self._offloader is None else self._offloader.wait(timeout)

    def _offload_work(self) -> OffloadResult:
        with self._offload_mutex:
            try:
                with self._lock:
                    active_first = self._active.first_lsn
                    active_size = self._active.size
                closed: list[ClosedSegment] = []
                listed = [item for item in self._segment_copies() if item[0] < active_first]
                for index, (first, paths) in enumerate(listed):
                    after = listed[index + 1][0] if index + 1 < len(listed) else active_first
                    size = 0
                    for path in paths:
                        with contextlib.suppress(FileNotFoundError):
                            size = max(size, path.stat().st_size)
                    closed.append((first, after - 1, paths, size))
                staging = sum(item[3] for item in closed) + active_size
                chosen = choose_segments(closed, staging, self._config.low_offload_bytes)
                try:
                    result = offload_segments(
                        self._layouts,
                        self.name,
                        chosen,
                        row_group_rows=self._config.row_group_rows,
                        dataset_bytes=self._config.staging_bytes,
                    )
                except (OSError, arrow_exception()) as exc:
                    raise log_error(
                        LogReason.OFFLOAD_FAILED,
                        f"writer {self.name}: offload failed, the records stay in staging: {exc}",
                    ) from exc
                self._space.add(sum(d.bytes for d in result.datasets) - result.staging_bytes_freed)
                self.last_offload = result
                return result
            finally:
                staging = self._measure_staging()
                with self._lock:
                    self._staging = staging
                    self._offload_pending = False

    # -- bookkeeping ------------------------------------------------------------------

    def observe(self, seq: int, structure: str | None = None) -> None:
        """Note that the structure reached ``seq`` (e.g. ``statistics().seq``).

        Records that are not changes carry the last seq observed; a server observes the
        structure's seq before writing a system checkpoint so that the checkpoint sorts
        after every change it has seen, however idle the server was.
        """
        name = structure if structure is not None else self.structure
        with self._lock:
            if seq > self._observed.get(name, 0):
                self._observed[name] = seq

    def last_seq(self, structure: str | None = None) -> int:
        """The last seq this writer observed for a structure (0 before any)."""
        return self._observed.get(structure if structure is not None else self.structure, 0)

    @property
    def last_lsn(self) -> int:
        """The lsn of the last record appended (0 before any)."""
        return self._written_lsn

    @property
    def durable_lsn(self) -> int:
        """Every record up to this lsn has been fsynced."""
        return self._durable_lsn

    @property
    def staging_bytes(self) -> int:
        """The bytes this writer's staging segments hold."""
        return self._staging

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Sync and close; waits for a running offload.  Idempotent."""
        if self._closed and self._lock_file is None:
            return
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join()
        if self._offloader is not None:
            self._offloader.wait()
            self._offloader.close()
        with self._lock:
            already = self._closed
            self._closed = True
            with self._sync_lock:
                broken = self._active.broken
                self._active.close(sync=not broken)
                self._durable_lsn = self._written_lsn
            if not already and not broken:
                try:
                    self._write_state(closed=True)
                except OSError as exc:  # readers then take it as not closed cleanly
                    logger.warning("writer %s: cannot record its clean close: %s", self.name, exc)
        if self._duplex is not None and not already and not broken:
            self._duplex.close()
        for group in self._groups:
            group.leave(self)
        self._space.count_room(self.name, None)
        self._release_ownership()

    def _release_ownership(self) -> None:
        if self._lock_file is not None:
            fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None

    def __enter__(self) -> LogWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
