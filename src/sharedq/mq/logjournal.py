"""The queue manager's recovery log: its journal, writing to the log streams.

:class:`LogJournal` turns each change the queue manager reports through the journal
seam (:mod:`sharedq.mq.journal`) into log records of the stream of the structure it
changed, before the manager's call returns to the application.  Changes of
nonpersistent messages are not logged (they are not recoverable); everything else the
manager keeps in a structure is: persistent messages, queue definitions, UOW
descriptors and the group's control entries, so that a structure rebuilt from its
checkpoint and the log is whole.

What each change becomes (the record type after the redbook's Appendix B, and the
MQ meaning in the record's ``payload`` as ``{"mq": kind}``, for the pipeline):

=================  ===========  =========================================
change kind        record type  what it is
=================  ===========  =========================================
put                PUT          a message written with its uncommitted key
sync-put           MOVE         an out-of-syncpoint put took its committed key
commit-puts        MOVE         a unit's puts took their committed keys
get                READ         a message moved to the manager's get list
sync-get           DELETE       an out-of-syncpoint get removed the message
commit-gets        DELETE       a unit's gets (and own puts it got) removed
backout-puts       DELETE       a unit's puts removed at backout
backout-gets       UNLOCK       gotten messages back to their put lists
backout-last       UNLOCK       the last get's message back (not counted)
expire             MOVE         a gotten message to the expiry list
purge              DELETE       expired messages purged
cold-queue         MOVE         gotten messages to the cold queue (cold start)
requeue            MOVE         messages back from the cold queue
descriptor,        CHANGE       UOW descriptors, queue definitions, the
definition,                     group directory and list claims
control
=================  ===========  =========================================

A unit of work whose descriptors say "begin commit" gets a ``COMMIT`` record, synced,
before its descriptors change to "in commit": at restart the manager reads its own
records for it (:meth:`LogJournal.begin_commit_outcome`), as the patent's owner reads
its private log (p[308]).  Per-commit durability syncs when a unit of work ends and
after each out-of-syncpoint put or get.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sharedq.cf import UNCHANGED, ById, ByKey, Change, Head, Position, Tail
from sharedq.log import LogPosition, LogRecord, LogStream, LogWriter, MessageInfo, RecordType
from sharedq.mq.errors import MQReason, mq_error
from sharedq.mq.journal import (
    BulkNote,
    ChangeKind,
    ChangeNote,
    DecisionUncertain,
    EntryMeaning,
    Journal,
)
from sharedq.mq.messages import message_facts

_MESSAGE_TYPES: dict[ChangeKind, RecordType] = {
    ChangeKind.PUT: RecordType.PUT,
    ChangeKind.SYNC_PUT: RecordType.MOVE,
    ChangeKind.COMMIT_PUTS: RecordType.MOVE,
    ChangeKind.GET: RecordType.READ,
    ChangeKind.SYNC_GET: RecordType.DELETE,
    ChangeKind.COMMIT_GETS: RecordType.DELETE,
    ChangeKind.BACKOUT_PUTS: RecordType.DELETE,
    ChangeKind.BACKOUT_GETS: RecordType.UNLOCK,
    ChangeKind.BACKOUT_LAST: RecordType.UNLOCK,
    ChangeKind.EXPIRE: RecordType.MOVE,
    ChangeKind.PURGE: RecordType.DELETE,
    ChangeKind.COLD_QUEUE: RecordType.MOVE,
    ChangeKind.REQUEUE: RecordType.MOVE,
}
#: Changes that end an out-of-syncpoint operation: records are synced after them.
_ENDS_AN_OPERATION = frozenset({ChangeKind.SYNC_PUT, ChangeKind.SYNC_GET})
#: The payload key naming the queue manager's meaning of a change.
PAYLOAD_KEY = "mq"
#: The payload value of a commit decision record.
COMMIT_DECIDED = "commit-decided"


class LogJournal(Journal):
    """Logs a queue manager's changes to the log stream of each structure it uses.

    Args:
        writer: the name the manager writes under (its own name: each server of a
            stream writes its own staging segments).
        streams: the log stream of every structure the manager will connect to; two
            structures of a pair may share one stream.  A change to a structure with
            no stream is refused rather than left unlogged.
    """

    def __init__(self, writer: str, streams: Mapping[str, LogStream]) -> None:
        self._name = writer
        self._streams = dict(streams)
        self._writers: dict[int, LogWriter] = {}
        self._lock = threading.Lock()
        #: Called after each change logged to a structure's stream (checkpoint triggers).
        self.listeners: dict[str, Callable[[], None]] = {}
        #: Units whose commit this manager decided and has not finished (restart state).
        self.committing: set[bytes] = set()
        #: Where restart reads this manager's records from, per structure: the position
        #: of its last system checkpoint and the units it recorded as committing.  Unset:
        #: the whole log is read.
        self.restart_points: dict[str, tuple[LogPosition, frozenset[bytes]]] = {}

    def __repr__(self) -> str:
        return f"<LogJournal {self._name!r} structures={sorted(self._streams)}>"

    def writer_for(self, structure: str) -> LogWriter:
        """This manager's writer on the stream of ``structure``, opened on first use."""
        stream = self._streams.get(structure)
        if stream is None:
            raise mq_error(
                MQReason.UNEXPECTED_ERROR,
                f"structure {structure} has no log stream: its changes cannot be logged",
            )
        writer = self._writers.get(id(stream))
        if writer is None:
            with self._lock:
                writer = self._writers.get(id(stream))
                if writer is None:
                    writer = self._writers[id(stream)] = stream.writer(self._name)
        return writer

    def close(self) -> None:
        """Sync and close every writer."""
        with self._lock:
            writers, self._writers = list(self._writers.values()), {}
        for writer in writers:
            writer.close()

    # -- the seam -------------------------------------------------------------------------

    def changed(self, note: ChangeNote) -> None:
        if note.persistent is False:
            return
        self._log_change(note)
        listener = self.listeners.get(note.structure)
        if listener is not None:
            listener()

    def _log_change(self, note: ChangeNote) -> None:
        writer = self.writer_for(note.structure)
        kind, options = note.kind, note.options
        record_type = _MESSAGE_TYPES.get(kind, RecordType.CHANGE)
        payload = {PAYLOAD_KEY: kind.value}
        commit = kind in _ENDS_AN_OPERATION
        request = note.request
        if request == "set_list_controls":
            assert isinstance(note.result, int)
            writer.log_list_controls(
                note.result,
                options["list_number"],
                limit=options.get("limit", UNCHANGED),
                increment_authority=options.get("increment_authority", False),
                payload=payload,
                structure=note.structure,
                commit=commit,
            )
            return
        change = note.result
        assert isinstance(change, Change)
        message = self._message(note, change, record_type)
        if request == "write":
            writer.log_write(
                change,
                record_type=RecordType.PUT if kind is ChangeKind.PUT else RecordType.CHANGE,
                position=options.get("position", Position.TAIL),
                ignore_limit=options.get("ignore_limit", False),
                message=message,
                payload=payload,
                structure=note.structure,
                commit=commit,
            )
        elif request == "move":
            writer.log_move(
                change,
                record_type=record_type,
                from_list=_source_list(options.get("locator")),
                position=options.get("position", Position.TAIL),
                ignore_limit=options.get("ignore_limit", False),
                message=message,
                payload=payload,
                structure=note.structure,
                commit=commit,
            )
        elif request == "delete":
            writer.log_delete(
                change,
                record_type=record_type,
                message=message,
                payload=payload,
                structure=note.structure,
                commit=commit,
            )
        else:
            writer.log_update(
                change,
                data_changed="data" in options,
                adjunct_changed="adjunct" in options,
                increment_authority=options.get("increment_authority", False),
                message=message,
                payload=payload,
                structure=note.structure,
                commit=commit,
            )

    def bulk_changed(self, note: BulkNote) -> None:
        self._log_bulk(note)
        listener = self.listeners.get(note.structure)
        if listener is not None:
            listener()

    def _log_bulk(self, note: BulkNote) -> None:
        writer = self.writer_for(note.structure)
        record_type = _MESSAGE_TYPES.get(note.kind, RecordType.CHANGE)
        payload = {PAYLOAD_KEY: note.kind.value}
        messages = [self._bulk_message(note.uow_id, meaning) for meaning in note.entries]
        if note.request == "move_entries":
            writer.log_bulk_move(
                note.items,  # type: ignore[arg-type]
                note.result,
                record_type=record_type,
                ignore_limit=note.options.get("ignore_limit", False),
                message=messages,
                payload=payload,
                structure=note.structure,
            )
        else:
            writer.log_bulk_delete(
                note.items,  # type: ignore[arg-type]
                note.result,
                record_type=record_type,
                message=messages,
                payload=payload,
                structure=note.structure,
            )

    def commit_decided(self, qm_name: str, uow_id: bytes, structures: Sequence[str]) -> bool:
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
                    payload={PAYLOAD_KEY: COMMIT_DECIDED},
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

    def unit_ended(self, qm_name: str, uow_id: bytes | None, structures: Sequence[str]) -> None:
        if uow_id is not None:
            self.committing.discard(uow_id)
        for writer in self._writers_of(structures):
            writer.commit()

    def begin_commit_outcome(self, qm_name: str, uow_id: bytes) -> bool | None:
        """Committed if the owner logged its commit decision for the unit, else not known.

        With restart points (a warm restart from system checkpoints), a unit counts as
        decided if a checkpoint recorded it as committing or a ``COMMIT`` record of it
        follows a checkpoint; otherwise every record the manager wrote is searched.
        """
        if self.restart_points:
            for structure, (position, committing) in self.restart_points.items():
                if uow_id in committing:
                    return True
                stream = self._streams.get(structure)
                if stream is not None and _commit_logged(
                    stream.records(writers={qm_name}, start=position), uow_id
                ):
                    return True
            return None
        for stream in {id(s): s for s in self._streams.values()}.values():
            if _commit_logged(stream.records(writers={qm_name}), uow_id):
                return True
        return None

    # -- helpers ----------------------------------------------------------------------------

    def _writers_of(self, structures: Iterable[str]) -> list[LogWriter]:
        seen: dict[int, LogWriter] = {}
        for structure in structures:
            writer = self.writer_for(structure)
            seen[id(writer)] = writer
        return list(seen.values())

    @staticmethod
    def _message(note: ChangeNote, change: Change, record_type: RecordType) -> MessageInfo:
        queue = None if note.queue is None else note.queue.encode()
        if record_type is RecordType.CHANGE or note.persistent is None:
            return MessageInfo(uow=note.uow_id, queue=queue, persistent=None)
        persistent, priority, msg_id, correl_id = message_facts(change.entry.data)
        return MessageInfo(note.uow_id, queue, msg_id, correl_id, priority, persistent)

    @staticmethod
    def _bulk_message(uow_id: bytes | None, meaning: EntryMeaning) -> MessageInfo:
        queue = None if meaning.queue is None else meaning.queue.encode()
        return MessageInfo(uow_id, queue, meaning.msg_id, None, None, meaning.persistent)


def _commit_logged(records: Iterable[LogRecord], uow_id: bytes) -> bool:
    return any(r.type == RecordType.COMMIT and r.uow == uow_id for r in records)


def _source_list(locator: Any) -> int | None:
    """The list a move took its entry from, when the locator names it."""
    if isinstance(locator, Head | Tail | ByKey):
        return locator.list_number
    if isinstance(locator, ById):
        return locator.list_number
    return None
