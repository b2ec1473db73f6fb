"""Turning list-structure changes into log records: the helpers servers call.

A server logs a change right after the structure made it and before it answers its
caller ("logged before the request returns").  These helpers take what
``sharedq.cf`` returned (a :class:`~sharedq.cf.Change`, a :class:`~sharedq.cf.BulkResult`)
plus what the server knows about the request (position, limit override, the message
and its unit of work) and write one record per entry changed, carrying the entry's
state *after* the change wherever the structure reported it, so that replay sets
absolute values instead of repeating increments.

Nonpersistent messages are not logged: pass the message's :class:`MessageInfo` with
``persistent=False`` and the helper writes nothing and returns ``None``.  Callers can
therefore pass every message through the same call.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from sharedq.cf.types import UNCHANGED, BulkMove, BulkResult, Change, Position, Unchanged
from sharedq.log.errors import LogReason, log_error
from sharedq.log.records import (
    FIELD_NAMES,
    LIMIT_NONE,
    ChangeOp,
    Checker,
    LogPosition,
    RecordType,
    checker,
)

_I = {name: index for index, name in enumerate(FIELD_NAMES)}
SEQ, OP, TYPE = _I["seq"], _I["op"], _I["type"]
ENTRY_ID, LIST, FROM_LIST, KEY = _I["entry_id"], _I["list_number"], _I["from_list"], _I["key"]
SKEY, SET_SKEY, VERSION, INC_VERSION = (
    _I["secondary_key"],
    _I["set_secondary_key"],
    _I["version"],
    _I["increment_version"],
)
DATA, ADJUNCT, AT_HEAD, LIMIT = _I["data"], _I["adjunct"], _I["at_head"], _I["limit"]
INC_AUTHORITY, IGNORE_LIMIT, PAYLOAD = (
    _I["increment_authority"],
    _I["ignore_limit"],
    _I["payload"],
)
_MESSAGE_FIRST = _I["uow"]
_FIELD_COUNT = len(FIELD_NAMES)
#: What a helper checks before writing: what its caller gave.  The entry's fields come
#: from the structure, which has checked them already (and a failed check here would
#: cost every append a microsecond or two).
CALLER_FIELDS = (
    TYPE,
    _I["structure"],
    FROM_LIST,
    *range(_MESSAGE_FIRST, _MESSAGE_FIRST + 6),
    PAYLOAD,
)
_CONTROL_FIELDS = (*CALLER_FIELDS, SEQ, LIST, LIMIT)
_EVENT_FIELDS = (*CALLER_FIELDS, SEQ)


class MessageInfo(NamedTuple):
    """What a change was made for: the message, its queue and its unit of work.

    Build one per message and pass it to every record about it.  ``queue`` is the
    queue name as bytes (a CQS name is 16 bytes; encode an MQ name as UTF-8).
    """

    uow: bytes | None = None
    queue: bytes | None = None
    message_id: bytes | None = None
    correl_id: bytes | None = None
    priority: int | None = None
    persistent: bool | None = True


def blank(record_type: RecordType | int, op: ChangeOp, message: MessageInfo | None) -> list[Any]:
    """A value list for a record: type, op and message fields set, the rest ``None``."""
    values: list[Any] = [None] * _FIELD_COUNT
    values[OP] = int(op)
    values[TYPE] = int(record_type)
    if message is not None:
        values[_MESSAGE_FIRST : _MESSAGE_FIRST + 6] = message
    return values


#: The message fields of a record about no message.
_NO_MESSAGE = MessageInfo(None, None, None, None, None, None)
_HEAD = Position.HEAD
_WRITE, _MOVE, _DELETE, _UPDATE = (
    int(ChangeOp.WRITE),
    int(ChangeOp.MOVE),
    int(ChangeOp.DELETE),
    int(ChangeOp.UPDATE),
)
#: Each record type's code (a plain int, what the record holds), by the type.
_CODES: dict[Any, int] = {t: int(t) for t in RecordType}
#: The unrolled check of the fields a helper's caller gave (``check_values``).
_CALLER_CHECK = checker(CALLER_FIELDS)


def _skipped(message: MessageInfo | None) -> bool:
    return message is not None and message.persistent is False


class ChangeLogging(ABC):
    """The record-building helpers of a log writer (mixed into ``LogWriter``)."""

    @abstractmethod
    def _emit(
        self,
        values: list[Any],
        structure: str | None,
        payload: Any,
        commit: bool,
        check: tuple[int, ...] | range,
        passes: Checker | None = None,
    ) -> LogPosition:
        """Fill in writer, lsn, time, structure and default seq; write; sync per policy.

        ``check``: the indexes of the fields to check (``check_values``); ``passes``
        their unrolled check, when the caller has it at hand."""

    @abstractmethod
    def commit(self) -> None:
        """Make every record appended so far durable."""

    # The helpers below build a record's values in one list display, in FIELDS order
    # (seq, op, writer, lsn, type, structure, time_us, entry_id, list_number, from_list,
    # key, secondary_key, set_secondary_key, version, increment_version, data, adjunct,
    # at_head, limit, increment_authority, ignore_limit, the six message fields,
    # payload); tests/log/test_change_records.py holds them to the fields one by one.

    def log_write(
        self,
        change: Change,
        *,
        record_type: RecordType = RecordType.PUT,
        position: Position = Position.TAIL,
        ignore_limit: bool = False,
        message: MessageInfo | None = None,
        payload: Any = None,
        structure: str | None = None,
        commit: bool = False,
    ) -> LogPosition | None:
        """Log a ``write``: the whole new entry, so replay recreates it byte for byte."""
        if message is None:
            message = _NO_MESSAGE
        elif message[5] is False:  # nonpersistent: not logged
            return None
        entry = change.entry
        return self._emit(
            [
                change.seq,
                _WRITE,
                None,
                None,
                _CODES.get(record_type, record_type),
                None,
                None,
                entry.entry_id,
                entry.list_number,
                None,
                entry.key,
                entry.secondary_key,
                True,
                entry.version,
                None,
                entry.data,
                entry.adjunct,
                position is _HEAD,
                None,
                None,
                ignore_limit,
                *message,
                None,
            ],
            structure,
            payload,
            commit,
            CALLER_FIELDS,
            _CALLER_CHECK,
        )

    def log_move(
        self,
        change: Change,
        *,
        record_type: RecordType = RecordType.MOVE,
        from_list: int | None = None,
        position: Position = Position.TAIL,
        ignore_limit: bool = False,
        message: MessageInfo | None = None,
        payload: Any = None,
        structure: str | None = None,
        commit: bool = False,
    ) -> LogPosition | None:
        """Log a ``move`` (a read to the lock queue, an unlock, a commit's move...).

        Records the entry's list, key, secondary key and version after the move.
        """
        if message is None:
            message = _NO_MESSAGE
        elif message[5] is False:
            return None
        entry = change.entry
        return self._emit(
            [
                change.seq,
                _MOVE,
                None,
                None,
                _CODES.get(record_type, record_type),
                None,
                None,
                entry.entry_id,
                entry.list_number,
                from_list,
                entry.key,
                entry.secondary_key,
                True,
                entry.version,
                None,
                None,
                None,
                position is _HEAD,
                None,
                None,
                ignore_limit,
                *message,
                None,
            ],
            structure,
            payload,
            commit,
            CALLER_FIELDS,
            _CALLER_CHECK,
        )

    def log_delete(
        self,
        change: Change,
        *,
        record_type: RecordType = RecordType.DELETE,
        message: MessageInfo | None = None,
        payload: Any = None,
        structure: str | None = None,
        commit: bool = False,
    ) -> LogPosition | None:
        """Log a ``delete``; the entry's list, key and version are kept for tracking."""
        if message is None:
            message = _NO_MESSAGE
        elif message[5] is False:
            return None
        entry = change.entry
        return self._emit(
            [
                change.seq,
                _DELETE,
                None,
                None,
                _CODES.get(record_type, record_type),
                None,
                None,
                entry.entry_id,
                entry.list_number,
                None,
                entry.key,
                None,
                None,
                entry.version,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                *message,
                None,
            ],
            structure,
            payload,
            commit,
            CALLER_FIELDS,
            _CALLER_CHECK,
        )

    def log_update(
        self,
        change: Change,
        *,
        data_changed: bool = True,
        adjunct_changed: bool = True,
        increment_authority: bool = False,
        record_type: RecordType = RecordType.CHANGE,
        message: MessageInfo | None = None,
        payload: Any = None,
        structure: str | None = None,
        commit: bool = False,
    ) -> LogPosition | None:
        """Log an ``update``: new data and/or adjunct (as changed), version after it."""
        if message is None:
            message = _NO_MESSAGE
        elif message[5] is False:
            return None
        entry = change.entry
        return self._emit(
            [
                change.seq,
                _UPDATE,
                None,
                None,
                _CODES.get(record_type, record_type),
                None,
                None,
                entry.entry_id,
                entry.list_number,
                None,
                entry.key,
                None,
                None,
                entry.version,
                None,
                entry.data if data_changed else None,
                entry.adjunct if adjunct_changed else None,
                None,
                None,
                increment_authority,
                None,
                *message,
                None,
            ],
            structure,
            payload,
            commit,
            CALLER_FIELDS,
            _CALLER_CHECK,
        )

    def log_list_controls(
        self,
        seq: int,
        list_number: int,
        *,
        limit: int | Unchanged | None = UNCHANGED,
        increment_authority: bool = False,
        record_type: RecordType = RecordType.CHANGE,
        payload: Any = None,
        structure: str | None = None,
        commit: bool = False,
    ) -> LogPosition:
        """Log ``set_list_controls`` (its seq is what the structure returned)."""
        values = blank(record_type, ChangeOp.LIST_CONTROLS, None)
        values[SEQ] = seq
        values[LIST] = list_number
        if not isinstance(limit, Unchanged):
            values[LIMIT] = LIMIT_NONE if limit is None else limit
        values[INC_AUTHORITY] = increment_authority
        return self._emit(values, structure, payload, commit, _CONTROL_FIELDS)

    def log_bulk_move(
        self,
        moves: Sequence[BulkMove],
        result: BulkResult,
        *,
        record_type: RecordType = RecordType.MOVE,
        ignore_limit: bool = False,
        message: MessageInfo | Sequence[MessageInfo | None] | None = None,
        payload: Any = None,
        structure: str | None = None,
        commit: bool = False,
    ) -> list[LogPosition]:
        """Log what a ``move_entries`` request did: one record per entry moved.

        ``moves`` is the request as sent (on a redrive, the slice sent); ``message`` one
        info for all entries or one per entry of ``moves``.  Entries the result lists as
        missing took no seq and get no record.  Bulk moves go to the tail.
        """

        def fill(values: list[Any], move: BulkMove) -> None:
            values[LIST] = move.to_list
            values[FROM_LIST] = move.from_list
            values[KEY] = move.new_key
            if not isinstance(move.new_secondary_key, Unchanged):
                values[SET_SKEY] = True
                values[SKEY] = move.new_secondary_key
            values[VERSION] = move.set_version
            values[INC_VERSION] = move.increment_version or None
            values[AT_HEAD] = False
            values[IGNORE_LIMIT] = ignore_limit

        return self._log_bulk(
            moves, result, ChangeOp.MOVE, record_type, message, payload, structure, commit, fill
        )

    def log_bulk_delete(
        self,
        entry_ids: Sequence[bytes],
        result: BulkResult,
        *,
        record_type: RecordType = RecordType.DELETE,
        message: MessageInfo | Sequence[MessageInfo | None] | None = None,
        payload: Any = None,
        structure: str | None = None,
        commit: bool = False,
    ) -> list[LogPosition]:
        """Log what a ``delete_entries`` request did: one record per entry deleted."""
        return self._log_bulk(
            entry_ids,
            result,
            ChangeOp.DELETE,
            record_type,
            message,
            payload,
            structure,
            commit,
            None,
        )

    def _log_bulk(
        self,
        items: Sequence[Any],
        result: BulkResult,
        op: ChangeOp,
        record_type: RecordType,
        message: MessageInfo | Sequence[MessageInfo | None] | None,
        payload: Any,
        structure: str | None,
        commit: bool,
        fill: Callable[[list[Any], Any], None] | None,
    ) -> list[LogPosition]:
        if commit is not True and commit is not False:  # checked before any record
            raise log_error(LogReason.BAD_ARGUMENT, f"commit must be True or False, not {commit!r}")
        positions: list[LogPosition] = []
        for index, item, seq in _handled(items, result):
            info = _message_at(message, index)
            if _skipped(info):
                continue
            values = blank(record_type, op, info)
            values[SEQ] = seq
            values[ENTRY_ID] = item.entry_id if isinstance(item, BulkMove) else item
            if fill is not None:
                fill(values, item)
            positions.append(
                self._emit(values, structure, payload, False, CALLER_FIELDS, _CALLER_CHECK)
            )
        if commit:
            self.commit()
        return positions

    def log_event(
        self,
        record_type: RecordType,
        *,
        payload: Any = None,
        seq: int | None = None,
        message: MessageInfo | None = None,
        structure: str | None = None,
        commit: bool = False,
    ) -> LogPosition:
        """Log a record that is not a structure change: connect, checkpoints, statistics...

        It carries ``seq`` if given, else the last seq this writer observed for the
        structure (see ``LogWriter.observe``), and sorts after the change with that seq.
        ``payload`` is any msgpack-able value (a system checkpoint's restart state).
        """
        values = blank(record_type, ChangeOp.NONE, message)
        values[SEQ] = seq
        return self._emit(values, structure, payload, commit, _EVENT_FIELDS)


def _handled(items: Sequence[Any], result: BulkResult) -> list[tuple[int, Any, int]]:
    """``(index, item, seq)`` for each item of a bulk request the structure changed."""
    missing = set(result.missing)
    handled = []
    seqs = iter(result.seqs)
    for index, item in enumerate(items[: result.processed]):
        entry_id = item.entry_id if isinstance(item, BulkMove) else item
        if entry_id in missing:
            continue
        seq = next(seqs, None)
        if seq is None:
            break
        handled.append((index, item, seq))
    return handled


def _message_at(
    message: MessageInfo | Sequence[MessageInfo | None] | None, index: int
) -> MessageInfo | None:
    if message is None or isinstance(message, MessageInfo):
        return message
    return message[index]
