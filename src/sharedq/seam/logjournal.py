"""A server's recovery log as its journal: every change written to the log streams.

:class:`LogJournal` turns each note a server's requests hand the journal seam
(:mod:`sharedq.seam.notes`) into log records of the stream of the structure changed,
before the server's call returns to its caller.  Changes of nonpersistent messages are
not logged (they are not recoverable); everything else a server keeps in a structure
is (its messages, and its own control entries), so that a structure rebuilt from its
checkpoint and the log is whole.

Each record's type is the change's :attr:`~sharedq.seam.notes.Meaning.record_type` (the
redbook's Appendix B) and its payload names the change in the server's own words,
``{payload_key: meaning.tag}`` (the queue manager's key is ``"mq"``; the pipeline reads
it).  The facts of a message a record describes (persistence, priority, ids) come from
the server's ``facts`` function, which knows how it lays out an entry's data.

A unit of work whose descriptors say "begin commit" gets a ``COMMIT`` record, synced,
before its descriptors change to "in commit": at restart the server reads its own
records for it (:meth:`LogJournal.begin_commit_outcome`), as the patent's owner reads
its private log (p[308]).  Per-commit durability syncs when a unit of work ends and
after each change that ends an operation out of syncpoint.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MethodType
from typing import Any

from sharedq.log import (
    LogPosition,
    LogRecord,
    LogStream,
    LogWriter,
    MessageInfo,
    PackedPayload,
    RecordType,
)
from sharedq.seam.access import FactsOf
from sharedq.seam.notes import (
    About,
    BulkDeleteNote,
    BulkMoveNote,
    BulkNote,
    ChangeNote,
    ControlsNote,
    DecisionUncertain,
    DeleteNote,
    EntryMeaning,
    Journal,
    Meaning,
    MoveNote,
    UpdateNote,
    WriteNote,
)

#: The payload value of a commit decision record.
COMMIT_DECIDED = "commit-decided"
#: Meanings whose record type, payload and sync are kept at most (a server has a
#: few dozen; meanings made per change only come and go).
_MEANINGS_KEPT = 64
#: Entry data longer than this is not compared with the last message's to reuse its
#: facts (reading the facts is cheaper than comparing a long message).
_FACTS_COMPARED = 4096


#: A message's info made by C (a named tuple's ``__new__`` is a Python call).
_message_info: Callable[[tuple[Any, ...]], MessageInfo] = MethodType(tuple.__new__, MessageInfo)


class NoStream(Exception):
    """A change to a structure the journal has no log stream for (never left unlogged)."""


class LogJournal(Journal):
    """Logs a server's changes to the log stream of each structure it uses.

    Args:
        writer: the name the server writes under (its own name: each server of a
            stream writes its own staging segments).
        streams: the log stream of every structure the server will connect to; two
            structures of a pair may share one stream.  A change to a structure with
            no stream raises :class:`NoStream` rather than go unlogged.
        payload_key: the key of the server's words in every record's payload.
        facts: reads a message's facts from its entry's data.
    """

    def __init__(
        self,
        writer: str,
        streams: Mapping[str, LogStream],
        *,
        payload_key: str,
        facts: FactsOf,
    ) -> None:
        self._name = writer
        self._streams = dict(streams)
        self._key = payload_key
        self._facts = facts
        self._writers: dict[int, LogWriter] = {}
        self._lock = threading.Lock()
        #: What a change's meaning gives each of its records, by the meaning's id: the
        #: meaning itself (kept alive, so that its id is not another's), the record
        #: type, the payload packed once, and whether the record is synced.
        self._meanings: dict[int, tuple[object, RecordType, PackedPayload, bool]] = {}
        #: The last message data read for its facts, the unit and queue of the record
        #: about it, the facts and the record's message info: a message's records (its
        #: put, its move, its get, its delete) mostly follow one another.
        self._last_message: tuple[
            bytes | None, bytes | None, str | None, tuple[Any, ...], MessageInfo
        ] = (None, None, None, (), MessageInfo())
        #: The writer of each structure this server has logged a change to.
        self._by_structure: dict[str, LogWriter] = {}
        #: Called after each change logged to a structure's stream (checkpoint triggers).
        self.listeners: dict[str, Callable[[], None]] = {}
        #: Units whose commit this server decided and has not finished (restart state).
        self.committing: set[bytes] = set()
        #: Where restart reads this server's records from, per structure: the position
        #: of its last system checkpoint and the units it recorded as committing.  Unset:
        #: the whole log is read.
        self.restart_points: dict[str, tuple[LogPosition, frozenset[bytes]]] = {}

    def __repr__(self) -> str:
        return f"<LogJournal {self._name!r} structures={sorted(self._streams)}>"

    def add_stream(self, structure: str, stream: LogStream) -> None:
        """Log the changes to ``structure``, which the server uses from now on, to
        ``stream`` (a structure of its own it creates as it runs)."""
        with self._lock:  # a new dict: readers iterate the old one undisturbed
            self._streams = {**self._streams, structure: stream}
            self._by_structure = {k: w for k, w in self._by_structure.items() if k != structure}

    def writer_for(self, structure: str) -> LogWriter:
        """This server's writer on the stream of ``structure``, opened on first use."""
        writer = self._by_structure.get(structure)
        if writer is not None:
            return writer
        stream = self._streams.get(structure)
        if stream is None:
            raise NoStream(f"structure {structure} has no log stream: its changes cannot be logged")
        with self._lock:
            writer = self._writers.get(id(stream))
            if writer is None:
                writer = self._writers[id(stream)] = stream.writer(self._name)
            if self._streams.get(structure) is stream:
                self._by_structure = {**self._by_structure, structure: writer}
        return writer

    def close(self) -> None:
        """Sync and close every writer."""
        with self._lock:
            writers, self._writers = list(self._writers.values()), {}
            self._by_structure = {}
        for writer in writers:
            writer.close()

    # -- the seam -------------------------------------------------------------------------

    def changed(self, note: ChangeNote) -> None:
        # Every logged change of a server comes this way: its calls are kept few.
        about = note.about
        if about.persistent is False:
            return
        structure = note.structure
        writer = self._by_structure.get(structure)
        if writer is None:
            writer = self.writer_for(structure)
        known = self._meanings.get(id(note.meaning))
        if known is None or known[0] is not note.meaning:
            known = self._meaning(note.meaning)
        _, record_type, payload, commit = known
        if isinstance(note, ControlsNote):
            writer.log_list_controls(
                note.seq,
                note.list_number,
                limit=note.limit,
                increment_authority=note.increment_authority,
                payload=payload,
                structure=structure,
                commit=commit,
            )
        else:
            change = note.change
            message = self._message(about, change.entry.data, record_type)
            if isinstance(note, MoveNote):
                writer.log_move(
                    change,
                    record_type=record_type,
                    from_list=note.from_list,
                    position=note.position,
                    ignore_limit=note.ignore_limit,
                    message=message,
                    payload=payload,
                    structure=structure,
                    commit=commit,
                )
            elif isinstance(note, WriteNote):
                writer.log_write(
                    change,
                    record_type=RecordType.PUT
                    if record_type is RecordType.PUT
                    else RecordType.CHANGE,
                    position=note.position,
                    ignore_limit=note.ignore_limit,
                    message=message,
                    payload=payload,
                    structure=structure,
                    commit=commit,
                )
            elif isinstance(note, DeleteNote):
                writer.log_delete(
                    change,
                    record_type=record_type,
                    message=message,
                    payload=payload,
                    structure=structure,
                    commit=commit,
                )
            else:
                assert isinstance(note, UpdateNote)
                writer.log_update(
                    change,
                    data_changed=note.data_changed,
                    adjunct_changed=note.adjunct_changed,
                    increment_authority=note.increment_authority,
                    message=message,
                    payload=payload,
                    structure=structure,
                    commit=commit,
                )
        listener = self.listeners.get(structure)
        if listener is not None:
            listener()

    def _meaning(self, meaning: Meaning) -> tuple[object, RecordType, PackedPayload, bool]:
        """The record type, packed payload and sync of a meaning's records."""
        known = self._meanings.get(id(meaning))
        if known is None or known[0] is not meaning:
            known = (
                meaning,
                meaning.record_type,
                PackedPayload({self._key: meaning.tag}),
                meaning.ends_operation,
            )
            meanings = self._meanings
            if len(meanings) >= _MEANINGS_KEPT:
                meanings = {}
            meanings[id(meaning)] = known
            self._meanings = meanings
        return known

    def bulk_changed(self, note: BulkNote) -> None:
        self._log_bulk(note)
        listener = self.listeners.get(note.structure)
        if listener is not None:
            listener()

    def _log_bulk(self, note: BulkNote) -> None:
        writer = self.writer_for(note.structure)
        _, record_type, payload, _ = self._meaning(note.meaning)
        messages = [self._bulk_message(note.uow_id, entry) for entry in note.entries]
        if isinstance(note, BulkMoveNote):
            writer.log_bulk_move(
                note.moves,
                note.result,
                record_type=record_type,
                ignore_limit=note.ignore_limit,
                message=messages,
                payload=payload,
                structure=note.structure,
            )
        else:
            assert isinstance(note, BulkDeleteNote)
            writer.log_bulk_delete(
                note.entry_ids,
                note.result,
                record_type=record_type,
                message=messages,
                payload=payload,
                structure=note.structure,
            )

    def commit_decided(self, server: str, uow_id: bytes, structures: Sequence[str]) -> bool:
        """Log a ``COMMIT`` record per stream and sync them before returning ``True``.

        The unit joins :attr:`committing` first, so that a system checkpoint taken
        meanwhile carries the decision.  If no record could be written, it leaves again
        and the exception says the decision was not recorded; if some record was
        written (and a sync, or another stream, failed), a restart may find it:
        :class:`DecisionUncertain`, and the unit stays in :attr:`committing`.
        """
        self.committing.add(uow_id)
        written = False
        try:
            writers = self._writers_of(structures)
            for writer in writers:
                writer.log_event(
                    RecordType.COMMIT,
                    payload={self._key: COMMIT_DECIDED},
                    message=MessageInfo(uow=uow_id, persistent=None),
                )
                written = True
            for writer in writers:
                writer.commit()
        except Exception as error:
            if not written:
                self.committing.discard(uow_id)
                raise
            raise DecisionUncertain(
                f"the commit decision of {uow_id.hex()} was written but not made durable: {error}"
            ) from error
        return True

    def unit_ended(self, server: str, uow_id: bytes | None, structures: Sequence[str]) -> None:
        if uow_id is not None:
            self.committing.discard(uow_id)
        for writer in self._writers_of(structures):
            writer.commit()

    def begin_commit_outcome(self, server: str, uow_id: bytes) -> bool | None:
        """Committed if the owner logged its commit decision for the unit, else not known.

        With restart points (a warm restart from system checkpoints), a unit counts as
        decided if a checkpoint recorded it as committing or a ``COMMIT`` record of it
        follows a checkpoint; otherwise every record the server wrote is searched.
        """
        if self.restart_points:
            for structure, (position, committing) in self.restart_points.items():
                if uow_id in committing:
                    return True
                stream = self._streams.get(structure)
                if stream is not None and _commit_logged(
                    stream.records(writers={server}, start=position), uow_id
                ):
                    return True
            return None
        for stream in {id(s): s for s in self._streams.values()}.values():
            if _commit_logged(stream.records(writers={server}), uow_id):
                return True
        return None

    # -- helpers ----------------------------------------------------------------------------

    def _writers_of(self, structures: Iterable[str]) -> list[LogWriter]:
        seen: dict[int, LogWriter] = {}
        for structure in structures:
            writer = self.writer_for(structure)
            seen[id(writer)] = writer
        return list(seen.values())

    def _message(self, about: About, data: bytes, record_type: RecordType) -> MessageInfo:
        if record_type is RecordType.CHANGE or about.persistent is None:
            queue = None if about.queue is None else about.queue.encode()
            return MessageInfo(uow=about.uow_id, queue=queue, persistent=None)
        # A message's records mostly follow one another: its last one's info again, if
        # the data, unit and queue are the same (the rest is read from the data).
        last_data, uow_id, queue_name, facts, message = self._last_message
        if data is not last_data and (len(data) > _FACTS_COMPARED or data != last_data):
            facts = self._facts(data)
        elif about.uow_id == uow_id and about.queue == queue_name:
            return message
        persistent, priority, msg_id, correl_id = facts
        queue = None if about.queue is None else about.queue.encode()
        message = _message_info((about.uow_id, queue, msg_id, correl_id, priority, persistent))
        self._last_message = (data, about.uow_id, about.queue, facts, message)
        return message

    @staticmethod
    def _bulk_message(uow_id: bytes | None, entry: EntryMeaning) -> MessageInfo:
        queue = None if entry.queue is None else entry.queue.encode()
        return MessageInfo(uow_id, queue, entry.msg_id, None, None, entry.persistent)


def _commit_logged(records: Iterable[LogRecord], uow_id: bytes) -> bool:
    return any(r.type == RecordType.COMMIT and r.uow == uow_id for r in records)
