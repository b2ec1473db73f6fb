"""The one door through which a server reaches a structure.

:class:`StructureAccess` wraps a server's connection to one structure.  Every request
the server makes goes through it, which gives three things one place to live:

* the journal seam (:mod:`sharedq.seam.notes`): after each request that changed the
  structure, the server's journal is handed a typed note of the request and of what it
  meant.  When the journal cannot record it (a recovery log on a full disk), the
  request raises the server's :class:`JournalFailure` *after* the change was made,
  carrying the note, so that the caller can undo it; inside :func:`tolerating` the
  failure is collected instead and the change stands;
* the quiesce gate: while a structure checkpoint copies the structure, changes wait
  (``gate.run``), and a structure found gone is looked up again (``relocate``: its copy);
* fault injection: a hook called before and after every request.  The crash tests
  make it raise :class:`~sharedq.testing.SimulatedFailure` (or kill the process) at a
  chosen request, which leaves the server exactly as a real failure would between two
  requests: the structure holds what the requests so far did, and nothing else.

Nothing here translates list-structure errors: callers know what a failure means to
them.  Requests take the list structure's own arguments, typed, plus what the change
concerns: its ``kind`` (a :class:`~sharedq.seam.notes.Meaning`), queue, unit of work,
persistence and message id, which go into the note.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import Protocol, TypeVar

from sharedq.cf import (
    UNCHANGED,
    BulkMove,
    BulkResult,
    BulkWrite,
    ById,
    ByKey,
    Change,
    Head,
    ListEntry,
    ListInfo,
    ListStructure,
    Locator,
    MonitorEvent,
    MonitorSpec,
    Position,
    Registration,
    StructureLost,
    Tail,
    UserInfo,
)
from sharedq.cf.api import Taken
from sharedq.cf.types import Unchanged
from sharedq.recovery.control import GatedChange, Runner
from sharedq.seam.notes import (
    NOTHING,
    About,
    BulkDeleteNote,
    BulkMoveNote,
    BulkNote,
    ChangeNote,
    ControlsNote,
    DeleteNote,
    EntryMeaning,
    Journal,
    Meaning,
    MoveNote,
    Note,
    UpdateNote,
    WriteNote,
)

_T = TypeVar("_T")


class SimulatedFailure(BaseException):
    """Raised by a test's fault hook to stop a server dead between two requests.

    A ``BaseException``, like ``KeyboardInterrupt``, so that no ``except Exception``
    clause in the server runs clean-up a dead process could not have run.
    """


class JournalFailure(Exception):
    """A server's error for a change its journal could not record (see the module).

    Servers raise their own subclass (the queue manager's ``JournalFailed``, 2195);
    ``note`` is the note of the change that was not recorded.
    """

    note: Note | None = None

    @property
    def meaning(self) -> Meaning | None:
        """What the unrecorded change meant to the server."""
        return None if self.note is None else self.note.meaning

    @property
    def about(self) -> About:
        """What the unrecorded change concerned (nothing known for a bulk request)."""
        note = self.note
        if isinstance(note, WriteNote | MoveNote | DeleteNote | UpdateNote | ControlsNote):
            return note.about
        return NOTHING

    @property
    def entry(self) -> ListEntry | None:
        """The entry as the unrecorded change left it (``None`` for a bulk request)."""
        note = self.note
        if isinstance(note, WriteNote | MoveNote | DeleteNote | UpdateNote):
            return note.change.entry
        return None


#: Builds the server's :class:`JournalFailure` for a journal's exception and the note.
FailureFactory = Callable[[Exception, Note], JournalFailure]
#: A message's facts from its entry's data: persistent, priority, message id, correl id.
FactsOf = Callable[[bytes], tuple[bool, int | None, bytes | None, bytes | None]]

#: The journal failures the current block carries on through (see :func:`tolerating`).
_TOLERATED: ContextVar[list[JournalFailure] | None] = ContextVar("_TOLERATED", default=None)

#: A change request's fault points when there is no fault hook: nothing to call.
_NO_FAULT_POINTS: AbstractContextManager[None] = nullcontext()


@contextmanager
def tolerating() -> Iterator[list[JournalFailure]]:
    """Carry on through journal failures inside the block.

    A change the journal cannot record stands, and its :class:`JournalFailure` is added
    to the list this yields instead of being raised.  For the changes that need no
    undo: a backout (recovery backs out whatever a log lacks of it), an undo (what it
    takes back the log may never have seen), and the work of a unit that was already
    decided.
    """
    failures: list[JournalFailure] = []
    token = _TOLERATED.set(failures)
    try:
        yield failures
    finally:
        _TOLERATED.reset(token)


class HasUowId(Protocol):
    """A unit of work, whose id is made only when asked for (it may never be)."""

    @property
    def uow_id(self) -> bytes: ...


class FromEntry:
    """A unit of work that only the moved entry knows: ``read`` takes the entry's data
    and gives its id.  A Common Queue Server's read logs the unit of the message it
    took, which it learns only from the move that took it (one round trip, not two)."""

    __slots__ = ("read",)

    def __init__(self, read: Callable[[bytes], bytes | None]) -> None:
        self.read = read


UowRef = bytes | HasUowId | FromEntry | None


def uow_id_of(uow: UowRef, data: bytes = b"") -> bytes | None:
    """The id of a unit of work given by id or by object (or read from ``data``, the
    entry a change left, for :class:`FromEntry`)."""
    if uow is None or isinstance(uow, bytes):
        return uow
    if isinstance(uow, FromEntry):
        return uow.read(data)
    return uow.uow_id


class FaultHook(Protocol):
    """Called with ``(request name, structure name, before)`` around every request."""

    def __call__(self, request: str, structure: str, before: bool) -> None: ...


#: Makes a change, holding it while the structure is quiesced (never failing for it):
#: ``QuiesceGate.run``.
Gate = Runner


def source_list(locator: Locator) -> int | None:
    """The list a move took its entry from, when the locator names it."""
    if isinstance(locator, Head | Tail | ByKey | ById):
        return locator.list_number
    return None


class StructureAccess:
    """A server's connection to one structure, with its structure number.

    ``write``, ``move`` and ``delete`` are spelled out rather than routed through one
    helper as the bulk requests are: they are every put's and get's path, where a call
    level shows.  A plain request (``_plain``: no fault hook, gate or journal) is the
    connection's call and nothing else; the others go through a private twin (``_move``
    and so on) that makes the closure a gate runs, so that the plain path does not pay
    for its captured arguments.
    """

    __slots__ = (
        "_element_bytes",
        "_facts",
        "_failure",
        "_faults",
        "_gate",
        "_journal",
        "_journaling",
        "_plain",
        "conn",
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
        failure: FailureFactory,
        faults: FaultHook | None = None,
        facts: FactsOf | None = None,
    ) -> None:
        """``failure`` makes the server's error for a change its journal could not
        record; ``facts`` reads a message's facts from an entry's data, for a move whose
        meaning learns them from the entry (a get)."""
        self.conn = conn
        self._facts = facts
        self.name = conn.structure_name
        self.number = number
        self._faults = faults
        self._gate: Gate | None = None
        self.journal = journal
        self._failure = failure
        #: Called when the structure is found gone: returns a connection to its copy
        #: (the request is then made again there), or ``None`` (it was lost).
        self.relocate: Callable[[ListStructure], ListStructure | None] | None = None
        #: Counts the connections replaced so (monitors registered before are gone).
        self.generation = 0
        self._element_bytes = 0

    @property
    def journal(self) -> Journal:
        return self._journal

    @journal.setter
    def journal(self, journal: Journal) -> None:
        self._journal = journal
        # The default journal records nothing: skip the calls (the hot path's sake).
        self._journaling = type(journal) is not Journal
        self._replan()

    @property
    def faults(self) -> FaultHook | None:
        """Called around every change request (the crash tests' fault injection)."""
        return self._faults

    @faults.setter
    def faults(self, faults: FaultHook | None) -> None:
        self._faults = faults
        self._replan()

    @property
    def gate(self) -> Gate | None:
        """Holds changes while the structure is quiesced (a recovery log's checkpoint)."""
        return self._gate

    @gate.setter
    def gate(self, gate: Gate | None) -> None:
        self._gate = gate
        self._replan()

    def _replan(self) -> None:
        # A plain request (no fault hook, gate or journal recording) is just the call
        # on the connection: write, write_and_rekey, move, take and delete test this.
        self._plain = self._faults is None and self._gate is None and not self._journaling

    @property
    def journaling(self) -> bool:
        """Whether the journal records changes (a recovery log)."""
        return self._journaling

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
        data: bytes = b"",
        *,
        adjunct: bytes = b"",
        secondary_key: bytes | None = None,
        entry_id: bytes | None = None,
        version: int = 0,
        position: Position = Position.TAIL,
        expect_authority: int | None = None,
        ignore_limit: bool = False,
        reserve: bool = False,
        kind: Meaning,
        queue: str | None = None,
        uow: UowRef = None,
        persistent: bool | None = None,
        msg_id: bytes | None = None,
    ) -> Change:
        if self._plain:
            return self.conn.write(
                list_number,
                key,
                data,
                adjunct=adjunct,
                secondary_key=secondary_key,
                entry_id=entry_id,
                version=version,
                position=position,
                expect_authority=expect_authority,
                ignore_limit=ignore_limit,
                reserve=reserve,
            )
        return self._write(
            list_number,
            key,
            data,
            adjunct,
            secondary_key,
            entry_id,
            version,
            position,
            expect_authority,
            ignore_limit,
            reserve,
            kind,
            queue,
            uow,
            persistent,
            msg_id,
        )

    def _write(
        self,
        list_number: int,
        key: bytes,
        data: bytes,
        adjunct: bytes,
        secondary_key: bytes | None,
        entry_id: bytes | None,
        version: int,
        position: Position,
        expect_authority: int | None,
        ignore_limit: bool,
        reserve: bool,
        kind: Meaning,
        queue: str | None,
        uow: UowRef,
        persistent: bool | None,
        msg_id: bytes | None,
    ) -> Change:
        """``write`` with fault points, gate or journal (the closure kept off the plain
        path: its captured arguments would cost every request)."""

        def call(conn: ListStructure, locks: tuple[int, ...]) -> Change:
            return conn.write(
                list_number,
                key,
                data,
                adjunct=adjunct,
                secondary_key=secondary_key,
                entry_id=entry_id,
                version=version,
                position=position,
                expect_authority=expect_authority,
                not_locked=locks,
                ignore_limit=ignore_limit,
                reserve=reserve,
            )

        with self._request("write"):
            change = self._call(call)
            if self._journaling:
                about = About(queue, uow_id_of(uow), persistent, msg_id)
                self._changed(WriteNote(kind, self.name, change, position, ignore_limit, about))
        return change

    def write_and_rekey(
        self,
        list_number: int,
        key: bytes,
        data: bytes = b"",
        *,
        adjunct: bytes = b"",
        entry_id: bytes | None = None,
        version: int = 0,
        expect_authority: int | None = None,
        new_key: bytes,
        new_secondary_key: bytes | Unchanged | None = UNCHANGED,
        set_version: int | None = None,
        kind: Meaning,
        then: Meaning,
        queue: str | None = None,
        uow: UowRef = None,
        persistent: bool | None = None,
        msg_id: bytes | None = None,
    ) -> tuple[Change, Change]:
        """A write (``kind``) and the move of the entry to ``new_key`` on its list
        (``then``) in one request; the journal hears of both, as two changes.

        With a recovery log (a journal recording) the two are two requests, ``write``
        then ``move``, each logged before the next is made: a server killed between a
        combined request and its log records would leave a *committed* message that no
        record describes, and a later change of it could not be replayed.  (Killed
        after the write alone, it leaves an uncommitted put, which recovery deletes.)
        A fault hook does not change the path: without a log it sees the one request.
        """
        if self._plain:
            return self.conn.write_and_rekey(
                list_number,
                key,
                data,
                adjunct=adjunct,
                entry_id=entry_id,
                version=version,
                expect_authority=expect_authority,
                new_key=new_key,
                new_secondary_key=new_secondary_key,
                set_version=set_version,
            )
        if self._journaling:
            written = self.write(
                list_number,
                key,
                data,
                adjunct=adjunct,
                entry_id=entry_id,
                version=version,
                expect_authority=expect_authority,
                kind=kind,
                queue=queue,
                uow=uow,
                persistent=persistent,
                msg_id=msg_id,
            )
            moved = self.move(
                ById(written.entry.entry_id, list_number),
                list_number,
                new_key=new_key,
                new_secondary_key=new_secondary_key,
                set_version=set_version,
                kind=then,
                queue=queue,
                uow=uow,
                persistent=persistent,
                msg_id=msg_id,
            )
            assert moved is not None
            return written, moved
        return self._write_and_rekey(
            list_number,
            key,
            data,
            adjunct,
            entry_id,
            version,
            expect_authority,
            new_key,
            new_secondary_key,
            set_version,
        )

    def write_and_rekey_entries(
        self,
        list_number: int,
        key: bytes,
        data: bytes,
        adjunct: bytes,
        entry_id: bytes | None,
        version: int,
        expect_authority: int | None,
        new_key: bytes,
        new_secondary_key: bytes | Unchanged | None,
        set_version: int | None,
        kind: Meaning,
        then: Meaning,
        queue: str | None,
        uow: UowRef,
        persistent: bool | None,
        msg_id: bytes | None,
    ) -> int | None:
        """:meth:`write_and_rekey` (every argument given, by position) for a caller
        that wants only the entry count after it (its ``[1].entries``): a plain request
        is the connection's ``write_and_rekey_entries``, which makes no changes."""
        if self._plain:
            return self.conn.write_and_rekey_entries(
                list_number,
                key,
                data,
                adjunct,
                entry_id,
                version,
                expect_authority,
                new_key,
                new_secondary_key,
                set_version,
            )
        return self.write_and_rekey(
            list_number,
            key,
            data,
            adjunct=adjunct,
            entry_id=entry_id,
            version=version,
            expect_authority=expect_authority,
            new_key=new_key,
            new_secondary_key=new_secondary_key,
            set_version=set_version,
            kind=kind,
            then=then,
            queue=queue,
            uow=uow,
            persistent=persistent,
            msg_id=msg_id,
        )[1].entries

    def _write_and_rekey(
        self,
        list_number: int,
        key: bytes,
        data: bytes,
        adjunct: bytes,
        entry_id: bytes | None,
        version: int,
        expect_authority: int | None,
        new_key: bytes,
        new_secondary_key: bytes | Unchanged | None,
        set_version: int | None,
    ) -> tuple[Change, Change]:
        """``write_and_rekey`` with fault points or a gate, and no journal recording."""

        def call(conn: ListStructure, locks: tuple[int, ...]) -> tuple[Change, Change]:
            return conn.write_and_rekey(
                list_number,
                key,
                data,
                adjunct=adjunct,
                entry_id=entry_id,
                version=version,
                expect_authority=expect_authority,
                not_locked=locks,
                new_key=new_key,
                new_secondary_key=new_secondary_key,
                set_version=set_version,
            )

        # No journal records here (see write_and_rekey): nothing to note.
        with self._request("write_and_rekey"):
            pair = self._call(call)
        return pair

    def move(
        self,
        locator: Locator,
        to_list: int,
        *,
        new_key: bytes | None = None,
        new_secondary_key: bytes | Unchanged | None = UNCHANGED,
        set_version: int | None = None,
        increment_version: bool = False,
        position: Position = Position.TAIL,
        expect_version: int | None = None,
        expect_authority: int | None = None,
        ignore_limit: bool = False,
        kind: Meaning,
        queue: str | None = None,
        uow: UowRef = None,
        persistent: bool | None = None,
        msg_id: bytes | None = None,
    ) -> Change | None:
        if self._plain:
            return self.conn.move(
                locator,
                to_list,
                new_key=new_key,
                new_secondary_key=new_secondary_key,
                set_version=set_version,
                increment_version=increment_version,
                position=position,
                expect_version=expect_version,
                expect_authority=expect_authority,
                ignore_limit=ignore_limit,
            )
        return self._move(
            locator,
            to_list,
            new_key,
            new_secondary_key,
            set_version,
            increment_version,
            position,
            expect_version,
            expect_authority,
            ignore_limit,
            kind,
            queue,
            uow,
            persistent,
            msg_id,
        )

    def _move(
        self,
        locator: Locator,
        to_list: int,
        new_key: bytes | None,
        new_secondary_key: bytes | Unchanged | None,
        set_version: int | None,
        increment_version: bool,
        position: Position,
        expect_version: int | None,
        expect_authority: int | None,
        ignore_limit: bool,
        kind: Meaning,
        queue: str | None,
        uow: UowRef,
        persistent: bool | None,
        msg_id: bytes | None,
    ) -> Change | None:
        """``move`` with fault points, gate or journal."""

        def call(conn: ListStructure, locks: tuple[int, ...]) -> Change | None:
            return conn.move(
                locator,
                to_list,
                new_key=new_key,
                new_secondary_key=new_secondary_key,
                set_version=set_version,
                increment_version=increment_version,
                position=position,
                expect_version=expect_version,
                expect_authority=expect_authority,
                not_locked=locks,
                ignore_limit=ignore_limit,
            )

        with self._request("move"):
            change = self._call(call)
            if change is not None and self._journaling:
                if persistent is None and kind.learns_facts and self._facts is not None:
                    persistent, _, msg_id, _ = self._facts(change.entry.data)
                about = About(queue, uow_id_of(uow, change.entry.data), persistent, msg_id)
                note = MoveNote(
                    kind, self.name, change, source_list(locator), position, ignore_limit, about
                )
                self._changed(note)
        return change

    def take(
        self,
        locator: Locator,
        to_list: int,
        *,
        delete: bool = False,
        expect_authority: int | None = None,
        monitor: MonitorSpec | None = None,
        take_events: bool = False,
        kind: Meaning,
        then: Meaning | None = None,
        queue: str | None = None,
        uow: UowRef = None,
        wait: float = 0.0,
    ) -> Taken:
        """``ListStructure.take``: the move is noted as ``kind`` (its facts learned from
        the entry when the meaning says so), the delete that follows it as ``then``.

        ``wait``: a plain request sleeps and takes in one request; any other sleeps as
        :meth:`wait_events` (``take=False``) does first, outside the gate.

        The notes follow the request, as for ``move`` and ``delete``: the journal hears
        of the move first, so that a failure to record it is the move's (the caller
        takes the entry back from ``to_list``).  A caller with a journal that records
        should not ask for the delete unless it can undo it from the note (the entry is
        gone by then): the queue manager asks for it without one only.
        """
        if self._plain:
            return self.conn.take(
                locator,
                to_list,
                delete=delete,
                expect_authority=expect_authority,
                monitor=monitor,
                take_events=take_events,
                wait=wait,
            )
        if wait > 0:
            self.wait_events(wait, take=False)
        return self._take(
            locator, to_list, delete, expect_authority, monitor, take_events, kind, then, queue, uow
        )

    def _take(
        self,
        locator: Locator,
        to_list: int,
        delete: bool,
        expect_authority: int | None,
        monitor: MonitorSpec | None,
        take_events: bool,
        kind: Meaning,
        then: Meaning | None,
        queue: str | None,
        uow: UowRef,
    ) -> Taken:
        """``take`` with fault points, gate or journal."""

        def call(conn: ListStructure, locks: tuple[int, ...]) -> Taken:
            return conn.take(
                locator,
                to_list,
                delete=delete,
                expect_authority=expect_authority,
                monitor=monitor,
                take_events=take_events,
            )

        with self._request("take"):
            taken = self._call(call)
            moved = taken.moved
            if moved is not None and self._journaling:
                persistent = msg_id = None
                if kind.learns_facts and self._facts is not None:
                    persistent, _, msg_id, _ = self._facts(moved.entry.data)
                about = About(queue, uow_id_of(uow), persistent, msg_id)
                where = source_list(locator)
                self._changed(MoveNote(kind, self.name, moved, where, Position.TAIL, False, about))
                if taken.deleted is not None:
                    self._changed(DeleteNote(then or kind, self.name, taken.deleted, about))
        return taken

    def take_many(
        self,
        head: Head,
        to_list: int,
        count: int,
        *,
        delete: bool = False,
        expect_authority: int | None = None,
        kind: Meaning,
        then: Meaning | None = None,
        queue: str | None = None,
        uow: UowRef = None,
    ) -> list[tuple[Change, Change | None]]:
        """``ListStructure.take_many``, each entry noted as ``take`` notes it.

        With a journal that records, a failure to record one entry's change raises at
        that entry, and the changes after it go unrecorded: the queue manager uses this
        without such a journal only.
        """

        def call(conn: ListStructure, locks: tuple[int, ...]) -> list[tuple[Change, Change | None]]:
            return conn.take_many(
                head, to_list, count, delete=delete, expect_authority=expect_authority
            )

        with self._request("take_many"):
            done = self._call(call)
            if done and self._journaling:
                for moved, deleted in done:
                    persistent = msg_id = None
                    if kind.learns_facts and self._facts is not None:
                        persistent, _, msg_id, _ = self._facts(moved.entry.data)
                    about = About(queue, uow_id_of(uow), persistent, msg_id)
                    where = head.list_number
                    self._changed(
                        MoveNote(kind, self.name, moved, where, Position.TAIL, False, about)
                    )
                    if deleted is not None:
                        self._changed(DeleteNote(then or kind, self.name, deleted, about))
        return done

    def delete(
        self,
        locator: Locator,
        *,
        expect_version: int | None = None,
        expect_authority: int | None = None,
        data_wanted: bool = True,
        kind: Meaning,
        queue: str | None = None,
        uow: UowRef = None,
        persistent: bool | None = None,
        msg_id: bytes | None = None,
    ) -> Change | None:
        """``data_wanted=False``: the caller has no use for the entry's data, so the
        backend need not return it, unless the journal needs it."""
        if self._plain:
            return self.conn.delete(
                locator,
                expect_version=expect_version,
                expect_authority=expect_authority,
                with_data=data_wanted,
            )
        return self._delete(
            locator,
            expect_version,
            expect_authority,
            data_wanted or self._journaling,
            kind,
            queue,
            uow,
            persistent,
            msg_id,
        )

    def delete_seq(
        self,
        locator: Locator,
        kind: Meaning,
        queue: str | None,
        uow: UowRef,
        persistent: bool | None,
        msg_id: bytes | None,
    ) -> int | None:
        """``delete(locator, data_wanted=False, kind=..., ...)`` (the rest by position)
        for a caller that wants only its seq: a plain request is the connection's
        ``delete_seq``, which makes no change."""
        if self._plain:
            return self.conn.delete_seq(locator)
        change = self._delete(
            locator, None, None, self._journaling, kind, queue, uow, persistent, msg_id
        )
        return None if change is None else change.seq

    def _delete(
        self,
        locator: Locator,
        expect_version: int | None,
        expect_authority: int | None,
        with_data: bool,
        kind: Meaning,
        queue: str | None,
        uow: UowRef,
        persistent: bool | None,
        msg_id: bytes | None,
    ) -> Change | None:
        """``delete`` with fault points, gate or journal."""

        def call(conn: ListStructure, locks: tuple[int, ...]) -> Change | None:
            return conn.delete(
                locator,
                expect_version=expect_version,
                expect_authority=expect_authority,
                not_locked=locks,
                with_data=with_data,
            )

        with self._request("delete"):
            change = self._call(call)
            if change is not None and self._journaling:
                if persistent is None and kind.learns_facts and self._facts is not None:
                    persistent, _, msg_id, _ = self._facts(change.entry.data)
                about = About(queue, uow_id_of(uow, change.entry.data), persistent, msg_id)
                self._changed(DeleteNote(kind, self.name, change, about))
        return change

    def update(
        self,
        locator: Locator,
        *,
        data: bytes | Unchanged = UNCHANGED,
        adjunct: bytes | Unchanged = UNCHANGED,
        set_version: int | None = None,
        increment_version: bool = False,
        increment_authority: bool = False,
        expect_version: int | None = None,
        expect_authority: int | None = None,
        kind: Meaning,
        queue: str | None = None,
        uow: UowRef = None,
    ) -> Change | None:
        def call(conn: ListStructure, locks: tuple[int, ...]) -> Change | None:
            return conn.update(
                locator,
                data=data,
                adjunct=adjunct,
                set_version=set_version,
                increment_version=increment_version,
                increment_authority=increment_authority,
                expect_version=expect_version,
                expect_authority=expect_authority,
                not_locked=locks,
            )

        with self._request("update"):
            change = self._call(call)
            if change is not None and self._journaling:
                note = UpdateNote(
                    kind,
                    self.name,
                    change,
                    not isinstance(data, Unchanged),
                    not isinstance(adjunct, Unchanged),
                    increment_authority,
                    About(queue, uow_id_of(uow)),
                )
                self._changed(note)
        return change

    def set_list_controls(
        self,
        list_number: int,
        *,
        limit: int | Unchanged | None = UNCHANGED,
        increment_authority: bool = False,
        expect_authority: int | None = None,
        kind: Meaning,
        queue: str | None = None,
    ) -> int:
        def call(conn: ListStructure, locks: tuple[int, ...]) -> int:
            return conn.set_list_controls(
                list_number,
                limit=limit,
                increment_authority=increment_authority,
                expect_authority=expect_authority,
                not_locked=locks,
            )

        with self._request("set_list_controls"):
            seq = self._call(call)
            if self._journaling:
                about = About(queue)
                note = ControlsNote(
                    kind, self.name, seq, list_number, limit, increment_authority, about
                )
                self._changed(note)
        return seq

    def move_entries(
        self,
        moves: Sequence[BulkMove],
        *,
        ignore_limit: bool = False,
        missing_ok: bool = False,
        kind: Meaning,
        uow: bytes | None,
        meanings: Sequence[EntryMeaning],
    ) -> BulkResult:
        def call(conn: ListStructure, locks: tuple[int, ...]) -> BulkResult:
            return conn.move_entries(
                moves, ignore_limit=ignore_limit, missing_ok=missing_ok, not_locked=locks
            )

        with self._request("move_entries"):
            result = self._call(call)
            if result.seqs and self._journaling:
                note = BulkMoveNote(kind, self.name, moves, result, ignore_limit, uow, meanings)
                self._bulk_changed(note)
        return result

    def write_entries(
        self,
        writes: Sequence[BulkWrite],
        *,
        expect_authority: int | None = None,
        kind: Meaning,
        uow: UowRef,
        meanings: Sequence[EntryMeaning],
    ) -> BulkResult:
        """A bulk write, each entry written noted as a ``write`` of its own (the records
        single writes would make); a failure to record one raises at that entry, and
        the entries after it go unrecorded."""

        def call(conn: ListStructure, locks: tuple[int, ...]) -> BulkResult:
            return conn.write_entries(writes, not_locked=locks, expect_authority=expect_authority)

        with self._request("write_entries"):
            result = self._call(call)
            if result.seqs and self._journaling:
                uow_id = uow_id_of(uow)
                for write, seq, meaning in zip(writes, result.seqs, meanings, strict=False):
                    entry = ListEntry(
                        write.entry_id or seq.to_bytes(12, "big"),
                        write.list_number,
                        write.key,
                        write.data,
                        write.adjunct,
                        write.secondary_key,
                        write.version,
                        -(-len(write.data) // self._element_size()),
                    )
                    about = About(meaning.queue, uow_id, meaning.persistent, meaning.msg_id)
                    change = Change(seq, entry)
                    self._changed(WriteNote(kind, self.name, change, write.position, False, about))
        return result

    def delete_entries(
        self,
        entry_ids: Sequence[bytes],
        *,
        missing_ok: bool = False,
        kind: Meaning,
        uow: bytes | None,
        meanings: Sequence[EntryMeaning],
    ) -> BulkResult:
        def call(conn: ListStructure, locks: tuple[int, ...]) -> BulkResult:
            return conn.delete_entries(entry_ids, missing_ok=missing_ok, not_locked=locks)

        with self._request("delete_entries"):
            result = self._call(call)
            if result.seqs and self._journaling:
                note = BulkDeleteNote(kind, self.name, entry_ids, result, uow, meanings)
                self._bulk_changed(note)
        return result

    def move_and_delete_entries(
        self,
        moves: Sequence[BulkMove],
        entry_ids: Sequence[bytes],
        *,
        ignore_limit: bool = False,
        missing_ok: bool = False,
        move_kind: Meaning,
        delete_kind: Meaning,
        uow: bytes | None,
        move_meanings: Sequence[EntryMeaning],
        delete_meanings: Sequence[EntryMeaning],
    ) -> BulkResult:
        """A unit's puts and gets committed in one request (the list structure's
        ``move_and_delete_entries``); one result over both, moves first.

        A journaling access sends the two requests it stands for instead, each noted
        with its own kind and meanings as :meth:`move_entries` and :meth:`delete_entries`
        note theirs: a log records them entry by entry, never as one atomic write, so
        the one request would buy a logged change nothing, and its result cannot say
        which of the ids it found missing were moves and which deletes.
        """
        if self._journaling:
            moved = self.move_entries(
                moves,
                ignore_limit=ignore_limit,
                missing_ok=missing_ok,
                kind=move_kind,
                uow=uow,
                meanings=move_meanings,
            )
            if not moved.complete:
                return BulkResult(
                    len(moves) + len(entry_ids),
                    moved.processed,
                    moved.seqs,
                    moved.missing,
                    moved.error,
                )
            deleted = self.delete_entries(
                entry_ids,
                missing_ok=missing_ok,
                kind=delete_kind,
                uow=uow,
                meanings=delete_meanings,
            )
            return BulkResult(
                len(moves) + len(entry_ids),
                moved.processed + deleted.processed,
                moved.seqs + deleted.seqs,
                moved.missing + deleted.missing,
                deleted.error,
            )

        def call(conn: ListStructure, locks: tuple[int, ...]) -> BulkResult:
            return conn.move_and_delete_entries(
                moves, entry_ids, ignore_limit=ignore_limit, missing_ok=missing_ok, not_locked=locks
            )

        with self._request("move_and_delete_entries"):
            return self._call(call)

    def _element_size(self) -> int:
        """The structure's element size (a bulk write's notes count elements), asked once."""
        if not self._element_bytes:
            self._element_bytes = self._again(lambda conn: conn.statistics()).element_size
        return self._element_bytes

    # -- the journal -----------------------------------------------------------------------

    def _changed(self, note: ChangeNote) -> None:
        """Journal a change; a journal that fails raises the server's own error."""
        try:
            self._journal.changed(note)
        except Exception as error:
            self._journal_failure(error, note)

    def _bulk_changed(self, note: BulkNote) -> None:
        try:
            self._journal.bulk_changed(note)
        except Exception as error:
            self._journal_failure(error, note)

    def _journal_failure(self, error: Exception, note: Note) -> None:
        """Raise the server's failure to record ``note`` (or collect it: :func:`tolerating`)."""
        failure = self._failure(error, note)
        failure.note = note
        tolerated = _TOLERATED.get()
        if tolerated is None:
            raise failure from error
        failure.__cause__ = error
        tolerated.append(failure)

    # -- the quiesce gate and relocation ---------------------------------------------------

    def _request(self, request: str) -> AbstractContextManager[None]:
        """A change request's two fault points: before it, and after it was made and
        noted; a request that raised does not reach the second.  (A request with no
        fault hook, no quiesce gate and no journal recording, the hot path of a manager
        without a log, is only the call: ``write``, ``write_and_rekey``, ``move``,
        ``take`` and ``delete`` test ``_plain`` first.)  Without a fault hook: a shared
        do-nothing context, no generator made per request."""
        faults = self._faults
        return _NO_FAULT_POINTS if faults is None else self._fault_points(faults, request)

    @contextmanager
    def _fault_points(self, faults: FaultHook, request: str) -> Iterator[None]:
        faults(request, self.name, True)
        yield
        faults(request, self.name, False)

    def _call(self, call: GatedChange[_T]) -> _T:
        """A change, through the quiesce gate if there is one."""
        return call(self.conn, ()) if self._gate is None else self._gated(call)

    def _gated(self, call: GatedChange[_T]) -> _T:
        """A change through the quiesce gate, made again on the structure's copy if the
        structure was copied meanwhile."""
        gate = self.gate
        assert gate is not None
        while True:
            conn = self.conn
            try:
                return gate(conn, call)
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

    def _again(self, call: Callable[[ListStructure], _T]) -> _T:
        """A request that changes nothing, made again on a copy if need be."""
        conn = self.conn
        try:
            return call(conn)
        except StructureLost:
            if not self._relocated(conn):
                raise
            return call(self.conn)

    # -- reads, monitors and users: no change to journal, but still fault points ---------

    def _point(self, request: str) -> None:
        if self.faults is not None:
            self.faults(request, self.name, True)

    def read(self, locator: Locator) -> ListEntry | None:
        self._point("read")
        return self._again(lambda conn: conn.read(locator))

    def scan(
        self, list_number: int, low: bytes, high: bytes, *, with_data: bool = True
    ) -> Iterator[ListEntry]:
        self._point("scan")
        return self._again(lambda conn: conn.scan(list_number, low, high, with_data=with_data))

    def list_info(self, list_number: int) -> ListInfo:
        self._point("list_info")
        return self._again(lambda conn: conn.list_info(list_number))

    def register_monitor(self, spec: MonitorSpec) -> Registration:
        self._point("register_monitor")
        return self._again(lambda conn: conn.register_monitor(spec))

    def stop_monitor(self, monitor_id: int) -> int:
        self._point("stop_monitor")
        return self.conn.stop_monitor(monitor_id)

    def wait_events(self, timeout: float | None, *, take: bool = True) -> list[MonitorEvent]:
        """The user's events, waiting up to ``timeout`` for one; with ``take=False`` it
        only sleeps until one is queued (``wait_for_event``), returning ``[]``, and the
        caller takes them with its next request (``take(take_events=True)``)."""
        self._point("wait_events")
        conn = self.conn
        try:
            if take:
                return conn.wait_events(timeout)
            conn.wait_for_event(timeout if timeout is not None else 2.0)
            return []
        except StructureLost:
            if not self._relocated(conn):
                raise
            return []  # the monitors were on the old structure: waiters register again

    def users(self) -> list[UserInfo]:
        self._point("users")
        return self._again(lambda conn: conn.users())

    def mark_failed(self, user_id: int) -> int:
        self._point("mark_failed")
        return self.conn.mark_failed(user_id)

    def cleanup_user(self, user_id: int) -> int:
        self._point("cleanup_user")
        return self.conn.cleanup_user(user_id)

    def disconnect(self) -> None:
        if self.conn.connected:
            self.conn.disconnect()
