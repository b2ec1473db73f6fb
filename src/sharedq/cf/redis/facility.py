"""The Redis backend: structures on a Redis server, shared by processes on any host.

Every user of a structure, in whatever process, opens its own ``RedisFacility`` on the
same server and connects to the structure by name.  The structure persists on the
server until deleted; sharedq's own log and structure checkpoints, not Redis
persistence, are what rebuild it after the server loses it.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from sharedq.cf.api import CouplingFacility
from sharedq.cf.errors import CFReason, UserError, cf_error
from sharedq.cf.params import StructureParams, validate_params
from sharedq.cf.redis import codec, keys, scripts
from sharedq.cf.redis.client import RedisClient
from sharedq.cf.redis.connection import RedisListStructure
from sharedq.cf.redis.lease import LeaseKeeper
from sharedq.cf.types import StructureStats

#: Renewals per lease period: a connection survives a few missed renewals.
RENEWALS_PER_LEASE = 5
#: The largest ``sequence_floor``: seqs stay exact in Lua's double-precision numbers.
MAX_SEQUENCE_FLOOR = 2**52
#: The header of a function called for no particular user.
_NO_USER = codec.reader_header(0, bytes(16))
#: How this version keeps a structure (``fmt`` in its meta hash): 3, an entry's data in
#: its record when small (at most 512 bytes), apart from it when larger; the mark
#: ``xa`` while a snapshot may be read.  Connecting to a structure kept otherwise (1:
#: data always in the record; 2: always apart) is refused.
STORAGE_FORMAT = b"3"
#: Deletes a token key if it still holds the given token: a lost connection's lease
#: ended at once, so that its user may reconnect (``connect``).
_END_LEASE = (
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
)


def _describe(params: StructureParams, sequence_floor: int) -> str:
    """The structure's parameters as text, kept in its meta hash for operators.

    Longer than 64 bytes on purpose: Redis then keeps the meta hash as a real hash table
    from the start rather than a packed list searched field by field, and every request
    reads several of its fields.
    """
    return json.dumps({**params.__dict__, "sequence_floor": sequence_floor}, sort_keys=True)


class RedisFacility(CouplingFacility):
    """Structures on one Redis server (or cluster), reached through one client."""

    def __init__(self, client: RedisClient) -> None:
        self.client = client
        self.lease_ms = int(client.options.lease_seconds * 1000)
        self._leases = LeaseKeeper(client.options.lease_seconds / RENEWALS_PER_LEASE)
        self._closed = False
        # (structure, user name) -> (user id, token) of connections lost to a server
        # restart or failover, whose tokens may still be valid on the server.
        self._lost: dict[tuple[str, str], set[tuple[int, bytes]]] = {}
        self._lost_lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str, **options: float) -> RedisFacility:
        """Open ``redis://``, ``rediss://`` (TLS) or ``unix://`` URLs, as redis-py reads them.

        User name and password come from the URL (``redis://user:password@host:port/db``);
        ``?lease=SECONDS`` and ``?retry=SECONDS`` set the lease of connections made here
        and how long a dropped connection is retried; keyword ``lease_seconds`` and
        ``retry_seconds`` override them.
        """
        return cls(RedisClient.open(url, **options))

    def __repr__(self) -> str:
        return f"<RedisFacility {self.client.where}>"

    def __enter__(self) -> RedisFacility:
        return self

    def create(self, params: StructureParams, *, sequence_floor: int = 0) -> StructureStats:
        capacity = validate_params(params)
        if not isinstance(sequence_floor, int) or not 0 <= sequence_floor <= MAX_SEQUENCE_FLOOR:
            raise cf_error(
                CFReason.BAD_ARGUMENT,
                f"sequence_floor {sequence_floor!r} must be 0..2**52 on Redis",
            )
        fields: list[Any] = [
            b"inst", os.urandom(8),
            b"params", _describe(params, sequence_floor),
            b"lc", params.list_count,
            b"es", params.element_size,
            b"lk", params.lock_count,
            b"er", params.entry_ratio,
            b"elr", params.element_ratio,
            b"size", params.size,
            b"maxsize", params.effective_max_size,
            b"emcp", params.emc_percent,
            b"c", codec.counters(
                seq=sequence_floor,
                max_entries=capacity.max_entries,
                max_elements=capacity.max_elements,
                max_emcs=capacity.max_emcs,
            ),
            b"nu", 0, b"mid", 0,
            b"fmt", STORAGE_FORMAT,
        ]  # fmt: skip
        reply = self.client.run(scripts.CREATE, keys.meta_key(params.name), [_NO_USER, *fields])
        return codec.stats_of(params.name, params.list_count, params.element_size, reply)

    def delete(self, name: str, *, force: bool = False) -> None:
        self.client.run(scripts.DESTROY, keys.meta_key(name), [_NO_USER, b"1" if force else b""])

    def exists(self, name: str) -> bool:
        meta = keys.meta_key(name)
        return bool(self.client.command("EXISTS", meta, key=meta))

    def structure_names(self) -> list[str]:
        names: set[str] = set()
        for address in self.client.nodes.addresses():
            cursor: Any = 0
            while True:
                cursor, found = self.client.on_node(
                    address, "SCAN", cursor, "MATCH", keys.META_PATTERN, "COUNT", 1000
                )
                names.update(keys.name_of(key) for key in found)
                if int(cursor) == 0:
                    break
        return sorted(names)

    def connect(self, name: str, user_name: str) -> RedisListStructure:
        """Attach ``user_name``; after a server restart or failover, how users reconnect.

        A connection of this facility lost to a restart (or failover) leaves its token
        on the server if the server came back with it (a snapshot, an AOF, a replica):
        its user would look connected until the lease lapsed.  Reconnecting under that
        name ends that lease at once and reattaches the user (with its locks, monitors
        and events, as after any failure).
        """
        if not isinstance(user_name, str) or not 1 <= len(user_name) <= 64:
            raise cf_error(CFReason.BAD_ARGUMENT, f"user name {user_name!r} must be 1-64 chars")
        meta = keys.meta_key(name)
        try:
            reply, epoch = self.client.serve(
                scripts.ATTACH,
                meta,
                [_NO_USER, user_name, os.urandom(8), self.lease_ms, STORAGE_FORMAT],
            )
        except UserError as exc:
            if exc.reason is not CFReason.USER_ACTIVE or not self._end_lost_leases(name, user_name):
                raise
            reply, epoch = self.client.serve(
                scripts.ATTACH,
                meta,
                [_NO_USER, user_name, os.urandom(8), self.lease_ms, STORAGE_FORMAT],
            )
        user_id, token, list_count, element_size, lock_count = reply
        structure = RedisListStructure(
            self,
            epoch,
            name,
            user_name,
            int(user_id),
            token,
            int(list_count),
            int(element_size),
            int(lock_count),
        )
        if self._lost:
            with self._lost_lock:  # attached: the tokens its lost connections left are gone
                self._lost.pop((name, user_name), None)
        self._leases.add(structure)
        self.client.bind(epoch, structure, meta)
        return structure

    def forget(self, structure: RedisListStructure) -> None:
        """Stop renewing a connection's lease (it disconnected)."""
        self._leases.discard(structure)

    def lost(self, structure: RedisListStructure) -> None:
        """A connection's server restarted or was replaced: stop its lease, keep its token."""
        self._leases.discard(structure)
        with self._lost_lock:
            self._lost.setdefault((structure.structure_name, structure.user_name), set()).add(
                (structure.user_id, structure.token)
            )

    def _end_lost_leases(self, name: str, user_name: str) -> bool:
        """End the leases lost connections of ``user_name`` left; whether one was ended."""
        with self._lost_lock:
            lost = self._lost.pop((name, user_name), set())
        ended = False
        for user_id, token in lost:
            token_key = f"{keys.PREFIX}:{{{name}}}:t:{user_id}"
            ended |= bool(
                self.client.command("EVAL", _END_LEASE, 1, token_key, token, key=token_key)
            )
        return ended

    def close(self) -> None:
        """Stop renewing leases and close the client's connections.

        Connections made through this facility that were not disconnected stay on the
        structure until their leases lapse; then they count as failed users.
        """
        if not self._closed:
            self._closed = True
            self._leases.close()
            self.client.close()
