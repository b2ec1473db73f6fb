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
  loading an SRDS covering seq ``S`` and replays them (``replay.py``);
* a structure checkpoint ends with ``stream.delete_before(structure, seq)``;
* ``stream.set_full_handler(fn)`` registers the checkpoint that runs when the log
  reaches ``max_bytes``.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import weakref
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any, TypeVar

from sharedq.log.codec import Damage
from sharedq.log.config import LogConfig
from sharedq.log.errors import LogReason, log_error
from sharedq.log.layout import Layout, write_atomically
from sharedq.log.reader import (
    DecodedSources,
    LogReader,
    LogSources,
    ReadFilter,
    SegmentDecoded,
    StagingSegment,
)
from sharedq.log.records import SCHEMA_VERSION, LogPosition, LogRecord
from sharedq.log.retention import LogFullHandler, LogSpace, PurgeResult, Retention
from sharedq.log.writer import Clock, LogWriter, system_clock

_STREAM_NAME_MAX = 64


T = TypeVar("T")


class LogStream:
    """A log stream directory and its settings, as seen by one process.

    Args:
        root: the stream's directory; created (with its ``STREAM`` file) if absent.
        name: the stream's name (the LOGR ``LOGNAME``); must match an existing stream's.
        structure: the structure writers' records are about unless they name another
            (the primary structure of the pair); the stream's name when omitted.
        config: staging, offload, maximum size and durability settings.  Each process
            passes its own; they should agree.
        clock: microseconds since 1970 UTC, for record times (tests inject one).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        name: str,
        structure: str | None = None,
        config: LogConfig | None = None,
        clock: Clock = system_clock,
    ) -> None:
        if not isinstance(name, str) or not 0 < len(name) <= _STREAM_NAME_MAX:
            raise log_error(LogReason.BAD_NAME, f"stream name {name!r}: 1 to 64 characters")
        self.name = name
        self.structure = structure if structure is not None else name
        self.config = config if config is not None else LogConfig()
        self.layout = Layout(root)
        self._clock = clock
        self._open_stream_file()
        self.layout.make_dirs()
        self.retention = Retention(self.layout)
        self.space = LogSpace(self.layout, self.config, self.retention)
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
        try:
            info = json.loads(path.read_text())
        except FileNotFoundError:
            raise log_error(
                LogReason.BAD_ARGUMENT, f"{root} is not a log stream (no {path.name} file)"
            ) from None
        except ValueError as exc:
            raise log_error(
                LogReason.STREAM_MISMATCH, f"{path} is not a stream file: {exc}"
            ) from None
        return cls(root, name=str(info.get("name")), **kwargs)

    @property
    def root(self) -> Path:
        return self.layout.root

    def _open_stream_file(self) -> None:
        path = self.layout.stream_file
        try:
            info = json.loads(path.read_text())
        except FileNotFoundError:
            self.layout.root.mkdir(parents=True, exist_ok=True)
            payload = {"name": self.name, "schema_version": SCHEMA_VERSION}
            write_atomically(path, json.dumps(payload, sort_keys=True).encode())
            return
        except ValueError as exc:
            raise log_error(
                LogReason.STREAM_MISMATCH, f"{path} is not a stream file: {exc}"
            ) from None
        if info.get("name") != self.name:
            raise log_error(
                LogReason.STREAM_MISMATCH,
                f"{self.layout.root} holds stream {info.get('name')!r}, not {self.name!r}",
            )
        if info.get("schema_version") != SCHEMA_VERSION:
            raise log_error(
                LogReason.STREAM_MISMATCH,
                f"{self.layout.root} has schema version {info.get('schema_version')}, "
                f"this code reads {SCHEMA_VERSION}",
            )

    # -- writing ---------------------------------------------------------------------

    def writer(self, name: str, *, structure: str | None = None) -> LogWriter:
        """Open the writer ``name`` (a server or queue manager), resuming where it stopped.

        ``WRITER_IN_USE`` if that writer is open already, here or in another process.
        """
        writer = LogWriter(
            layout=self.layout,
            config=self.config,
            space=self.space,
            name=name,
            structure=structure if structure is not None else self.structure,
            clock=self._clock,
        )
        with self._lock:
            self._writers.add(writer)
        return writer

    def set_full_handler(self, handler: LogFullHandler | None) -> None:
        """Register what runs when an append finds the log at ``max_bytes`` (CHKNEARFULL).

        The handler takes a structure checkpoint and calls :meth:`delete_before`; it
        runs in the appending thread, once for all threads that found the log full.
        """
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
        return LogReader(self.layout, self.space, self.retention)

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
        name = structure if structure is not None else self.structure
        return self.reader().last_seq(name)

    # -- deleting ----------------------------------------------------------------------

    def delete_before(self, structure: str, seq: int) -> PurgeResult:
        """Delete the structure's records with a lower seq, durably; remove files that empties.

        The point never goes down: a lower ``seq`` than the current point changes nothing.
        """
        self.retention.raise_to(structure, seq)
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
        try:
            return sorted(self.layout.damaged.iterdir())
        except FileNotFoundError:
            return []

    # -- closing ---------------------------------------------------------------------

    def close(self) -> None:
        """Close every writer opened through this object."""
        with self._lock:
            writers = list(self._writers)
        for writer in writers:
            writer.close()

    def __enter__(self) -> LogStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
