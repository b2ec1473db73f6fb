"""Which server a request goes to, and the calling thread's connection to it.

Each thread has a connection of its own to each server it talks to, kept for the
thread's life: a request is one packed write and one read on it (hiredis packs and
parses), without a pool checkout per command.  One server is the usual case; on a
Redis Cluster the structure's hash slot picks the node, from a slot map read with
``CLUSTER SLOTS`` and corrected by the MOVED replies of nodes that no longer own a
slot.

A client has one ``Nodes`` per epoch (see ``Epoch`` in ``client.py``): the sockets of
an epoch reach only the servers that epoch knows, so a user connection bound to it
never talks to a server that restarted or took over since.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, Protocol

import hiredis
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

#: Packs a command for the wire (hiredis, in C).
pack_command: Callable[[tuple[Any, ...]], bytes] = hiredis.pack_command

#: A cluster node's host and port; ``None`` for the one server of a plain setup.
Address = tuple[str, int] | None


class Connection(Protocol):
    """What we use of a redis-py connection (which connects itself when it must)."""

    def send_packed_command(self, command: list[bytes], check_health: bool = True) -> None: ...

    def read_response(self) -> Any: ...

    def disconnect(self) -> None: ...


_every: weakref.WeakSet[Nodes] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # The child's copies of the parent's connections are dropped unused (redis-py does
    # not shut a socket down from another process than the one that opened it).
    for nodes in list(_every):
        nodes.forget_connections()


os.register_at_fork(after_in_child=_after_fork_in_child)


def call(connection: Connection, *args: Any) -> Any:
    """One command on one connection: its reply, or the error it raised."""
    connection.send_packed_command([pack_command(args)], False)
    return connection.read_response()


class Nodes:
    """The calling thread's connection to the server a key lives on (one server)."""

    def __init__(self, make: Callable[[Address], Connection]) -> None:
        self._make = make
        self._local = threading.local()
        self._all: weakref.WeakSet[Connection] = weakref.WeakSet()
        self._lock = threading.Lock()
        _every.add(self)

    def forget_connections(self) -> None:
        """Start afresh: a forked child must not talk on its parent's sockets."""
        self._local = threading.local()
        self._all = weakref.WeakSet()

    def connection(self, key: str | None = None) -> Connection:
        try:
            connection: Connection = self._local.connection
        except AttributeError:
            connection = self._local.connection = self._new(None)
        return connection

    def connection_to(self, address: Address) -> Connection:
        return self.connection()

    def address_of(self, key: str | None) -> Address:
        """The server ``key`` lives on: the one server."""
        return None

    def slot_of(self, key: str | None) -> int | None:
        """The cluster hash slot of ``key``; none with one server."""
        return None

    def read_slots(self) -> list[Address] | None:
        """The cluster's slot map as a node tells it now; none with one server."""
        return None

    @property
    def slots(self) -> list[Address] | None:
        """The slot map requests follow; none with one server."""
        return None

    def addresses(self) -> list[Address]:
        """Every primary: the one server."""
        return [None]

    def moved(self, slot: int, host: str, port: int) -> None:
        """A cluster node's MOVED reply; never happens with one server."""

    def refresh(self) -> None:
        """Reread the cluster's slot map; nothing to reread with one server."""

    def close(self) -> None:
        with self._lock:
            connections = list(self._all)
        for connection in connections:
            connection.disconnect()

    def _new(self, address: Address) -> Connection:
        # Kept in the thread's locals: a thread that ends drops its connections.
        connection = self._make(address)
        with self._lock:
            self._all.add(connection)
        return connection


class ClusterNodes(Nodes):
    """The calling thread's connection to the cluster node that owns a key's slot."""

    def __init__(
        self,
        make: Callable[[Address], Connection],
        seed: Address,
        slots: list[Address] | None = None,
    ) -> None:
        super().__init__(make)
        assert seed is not None
        self._seed = seed
        self._slots: list[Address] = (
            [seed] * REDIS_CLUSTER_HASH_SLOTS if slots is None else list(slots)
        )

    def address_of(self, key: str | None) -> Address:
        if key is None:
            return self._seed
        return self._slots[key_slot(key.encode("utf-8"))]

    def slot_of(self, key: str | None) -> int | None:
        return None if key is None else key_slot(key.encode("utf-8"))

    @property
    def slots(self) -> list[Address]:
        return self._slots

    def connection(self, key: str | None = None) -> Connection:
        if key is None:
            return self.connection_to(self._seed)
        return self.connection_to(self._slots[key_slot(key.encode("utf-8"))])

    def connection_to(self, address: Address) -> Connection:
        try:
            connections: dict[Address, Connection] = self._local.nodes
        except AttributeError:
            connections = self._local.nodes = {}
        connection = connections.get(address)
        if connection is None:
            connection = connections[address] = self._new(address)
        return connection

    def addresses(self) -> list[Address]:
        return [*sorted({address for address in self._slots if address is not None})]

    def moved(self, slot: int, host: str, port: int) -> None:
        self._slots[slot] = (host, port)

    def refresh(self) -> None:
        """Follow the slot map the first node that answers tells (a node may be down)."""
        self._slots = self.read_slots()

    def read_slots(self) -> list[Address]:
        """The slot map as the first node that answers tells it; followed by nobody yet.

        Slots no node serves keep the owner they had here.
        """
        last: Exception | None = None
        for address in [self._seed, *self.addresses()]:
            try:
                ranges = call(self.connection_to(address), "CLUSTER", "SLOTS")
            except Exception as exc:  # try the next node
                last = exc
                continue
            slots = list(self._slots)
            for start, end, primary, *_ in ranges:
                host = primary[0].decode() or self._seed[0]
                slots[start : end + 1] = [(host, int(primary[1]))] * (end - start + 1)
            return slots
        assert last is not None
        raise last
