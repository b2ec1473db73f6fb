"""Replay: applying logged structure changes to a ``ListStructure``.

The log knows its records (:mod:`sharedq.log.records`); applying them to a structure
belongs to recovery.  A record that cannot be applied is still the log's
``REPLAY_FAILED`` (3040, :class:`~sharedq.log.ReplayError`): its code and class stay
what they were when replay lived in ``sharedq.log``.

Structure recovery loads the newest readable SRDS into a fresh structure and replays
the log after it (or the whole log when no checkpoint was ever taken).  Replay uses
only the public ``ListStructure`` requests, so it works on any backend, and it
repeats each change with absolute values (ids, keys, versions) and with the list
limit overridden: the change succeeded once, so the limit is not a condition to
check again.

Two ways, with the same result:

* :func:`apply_record` repeats one record's change, exactly as it was made.
* :func:`replay` (``fold=True``, the default) first folds a window of records into
  each entry's *net* change, then applies that: a message put, read and deleted
  within the window costs no request at all.  This is what makes recovery cheap next
  to reading the log.  It is exact because of how a sublist orders its entries: an
  entry placed at the head goes before every entry of its key present then, one placed
  at the tail after them, so the final order depends only on each entry's *last*
  placement (head or tail, and when).  Replay removes deleted entries, rewrites
  updated ones in place, then places entries in the order of their last placement,
  which reproduces the order the structure had.  Every intermediate state uses no more
  room than the final one, so replay cannot fail for room where the original did not.

A record that cannot be applied (an entry that should exist does not, or the reverse)
means the log and the starting image disagree: :class:`~sharedq.log.errors.ReplayError`
names the record.  One disagreement is expected and harmless: the delete of an entry
the log never wrote.  A server changes the structure first and logs the change before
it answers; killed in between, it leaves an entry that no record describes (an
uncommitted put), which the peer that recovers its units then deletes, and logs.  The
delete's outcome, no such entry, holds either way, so replay lets it pass.

After an operator accepted records as lost (``sharedq recovery accept-loss``), replay
runs with ``on_conflict``: a change that cannot be applied because records before it
are gone (a move of an entry whose write was lost, a write of one whose delete was)
is reported to it and passed over, and the rest goes on; a rewritten entry replaces
what is there.  The recovery report lists each.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import islice
from typing import TypeVar

from sharedq.cf.api import ListStructure
from sharedq.cf.errors import CFError, NoSuchEntry
from sharedq.cf.types import UNCHANGED, BulkWrite, ById, Position, Unchanged
from sharedq.log import LIMIT_NONE, ChangeOp, LogReason, LogRecord, ReplayError, log_error
from sharedq.log.records import MAX_VERSION

_WRITE, _MOVE, _DELETE, _UPDATE, _CONTROLS = (
    int(ChangeOp.WRITE),
    int(ChangeOp.MOVE),
    int(ChangeOp.DELETE),
    int(ChangeOp.UPDATE),
    int(ChangeOp.LIST_CONTROLS),
)
_NONE = int(ChangeOp.NONE)
#: Records folded together before their net effect is applied.
DEFAULT_WINDOW = 200_000
#: Entries per bulk delete request.
_BULK = 1024
_T = TypeVar("_T")

#: Told of each change replay passed over (the record, and why) after accepted loss.
ConflictHandler = Callable[[LogRecord, str], None]


@dataclass(frozen=True)
class ReplayResult:
    """What a replay did."""

    records: int = 0
    requests: int = 0
    first_seq: int | None = None
    last_seq: int | None = None


def apply_record(structure: ListStructure, record: LogRecord) -> bool:
    """Repeat one record's change; ``False`` for a record that is not a change."""
    op = record.op
    try:
        if op == _WRITE:
            structure.write(
                _req(record.list_number),
                _req(record.key),
                record.data or b"",
                adjunct=record.adjunct or b"",
                secondary_key=record.secondary_key if record.set_secondary_key else None,
                entry_id=record.entry_id,
                version=record.version or 0,
                position=Position.HEAD if record.at_head else Position.TAIL,
                ignore_limit=True,
            )
        elif op == _MOVE:
            structure.move(
                ById(_req(record.entry_id)),
                _req(record.list_number),
                new_key=record.key,
                new_secondary_key=record.secondary_key if record.set_secondary_key else UNCHANGED,
                set_version=_version_after(structure, record),
                position=Position.HEAD if record.at_head else Position.TAIL,
                ignore_limit=True,
            )
        elif op == _DELETE:
            with contextlib.suppress(NoSuchEntry):  # never logged: see the module's doc
                structure.delete(ById(_req(record.entry_id)))
        elif op == _UPDATE:
            structure.update(
                ById(_req(record.entry_id)),
                data=UNCHANGED if record.data is None else record.data,
                adjunct=UNCHANGED if record.adjunct is None else record.adjunct,
                set_version=_version_after(structure, record),
                increment_authority=bool(record.increment_authority),
            )
        elif op == _CONTROLS:
            structure.set_list_controls(
                _req(record.list_number),
                limit=_limit(record.limit),
                increment_authority=bool(record.increment_authority),
            )
        else:
            return False
    except CFError as exc:
        raise _failed(record, exc) from exc
    return True


def replay(
    structure: ListStructure,
    records: Iterable[LogRecord],
    *,
    structure_name: str | None = None,
    fold: bool = True,
    window: int = DEFAULT_WINDOW,
    on_conflict: ConflictHandler | None = None,
) -> ReplayResult:
    """Apply the changes among ``records`` (in log order) that concern the structure.

    ``structure_name`` selects the records (by default the structure's own name; give
    the old name when rebuilding under another).  Records of other structures and
    records that are not changes are skipped.  ``on_conflict``: pass over changes that
    cannot be applied, telling it of each, instead of raising (only after records
    were accepted as lost).
    """
    name = structure_name if structure_name is not None else structure.structure_name
    changes = (r for r in records if r.op != _NONE and r.structure == name)
    count = requests = 0
    first: int | None = None
    last: int | None = None
    if not fold:
        for record in changes:
            try:
                apply_record(structure, record)
            except ReplayError as exc:
                if on_conflict is None:
                    raise
                on_conflict(record, exc.detail)
            count += 1
            if first is None:
                first = record.seq
            last = record.seq
        return ReplayResult(count, count, first, last)
    source = iter(records)
    while True:
        batch = list(islice(source, window))
        if not batch:
            break
        chunk = [r for r in batch if r.op != _NONE and r.structure == name]
        if not chunk:
            continue
        count += len(chunk)
        first = chunk[0].seq if first is None else first
        last = chunk[-1].seq
        requests += _Fold(chunk, on_conflict).apply(structure)
    return ReplayResult(count, requests, first, last)


class _Net:
    """One entry's net change over a window (fields unset until the window sets them)."""

    __slots__ = (
        "adjunct",
        "data",
        "existed",
        "head",
        "incs",
        "key",
        "list",
        "placed_at",
        "present",
        "record",
        "rewritten",
        "skey",
        "skey_set",
        "version",
    )

    def __init__(self, existed: bool, record: LogRecord) -> None:
        self.existed = existed
        self.present = existed
        self.rewritten = False
        self.record = record  # the latest record, for error messages
        self.list: int | None = None
        self.key: bytes | None = None
        self.skey_set = False
        self.skey: bytes | None = None
        self.version: int | None = None
        self.incs = 0
        self.data: bytes | None = None
        self.adjunct: bytes | None = None
        self.placed_at: int | None = None
        self.head = False


class _Fold:
    """Folds a window of change records into net changes, then applies them."""

    def __init__(self, records: list[LogRecord], on_conflict: ConflictHandler | None) -> None:
        self.on_conflict = on_conflict
        self.nets: dict[bytes, _Net] = {}
        self.limits: dict[int, int | None] = {}
        self.authority: dict[int, int] = {}
        # The loop runs once per record replayed: locals, no calls on the common paths.
        nets = self.nets
        get = nets.get
        new_net = object.__new__
        for record in records:
            op = record.op
            if op == _CONTROLS:
                self._controls(record)
                continue
            entry_id = record.entry_id
            if entry_id is None:
                raise _failed(record, "the record has no entry id")
            net = get(entry_id)
            if net is None:
                if op == _WRITE:  # the common case: a new entry; set each field once
                    net = nets[entry_id] = new_net(_Net)
                    net.existed = False
                    net.present = False
                else:
                    net = nets[entry_id] = _Net(True, record)
            elif (op == _WRITE) == net.present:
                what = "exists already" if op == _WRITE else "was deleted before"
                why = f"entry {entry_id.hex()} {what} (seq {net.record.seq})"
                if self.on_conflict is None:
                    raise _failed(record, why)
                self.on_conflict(record, why)
                if op != _WRITE:
                    continue
            net.record = record
            if op == _WRITE:
                net.rewritten = net.existed
                net.present = True
                net.list = record.list_number
                net.key = record.key
                net.skey_set = True
                net.skey = record.secondary_key if record.set_secondary_key else None
                net.version = record.version or 0
                net.incs = 0
                net.data = record.data or b""
                net.adjunct = record.adjunct or b""
                net.placed_at = record.seq
                net.head = bool(record.at_head)
            elif op == _MOVE:
                net.list = record.list_number
                if record.key is not None:
                    net.key = record.key
                if record.set_secondary_key:
                    net.skey_set = True
                    net.skey = record.secondary_key
                if record.version is not None:
                    net.version = record.version
                    net.incs = 0
                elif record.increment_version:
                    self._increment(net)
                net.placed_at = record.seq
                net.head = bool(record.at_head)
            elif op == _DELETE:
                net.present = False
                net.placed_at = None
            elif op == _UPDATE:
                self._update_record(net, record)

    def _controls(self, record: LogRecord) -> None:
        number = _req(record.list_number)
        if record.limit is not None:
            self.limits[number] = None if record.limit == LIMIT_NONE else record.limit
        if record.increment_authority:
            self.authority[number] = self.authority.get(number, 0) + 1

    def _update_record(self, net: _Net, record: LogRecord) -> None:
        if record.data is not None:
            net.data = record.data
        if record.adjunct is not None:
            net.adjunct = record.adjunct
        if record.version is not None:
            net.version = record.version
            net.incs = 0
        elif record.increment_version:
            self._increment(net)
        if record.increment_authority:
            number = _req(record.list_number)
            self.authority[number] = self.authority.get(number, 0) + 1

    @staticmethod
    def _increment(net: _Net) -> None:
        if net.version is not None:
            net.version = min(net.version + 1, MAX_VERSION)  # saturates, as bulk moves do
        else:
            net.incs += 1

    def apply(self, structure: ListStructure) -> int:
        """Apply the net changes; return the number of requests made."""
        requests = 0
        # An entry whose net change is its deletion may never have been logged (see
        # the module's doc): missing is fine.  One deleted and written again must exist.
        gone = [(e, n) for e, n in self.nets.items() if n.existed and not n.present]
        rewritten = [
            (e, n) for e, n in self.nets.items() if n.existed and n.present and n.rewritten
        ]
        lenient = self.on_conflict is not None
        for deletes, missing_ok in ((gone, True), (rewritten, lenient)):
            for start in range(0, len(deletes), _BULK):
                batch = deletes[start : start + _BULK]
                ids = [e for e, _ in batch]
                done = 0
                while done < len(ids):
                    result = structure.delete_entries(
                        ids[done:], missing_ok=missing_ok, budget=len(ids) - done
                    )
                    requests += 1
                    if result.error is not None or not result.processed:
                        bad = batch[min(done + result.processed, len(batch) - 1)][1].record
                        raise _failed(bad, result.error or "bulk delete stopped")
                    done += result.processed
        placements: list[tuple[int, bytes, _Net]] = []
        for entry_id, net in self.nets.items():
            if not net.present:
                continue
            if net.existed and not net.rewritten:
                try:
                    requests += self._update(structure, entry_id, net)
                except ReplayError as exc:
                    if self.on_conflict is None:
                        raise
                    self.on_conflict(net.record, exc.detail)
                    continue
            if net.placed_at is not None:
                placements.append((net.placed_at, entry_id, net))
        placements.sort(key=_first)
        # New entries go in bulk writes (one request per batch, not per entry); a run
        # of them is written before the next move, so that placement order holds.
        writes: list[tuple[BulkWrite, _Net]] = []
        for _, entry_id, net in placements:
            if not net.existed or net.rewritten:
                writes.append((_as_write(entry_id, net), net))
                if len(writes) >= _BULK:
                    requests += _write_batch(structure, writes, self.on_conflict)
                continue
            if writes:
                requests += _write_batch(structure, writes, self.on_conflict)
            requests += 1
            try:
                self._place(structure, entry_id, net)
            except CFError as exc:
                if self.on_conflict is None:
                    raise _failed(net.record, exc) from exc
                self.on_conflict(net.record, str(exc))
        if writes:
            requests += _write_batch(structure, writes, self.on_conflict)
        for number in sorted(set(self.limits) | set(self.authority)):
            increments = self.authority.get(number, 0)
            limit = self.limits.get(number, UNCHANGED)
            try:
                structure.set_list_controls(number, limit=limit, increment_authority=increments > 0)
                for _ in range(increments - 1):
                    structure.set_list_controls(number, increment_authority=True)
            except CFError as exc:
                raise log_error(LogReason.REPLAY_FAILED, f"list {number} controls: {exc}") from exc
            requests += max(1, increments)
        return requests

    @staticmethod
    def _update(structure: ListStructure, entry_id: bytes, net: _Net) -> int:
        """In-place changes of an entry that existed before the window; 0 or 1 request."""
        version = net.version
        if version is None and net.incs:
            try:
                version = net.version = _incremented(structure, net.record, net.incs)
            except CFError as exc:
                raise _failed(net.record, exc) from exc
        if net.data is None and net.adjunct is None and (version is None or net.placed_at):
            return 0  # nothing in place; a placement will set the version
        try:
            structure.update(
                ById(entry_id),
                data=UNCHANGED if net.data is None else net.data,
                adjunct=UNCHANGED if net.adjunct is None else net.adjunct,
                set_version=version,
            )
        except CFError as exc:
            raise _failed(net.record, exc) from exc
        return 1

    @staticmethod
    def _place(structure: ListStructure, entry_id: bytes, net: _Net) -> None:
        position = Position.HEAD if net.head else Position.TAIL
        if not net.existed or net.rewritten:
            structure.write(
                _req(net.list),
                _req(net.key),
                net.data or b"",
                adjunct=net.adjunct or b"",
                secondary_key=net.skey,
                entry_id=entry_id,
                version=net.version or 0,
                position=position,
                ignore_limit=True,
            )
        else:
            structure.move(
                ById(entry_id),
                _req(net.list),
                new_key=net.key,
                new_secondary_key=net.skey if net.skey_set else UNCHANGED,
                set_version=net.version,
                position=position,
                ignore_limit=True,
            )


def _as_write(entry_id: bytes, net: _Net) -> BulkWrite:
    """A net change that creates its entry, as one entry of a bulk write."""
    return BulkWrite(
        _req(net.list),
        _req(net.key),
        net.data or b"",
        net.adjunct or b"",
        net.skey,
        entry_id,
        net.version or 0,
        Position.HEAD if net.head else Position.TAIL,
    )


def _write_batch(
    structure: ListStructure,
    batch: list[tuple[BulkWrite, _Net]],
    on_conflict: ConflictHandler | None = None,
) -> int:
    """Write a batch in as few requests as the backend's budget allows; empties it.

    With ``on_conflict``, an entry whose id is taken (its delete was lost) replaces the
    entry there; one that still cannot be written is reported and passed over.
    """
    writes = [write for write, _ in batch]
    requests = done = 0
    while done < len(writes):
        try:
            result = structure.write_entries(
                writes[done:], ignore_limit=True, budget=len(writes) - done
            )
        except CFError as exc:
            raise _failed(batch[done][1].record, exc) from exc
        requests += 1
        done += result.processed
        if result.error is not None:
            record = batch[done][1].record
            if on_conflict is None:
                raise _failed(record, result.error)
            write = writes[done]
            try:
                structure.delete_entries([write.entry_id], missing_ok=True)  # type: ignore[list-item]
                structure.write_entries([write], ignore_limit=True)
                on_conflict(record, f"{result.error}: the entry there was replaced")
            except CFError as exc:
                on_conflict(record, f"{result.error}; replacing it failed too: {exc}")
            requests += 2
            done += 1
    batch.clear()
    return requests


def _version_after(structure: ListStructure, record: LogRecord) -> int | None:
    """The version a move or update record sets: its own, or one up from the entry's."""
    if record.version is None and record.increment_version:
        return _incremented(structure, record, 1)
    return record.version


def _incremented(structure: ListStructure, record: LogRecord, increments: int) -> int:
    """The entry's version after ``increments`` increments, stopping at the largest.

    A logged increment (a bulk move's ``increment_version``) has no absolute value;
    replay reads the entry's version and sets the result, saturating at the largest
    version as ``move_entries`` does.
    """
    entry = structure.read(ById(_req(record.entry_id)))
    if entry is None:  # pragma: no cover - ById raises instead
        raise _failed(record, "entry not found")
    return min(entry.version + increments, MAX_VERSION)


def _first(item: tuple[int, bytes, _Net]) -> int:
    return item[0]


def _req(value: _T | None) -> _T:
    """A field the record's op requires; a record without it is malformed."""
    if value is None:
        raise log_error(LogReason.REPLAY_FAILED, "a change record lacks a required field")
    return value


def _limit(limit: int | None) -> int | Unchanged | None:
    if limit is None:
        return UNCHANGED
    return None if limit == LIMIT_NONE else limit


def _failed(record: LogRecord, cause: object) -> Exception:
    return log_error(
        LogReason.REPLAY_FAILED,
        f"cannot apply {record.change_op.name.lower()} at seq {record.seq} "
        f"(writer {record.writer}, lsn {record.lsn}): {cause}",
        seq=record.seq,
        writer=record.writer,
        lsn=record.lsn,
    )
