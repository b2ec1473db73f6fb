"""The client's side of a CQS in a process of its own (:mod:`sharedq.cqs.serve_socket`).

A :class:`RemoteCQS` offers the requests of :class:`~sharedq.cqs.CQS`
(:class:`~sharedq.cqs.service.CQSService`) and forwards each over an authenticated
Unix socket; the server's "queue non-empty" events come back over the same socket
and are handed to ``on_work`` and :meth:`RemoteCQS.wait_for_work` by a thread of
their own (so a callback may make requests).  When the server process dies, every
request waiting and every later one is refused with ``NOT_CONNECTED``, as the
requests of an in-process CQS after ``stop_dead`` are: nothing hangs.  ``connect``
opens the socket again, so that a client reconnects to a restarted server.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import queue as queues
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection
from typing import Any, Literal

from sharedq.cf import StructureStats
from sharedq.clock import SYSTEM_CLOCK, Clock
from sharedq.cqs import remote_codec as codec
from sharedq.cqs.errors import CQSError, CQSReason, cqs_error
from sharedq.cqs.layout import Kind
from sharedq.cqs.message import Message, QueueCounts
from sharedq.cqs.names import check_collection
from sharedq.cqs.notify import Work, WorkCallback
from sharedq.cqs.pair import StructurePair
from sharedq.cqs.resync import Resynced
from sharedq.cqs.site import LockToken
from sharedq.cqs.uow import TokenSource, Uow

logger = logging.getLogger("sharedq.cqs")
_Slot = list[Any]  # [event, outcome]: outcome ("ok", value) or ("error", CQSError)
#: The first pause before looking for a restarted server, seconds (then doubled).
WATCH_FIRST_S = 0.05
#: The longest pause between looks for a restarted server, seconds.
WATCH_LONGEST_S = 1.0


def _gone(detail: str) -> CQSError:
    return cqs_error(CQSReason.NOT_CONNECTED, detail)


def _why(name: str, why: object) -> str:
    return f"{name}: the CQS process is gone ({why})"


class _Link:
    """One connection to the server: requests out, replies and events in."""

    def __init__(
        self,
        name: str,
        conn: Connection,
        events: queues.SimpleQueue[Any],
        on_broken: Callable[[_Link], None] | None = None,
    ) -> None:
        self._name = name
        self._conn = conn
        self._events = events
        self._on_broken = on_broken
        self._lock = threading.Lock()
        self._pending: dict[int, _Slot] = {}
        self._ids = itertools.count(1)
        #: Why the link is broken (``None``: it is not).
        self.broken: str | None = None
        self._reader = threading.Thread(target=self._read, name=f"cqs-remote-{name}", daemon=True)
        self._reader.start()

    def call(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], timeout_s: float | None
    ) -> Any:
        slot: _Slot = [threading.Event(), None]
        with self._lock:
            if self.broken is not None:
                raise _gone(self.broken)
            ident = next(self._ids)
            self._pending[ident] = slot
            try:
                self._conn.send_bytes(codec.pack([ident, method, list(args), kwargs]))
            except OSError as error:
                self._pending.pop(ident, None)
                self._fail(_why(self._name, error))
                raise _gone(self.broken or "") from error
        if not slot[0].wait(timeout_s):
            with self._lock:  # no answer: taken for gone, as a dead server
                if ident in self._pending:  # (not answered meanwhile)
                    self._fail(_why(self._name, f"no reply to {method} in {timeout_s} s"))
            slot[0].wait()  # set by the failure, or by the answer that came meanwhile
        outcome, value = slot[1]
        if outcome == "error":
            raise value
        return value

    def _read(self) -> None:
        why: object = "end of connection"
        while True:
            try:
                body = codec.unpack(self._conn.recv_bytes())
            except (EOFError, OSError, CQSError) as error:
                why = f"{type(error).__name__} {error}".strip()
                break
            if body[0] == "work":
                self._events.put((body[1], body[2]))
                continue
            _, ident, *rest = body
            outcome = (
                ("ok", rest[0])
                if body[0] == "ok"
                else ("error", cqs_error(CQSReason(rest[0]), rest[1]))
            )
            with self._lock:
                slot = self._pending.pop(ident, None)
            if slot is not None:
                slot[1] = outcome
                slot[0].set()
        with self._lock:
            self._fail(_why(self._name, why))
        if self._on_broken is not None:
            self._on_broken(self)

    def _fail(self, why: str) -> None:
        """Under the lock: the link is broken; wake every request waiting on it."""
        if self.broken is None:
            self.broken = why
        for slot in self._pending.values():
            slot[1] = ("error", _gone(self.broken))
            slot[0].set()
        self._pending.clear()

    def close(self) -> None:
        """Shut the socket down (which wakes the reader's wait), then close it."""
        with contextlib.suppress(OSError):
            sock = socket.socket(fileno=os.dup(self._conn.fileno()))
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        if self._reader is not threading.current_thread():
            self._reader.join()
        with contextlib.suppress(OSError):
            self._conn.close()


class RemoteCQS:
    """A CQS served by another process on the Unix socket ``address``.

    Made while the server is listening: its hello gives the CQS's name, system id and
    structure pairs.  ``authkey``: the server's key (``sharedq.cqs.serve_socket.authkey_file``);
    a wrong one is ``NOT_AUTHORIZED``, no server there ``NOT_CONNECTED``.
    ``on_work``: as :class:`~sharedq.cqs.CQS`'s, called from this object's event thread.
    ``clock``: for the units of work made here (``new_uow``; a put with no ``uow`` gets
    one made here, never one of the server's own token source).
    ``timeout_s``: a request not answered in that time takes the server for gone
    (``NOT_CONNECTED``; a server that hangs rather than dies); ``None``: wait for the
    answer or the server's end, whichever comes.  It may be changed at any time.
    ``on_restart``: called (from a watcher thread of this object) when a server is
    back on ``address`` after the link was lost (the server's end, not ``close``);
    the link is open again, the CQS not yet connected.  It may be set at any time.
    """

    def __init__(
        self,
        address: str,
        authkey: bytes,
        *,
        on_work: WorkCallback | None = None,
        clock: Clock | None = None,
        timeout_s: float | None = None,
        on_restart: Callable[[], None] | None = None,
    ) -> None:
        if timeout_s is not None and not timeout_s > 0:
            raise cqs_error(CQSReason.BAD_ARGUMENT, f"timeout_s {timeout_s!r}: above 0, or None")
        self.timeout_s = timeout_s
        self.address = address
        self._authkey = authkey
        self.on_work = on_work
        self.on_restart = on_restart
        #: How many times a restarted server was found by the watcher.
        self.restarts_seen = 0
        self._watcher: threading.Thread | None = None
        self._watch_lock = threading.Lock()
        self.clock = clock or SYSTEM_CLOCK
        self.tokens = TokenSource(self.clock)
        self._work = Work()
        self._events: queues.SimpleQueue[Any] = queues.SimpleQueue()
        self._told = 0
        self.name = "?"
        self._link: _Link | None = None
        self._deliverer: threading.Thread | None = None
        self._link_lock = threading.Lock()
        name, system, pairs = self._open()
        self.name, self.system = name, system
        self.pairs: dict[Kind, StructurePair] = {p.kind: p for p in pairs}

    def __repr__(self) -> str:
        state = "linked" if self._live() is not None else "not linked"
        return f"<RemoteCQS {self.name} system={self.system} at {self.address} {state}>"

    @property
    def structures(self) -> list[str]:
        return [p.primary for p in self.pairs.values()]

    # -- the link ----------------------------------------------------------------------------

    def _open(self) -> tuple[str, str, list[StructurePair]]:
        try:
            conn = Client(self.address, family="AF_UNIX", authkey=self._authkey)
        except AuthenticationError as error:
            raise cqs_error(
                CQSReason.NOT_AUTHORIZED, f"{self.address}: wrong authentication key"
            ) from error
        except (OSError, EOFError) as error:
            raise _gone(_why(self.name, f"no server on {self.address}: {error}")) from error
        try:
            hello = codec.unpack(conn.recv_bytes())
        except (OSError, EOFError) as error:
            conn.close()
            raise _gone(_why(self.name, error)) from error
        if hello[0] == "error":
            conn.close()
            raise cqs_error(CQSReason(hello[2]), hello[3])
        _, name, system, pairs = hello
        if self.name != "?" and (name, system) != (self.name, self.system):
            conn.close()
            raise cqs_error(
                CQSReason.BAD_ARGUMENT,
                f"{self.address} serves {name} for {system}, not {self.name} for {self.system}",
            )
        self._link = _Link(name, conn, self._events, self._broken)
        if self._deliverer is None or not self._deliverer.is_alive():
            self._deliverer = threading.Thread(
                target=self._deliver, name=f"cqs-events-{name}", daemon=True
            )
            self._deliverer.start()
        return name, system, list(pairs)

    def _broken(self, link: _Link) -> None:
        """The reader of ``link`` ended (the server went away): watch for its return."""
        if self.on_restart is None or self._link is not link:
            return  # not watched, or dropped on purpose (close, disconnect, stop_dead)
        with self._watch_lock:  # not the link lock: a connect may hold it, closing us
            if self._watcher is not None and self._watcher.is_alive():
                return
            self._watcher = threading.Thread(
                target=self._watch, args=(link,), name=f"cqs-watch-{self.name}", daemon=True
            )
            self._watcher.start()

    def _watch(self, lost: _Link) -> None:
        """Look for a server on the socket again, backing off, until one answers, the
        link is replaced or dropped (a ``connect`` or ``close`` meanwhile), or a server
        there is not ours (logged: no retry helps)."""
        pause = WATCH_FIRST_S
        while True:
            time.sleep(pause)
            pause = min(pause * 2, WATCH_LONGEST_S)
            with self._link_lock:
                if self._link is not lost:
                    return
                if not os.path.exists(self.address):
                    continue  # the path reappears when a server listens again
                self._watching(False)  # the new link's loss, even at once, is watched anew
                try:
                    self._open()  # the hello: the new link replaces the lost one
                except CQSError as error:
                    self._watching(True)
                    if error.reason is CQSReason.NOT_CONNECTED:
                        continue  # nobody answers yet (a dead server's socket file)
                    logger.warning("%s: not reconnecting to %s: %s", self.name, self.address, error)
                    return
                lost.close()
                self.restarts_seen += 1
            break
        callback = self.on_restart
        if callback is not None:
            try:
                callback()
            except Exception:  # a client's callback must not be lost silently
                logger.exception("%s: restart callback failed", self.name)

    def _watching(self, on: bool) -> None:
        """This thread is (``on``) or is no more the watcher."""
        with self._watch_lock:
            me = threading.current_thread()
            if on and self._watcher is None:
                self._watcher = me
            elif not on and self._watcher is me:
                self._watcher = None

    def _live(self) -> _Link | None:
        link = self._link
        return link if link is not None and link.broken is None else None

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        link = self._link
        if link is None:
            raise cqs_error(CQSReason.NOT_CONNECTED, f"{self.name} is not linked (call connect)")
        return link.call(method, args, kwargs, self.timeout_s)

    def _deliver(self) -> None:
        """The event thread: each "queue non-empty" to ``wait_for_work`` and ``on_work``."""
        while True:
            event = self._events.get()
            if event is None:  # the link was dropped, its reader ended before
                return
            kind, queue = event
            self._told += 1
            self._work.put((kind, queue))
            callback = self.on_work
            if callback is not None:
                try:
                    callback(kind, queue)
                except Exception:  # a client's callback must not stop the thread
                    logger.exception("work callback failed for %r", queue)

    def _drop_link(self) -> None:
        with self._link_lock:
            link, self._link = self._link, None
            deliverer, self._deliverer = self._deliverer, None
        if link is not None:
            link.close()
        if deliverer is not None:  # the events already read are handed on first
            self._events.put(None)
            if deliverer is not threading.current_thread():
                deliverer.join()

    # -- CQSCONN / CQSDISC -------------------------------------------------------------------

    def connect(self) -> RemoteCQS:
        """CQSCONN in the server's process; the socket is opened again first if the
        server was restarted (the same CQS name and system, else ``BAD_ARGUMENT``)."""
        with self._link_lock:
            if self._live() is None:
                old, self._link = self._link, None  # not watched once replaced
                if old is not None:
                    old.close()
                self._open()
        self._call("connect")
        return self

    def disconnect(self) -> None:
        """CQSDISC in the server's process, then the socket closed; nothing to do when
        the server is gone (as an in-process CQS that stopped dead)."""
        if self._live() is not None:
            with contextlib.suppress(CQSError):
                self._call("disconnect")
        self._drop_link()

    def stop_dead(self) -> None:
        """The server's CQS stops dead (``CQS.stop_dead``: nothing more written, its
        connections left as a killed process leaves them), and the socket is closed."""
        if self._live() is not None:
            with contextlib.suppress(CQSError):
                self._call("stop_dead")
        self._drop_link()

    def close(self) -> None:
        """Close the socket without a request (the server disconnects on our behalf)."""
        self._drop_link()

    def __enter__(self) -> RemoteCQS:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.disconnect()

    # -- the requests ------------------------------------------------------------------------

    def register(self, queue: object, *, kind: Kind = Kind.MSGQ) -> bool:
        return bool(self._call("register", queue, kind=kind))

    def deregister(self, queue: object, *, kind: Kind = Kind.MSGQ) -> None:
        self._call("deregister", queue, kind=kind)

    def registered(self) -> list[tuple[Kind, bytes]]:
        found: list[tuple[Kind, bytes]] = self._call("registered")
        return found

    def notifications(self) -> dict[str, int]:
        """The server's counts; ``received``: the events that reached this process."""
        counts: dict[str, int] = self._call("notifications")
        return {**counts, "received": self._told}

    def wait_for_work(self, timeout: float | None = None) -> tuple[Kind, bytes] | None:
        return self._work.get(timeout)

    def new_uow(self) -> Uow:
        return Uow.new(self.system, self.tokens)

    def put(
        self,
        queue: object,
        body: bytes | Sequence[bytes],
        *,
        kind: Kind = Kind.MSGQ,
        uow: Uow | bytes | None = None,
        recoverable: bool = True,
        local: bool = False,
    ) -> LockToken | bytes:
        if uow is None:
            uow = self.new_uow()
        sent = body if isinstance(body, bytes) else list(body)
        result: LockToken | bytes = self._call(
            "put", queue, sent, kind=kind, uow=uow, recoverable=recoverable, local=local
        )
        return result

    def read(self, queue: object, *, kind: Kind = Kind.MSGQ) -> Message | None:
        found: Message | None = self._call("read", queue, kind=kind)
        return found

    def browse(
        self, queue: object, *, kind: Kind = Kind.MSGQ, limit: int | None = None
    ) -> list[Message]:
        found: list[Message] = self._call("browse", queue, kind=kind, limit=limit)
        return found

    def browse_locked(self, token: LockToken) -> Message:
        found: Message = self._call("browse_locked", token)
        return found

    def move(
        self, source: LockToken | object, to_queue: object, *, kind: Kind = Kind.MSGQ
    ) -> bytes | None:
        moved: bytes | None = self._call("move", source, to_queue, kind=kind)
        return moved

    def delete(self, token: LockToken) -> None:
        self._call("delete", token)

    def unlock(
        self,
        token: LockToken,
        *,
        first: bool = True,
        to_queue: object = None,
        force: bool = False,
    ) -> None:
        self._call("unlock", token, first=first, to_queue=to_queue, force=force)

    def resync(self, done: Iterable[Uow | bytes] = (), *, kind: Kind = Kind.MSGQ) -> Resynced:
        report: Resynced = self._call("resync", list(check_collection(done, "done")), kind=kind)
        return report

    def cold_start_client(self, *, kind: Kind = Kind.MSGQ) -> list[Message]:
        moved: list[Message] = self._call("cold_start_client", kind=kind)
        return moved

    def cold_queue(self, *, kind: Kind = Kind.MSGQ) -> list[Message]:
        found: list[Message] = self._call("cold_queue", kind=kind)
        return found

    def locks(self, *, kind: Kind = Kind.MSGQ, owner: str | None = None) -> list[LockToken]:
        found: list[LockToken] = self._call("locks", kind=kind, owner=owner)
        return found

    def query(self, queues: Iterable[object], *, kind: Kind = Kind.MSGQ) -> list[QueueCounts]:
        found: list[QueueCounts] = self._call(
            "query", list(check_collection(queues, "queues")), kind=kind
        )
        return found

    def statistics(self, *, kind: Kind = Kind.MSGQ) -> StructureStats:
        stats: StructureStats = self._call("statistics", kind=kind)
        return stats

    def display_overflowq(self, *, kind: Kind = Kind.MSGQ) -> dict[str, object]:
        state: dict[str, object] = self._call("display_overflowq", kind=kind)
        return state

    def checkpoint(self, scope: Literal["system", "structure"] = "system") -> None:
        self._call("checkpoint", scope)
