"""A user's connection to a structure on Redis: each request is one function call.

A request checks its input here first, with the validators the memory backend uses
(so bad input fails with the same reason and never reaches the server), then calls its
function (``lua/<request>.lua``), which checks the user, the conditions and the room
before its first write.  Requests that change something carry a request id: a
channel (the calling thread) and a number, so that a request resent after a lost
reply is answered from the function's record instead of being applied twice.

A connection is bound to the client's epoch that attached it (``Epoch`` in
``client.py``) and sends over that epoch's sockets only.  When the server it was made
on restarts or is replaced (a failover), the epoch tells it (``lose``): from then on
every request fails with ``STRUCTURE_LOST``, without reaching any server, because the
server may have come back older than the connection left it.  The caller reconnects
(``facility.connect``) and checks the structure against its log.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import MethodType
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from sharedq.cf import validation as v
from sharedq.cf.api import ListStructure, StructureSnapshot, Taken, check_take_count
from sharedq.cf.errors import CFReason, StoreError, cf_error
from sharedq.cf.redis import codec, keys, scripts
from sharedq.cf.redis import snapshot as redis_snapshot
from sharedq.cf.redis.codec import NO_OPTIONS, entry_of, options, pack_locator
from sharedq.cf.redis.errors import structure_lost
from sharedq.cf.types import (
    ENTRY_ID_LENGTH,
    HIGHEST_KEY,
    LOWEST_KEY,
    MAX_ADJUNCT,
    MAX_ELEMENTS_PER_ENTRY,
    MAX_ENTRY_BYTES,
    MAX_VERSION,
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
    UserState,
)

if TYPE_CHECKING:
    from sharedq.cf.redis.client import Epoch
    from sharedq.cf.redis.scripts import Function

#: Entries a bulk request handles before it returns for a redrive, when not told: few
#: enough that one function call stays short (Redis serves nobody else meanwhile).
DEFAULT_BULK_BUDGET = 256
#: Entries a scan reads per function call.
SCAN_PAGE = 128
#: Longest single block of ``wait_events`` before it re-checks the connection: a
#: structure deleted or a user cleaned up meanwhile surfaces within this.
WAIT_SLICE = 2.0

_TAIL = Position.TAIL
#: options() of a move to a new key with version 0, secondary key unchanged.
_REKEY_TO_VERSION_0 = (codec.NEW_KEY | codec.SET_VERSION).to_bytes(2, "big")
_ZERO_VERSION = bytes(8)
#: options() of a delete whose caller does not want the data back.
_WITHOUT_DATA = codec.WITHOUT_DATA.to_bytes(2, "big")
#: Named tuples made from a tuple as ``codec._entry`` makes them.
_change: Callable[[tuple[Any, ...]], Change] = MethodType(tuple.__new__, Change)


def _counted(reply: Any) -> tuple[int, int | None]:
    """A write's reply: its seq and the list's entry count (a resend's kept reply, the
    seq alone, has no count)."""
    if type(reply) is list:
        return reply[0], reply[1]
    return reply, None


_entry: Callable[[tuple[Any, ...]], ListEntry] = MethodType(tuple.__new__, ListEntry)
_taken: Callable[[tuple[Any, ...]], Taken] = MethodType(tuple.__new__, Taken)


class LeaseOwner(Protocol):
    """What a connection needs of the facility that made it: the lease it renews, and
    someone to tell when it stops renewing it (``RedisFacility`` is one)."""

    #: How long a lease lasts once renewed, in milliseconds.
    lease_ms: int

    def forget(self, structure: RedisListStructure) -> None:
        """Stop renewing ``structure``'s lease: it disconnected, or its lease lapsed."""

    def lost(self, structure: RedisListStructure) -> None:
        """Stop renewing ``structure``'s lease and keep its token: its server was lost."""


class RedisListStructure(ListStructure):
    """A user's connection to a structure held on a Redis server."""

    def __init__(
        self,
        facility: LeaseOwner,
        epoch: Epoch,
        name: str,
        user_name: str,
        user_id: int,
        token: bytes,
        list_count: int,
        element_size: int,
        lock_count: int,
    ) -> None:
        self._facility = facility
        # Requests go over the sockets of the epoch that attached this connection, and
        # only there; lose() swaps both for a function that fails.
        self._run: Callable[[Function, str, list[Any]], Any] = epoch.run
        self._block: Callable[[str, float], None] = epoch.block
        self._wait_run: Callable[[str, float, Function, str, list[Any]], Any] = epoch.wait_for_event
        self._name = name
        self._key = keys.meta_key(name)
        self._user_name = user_name
        self._user_id = user_id
        self._token = token
        self._list_count = list_count
        self._element_size = element_size
        self._lock_count = lock_count
        self._max_entry_elements = min(MAX_ELEMENTS_PER_ENTRY, MAX_ENTRY_BYTES // element_size)
        self._requests = itertools.count(1)
        #: Each thread's changer headers (its channel is the thread), each with the next
        #: number of the connection's one count (``codec.changer_headers``).
        self._channels: dict[int, Iterator[bytes]] = {}
        self._reader = codec.reader_header(user_id, token)
        self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return (
            f"<RedisListStructure {self._name!r} user={self._user_id} {self._user_name!r} {state}>"
        )

    def _changer(self) -> bytes:
        """The header of a request that changes something: with a request id."""
        channel = threading.get_ident()
        headers = self._channels.get(channel)
        if headers is None:
            headers = codec.changer_headers(self._user_id, self._token, channel, self._requests)
            self._channels[channel] = headers
        return next(headers)

    @property
    def structure_name(self) -> str:
        return self._name

    @property
    def user_id(self) -> int:
        return self._user_id

    @property
    def user_name(self) -> str:
        return self._user_name

    @property
    def connected(self) -> bool:
        if self._closed:
            return False
        try:
            return bool(self._run(scripts.ALIVE, self._key, [self._reader]))
        except StoreError:
            return False

    def lose(self, why: str) -> None:
        """The server this connection was made on restarted or was replaced (``why``).

        From now on every request fails with ``STRUCTURE_LOST`` without being sent, and
        the lease is no longer renewed.  Called by the client, once, when it sees the
        change; a request already under way learns it from its epoch.
        """
        error_key = self._key

        def lost(*args: object) -> NoReturn:
            raise structure_lost(error_key, why)

        self._run = lost
        self._block = lost
        self._wait_run = lost
        self._facility.lost(self)

    @property
    def token(self) -> bytes:
        """This connection's token (the facility reclaims a lost connection's user)."""
        return self._token

    def renew_lease(self) -> None:
        """Called by the facility's lease keeper; a failure here is seen by requests."""
        try:
            renewed = self._run(scripts.RENEW, self._key, [self._reader, self._facility.lease_ms])
        except Exception:
            return
        if not renewed:
            self._facility.forget(self)

    # -- single-entry requests ------------------------------------------------------------

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
        spec, elements = self._write_spec(
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
        )
        if not_locked:
            locks = v.check_locks(not_locked, self._lock_count)
            args = [self._changer(), spec, data, *locks]
        else:
            args = [self._changer(), spec, data]
        function = scripts.WRITE_RESERVE if reserve else scripts.WRITE
        seq, entries = _counted(self._run(function, self._key, args))
        entry: ListEntry = _entry(
            (
                seq.to_bytes(12, "big") if entry_id is None else entry_id,
                list_number,
                key,
                data,
                adjunct,
                secondary_key,
                version,
                elements,
            )
        )
        return _change((seq, entry, entries))

    def _write_spec(
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
    ) -> tuple[bytes, int]:
        """A write's arguments checked (as the memory backend checks them) and packed."""
        if type(list_number) is not int or not 0 <= list_number < self._list_count:
            v.check_list(list_number, self._list_count)
        if type(key) is not bytes or len(key) != 16:
            v.check_key(key)
        if type(data) is not bytes:
            v.elements_for(data, self._element_size)
        elements = -(-len(data) // self._element_size)
        if elements > self._max_entry_elements:
            v.elements_for(data, self._element_size)
        if adjunct and (type(adjunct) is not bytes or len(adjunct) > MAX_ADJUNCT):
            v.check_adjunct(adjunct)
        if secondary_key is not None:
            v.check_secondary_key(secondary_key)
        if type(version) is not int or not 0 <= version <= MAX_VERSION:
            v.check_version(version)
        if position is not _TAIL:
            v.check_position(position)
        if entry_id is not None and (
            type(entry_id) is not bytes or len(entry_id) != ENTRY_ID_LENGTH
        ):
            v.check_entry_id(entry_id)
        spec = codec.write_spec(
            list_number,
            key,
            version,
            position is not _TAIL,
            ignore_limit,
            elements,
            expect_authority,
            adjunct,
            secondary_key,
            entry_id,
        )
        return spec, elements

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
        seq, entries, elements = self._write_rekey(
            list_number,
            key,
            data,
            adjunct,
            secondary_key,
            entry_id,
            version,
            position,
            expect_authority,
            not_locked,
            ignore_limit,
            new_key,
            new_secondary_key,
            set_version,
        )
        written: ListEntry = _entry(
            (
                seq.to_bytes(12, "big") if entry_id is None else entry_id,
                list_number,
                key,
                data,
                adjunct,
                secondary_key,
                version,
                elements,
            )
        )
        moved: ListEntry = _entry(
            (
                written[0],
                list_number,
                new_key,
                data,
                adjunct,
                secondary_key if new_secondary_key is UNCHANGED else new_secondary_key,
                version if set_version is None else set_version,
                elements,
            )
        )
        return _change((seq, written, entries)), _change((seq + 1, moved, entries))

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
        # The put out of syncpoint: the request alone, no changes made (the base's doc).
        return self._write_rekey(
            list_number,
            key,
            data,
            adjunct,
            None,
            entry_id,
            version,
            _TAIL,
            expect_authority,
            (),
            False,
            new_key,
            new_secondary_key,
            set_version,
        )[1]

    def _write_rekey(
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
        not_locked: Iterable[int],
        ignore_limit: bool,
        new_key: bytes,
        new_secondary_key: bytes | Unchanged | None,
        set_version: int | None,
    ) -> tuple[int, int | None, int]:
        """``write_and_rekey``'s checks and request: its seq, entry count and elements."""
        if type(new_key) is not bytes or len(new_key) != 16:
            v.check_key(new_key, "new key")
        if new_secondary_key is not UNCHANGED:
            v.check_secondary_key(new_secondary_key)
        if set_version is not None and (
            type(set_version) is not int or not 0 <= set_version <= MAX_VERSION
        ):
            v.check_version_update(set_version, False)
        spec, elements = self._write_spec(
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
        )
        if set_version == 0 and new_secondary_key is UNCHANGED:
            rekey = _REKEY_TO_VERSION_0 + new_key + _ZERO_VERSION  # a put out of syncpoint
        else:
            rekey = options(
                new_key=new_key, new_secondary_key=new_secondary_key, set_version=set_version
            )
        if not_locked:
            locks = v.check_locks(not_locked, self._lock_count)
            args = [self._changer(), spec, data, rekey, *locks]
        else:
            args = [self._changer(), spec, data, rekey]
        seq, entries = _counted(self._run(scripts.WRITE_REKEY, self._key, args))
        return seq, entries, elements

    def read(self, locator: Locator) -> ListEntry | None:
        reply = self._run(
            scripts.READ, self._key, [self._reader, pack_locator(locator, self._list_count)]
        )
        return None if reply is None else entry_of(*reply)

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
        if type(to_list) is not int or not 0 <= to_list < self._list_count:
            v.check_list(to_list, self._list_count, "target list")
        if new_key is not None and (type(new_key) is not bytes or len(new_key) != 16):
            v.check_key(new_key, "new key")
        if new_secondary_key is not UNCHANGED:
            v.check_secondary_key(new_secondary_key)
        if set_version is not None or increment_version:
            v.check_version_update(set_version, increment_version)
        if position is not _TAIL:
            v.check_position(position)
        found = pack_locator(locator, self._list_count)
        if (
            new_key is None
            and new_secondary_key is UNCHANGED
            and set_version is None
            and not increment_version
            and position is _TAIL
            and expect_version is None
            and not ignore_limit
        ):
            # A get: nothing else to say, or only the list authority it expects.
            if expect_authority is None:
                spec = to_list.to_bytes(2, "big") + NO_OPTIONS
            else:
                spec = codec.get_spec(to_list, expect_authority)
        else:
            spec = to_list.to_bytes(2, "big") + options(
                new_key=new_key,
                new_secondary_key=new_secondary_key,
                set_version=set_version,
                increment_version=increment_version,
                head=position is not _TAIL,
                expect_version=expect_version,
                expect_authority=expect_authority,
                ignore_limit=ignore_limit,
            )
        args: list[bytes | int] = [self._changer(), found, spec]
        if not_locked:
            args.extend(v.check_locks(not_locked, self._lock_count))
        reply = self._run(scripts.MOVE, self._key, args)
        if reply is None:
            return None
        entries = reply[3] if len(reply) > 3 else None  # a resend's kept reply has none
        return _change((reply[0], entry_of(reply[1], reply[2]), entries))

    def delete(
        self,
        locator: Locator,
        *,
        expect_version: int | None = None,
        expect_authority: int | None = None,
        not_locked: Iterable[int] = (),
        with_data: bool = True,
    ) -> Change | None:
        found = pack_locator(locator, self._list_count)
        if expect_version is None and expect_authority is None:
            spec = NO_OPTIONS if with_data else _WITHOUT_DATA
        else:
            spec = options(
                expect_version=expect_version,
                expect_authority=expect_authority,
                without_data=not with_data,
            )
        args: list[bytes | int] = [self._changer(), found, spec]
        if not_locked:
            args.extend(v.check_locks(not_locked, self._lock_count))
        reply = self._run(scripts.DELETE, self._key, args)
        return None if reply is None else _change((reply[0], entry_of(reply[1], reply[2]), None))

    def delete_seq(self, locator: Locator) -> int | None:
        # delete(locator, with_data=False)'s request; of its reply, the seq alone.
        reply = self._run(
            scripts.DELETE,
            self._key,
            [self._changer(), pack_locator(locator, self._list_count), _WITHOUT_DATA],
        )
        return None if reply is None else reply[0]

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
        if type(to_list) is not int or not 0 <= to_list < self._list_count:
            v.check_list(to_list, self._list_count, "target list")
        flags = (1 if delete else 0) | (2 if take_events else 0)
        authority = b""
        if expect_authority is not None:
            flags |= 8
            authority = options(expect_authority=expect_authority)[-8:]
        args: list[bytes | int] = [self._changer(), pack_locator(locator, self._list_count), b""]
        if monitor is not None:
            v.check_monitor_spec(monitor, self._list_count)
            flags |= 4
            args += [
                monitor.list_number,
                monitor.low_key,
                monitor.high_key,
                monitor.secondary_key or b"",
                b"1" if monitor.notify_empty else b"",
                monitor.token,
            ]
        args[2] = to_list.to_bytes(2, "big") + bytes((flags,)) + authority
        if wait > 0:
            # XREAD BLOCK and the call in one write: the server runs the take as soon as
            # the wait ends (wait_for_event), with no round trip between the two.
            reply = self._wait_run(
                keys.queue_key(self._name, self._user_id),
                min(wait, WAIT_SLICE),
                scripts.TAKE,
                self._key,
                args,
            )
        else:
            reply = self._run(scripts.TAKE, self._key, args)
        raw, seq, record, data, deleted_seq, monitor_id, nonempty, monitor_seq, left = reply
        # No comprehension (a call) when there are no events: most takes.
        events = [codec.event_of(event) for event in raw] if raw else []
        if not seq:
            registration = (
                None
                if not monitor_id
                else Registration(
                    monitor_id, monitor.list_number if monitor else 0, bool(nonempty), monitor_seq
                )
            )
            return _taken((events, None, None, registration))
        entry = entry_of(record, data)
        deleted = _change((deleted_seq, entry, None)) if deleted_seq else None
        return _taken((events, _change((seq, entry, left)), deleted, None))

    def take_many(
        self,
        head: Head,
        to_list: int,
        count: int,
        *,
        delete: bool = False,
        expect_authority: int | None = None,
    ) -> list[tuple[Change, Change | None]]:
        check_take_count(count)
        if type(head) is not Head:
            v.check_locator(head, self._list_count)
            raise cf_error(CFReason.BAD_ARGUMENT, f"take_many takes a Head, not {head!r}")
        if type(to_list) is not int or not 0 <= to_list < self._list_count:
            v.check_list(to_list, self._list_count, "target list")
        flags = 1 if delete else 0
        authority = b""
        if expect_authority is not None:
            flags |= 8
            authority = options(expect_authority=expect_authority)[-8:]
        spec = to_list.to_bytes(2, "big") + bytes((flags,)) + count.to_bytes(2, "big") + authority
        reply = self._run(
            scripts.TAKE_MANY,
            self._key,
            [self._changer(), pack_locator(head, self._list_count), spec],
        )
        done: list[tuple[Change, Change | None]] = []
        taken = len(reply) // 4
        # Each take left one entry more than the next: the last left what the reply ends
        # with (a move within the head's own list leaves its count as it was).
        left = reply[-1] if len(reply) % 4 else None
        for at in range(0, taken * 4, 4):
            seq, record, data, deleted_seq = reply[at : at + 4]
            entry = entry_of(record, data)
            deleted = _change((deleted_seq, entry, None)) if deleted_seq else None
            if left is not None and to_list != head.list_number:
                entries = left + taken - 1 - at // 4
            else:
                entries = left
            done.append((_change((seq, entry, entries)), deleted))
        return done

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
        elements = 0
        if not isinstance(data, Unchanged):
            elements = v.elements_for(data, self._element_size)
        if not isinstance(adjunct, Unchanged):
            v.check_adjunct(adjunct)
        v.check_version_update(set_version, increment_version)
        found = pack_locator(locator, self._list_count)
        locks = v.check_locks(not_locked, self._lock_count)
        spec = options(
            set_version=set_version,
            increment_version=increment_version,
            increment_authority=increment_authority,
            expect_version=expect_version,
            expect_authority=expect_authority,
        )
        # An update that keeps the data replaces fixed-size fields only: it runs at
        # maxmemory too (a descriptor's status, a definition's version).
        reply = self._run(
            scripts.UPDATE if not isinstance(data, Unchanged) else scripts.UPDATE_IN_PLACE,
            self._key,
            [
                self._changer(),
                found,
                spec,
                b"u" if isinstance(data, Unchanged) else b"d" + data,
                b"u" if isinstance(adjunct, Unchanged) else b"a" + adjunct,
                elements,
                *locks,
            ],
        )
        return None if reply is None else _change((reply[0], entry_of(reply[1], reply[2]), None))

    # -- bulk requests ----------------------------------------------------------------

    def move_entries(
        self,
        moves: Sequence[BulkMove],
        *,
        ignore_limit: bool = False,
        missing_ok: bool = False,
        not_locked: Iterable[int] = (),
        budget: int | None = None,
    ) -> BulkResult:
        v.check_budget(budget)
        for move in moves:
            v.check_bulk_move(move, self._list_count)
        locks = v.check_locks(not_locked, self._lock_count)
        reply = self._run(
            scripts.BULK_MOVE,
            self._key,
            [
                self._changer(),
                b"1" if ignore_limit else b"",
                b"1" if missing_ok else b"",
                len(locks),
                *locks,
                *(codec.pack_move(move) for move in moves[: budget or DEFAULT_BULK_BUDGET]),
            ],
        )
        return codec.bulk_result(len(moves), reply)

    def delete_entries(
        self,
        entry_ids: Sequence[bytes],
        *,
        missing_ok: bool = False,
        not_locked: Iterable[int] = (),
        budget: int | None = None,
    ) -> BulkResult:
        v.check_budget(budget)
        for entry_id in entry_ids:
            v.check_entry_id(entry_id)
        locks = v.check_locks(not_locked, self._lock_count)
        reply = self._run(
            scripts.BULK_DELETE,
            self._key,
            [
                self._changer(),
                b"1" if missing_ok else b"",
                len(locks),
                *locks,
                *entry_ids[: budget or DEFAULT_BULK_BUDGET],
            ],
        )
        return codec.bulk_result(len(entry_ids), reply)

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
        v.check_budget(budget)
        for move in moves:
            v.check_bulk_move(move, self._list_count)
        for entry_id in entry_ids:
            v.check_entry_id(entry_id)
        locks = v.check_locks(not_locked, self._lock_count)
        left = budget or DEFAULT_BULK_BUDGET
        sent = moves[:left]
        reply = self._run(
            scripts.BULK_COMMIT,
            self._key,
            [
                self._changer(),
                b"1" if ignore_limit else b"",
                b"1" if missing_ok else b"",
                len(locks),
                *locks,
                len(sent),
                *(codec.pack_move(move) for move in sent),
                *entry_ids[: left - len(sent)],
            ],
        )
        return codec.bulk_result(len(moves) + len(entry_ids), reply)

    def write_entries(
        self,
        writes: Sequence[BulkWrite],
        *,
        ignore_limit: bool = False,
        not_locked: Iterable[int] = (),
        budget: int | None = None,
        expect_authority: int | None = None,
    ) -> BulkResult:
        v.check_budget(budget)
        args: list[bytes | int] = []
        list_count, element_size = self._list_count, self._element_size
        for write in writes[: budget or DEFAULT_BULK_BUDGET]:
            elements = v.check_bulk_write(write, list_count, element_size)
            spec = codec.write_spec(
                write.list_number,
                write.key,
                write.version,
                write.position is not _TAIL,
                False,
                elements,
                None,
                write.adjunct,
                write.secondary_key,
                write.entry_id,
            )
            args += (spec, write.data)
        for write in writes[budget or DEFAULT_BULK_BUDGET :]:
            v.check_bulk_write(write, list_count, element_size)
        locks = v.check_locks(not_locked, self._lock_count)
        opts = b"1" if ignore_limit else b"0"
        if expect_authority is not None:
            # Every entry's list's authority checked first (bulk_write.lua).
            opts += options(expect_authority=expect_authority)[-8:]
        reply = self._run(
            scripts.BULK_WRITE, self._key, [self._changer(), opts, len(locks), *locks, *args]
        )
        return codec.bulk_result(len(writes), reply)

    def snapshot(self) -> StructureSnapshot:
        return redis_snapshot.take(
            self._name, self._on_structure, changer=self._changer(), reader=self._reader
        )

    def _on_structure(self, function: Function, args: list[Any]) -> Any:
        """Call ``function`` on this structure over this connection's epoch (a snapshot's
        requests go this way, so that a lost connection fails its snapshots too)."""
        return self._run(function, self._key, args)

    def scan(
        self,
        list_number: int,
        low_key: bytes = LOWEST_KEY,
        high_key: bytes = HIGHEST_KEY,
        *,
        with_data: bool = True,
    ) -> Iterator[ListEntry]:
        v.check_list(list_number, self._list_count)
        v.check_key(low_key, "low key")
        v.check_key(high_key, "high key")
        page = self._scan_page(list_number, low_key, high_key, b"", with_data)
        return self._pages(page, list_number, low_key, high_key, with_data)

    def _scan_page(
        self, list_number: int, low: bytes, high: bytes, after: bytes, with_data: bool
    ) -> list[bytes]:
        page: list[bytes] = self._run(
            scripts.SCAN,
            self._key,
            [self._reader, list_number, low, high, after, SCAN_PAGE, b"1" if with_data else b""],
        )
        return page

    def _pages(
        self, page: list[bytes], list_number: int, low: bytes, high: bytes, with_data: bool
    ) -> Iterator[ListEntry]:
        # Each page starts after the last member of the one before, so entries present
        # throughout are returned once however the list changes between pages.  A page
        # is record, data, record, data...
        while True:
            yield from map(entry_of, page[::2], page[1::2])
            if len(page) < 2 * SCAN_PAGE:
                return
            after = codec.member_of(page[-2])
            page = self._scan_page(list_number, low, high, after, with_data)

    # -- list controls and locks ----------------------------------------------------------

    def list_info(self, list_number: int) -> ListInfo:
        v.check_list(list_number, self._list_count)
        entries, elements, limit, authority = self._run(
            scripts.LIST_INFO, self._key, [self._reader, list_number]
        )
        return ListInfo(
            list_number, entries, elements, None if limit is None else int(limit), authority
        )

    def set_list_controls(
        self,
        list_number: int,
        *,
        limit: int | Unchanged | None = UNCHANGED,
        increment_authority: bool = False,
        expect_authority: int | None = None,
        not_locked: Iterable[int] = (),
    ) -> int:
        v.check_list(list_number, self._list_count)
        if isinstance(limit, Unchanged):
            limit_arg: bytes | int = b"u"
        else:
            checked = v.check_limit(limit)
            limit_arg = b"" if checked is None else checked
        locks = v.check_locks(not_locked, self._lock_count)
        seq: int = self._run(
            scripts.CONTROLS,
            self._key,
            [
                self._changer(),
                list_number,
                limit_arg,
                b"1" if increment_authority else b"",
                b"" if expect_authority is None else codec.authority_number(expect_authority),
                *locks,
            ],
        )
        return seq

    def lock(self, lock_number: int) -> int:
        v.check_lock_number(lock_number, self._lock_count)
        seq: int = self._run(scripts.LOCK, self._key, [self._changer(), lock_number])
        return seq

    def unlock(self, lock_number: int) -> int:
        v.check_lock_number(lock_number, self._lock_count)
        seq: int = self._run(scripts.UNLOCK, self._key, [self._changer(), lock_number])
        return seq

    def lock_holder(self, lock_number: int) -> int | None:
        v.check_lock_number(lock_number, self._lock_count)
        holder = self._run(scripts.HOLDER, self._key, [self._reader, lock_number])
        return None if holder is None else int(holder)

    # -- monitoring -------------------------------------------------------------------------

    def register_monitor(self, spec: MonitorSpec) -> Registration:
        v.check_monitor_spec(spec, self._list_count)
        monitor_id, nonempty, seq = self._run(
            scripts.MONITOR,
            self._key,
            [
                self._changer(),
                spec.list_number,
                spec.low_key,
                spec.high_key,
                spec.secondary_key or b"",
                b"1" if spec.notify_empty else b"",
                spec.token,
            ],
        )
        return Registration(monitor_id, spec.list_number, bool(nonempty), seq)

    def stop_monitor(self, monitor_id: int) -> int:
        if type(monitor_id) is not int:
            raise cf_error(
                CFReason.NO_SUCH_MONITOR, f"user {self._user_id} has no monitor {monitor_id!r}"
            )
        seq: int = self._run(scripts.UNMONITOR, self._key, [self._changer(), monitor_id])
        return seq

    def events_nowait(self) -> list[MonitorEvent]:
        raw: list[bytes] = self._run(scripts.EVENTS, self._key, [self._changer()])
        return [codec.event_of(event) for event in raw]

    def wait_events(self, timeout: float | None = None) -> list[MonitorEvent]:
        # The events are in a stream on the server, written by the changes themselves;
        # XREAD BLOCK wakes on the first one without taking it, and events_nowait takes
        # them all atomically.  A wake-up lost with a dropped connection loses nothing.
        deadline = None if timeout is None else time.monotonic() + timeout
        queue = keys.queue_key(self._name, self._user_id)
        while True:
            events = self.events_nowait()
            if events:
                return events
            remaining = WAIT_SLICE if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                return []
            self._block(queue, min(remaining, WAIT_SLICE))

    def wait_for_event(self, timeout: float) -> None:
        # XREAD BLOCK on the user's event stream: it returns as soon as the stream holds
        # an event (or a wake-up marker), and takes nothing.
        if timeout > 0:
            self._block(keys.queue_key(self._name, self._user_id), min(timeout, WAIT_SLICE))

    # -- users -----------------------------------------------------------------------------

    def users(self) -> list[UserInfo]:
        return [
            UserInfo(
                int(user_id),
                name.decode("utf-8"),
                UserState.ACTIVE if state == b"a" else UserState.FAILED,
            )
            for user_id, name, state in self._run(scripts.USERS, self._key, [self._reader])
        ]

    def mark_failed(self, user_id: int) -> int:
        return self._user_request(b"f", user_id)

    def cleanup_user(self, user_id: int) -> int:
        return self._user_request(b"c", user_id)

    def _user_request(self, op: bytes, user_id: int) -> int:
        if type(user_id) is not int:
            raise cf_error(CFReason.NO_SUCH_USER, f"no user {user_id!r} on {self._name}")
        seq: int = self._run(scripts.USER, self._key, [self._changer(), op, user_id])
        return seq

    def disconnect(self) -> None:
        self._run(scripts.DETACH, self._key, [self._changer()])
        self._closed = True
        self._facility.forget(self)

    # -- the structure as a whole ----------------------------------------------------------

    def statistics(self) -> StructureStats:
        reply = self._run(scripts.STATS, self._key, [self._reader])
        return codec.stats_of(self._name, self._list_count, self._element_size, reply)

    def alter(self, *, size: int | None = None, emc_percent: int | None = None) -> StructureStats:
        if size is not None and (type(size) is not int or size < 1):
            raise cf_error(CFReason.BAD_ARGUMENT, f"size {size!r} must be a positive int")
        if emc_percent is not None and type(emc_percent) is not int:
            raise cf_error(
                CFReason.BAD_STRUCTURE_PARAMS, f"emc_percent {emc_percent!r} must be an int"
            )
        reply = self._run(
            scripts.ALTER,
            self._key,
            [
                self._changer(),
                b"" if size is None else size,
                b"" if emc_percent is None else emc_percent,
            ],
        )
        return codec.stats_of(self._name, self._list_count, self._element_size, reply)
