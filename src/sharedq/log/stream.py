"""A log stream: one directory, written by every server of a structure pair.

:class:`LogStream` is the entry point.  Each process that writes or reads the stream
opens its own ``LogStream`` on the same directory (local, or on storage every host
reaches); writers never share files, so they need no coordination beyond the file
system.  What the layers above do with it:

* a server opens ``stream.writer(name)`` and logs each change of a recoverable object
  before answering its caller (``log_write``, ``log_move``, ... in ``changes.py``);
* a system checkpoint is ``writer.log_event(RecordType.SYSTEM_CHECKPOINT, payload=...)``;
  the returned :class:`~sharedq.log.records.LogPosition` is what the server keeps;
* structure recovery reads ``stream.records(structures={name}, from_seq=S + 1)`` after
  loading an SRDS covering seq ``S`` and replays them (:mod:`sharedq.recovery.replay`);
* a structure checkpoint records ``stream.positions()`` (each writer's last lsn)
  before it quiesces, and ends with ``stream.delete_before(structure, seq)``;
* ``stream.set_full_handler(fn)`` registers the checkpoint that runs when the log
  reaches ``max_bytes``;
* before recovery changes anything, ``stream.plan(...).check(...)`` says whether the
  records it needs are whole (``continuity.py``).

Identity.  The ``STREAM`` state file gives the stream a random :attr:`LogStream.identity`
when it is created; a structure records the identity of the log its changes go to,
so that a server pointed at another log is refused rather than splitting the
structure's history between two logs.

Dual logging.  ``copy_root`` (a directory on another disk) makes every writer write
each staging segment, and offload each data set, under both roots; readers repair a
damaged or missing file from the other copy.  The ``STREAM`` file records the copy's
place, so every later process of the stream (readers included) uses it.

Logging structure.  ``logging_structure`` (a Redis URL) is where writers under
``Durability.duplex`` copy their records until a sync makes them durable, the seed's
coupling-facility copy (:mod:`sharedq.log.logging_structure`).  The ``STREAM`` file
records it as it does the copy's place.  A reader copies back the records of a writer
that stopped on a machine that has booted since, before it reads
(:meth:`LogStream.reader`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import weakref
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any, TypeVar

from sharedq import names
from sharedq.clock import SYSTEM_CLOCK, Clock
from sharedq.log.codec import Damage
from sharedq.log.config import LogConfig
from sharedq.log.continuity import Coverage
from sharedq.log.errors import LogError, LogReason, WriterInUse, log_error
from sharedq.log.files import file_in_the_way, make_dirs, open_lock
from sharedq.log.layout import Layout, owned
from sharedq.log.logging_structure import (
    LoggingStructure,
    check_url,
    needs_copy_back,
    without_credentials,
)
from sharedq.log.reader import (
    DecodedSources,
    LogReader,
    LogSources,
    ReadFilter,
    ReadPlan,
    SegmentDecoded,
    StagingSegment,
)
from sharedq.log.records import SCHEMA_VERSION, LogPosition, LogRecord
from sharedq.log.retention import LogFullHandler, LogSpace, PurgeResult, Retention
from sharedq.log.statefile import read_state, write_state
from sharedq.log.writer import LogWriter

_STREAM_LOCK = ".stream.lock"


@contextlib.contextmanager
def _stream_lock(root: Path) -> Iterator[None]:
    """Serialize creating or changing a ``STREAM`` file between processes."""
    with open_lock(root / _STREAM_LOCK) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


T = TypeVar("T")


class LogStream:
    """A log stream directory and its settings, as seen by one process.

    Args:
        root: the stream's directory; created (with its ``STREAM`` file) if absent.
        name: the stream's name (the LOGR ``LOGNAME``); must match an existing stream's.
            :data:`sharedq.names.STREAM` says what a name may be (``BAD_NAME`` if not).
        structure: the structure writers' records are about unless they name another
            (the primary structure of the pair); the stream's name when omitted.  A
            structure name (:data:`sharedq.names.STRUCTURE`) when given.
        config: staging, offload, maximum size and durability settings.  Each process
            passes its own; they should agree.
        clock: where record times are read (``now_us()``) and writers wait for their
            lock (``sharedq.clock.Clock``; tests inject a ``ManualClock``).
        copy_root: the second root of a dual log (another disk).  A stream's copy is
            chosen once, when the first process names it; later processes may omit it
            (the ``STREAM`` file says where it is) but not name another.
        logging_structure: the Redis URL of the stream's logging structure, for
            writers with ``Durability.duplex``; recorded and checked as ``copy_root``.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        name: str,
        structure: str | None = None,
        config: LogConfig | None = None,
        clock: Clock = SYSTEM_CLOCK,
        copy_root: str | os.PathLike[str] | None = None,
        logging_structure: str | None = None,
    ) -> None:
        for what, where in (("directory", root), ("copy directory", copy_root)):
            if where is not None or what == "directory":
                _check_directory(where, what)
        for rule, value in ((names.STREAM, name), (names.STRUCTURE, structure)):
            problem = None if value is None else rule.problem(value)
            if problem is not None:
                raise log_error(LogReason.BAD_NAME, problem)
        self.name = name
        self.structure = structure if structure is not None else name
        self.config = config if config is not None else LogConfig()
        self.layout = Layout(root)
        self._clock = clock
        #: The stream's identity: a random name given when it was created.
        self.identity = ""
        self.copy: Layout | None = None
        #: Where duplex writers copy their unsynced records (``None``: nowhere).
        self.logging: LoggingStructure | None = None
        wanted = None if logging_structure is None else check_url(logging_structure)
        self._open_stream_file(None if copy_root is None else Path(copy_root), wanted)
        self.layout.make_dirs()
        self.layouts = [self.layout] if self.copy is None else [self.layout, self.copy]
        if self.copy is not None:
            self.copy.make_dirs()
        self.retention = Retention(self.layouts)
        self.space = LogSpace(
            self.layout, self.config, self.retention, () if self.copy is None else (self.copy,)
        )
        self._writers: weakref.WeakSet[LogWriter] = weakref.WeakSet()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<LogStream {self.name!r} at {str(self.layout.root)!r}>"

    @classmethod
    def open_existing(cls, root: str | os.PathLike[str], **kwargs: Any) -> LogStream:
        """Open a stream that must exist already, under the name its ``STREAM`` file says.

        For readers (the pipeline, operators' tools) that are given a directory and
        must not create one: ``BAD_ARGUMENT`` when ``root`` holds no stream.
        """
        path = Layout(root).stream_file
        body = read_state(path)
        if body is None:
            raise log_error(
                LogReason.BAD_ARGUMENT, f"{root} is not a log stream (no {path.name} file)"
            )
        return cls(root, name=str(body.get("name")), **kwargs)

    @property
    def root(self) -> Path:
        return self.layout.root

    def _open_stream_file(self, copy_root: Path | None, logging_url: str | None) -> None:
        """Create the ``STREAM`` file, or check it: name, format, identity, copy,
        logging structure."""
        path = self.layout.stream_file
        make_dirs(self.layout.root)
        with _stream_lock(self.layout.root):
            body = self._stream_body(path, copy_root)
            if body is None:
                body = {
                    "name": self.name,
                    "schema_version": SCHEMA_VERSION,
                    "id": os.urandom(8).hex(),
                    "copy": None if copy_root is None else str(copy_root.resolve()),
                    "logging_structure": (
                        None if logging_url is None else without_credentials(logging_url)
                    ),
                }
                write_state(path, body)
            if body.get("name") != self.name:
                raise log_error(
                    LogReason.STREAM_MISMATCH,
                    f"{self.layout.root} holds stream {body.get('name')!r}, not {self.name!r}",
                )
            if body.get("schema_version") != SCHEMA_VERSION:
                raise log_error(
                    LogReason.STREAM_MISMATCH,
                    f"{self.layout.root} has schema version {body.get('schema_version')}, "
                    f"this code reads {SCHEMA_VERSION}",
                )
            copy = body.get("copy")
            if copy_root is not None and copy is None:
                body = {**body, "copy": str(copy_root.resolve())}
                write_state(path, body)
                copy = body["copy"]
            elif copy_root is not None and Path(str(copy)) != copy_root.resolve():
                raise log_error(
                    LogReason.STREAM_MISMATCH,
                    f"stream {self.name} at {self.layout.root} keeps its second copy in "
                    f"{copy}, not {copy_root}",
                )
            recorded = body.get("logging_structure")
            public = None if logging_url is None else without_credentials(logging_url)
            if public is not None and recorded is None:
                body = {**body, "logging_structure": public}
                write_state(path, body)
                recorded = public
            elif public is not None and recorded != public:
                raise log_error(
                    LogReason.STREAM_MISMATCH,
                    f"stream {self.name} at {self.layout.root} has its logging structure "
                    f"at {recorded}, not {public}",
                )
            self.identity = str(body["id"])
            if recorded is not None:  # given with its credentials, or as recorded
                self.logging = LoggingStructure(logging_url or str(recorded), self.identity)
            if copy is not None:
                self.copy = Layout(str(copy))
                make_dirs(self.copy.root)
                mirror = self.copy.stream_file
                try:
                    theirs = read_state(mirror)
                except LogError:
                    theirs = None
                if theirs != body:
                    write_state(mirror, body)

    def _stream_body(self, path: Path, copy_root: Path | None) -> dict[str, Any] | None:
        """The ``STREAM`` file's body; from the copy when this one is damaged or gone."""
        try:
            body = read_state(path)
        except LogError:
            body = None
            problem = True
        else:
            problem = False
        if body is not None:
            return body
        if copy_root is not None:
            try:
                theirs = read_state(Layout(copy_root).stream_file)
            except LogError:
                theirs = None
            if theirs is not None:
                write_state(path, theirs)  # the copy's account makes this one good
                return theirs
        if problem:
            read_state(path)  # raises LOG_DAMAGED, naming the file
        if any(self.layout.staging.glob("*")) or any(self.layout.datasets.glob("*")):
            raise log_error(
                LogReason.STREAM_MISMATCH,
                f"{self.layout.root} holds log files but no {path.name} file: restore it "
                "(or its copy) rather than start a new stream over old records",
            )
        return None

    # -- writing ---------------------------------------------------------------------

    def writer(self, name: str, *, structure: str | None = None) -> LogWriter:
        """Open the writer ``name`` (a server or queue manager), resuming where it stopped.

        ``WRITER_IN_USE`` if that writer is open already, here or in another process;
        ``BAD_NAME`` if ``name`` is no server name or ``structure`` no structure name.
        """
        problem = None if structure is None else names.STRUCTURE.problem(structure)
        if problem is not None:
            raise log_error(LogReason.BAD_NAME, problem)
        writer = LogWriter(
            layout=self.layout,
            config=self.config,
            space=self.space,
            name=name,
            structure=structure if structure is not None else self.structure,
            clock=self._clock,
            copy=self.copy,
            logging=self.logging,
        )
        with self._lock:
            self._writers.add(writer)
        return writer

    def set_full_handler(self, handler: LogFullHandler | None) -> None:
        """Register what runs when an append finds the log at ``max_bytes`` (CHKNEARFULL).

        The handler takes a structure checkpoint and calls :meth:`delete_before`; it
        runs in the appending thread, once for all threads that found the log full.
        ``BAD_ARGUMENT`` for what is not callable (nor ``None``): found only when the log
        is full, it would make every append then fail; the handler set before stays.
        """
        if handler is not None and not callable(handler):
            raise log_error(
                LogReason.BAD_ARGUMENT,
                f"the log-full handler must be a function or None, not {type(handler).__name__}",
            )
        self.space.set_handler(handler)

    def exempt_from_maximum(self) -> contextlib.AbstractContextManager[None]:
        """A block whose appends (by this thread) may pass ``max_bytes``.

        What runs in the log-full handler is exempt already; a structure checkpoint or a
        system checkpoint started elsewhere uses this, so that it never waits for room
        that only it can make.
        """
        return self.space.exempt()

    # -- reading ---------------------------------------------------------------------

    def reader(self) -> LogReader:
        """A reader of every writer's records, after copying back what a writer that
        stopped on a machine booted since left only in the logging structure."""
        if self.logging is not None:
            self._copy_back_stopped_writers()
        return LogReader(self.layouts, self.space, self.retention)

    def _copy_back_stopped_writers(self) -> None:
        """Reopen (and close) each writer whose last records may be only in the
        logging structure: opening copies them into its segment (``LogWriter``).

        A writer open elsewhere (``WRITER_IN_USE``) is left to itself: its machine is
        up.  ``LOGGING_UNAVAILABLE`` when a copy is needed and the logging structure
        does not answer: the read would miss records, so it is refused.
        """
        with self._lock:
            open_here = {w.name for w in self._writers if not w.closed}
        for name in self.layout.writers():
            if name in open_here:
                continue
            try:
                state = read_state(self.layout.writer_state(name))
            except LogError:
                continue  # a damaged state file: the reader reports it
            if not needs_copy_back(state) or owned(self.layout.writer_dir(name)):
                continue  # (owned: up, on a machine whose page cache holds its records)
            try:
                self.writer(name).close()
            except WriterInUse:
                continue

    def plan(self, selection: ReadFilter | None = None, *, strict: bool = False) -> ReadPlan:
        """A read prepared (staging read, data set footers verified), to check and yield."""
        if selection is not None and not isinstance(selection, ReadFilter):
            raise log_error(LogReason.BAD_ARGUMENT, f"{selection!r} is not a ReadFilter")
        return self.reader().plan(selection, strict=strict)

    def check(
        self, *, starts: dict[str, int] | None = None, needed_seq: dict[str, int] | None = None
    ) -> Coverage:
        """Whether every writer's records are whole (see :meth:`ReadPlan.check`)."""
        for what, given in (("starts", starts), ("needed_seq", needed_seq)):
            if given is not None and not (
                isinstance(given, dict)
                and all(isinstance(k, str) and type(v) is int for k, v in given.items())
            ):
                raise log_error(LogReason.BAD_ARGUMENT, f"{what} {given!r}: None or {{name: int}}")
        return self.plan().check(starts=starts, needed_seq=needed_seq)

    def positions(self) -> dict[str, int]:
        """Every writer's last lsn in the files now (see :meth:`LogReader.positions`)."""
        return self.reader().positions()

    def high_water(self, structure: str | None = None) -> int:
        """The highest seq the log holds for a structure, read cheaply (state files and
        each writer's current segment; see :meth:`LogReader.high_water`)."""
        return self.reader().high_water(self._structure(structure))

    def records(
        self,
        *,
        structures: Collection[str] | None = None,
        writers: Collection[str] | None = None,
        from_seq: int | None = None,
        to_seq: int | None = None,
        start: LogPosition | None = None,
        until_time_us: int | None = None,
        strict: bool = False,
    ) -> Iterator[LogRecord]:
        """The merged records (see :class:`~sharedq.log.reader.ReadFilter`)."""
        return self.reader().records(
            structures=structures,
            writers=writers,
            from_seq=from_seq,
            to_seq=to_seq,
            start=start,
            until_time_us=until_time_us,
            strict=strict,
        )

    def sources(self) -> LogSources:
        """The staging records and data set files, for a reader of its own (Spark)."""
        return self.reader().sources()

    def decoded_sources(
        self, decode: Callable[[list[StagingSegment]], list[SegmentDecoded[T]]]
    ) -> DecodedSources[T]:
        """The data set files, and the staging segments decoded by ``decode`` (in
        parallel, elsewhere); see :meth:`LogReader.decoded_sources`."""
        return self.reader().decoded_sources(decode)

    def verify(self) -> list[Damage]:
        """Read the whole stream and return the damage found (empty when sound)."""
        reader = self.reader()
        for _ in reader.batches(ReadFilter()):
            pass
        return reader.damage

    def last_seq(self, structure: str | None = None) -> int:
        """The highest seq the stream holds for a structure (0 if none).

        A structure rebuilt from the log is created with this as its ``sequence_floor``.
        """
        return self.reader().last_seq(self._structure(structure))

    def _structure(self, structure: object) -> str:
        """``structure`` (this stream's own if ``None``) if it is a structure's name."""
        return self.structure if structure is None else _check_structure(structure)

    # -- deleting ----------------------------------------------------------------------

    def delete_before(self, structure: str, seq: int) -> PurgeResult:
        """Delete the structure's records with a lower seq, durably; remove files that empties.

        The point never goes down: a lower ``seq`` than the current point changes nothing.
        """
        self.retention.raise_to(_check_structure(structure), seq)
        return self.space.purge()

    def retention_points(self) -> dict[str, int]:
        """Per structure, the lowest seq still kept."""
        return self.retention.load()

    def purge(self) -> PurgeResult:
        """Remove files wholly below the current retention points."""
        return self.space.purge()

    def size_bytes(self) -> int:
        """The stream's size now: every writer's staging plus the data sets."""
        return self.space.refresh()

    def damaged_files(self) -> list[Path]:
        """What offload and writers set aside as damaged (never deleted by sharedq)."""
        found: list[Path] = []
        for layout in self.layouts:
            with contextlib.suppress(FileNotFoundError):
                found.extend(layout.damaged.iterdir())
        return sorted(found)

    # -- closing ---------------------------------------------------------------------

    def close(self) -> None:
        """Close every writer opened through this object."""
        with self._lock:
            writers = list(self._writers)
        for writer in writers:
            writer.close()
        if self.logging is not None:
            self.logging.close()

    def __enter__(self) -> LogStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _check_directory(where: object, what: str) -> None:
    """``BAD_ARGUMENT`` unless ``where`` is a path to a directory, or to none yet."""
    if not isinstance(where, str | os.PathLike) or not isinstance(os.fspath(where), str):
        raise log_error(LogReason.BAD_ARGUMENT, f"a log stream's {what} is a path, not {where!r}")
    if os.fspath(where) == "":  # Path("") is the working directory: never meant
        raise log_error(LogReason.BAD_ARGUMENT, f"a log stream's {what} is empty ('')")
    path = Path(where)
    found = file_in_the_way(path)
    if found is not None:
        raise log_error(
            LogReason.BAD_ARGUMENT, f"a log stream's {what} {path}: {found} is not a directory"
        )


def _check_structure(structure: object) -> str:
    problem = names.STRUCTURE.problem(structure)
    if problem is not None:
        raise log_error(LogReason.BAD_NAME, problem)
    assert isinstance(structure, str)
    return structure
