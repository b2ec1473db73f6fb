"""The list-structure interface: the contract every backend keeps.

This is the coupling facility of the seeds, reduced to what the queue manager, the
Common Queue Server and recovery use.  A :class:`CouplingFacility` holds named
structures; a user connects to one and gets a :class:`ListStructure`, its handle on
the structure.  Every request is atomic: it happens entirely or not at all, and a
request that fails (bad input, a condition that does not hold, no room) changes
nothing.  That single-request atomicity is what the seeds' lock-free protocols (key
range checking on read, version and authority comparison) rely on.

Ordering.  Entries on a list are kept in ascending key order, keys compared as
unsigned byte strings.  Among entries of equal key (a *sublist*), a write or move goes
to the tail unless ``position=Position.HEAD`` is asked for.

Sequence numbers.  Every request that changes the structure takes a sequence number
from the structure, strictly increasing across all users; bulk requests take one per
entry changed.  Requests that fail take none.  The recovery log orders its records by
these numbers, so replaying a log repeats the structure's own order.

Conditions.  A change may be conditioned on the entry's version number
(``expect_version``), on the authority value of the list (``expect_authority``: the
list the entry is written to for a write, the list it is on for any other request), on
lock-table entries not being held by another user (``not_locked``), and a change that
adds an entry to a list respects that list's limit unless ``ignore_limit`` is given.

Users.  At most 32 users are connected to a structure at a time, each with an id from
1 to 32.  A user that disconnects normally releases its monitors, events and locks.  A
user declared failed (by a peer, an operator, or the backend when its process
vanished) keeps them, *failed-persistent*, until it reconnects under the same name
(and picks them up) or a peer cleans up after it.

Monitoring.  A registration watches a key range of a list, a sublist (one exact key),
or the entries with one secondary key, and takes one event monitor control (EMC) from
the structure's EMC area.  When the watched set goes from empty to non-empty (and, if
asked, back to empty) an event is queued for the registering user and any of that
user's threads waiting in :meth:`ListStructure.wait_events` is woken.

Time is in seconds throughout this layer.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from types import TracebackType
from typing import NamedTuple

from sharedq.cf.errors import CFReason, cf_error
from sharedq.cf.params import StructureParams
from sharedq.cf.types import (
    HIGHEST_KEY,
    LOWEST_KEY,
    UNCHANGED,
    BulkMove,
    BulkResult,
    BulkWrite,
    Change,
    Head,
    ListEntry,
    ListInfo,
    Locator,
    MonitorEvent,
    MonitorSpec,
    Position,
    Registration,
    StructureStats,
    Unchanged,
    UserInfo,
)

#: The most entries one :meth:`ListStructure.take_many` takes: few enough that one
#: request stays short (a Redis server serves nobody else meanwhile).
MAX_TAKE_MANY = 1000


def check_take_count(count: object) -> int:
    """A ``take_many`` count, or ``InvalidRequest``."""
    if type(count) is not int or not 1 <= count <= MAX_TAKE_MANY:
        raise cf_error(CFReason.BAD_ARGUMENT, f"count {count!r} must be 1..{MAX_TAKE_MANY}")
    return count


class Taken(NamedTuple):
    """What :meth:`ListStructure.take` did, in the order it did it.

    ``events``: the events queued for this user that it took first (empty unless asked).
    ``moved``: the move of the located entry (``None``: the locator found none).
    ``deleted``: the delete that followed the move, when asked; its entry is the entry
    as the move left it, with its data.  ``registration``: the monitor registered
    because the locator found nothing, when asked.
    """

    events: list[MonitorEvent]
    moved: Change | None
    deleted: Change | None
    registration: Registration | None


class ListStructure(ABC):
    """One user's connection to one list structure.

    A connection may be shared by several threads of the user; each request is still
    atomic.  Use it as a context manager to disconnect normally at the end.
    """

    # -- identity -------------------------------------------------------------------

    @property
    @abstractmethod
    def structure_name(self) -> str:
        """The name of the structure this connection is to."""

    @property
    @abstractmethod
    def user_id(self) -> int:
        """This user's id, 1 to 32, unique among the structure's users."""

    @property
    @abstractmethod
    def user_name(self) -> str:
        """The name this user connected under."""

    # -- single-entry requests -----------------------------------------------------

    @abstractmethod
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
        not_locked: Iterable[int] = (),
        ignore_limit: bool = False,
        reserve: bool = False,
    ) -> Change:
        """Create an entry on ``list_number`` at its key position.

        The entry takes ``ceil(len(data) / element_size)`` data elements (at most 255,
        and at most 64 KiB of data).  ``entry_id`` is assigned by the caller (the
        patent's program-assigned entry ids) or, when ``None``, by the structure.

        ``reserve``: the entry is a small, short-lived control entry that lets work go
        on which frees room (a unit of work's commit descriptor): it may use memory the
        backend holds back, where it has a limit of its own besides the structure's
        counts (a Redis server at ``maxmemory``).  The structure's own entry and
        element counts apply as for any write.

        Raises:
            InvalidRequest: bad key, list number, data size, adjunct, secondary key, id.
            EntryExists: ``entry_id`` is already in use in the structure.
            ListFull: the list is at its limit and ``ignore_limit`` was not given.
            StructureFull: no room for one more entry or for its elements.
            AuthorityMismatch, LockHeld: a condition did not hold.
        """

    @abstractmethod
    def read(self, locator: Locator) -> ListEntry | None:
        """The entry the locator finds, or ``None`` when it finds none.

        A positional locator (head, tail, key, secondary key) that finds nothing gives
        ``None``.  ``ById`` names an entry that must exist: ``NoSuchEntry`` if it does
        not, ``ListMismatch`` if it is not on the list the locator names.
        """

    @abstractmethod
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
        not_locked: Iterable[int] = (),
        ignore_limit: bool = False,
    ) -> Change | None:
        """Move the located entry to ``to_list`` (which may be its own list).

        The entry keeps its id, data and adjunct; it takes ``new_key`` if given (and is
        placed at that key's position), ``new_secondary_key`` if given (``None``
        removes it), and a new version if ``set_version`` or ``increment_version`` is
        given.  ``Head(list, key=K, compare=LE)`` moves the head only if its key
        compares: this is how a get takes only committed messages.

        Returns the change, or ``None`` when a positional locator found no entry (an
        empty list, or a head whose key does not compare).  Moving to another list
        respects the target's limit unless ``ignore_limit``.
        """

    @abstractmethod
    def write_and_rekey(
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
        not_locked: Iterable[int] = (),
        ignore_limit: bool = False,
        new_key: bytes,
        new_secondary_key: bytes | Unchanged | None = UNCHANGED,
        set_version: int | None = None,
    ) -> tuple[Change, Change]:
        """Write an entry, then give it a new key on its list, in one atomic request.

        The same as :meth:`write` with the first arguments followed at once by
        ``move(ById(entry_id, list_number), list_number, new_key=new_key,
        new_secondary_key=new_secondary_key, set_version=set_version)`` (to the tail of
        the new key's sublist), with nothing of anyone else's in between: two changes,
        with consecutive seqs, returned in that order, and the monitors told of each as
        the two requests would tell them.  This is the queue manager's put out of
        syncpoint (write uncommitted, sync to the committed key) in one round trip.

        The move's arguments are checked with the write's, before anything is changed;
        the write's errors are :meth:`write`'s, and then the move cannot fail.
        """

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
    ) -> int | None:
        """:meth:`write_and_rekey` for a caller that wants only the entry count after it.

        The same request, with the same checks, errors and changes, as
        ``write_and_rekey(list_number, key, data, adjunct=..., entry_id=...,
        version=..., expect_authority=..., new_key=..., new_secondary_key=...,
        set_version=...)`` (every argument given, by position); it returns that
        request's ``[1].entries``.  A backend may answer it without making the two
        changes (the queue manager's put out of syncpoint reads only the count).
        """
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
        )[1].entries

    @abstractmethod
    def take(
        self,
        locator: Locator,
        to_list: int,
        *,
        delete: bool = False,
        expect_authority: int | None = None,
        monitor: MonitorSpec | None = None,
        take_events: bool = False,
        wait: float = 0.0,
    ) -> Taken:
        """A consumer's round trip: take events, move an entry (and delete it) or watch.

        In one atomic request, in this order: with ``take_events``, every event queued
        for this user is dequeued, as :meth:`events_nowait` would; then the entry the
        locator finds is moved to ``to_list`` as ``move(locator, to_list,
        expect_authority=...)`` would, and with ``delete`` deleted from there at once
        as ``delete(ById(entry_id, to_list))`` would: two changes, consecutive seqs,
        the monitors told of each as the two requests would tell them.  When the
        locator finds nothing and ``monitor`` is given, that monitor is registered as
        :meth:`register_monitor` would (taking a seq and an EMC): a consumer that
        found nothing is watching from the same instant, with nothing in between.

        This is the queue manager's get out of syncpoint (move to its get list and
        delete: the message is gone and its data returned) and its get-wait (move or
        register; on waking, take the events and move) in one round trip each.

        With ``wait`` (seconds), the request first sleeps as :meth:`wait_for_event`
        would (until an event is queued for this user, ``wait`` passes, or earlier),
        and then takes as above, whether or not an event came: a waiting consumer's
        wake-up and its try in one round trip.  The sleep changes nothing; the take
        sees the structure as it is after it.

        Everything is checked before anything changes: a bad argument, a condition
        that does not hold (``AuthorityMismatch``), ``ListFull`` (``to_list`` at its
        limit) or ``EmcAreaFull`` (a monitor to register and no EMC left) leaves the
        structure and the user's events as they were.
        """

    @abstractmethod
    def take_many(
        self,
        head: Head,
        to_list: int,
        count: int,
        *,
        delete: bool = False,
        expect_authority: int | None = None,
    ) -> list[tuple[Change, Change | None]]:
        """Up to ``count`` :meth:`take` requests of the head, in one atomic request.

        Each entry the ``head`` locator finds (its key compared as the locator says) is
        moved to ``to_list`` and, with ``delete``, deleted there at once, in list
        order, until ``count`` are done or the head does not qualify: the same changes,
        seqs and events as that many ``take(head, to_list, delete=...)``, with nothing
        of anyone else's in between.  Returns each entry's move and its delete (``None``
        without ``delete``); an empty list when the first head does not qualify.

        ``count`` is 1 to :data:`MAX_TAKE_MANY`.  The conditions are checked before
        anything changes: ``expect_authority`` (``AuthorityMismatch``) and the room on
        ``to_list`` for the first entry (``ListFull``); the request stops, keeping what
        it did, when ``to_list`` reaches its limit after that.  This is the queue
        manager's ``get_many``: a batch of messages in one round trip.
        """

    @abstractmethod
    def delete(
        self,
        locator: Locator,
        *,
        expect_version: int | None = None,
        expect_authority: int | None = None,
        not_locked: Iterable[int] = (),
        with_data: bool = True,
    ) -> Change | None:
        """Delete the located entry; the change carries the entry as it was.

        With ``with_data=False`` the change's entry carries ``b""`` as its data (its
        ``elements`` still count it), for a caller with no use for it: a backend then
        need not read the data back to return it.
        """

    def delete_seq(self, locator: Locator) -> int | None:
        """``delete(locator, with_data=False)`` for a caller that wants only its seq.

        The same request, checks, errors and change; it returns the change's ``seq``,
        or ``None`` where :meth:`delete` returns ``None``.  A backend may answer it
        without making the change (a queue manager's commit of a get reads nothing
        of it).
        """
        change = self.delete(locator, with_data=False)
        return None if change is None else change.seq

    @abstractmethod
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
        not_locked: Iterable[int] = (),
    ) -> Change | None:
        """Rewrite the located entry in place (its data, adjunct or version).

        ``increment_authority`` adds one to the authority value of the entry's list in
        the same atomic step.  This is the protocol for a list's control entry (the
        patent's LHQC): read it and the authority, rewrite it with
        ``expect_authority`` set to what was read and ``increment_authority=True``;
        every other user still holding the old authority then fails its next
        authority-conditioned request and re-reads the control entry.
        """

    # -- bulk requests ----------------------------------------------------------------

    @abstractmethod
    def move_entries(
        self,
        moves: Sequence[BulkMove],
        *,
        ignore_limit: bool = False,
        missing_ok: bool = False,
        not_locked: Iterable[int] = (),
        budget: int | None = None,
    ) -> BulkResult:
        """Move several entries by id, in order, each atomically.

        The request handles at most ``budget`` entries (a backend default when
        ``None``) and then returns; ``BulkResult.redrive_from`` says where to continue.
        Entries are validated before any is moved: a bad request moves nothing.  When
        an entry is absent, ``missing_ok`` records it in ``missing`` and goes on (how
        recovery stays idempotent); otherwise the request stops before it with
        ``NoSuchEntry``, having moved the ones before it.
        """

    @abstractmethod
    def write_entries(
        self,
        writes: Sequence[BulkWrite],
        *,
        ignore_limit: bool = False,
        not_locked: Iterable[int] = (),
        budget: int | None = None,
        expect_authority: int | None = None,
    ) -> BulkResult:
        """Write several entries, in order, each atomically, as :meth:`write` would.

        The bulk form of ``write``, for loading a structure (recovery, copy): one
        request instead of one per entry.  Budget and redrive as :meth:`move_entries`.
        Every entry is validated before any is written: a bad request writes nothing.
        The request stops at an entry that cannot be written (its id in use, its list
        at its limit without ``ignore_limit``, no room), having written the ones before
        it; ``error`` holds the exception (``EntryExists``, ``ListFull``,
        ``StructureFull``).  An entry written without an id gets the one the structure
        assigns, its seq as 12 big-endian bytes, as ``write`` does.  ``missing`` is
        always empty.

        ``expect_authority``: the list of every entry the request handles must have
        this authority value, checked before anything is written (``AuthorityMismatch``
        raised, nothing written): a batch conditioned as a ``write`` with
        ``expect_authority`` is (the queue manager's ``put_many``).
        """

    @abstractmethod
    def delete_entries(
        self,
        entry_ids: Sequence[bytes],
        *,
        missing_ok: bool = False,
        not_locked: Iterable[int] = (),
        budget: int | None = None,
    ) -> BulkResult:
        """Delete several entries by id, in order; budget and redrive as :meth:`move_entries`."""

    @abstractmethod
    def move_and_delete_entries(
        self,
        moves: Sequence[BulkMove],
        entry_ids: Sequence[bytes],
        *,
        ignore_limit: bool = False,
        missing_ok: bool = False,
        not_locked: Iterable[int] = (),
        budget: int | None = None,
    ) -> BulkResult:
        """:meth:`move_entries` of ``moves``, then :meth:`delete_entries` of ``entry_ids``,
        as one atomic request: a unit of work's commit that both puts (moves to the
        committed keys) and gets (deletes) in one request.

        One result over both lists, as if they were one list of ``moves`` followed by
        ``entry_ids``: ``processed`` counts the moves first, then the deletes, and the
        budget covers both (the deletes get what the moves left of it); ``seqs`` and
        ``missing`` run in that order; a stop at an entry that cannot be handled ends
        the request there (no delete is done after a move that stopped it).  Every move
        and id is validated before anything changes, as in the two requests; the options
        mean what they mean there (``ignore_limit`` concerns only the moves).  The deletes
        see what the moves did: an entry moved and then named for deletion is deleted.
        Monitors and snapshots see what the two requests, one after the other, would
        have shown them.

        A request of its own rather than a ``deletes=`` option on :meth:`move_entries`:
        that one's result counts moves alone for its many callers, and a separate name
        says that the count runs over two lists.
        """

    @abstractmethod
    def scan(
        self,
        list_number: int,
        low_key: bytes = LOWEST_KEY,
        high_key: bytes = HIGHEST_KEY,
        *,
        with_data: bool = True,
    ) -> Iterator[ListEntry]:
        """The entries of a list with keys in ``[low_key, high_key]``, in list order.

        The scan reads in pages: entries present for its whole duration are returned
        exactly once; entries changed meanwhile may or may not be.  Without data the
        entries carry ``b""`` as data.
        """

    @abstractmethod
    def snapshot(self) -> StructureSnapshot:
        """Copy the whole structure in one atomic request, to be read afterwards.

        The copy holds every entry (with its data) and every list's controls as they
        were between two changes, and the seq of the last change it includes.  Taking
        it is short (the memory backend collects its immutable entries; the Redis
        backend copies the structure's keys on the server, in its slot); reading it
        does not hold up other users.  This is the structure checkpoint's copy to a
        data space (redbook §2.10): release it when done.  It is not counted against
        the structure's size.
        """

    # -- list controls and locks -------------------------------------------------------

    @abstractmethod
    def list_info(self, list_number: int) -> ListInfo:
        """A list's entry and element counts, limit and authority."""

    @abstractmethod
    def set_list_controls(
        self,
        list_number: int,
        *,
        limit: int | Unchanged | None = UNCHANGED,
        increment_authority: bool = False,
        expect_authority: int | None = None,
        not_locked: Iterable[int] = (),
    ) -> int:
        """Set a list's limit (``None``: no limit) and/or bump its authority; returns the seq.

        A limit below the list's current count is accepted: the entries stay, and
        further writes fail until the count drops below the limit.
        """

    @abstractmethod
    def lock(self, lock_number: int) -> int:
        """Take a lock-table entry; returns the seq.  ``LockHeld`` if another user has it.

        Taking a lock this user already holds succeeds and changes nothing.
        """

    @abstractmethod
    def unlock(self, lock_number: int) -> int:
        """Release a lock-table entry this user holds; ``LockNotHeld`` otherwise."""

    @abstractmethod
    def lock_holder(self, lock_number: int) -> int | None:
        """The user id holding a lock-table entry, or ``None``."""

    # -- monitoring ----------------------------------------------------------------------

    @abstractmethod
    def register_monitor(self, spec: MonitorSpec) -> Registration:
        """Register interest in a key range, sublist or secondary key of a list.

        Takes one EMC (``EmcAreaFull`` when none is left) and returns the state of the
        watched set now, so that a caller who registers after finding nothing knows
        whether something arrived in between.
        """

    @abstractmethod
    def stop_monitor(self, monitor_id: int) -> int:
        """Deregister; frees the EMC and drops the monitor's undelivered events."""

    @abstractmethod
    def events_nowait(self) -> list[MonitorEvent]:
        """Dequeue every event queued for this user, oldest first; may be empty."""

    @abstractmethod
    def wait_events(self, timeout: float | None = None) -> list[MonitorEvent]:
        """Wait until at least one event is queued for this user, then dequeue them all.

        Returns an empty list when ``timeout`` seconds pass first.  The wait is woken by
        the change that queues the event, not by polling.
        """

    @abstractmethod
    def wait_for_event(self, timeout: float) -> None:
        """Sleep until an event is queued for this user, or ``timeout`` seconds pass.

        The events are left queued, for the request that takes them with its own work
        (:meth:`take` with ``take_events``, or :meth:`events_nowait`): a consumer then
        needs one round trip to sleep and one to take its events and its entry, where
        :meth:`wait_events` and a move are three.  It may return early with nothing
        queued (a backend may wake for other reasons); callers look and sleep again.
        """

    def monitor_list(
        self, list_number: int, *, notify_empty: bool = False, token: bytes = b""
    ) -> Registration:
        """Watch a whole list."""
        return self.register_monitor(
            MonitorSpec(list_number, notify_empty=notify_empty, token=token)
        )

    def monitor_key_range(
        self,
        list_number: int,
        low_key: bytes,
        high_key: bytes,
        *,
        notify_empty: bool = False,
        token: bytes = b"",
    ) -> Registration:
        """Watch the entries of a list whose keys lie in ``[low_key, high_key]``."""
        return self.register_monitor(
            MonitorSpec(list_number, low_key, high_key, notify_empty=notify_empty, token=token)
        )

    def monitor_sublist(
        self,
        list_number: int,
        key: bytes,
        *,
        secondary: bool = False,
        notify_empty: bool = False,
        token: bytes = b"",
    ) -> Registration:
        """Watch the entries with one exact key (primary, or secondary if asked)."""
        if secondary:
            spec = MonitorSpec(
                list_number, secondary_key=key, notify_empty=notify_empty, token=token
            )
        else:
            spec = MonitorSpec(list_number, key, key, notify_empty=notify_empty, token=token)
        return self.register_monitor(spec)

    # -- users -----------------------------------------------------------------------------

    @abstractmethod
    def users(self) -> list[UserInfo]:
        """Every user the structure records, active or failed, by user id."""

    @abstractmethod
    def mark_failed(self, user_id: int) -> int:
        """Declare a user failed: its connection stops working, its resources stay.

        A peer does this when it learns a user's process died; the failed user's
        locks, monitors and queued events are kept until it reconnects under its name
        or :meth:`cleanup_user` releases them.
        """

    @abstractmethod
    def cleanup_user(self, user_id: int) -> int:
        """Release a failed user's locks, monitors and events, and free its user id."""

    @abstractmethod
    def disconnect(self) -> None:
        """Disconnect normally, releasing this user's locks, monitors and events."""

    @property
    @abstractmethod
    def connected(self) -> bool:
        """Whether this connection can still make requests."""

    # -- the structure as a whole --------------------------------------------------------

    @abstractmethod
    def statistics(self) -> StructureStats:
        """Maximum and in-use entries, elements and EMCs, users and the last seq."""

    @abstractmethod
    def alter(self, *, size: int | None = None, emc_percent: int | None = None) -> StructureStats:
        """Change the structure's size and/or EMC share, within its maximum size.

        ``AlterRejected`` when the new size exceeds the maximum set at creation or the
        new counts would be below what is in use; nothing changes then.
        """

    def __enter__(self) -> ListStructure:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.connected:
            self.disconnect()


class StructureSnapshot(ABC):
    """A structure as it was at one instant: from :meth:`ListStructure.snapshot`.

    ``seq`` is the seq of the last change the copy includes; ``params`` how to allocate a
    structure like this one (its size as altered); ``lists`` every list's counts and
    controls at the snapshot, by list number.  Use it as a context manager, or call
    :meth:`release`, to free the copy.
    """

    def __init__(self, seq: int, params: StructureParams, lists: tuple[ListInfo, ...]) -> None:
        self.seq = seq
        self.params = params
        self.lists = lists

    @abstractmethod
    def entries(self, list_number: int) -> Iterator[ListEntry]:
        """A list's entries at the snapshot, in list order, with their data."""

    @abstractmethod
    def release(self) -> None:
        """Free the copy; idempotent."""

    def __enter__(self) -> StructureSnapshot:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


class CouplingFacility(ABC):
    """A place that holds named list structures, and lets users connect to them.

    Structures persist until deleted, whether or not anyone is connected.
    """

    @abstractmethod
    def create(self, params: StructureParams, *, sequence_floor: int = 0) -> StructureStats:
        """Allocate a new, empty structure.

        Its first change takes sequence number ``sequence_floor + 1``: a structure
        rebuilt after a loss continues the old one's numbering so that the log stays
        in order.  ``StructureExists`` if the name is taken.
        """

    @abstractmethod
    def delete(self, name: str, *, force: bool = False) -> None:
        """Deallocate a structure.

        Refused with ``USER_ACTIVE`` while users are connected unless ``force``; with
        ``force`` the remaining connections get ``StructureLost`` from then on.
        """

    @abstractmethod
    def exists(self, name: str) -> bool:
        """Whether a structure of that name is allocated."""

    @abstractmethod
    def structure_names(self) -> list[str]:
        """The names of the structures allocated here, sorted."""

    @abstractmethod
    def connect(self, name: str, user_name: str) -> ListStructure:
        """Connect to a structure as a user.

        A failed user of the same name is reattached (same user id, its monitors,
        events and locks); an active one makes this fail with ``USER_ACTIVE``.
        ``TOO_MANY_USERS`` when 32 users are connected already.
        """

    @abstractmethod
    def close(self) -> None:
        """Release this facility handle's client resources (not the structures)."""

    def __enter__(self) -> CouplingFacility:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
