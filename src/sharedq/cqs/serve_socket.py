"""A CQS in a process of its own (issue 17): its requests served on a local socket.

:func:`serve` listens on a Unix domain socket in a directory only its owner may enter
(0700) with :mod:`multiprocessing.connection`, whose handshake proves that the client
holds the authentication key (an HMAC challenge both ways) before any request is read.
One client at a time: the client system this CQS serves (another is refused with
``ALREADY_CONNECTED``).  Bodies are msgpack (:mod:`sharedq.cqs.remote_codec`):

* the server's hello: ``["hello", name, system, pairs]``;
* a request: ``[id, method, args, kwargs]``, its reply ``["ok", id, value]`` or
  ``["error", id, reason code, detail]``; requests are served concurrently (a pool),
  as a :class:`~sharedq.cqs.CQS` is safe from several threads;
* an event, pushed when a registered queue goes from empty to non-empty (the CQS's
  own listener, no polling): ``["work", kind, queue]``.

A client that goes away without CQSDISC (its process killed) is disconnected on its
behalf: its locked messages stay on the lock queue for its restart, its registrations
go.  The client side is :class:`sharedq.cqs.remote.RemoteCQS`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import stat
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection, Listener
from pathlib import Path
from typing import Any

from sharedq.cqs import remote_codec as codec
from sharedq.cqs.errors import CQSError, CQSReason, cqs_error
from sharedq.cqs.layout import Kind
from sharedq.cqs.server import CQS

logger = logging.getLogger("sharedq.cqs")

#: The requests a remote client may make: the CQS's public requests, nothing else.
REQUESTS = frozenset(
    {
        "connect",
        "disconnect",
        "stop_dead",
        "register",
        "deregister",
        "registered",
        "notifications",
        "put",
        "read",
        "browse",
        "browse_locked",
        "move",
        "delete",
        "unlock",
        "resync",
        "cold_start_client",
        "cold_queue",
        "locks",
        "query",
        "statistics",
        "display_overflowq",
        "checkpoint",
    }
)
#: Requests served at once for one client.
WORKERS = 8
#: How often the serving thread looks whether it was told to stop, seconds.
STOP_POLL_S = 0.1
#: Length of a generated authentication key, bytes (before hex).
KEY_BYTES = 32


def authkey_file(path: str | os.PathLike[str], *, create: bool = False) -> bytes:
    """The authentication key a file holds (its first line); with ``create``, a new
    random one written to a new file readable by its owner only.  A key file others
    may read is refused (``NOT_AUTHORIZED``): the key is the only credential."""
    where = Path(path)
    if create and not where.exists():
        fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(secrets.token_hex(KEY_BYTES) + "\n")
    try:
        mode = stat.S_IMODE(where.stat().st_mode)
        text = where.read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise cqs_error(CQSReason.BAD_ARGUMENT, f"authentication key {where}: {error}") from error
    if mode & 0o077:
        raise cqs_error(
            CQSReason.NOT_AUTHORIZED, f"authentication key {where} is readable by others ({mode:o})"
        )
    if not text or not text[0].strip():
        raise cqs_error(CQSReason.BAD_ARGUMENT, f"authentication key {where} is empty")
    return text[0].strip().encode("ascii")


def _prepare(address: str) -> None:
    """The socket's directory made (0700) or checked private; a socket left by a killed
    server removed (nobody answers on it); one that answers refused."""
    where = Path(address)
    where.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    mode = stat.S_IMODE(where.parent.stat().st_mode)
    if mode & 0o077:
        detail = f"socket directory {where.parent} is open to others ({mode:o})"
        raise cqs_error(CQSReason.NOT_AUTHORIZED, detail)
    if not where.exists():
        return
    if not stat.S_ISSOCK(where.stat().st_mode):
        raise cqs_error(CQSReason.BAD_ARGUMENT, f"{where} exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(address)
    except (ConnectionRefusedError, FileNotFoundError):
        where.unlink(missing_ok=True)  # a dead server's
        return
    finally:
        probe.close()
    raise cqs_error(CQSReason.ALREADY_CONNECTED, f"a server is listening on {where}")


class _Session:
    """One client's connection: its requests served, its events pushed."""

    def __init__(self, cqs: CQS, conn: Connection) -> None:
        self._cqs = cqs
        self._conn = conn
        self._send_lock = threading.Lock()
        self._clean = False  # the client disconnected or stopped its CQS itself

    def send(self, body: list[Any]) -> None:
        data = codec.pack(body)
        with self._send_lock, contextlib.suppress(OSError):  # the client is gone
            self._conn.send_bytes(data)

    def work(self, kind: Kind, queue: bytes) -> None:
        self.send(["work", kind, queue])

    def run(self) -> None:
        cqs = self._cqs
        self.send(["hello", cqs.name, cqs.system, list(cqs.pairs.values())])
        cqs.on_work = self.work
        with ThreadPoolExecutor(WORKERS, thread_name_prefix=f"cqs-serve-{cqs.name}") as pool:
            while True:
                try:
                    data = self._conn.recv_bytes()
                except (EOFError, OSError):
                    break
                pool.submit(self._serve, data)
        if not self._clean:
            logger.warning("%s: its client went away without CQSDISC: disconnecting", cqs.name)
            with contextlib.suppress(CQSError):
                cqs.disconnect()  # its locks stay on the lock queue for its restart
        cqs.on_work = None

    def _serve(self, data: bytes) -> None:
        ident: Any = None
        try:
            ident, method, args, kwargs = codec.unpack(data)
            if method not in REQUESTS:
                raise cqs_error(CQSReason.BAD_ARGUMENT, f"no request {method!r}")
            value = getattr(self._cqs, method)(*args, **kwargs)
            if method in ("disconnect", "stop_dead"):
                self._clean = True
            self.send(["ok", ident, None if method == "connect" else value])
        except CQSError as error:
            self.send(["error", ident, int(error.reason), error.detail])
        except (TypeError, ValueError) as error:  # a request of the wrong shape
            self.send(["error", ident, int(CQSReason.BAD_ARGUMENT), str(error)])
        except Exception as error:  # never leave a client waiting
            logger.exception("%s: %r failed", self._cqs.name, data[:64])
            self.send(["error", ident, int(CQSReason.STRUCTURE_ERROR), repr(error)])


def serve(
    cqs: CQS,
    address: str,
    authkey: bytes,
    *,
    ready: Callable[[], None] | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Serve ``cqs`` to one client at a time on the Unix socket ``address`` until
    ``stop`` is set or the process is told to end (SIGTERM in ``sharedq cqs serve``);
    then the CQS disconnects (CQSDISC) if a client left it connected.

    ``ready`` is called once the socket listens (a launcher waits for it, not a
    sleep).  The CQS is connected by its client's ``connect`` request, not here.
    """
    _prepare(address)
    listener = Listener(address, family="AF_UNIX", authkey=authkey)
    os.chmod(address, 0o600)
    active = threading.Lock()

    def attend(conn: Connection) -> None:
        if not active.acquire(blocking=False):
            refusal = ["error", None, int(CQSReason.ALREADY_CONNECTED), f"{cqs.name} has a client"]
            with contextlib.suppress(OSError):
                conn.send_bytes(codec.pack(refusal))
            conn.close()
            return
        try:
            _Session(cqs, conn).run()
        finally:
            conn.close()
            active.release()

    def accept_all() -> None:
        while stop is None or not stop.is_set():
            try:
                conn = listener.accept()
            except (OSError, EOFError, AuthenticationError) as error:  # failed the handshake
                if stop is not None and stop.is_set():
                    break
                logger.warning("%s: a connection refused: %s", cqs.name, error)
                continue
            if stop is not None and stop.is_set():
                conn.close()
                break
            threading.Thread(target=attend, args=(conn,), daemon=True).start()

    try:
        if ready is not None:
            ready()
        if stop is None:
            accept_all()
            return
        acceptor = threading.Thread(target=accept_all, name=f"cqs-accept-{cqs.name}", daemon=True)
        acceptor.start()
        # The calling (main) thread waits in short steps, not in accept: a signal the
        # kernel hands to another thread (any of ours may take SIGTERM) interrupts no
        # system call here, and its Python handler runs only when this thread next
        # runs Python code, so a wait without end would never see it.
        while not stop.wait(STOP_POLL_S):
            pass
        _poke(address)  # wake the accept
        acceptor.join(STOP_POLL_S * 20)
    finally:
        listener.close()
        with contextlib.suppress(CQSError):
            cqs.disconnect()


def _poke(address: str) -> None:
    """Connect to the listener so that its accept returns (the handshake then fails)."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as poke:
        poke.connect(address)
