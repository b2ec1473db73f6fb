"""The one door through which the queue manager reaches a structure.

:class:`StructureAccess` wraps a manager's connection to one structure.  Every request
the queue manager makes goes through it, which gives two things one place to live:

* the journal seam (:mod:`sharedq.mq.journal`): after each request that changed the
  structure, the manager's journal is told what changed and what it meant.  When the
  journal cannot record it (a recovery log on a full disk), the request raises
  :class:`~sharedq.mq.errors.JournalFailed` *after* the change was made, carrying its
  note, so that the caller can undo it (:mod:`sharedq.mq.undo`); inside
  :func:`tolerating` the failure is collected instead and the change stands;
* fault injection: a hook called before and after every request.  The crash tests
  make it raise :class:`SimulatedFailure` (or kill the process) at a chosen request,
  which leaves the manager exactly as a real failure would between two requests:
  the structure holds what the requests so far did, and nothing else.

Nothing here translates list-structure errors: callers know what a failure means to
them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

from sharedq.cf import (
    UNCHANGED,
    BulkMove,
    BulkResult,
    ById,
    Change,
    ListEntry,
    ListInfo,
    ListStructure,
    Locator,
    MonitorEvent,
    MonitorSpec,
    Registration,
    StructureLost,
    UserInfo,
)
from sharedq.cf.types import Unchanged
from sharedq.mq.errors import JournalFailed, journal_failed
from sharedq.mq.journal import BulkNote, ChangeKind, ChangeNote, EntryMeaning, Journal
from sharedq.mq.messages import entry_facts


class SimulatedFailure(BaseException):
    """Raised by a test's fault hook to stop a manager dead between two requests.

    A ``BaseException``, like ``KeyboardInterrupt``, so that no ``except Exception``
    clause in the manager runs clean-up a dead process could not have run.
    """


#: The journal failures the current block carries on through (see :func:`tolerating`).
_TOLERATED: ContextVar[list[JournalFailed] | None] = ContextVar("_TOLERATED", default=None)


@contextmanager
def tolerating() -> Iterator[list[JournalFailed]]:
    """Carry on through journal failures inside the block.

    A change the journal cannot record stands, and its :class:`JournalFailed` is added
    to the list this yields instead of being raised.  For the changes that need no
    undo: a backout (recovery backs out whatever a log lacks of it), an undo (what it
    takes back the log may never have seen), and the work of a unit that was already
    decided.
    """
    failures: list[JournalFailed] = []
    token = _TOLERATED.set(failures)
    try:
        yield failures
    finally:
        _TOLERATED.reset(token)


def _journal_failure(error: Exception, note: ChangeNote | BulkNote) -> None:
    """Raise the journal's failure to record ``note`` (or collect it: :func:`tolerating`)."""
    failure = journal_failed(error, note)
    tolerated = _TOLERATED.get()
    if tolerated is None:
        raise failure from error
    failure.__cause__ = error
    tolerated.append(failure)


class HasUowId(Protocol):
    """A unit of work, whose id is made only when asked for (it may never be)."""

    @property
    def uow_id(self) -> bytes: ...


UowRef = bytes | HasUowId | None


def _uow_id(uow: UowRef) -> bytes | None:
    return uow if uow is None or type(uow) is bytes else uow.uow_id  # type: ignore[union-attr]


class FaultHook(Protocol):
    """Called with ``(request name, structure name, before)`` around every request."""

    def __call__(self, request: str, structure: str, before: bool) -> None: ...


class Gate(Protocol):
    """Makes a change, holding it while the structure is quiesced (never failing for it)."""

    def run(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...


class StructureAccess:
    """A manager's connection to one structure, with its structure number.

    Change requests take ``kind`` and what the change concerns (queue, unit of work,
    persistence, message id), which they pass on to the journal.  ``write``, ``move``
    and ``delete`` are spelled out rather than routed through one helper as the bulk
    requests are: they are every put's and get's path, where a call level shows.
    """

    __slots__ = (
        "_journal",
        "_journaling",
        "conn",
        "faults",
        "gate",
        "generation",
        "name",
        "number",
        "relocate",
    )

    def __init__(
        self,
        conn: ListStructure,
        number: int,
        journal: Journal,
        faults: FaultHook | None = None,
    ) -> None:
        self.conn = conn
        self.name = conn.structure_name
        self.number = number
        self.journal = journal
        self.faults = faults
        #: Holds changes while the structure is quiesced (a recovery log's checkpoint):
        #: ``gate.run(call, *args, **options)`` makes the request, waiting if need be.
        self.gate: Gate | None = None
        #: Called when the structure is found gone: returns a connection to its copy
        #: (the request is then made again there), or ``None`` (it was lost).
        self.relocate: Callable[[ListStructure], ListStructure | None] | None = None
        #: Counts the connections replaced so (monitors registered before are gone).
        self.generation = 0

    @property
    def journal(self) -> Journal:
        return self._journal

    @journal.setter
    def journal(self, journal: Journal) -> None:
        self._journal = journal
        # The default journal records nothing: skip the calls (the hot path's sake).
        self._journaling = type(journal) is not Journal

    def __repr__(self) -> str:
        return f"<StructureAccess {self.name!r} #{self.number} user={self.conn.user_id}>"

    @property
    def user_id(self) -> int:
        return self.conn.user_id

    # -- changes ------------------------------------------------------------------------

    def write(
        self,
        list_number: int,
        key: bytes,
        data: bytes,
        *,
        kind: ChangeKind,
        queue: str | None = None,
        uow: UowRef = None,
        persistent: bool | None = None,
        msg_id: bytes | None = None,
        **options: Any,
    ) -> Change:
        if self.faults is not None:
            self.faults("write", self.name, True)
        change = (
            self.conn.write(list_number, key, data, **options)
            if self.gate is None
            else self._gated("write", list_number, key, data, **options)
        )
        if self._journaling:
            note = ChangeNote(
                kind,
                self.name,
                "write",
                change,
                options,
                queue,
                _uow_id(uow),
                persistent,
                msg_id,
            )
            self._changed(note)
        if self.faults is not None:
            self.faults("write", self.name, False)
        return change

    def write_and_rekey(
        self,
        list_number: int,
        key: bytes,
        data: bytes,
        *,
        kind: ChangeKind,
        then: ChangeKind,
        queue: str | None = None,
        uow: UowRef = None,
        persistent: bool | None = None,
        msg_id: bytes | None = None,
        new_key: bytes,
        new_secondary_key: bytes | Unchanged | None = UNCHANGED,
        set_version: int | None = None,
        **options: Any,
    ) -> tuple[Change, Change]:
        """A write (``kind``) and the move of the entry to ``new_key`` on its list
        (``then``) in one request; the journal hears of both, as two changes.

        With a recovery log (a journal recording) the two are two requests, ``write``
        then ``move``, each logged before the next is made: a manager killed between a
        combined request and its log records would leave a *committed* message that no
        record describes, and a later change of it could not be replayed.  (Killed
        after the write alone, it leaves an uncommitted put, which recovery deletes.)
        With a fault hook they are two requests as well, so that a test can stop the
        manager between them.
        """
        rekey: dict[str, Any] = {
            "new_key": new_key,
            "new_secondary_key": new_secondary_key,
            "set_version": set_version,
        }
        if self.faults is not None or self._journaling:
            written = self.write(
                list_number,
                key,
                data,
                kind=kind,
                queue=queue,
                uow=uow,
                persistent=persistent,
                msg_id=msg_id,
                **options,
            )
            moved = self.move(
                ById(written.entry.entry_id, list_number),
                list_number,
                kind=then,
                queue=queue,
                uow=uow,
                persistent=persistent,
                msg_id=msg_id,
                **rekey,
            )
            assert moved is not None
            return written, moved
        # No journal records here (see above): nothing to note.
        pair: tuple[Change, Change] = (
            self.conn.write_and_rekey(list_number, key, data, **options, **rekey)
            if self.gate is None
            else self._gated("write_and_rekey", list_number, key, data, **options, **rekey)
        )
        return pair

    def move(
        self,
        locator: Locator,
        to_list: int,
        *,
        kind: ChangeKind,
        queue: str | None = None,
        uow: UowRef = None,
        persistent: bool | None = None,
        msg_id: bytes | None = None,
        **options: Any,
    ) -> Change | None:
        if self.faults is not None:
            self.faults("move", self.name, True)
        change = (
            self.conn.move(locator, to_list, **options)
            if self.gate is None
            else self._gated("move", locator, to_list, **options)
        )
        if change is not None and self._journaling:
            if persistent is None and kind is ChangeKind.GET:
                # A get learns what it took only from the entry it moved.
                persistent, msg_id = entry_facts(change.entry.data)
            note = ChangeNote(
                kind,
                self.name,
                "move",
                change,
                options,
                queue,
                _uow_id(uow),
                persistent,
                msg_id,
            )
            self._changed(note)
        if self.faults is not None:
            self.faults("move", self.name, False)
        return change

    def delete(
        self,
        locator: Locator,
        *,
        kind: ChangeKind,
        queue: str | None = None,
        uow: UowRef = None,
        persistent: bool | None = None,
        msg_id: bytes | None = None,
        data_wanted: bool = True,
        **options: Any,
    ) -> Change | None:
        """``data_wanted=False``: the caller has no use for the entry's data, so the
        backend need not return it, unless the journal needs it."""
        if not data_wanted and not self._journaling:
            options["with_data"] = False
        if self.faults is not None:
            self.faults("delete", self.name, True)
        change = (
            self.conn.delete(locator, **options)
            if self.gate is None
            else self._gated("delete", locator, **options)
        )
        if change is not None and self._journaling:
            note = ChangeNote(
                kind,
                self.name,
                "delete",
                change,
                options,
                queue,
                _uow_id(uow),
                persistent,
                msg_id,
            )
            self._changed(note)
        if self.faults is not None:
            self.faults("delete", self.name, False)
        return change

    def update(
        self,
        locator: Locator,
        *,
        kind: ChangeKind,
        queue: str | None = None,
        uow: UowRef = None,
        **options: Any,
    ) -> Change | None:
        if self.faults is not None:
            self.faults("update", self.name, True)
        change = (
            self.conn.update(locator, **options)
            if self.gate is None
            else self._gated("update", locator, **options)
        )
        if change is not None and self._journaling:
            note = ChangeNote(
                kind, self.name, "update", change, options, queue, _uow_id(uow), None, None
            )
            self._changed(note)
        if self.faults is not None:
            self.faults("update", self.name, False)
        return change

    def move_entries(
        self,
        moves: Sequence[BulkMove],
        *,
        kind: ChangeKind,
        uow: bytes | None,
        meanings: Sequence[EntryMeaning],
        **options: Any,
    ) -> BulkResult:
        return self._bulk(
            "move_entries", self.conn.move_entries, moves, kind, uow, meanings, options
        )

    def delete_entries(
        self,
        entry_ids: Sequence[bytes],
        *,
        kind: ChangeKind,
        uow: bytes | None,
        meanings: Sequence[EntryMeaning],
        **options: Any,
    ) -> BulkResult:
        return self._bulk(
            "delete_entries", self.conn.delete_entries, entry_ids, kind, uow, meanings, options
        )

    def _bulk(
        self,
        request: str,
        call: Callable[..., BulkResult],
        items: Sequence[Any],
        kind: ChangeKind,
        uow: bytes | None,
        meanings: Sequence[EntryMeaning],
        options: dict[str, Any],
    ) -> BulkResult:
        if self.faults is not None:
            self.faults(request, self.name, True)
        result = (
            call(items, **options) if self.gate is None else self._gated(request, items, **options)
        )
        if result.seqs and self._journaling:
            note = BulkNote(kind, self.name, request, items, result, options, uow, meanings)
            self._bulk_changed(note)
        if self.faults is not None:
            self.faults(request, self.name, False)
        return result

    def set_list_controls(
        self, list_number: int, *, kind: ChangeKind, queue: str | None = None, **options: Any
    ) -> int:
        if self.faults is not None:
            self.faults("set_list_controls", self.name, True)
        seq = (
            self.conn.set_list_controls(list_number, **options)
            if self.gate is None
            else self._gated("set_list_controls", list_number, **options)
        )
        if self._journaling:
            note = ChangeNote(
                kind,
                self.name,
                "set_list_controls",
                seq,
                {"list_number": list_number, **options},
                queue,
                None,
                None,
                None,
            )
            self._changed(note)
        if self.faults is not None:
            self.faults("set_list_controls", self.name, False)
        return seq

    def _changed(self, note: ChangeNote) -> None:
        """Journal a change; a journal that fails raises the manager's own error."""
        try:
            self._journal.changed(note)
        except Exception as error:
            _journal_failure(error, note)

    def _bulk_changed(self, note: BulkNote) -> None:
        try:
            self._journal.bulk_changed(note)
        except Exception as error:
            _journal_failure(error, note)

    def _gated(self, request: str, *args: Any, **options: Any) -> Any:
        """A change through the quiesce gate, made again on the structure's copy if the
        structure was copied meanwhile."""
        assert self.gate is not None
        while True:
            conn = self.conn
            try:
                return self.gate.run(getattr(conn, request), *args, **options)
            except StructureLost:
                if not self._relocated(conn):
                    raise

    def _relocated(self, lost: ListStructure) -> bool:
        """After ``lost`` found its structure gone: switch to the structure's copy if
        there is one (another thread may have switched already)."""
        if self.conn is not lost:
            return True
        new = None if self.relocate is None else self.relocate(lost)
        if new is None:
            return False
        if self.conn is lost:
            self.conn = new
            self.generation += 1
        return True

    def _again(self, request: str, *args: Any, **options: Any) -> Any:
        """A request that changes nothing, made again on a copy if need be."""
        conn = self.conn
        try:
            return getattr(conn, request)(*args, **options)
        except StructureLost:
            if not self._relocated(conn):
                raise
            return getattr(self.conn, request)(*args, **options)

    # -- reads, monitors and users: no change to journal, but still fault points ---------

    def _point(self, request: str) -> None:
        if self.faults is not None:
            self.faults(request, self.name, True)

    def read(self, locator: Locator) -> ListEntry | None:
        self._point("read")
        return self._again("read", locator)  # type: ignore[no-any-return]

    def scan(
        self, list_number: int, low: bytes, high: bytes, *, with_data: bool = True
    ) -> Iterator[ListEntry]:
        self._point("scan")
        return self._again("scan", list_number, low, high, with_data=with_data)  # type: ignore[no-any-return]

    def list_info(self, list_number: int) -> ListInfo:
        self._point("list_info")
        return self._again("list_info", list_number)  # type: ignore[no-any-return]

    def register_monitor(self, spec: MonitorSpec) -> Registration:
        self._point("register_monitor")
        return self._again("register_monitor", spec)  # type: ignore[no-any-return]

    def stop_monitor(self, monitor_id: int) -> int:
        self._point("stop_monitor")
        return self.conn.stop_monitor(monitor_id)

    def wait_events(self, timeout: float | None) -> list[MonitorEvent]:
        self._point("wait_events")
        conn = self.conn
        try:
            return conn.wait_events(timeout)
        except StructureLost:
            if not self._relocated(conn):
                raise
            return []  # the monitors were on the old structure: waiters register again

    def users(self) -> list[UserInfo]:
        self._point("users")
        return self._again("users")  # type: ignore[no-any-return]

    def mark_failed(self, user_id: int) -> int:
        self._point("mark_failed")
        return self.conn.mark_failed(user_id)

    def cleanup_user(self, user_id: int) -> int:
        self._point("cleanup_user")
        return self.conn.cleanup_user(user_id)

    def disconnect(self) -> None:
        if self.conn.connected:
            self.conn.disconnect()
