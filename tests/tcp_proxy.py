"""A TCP proxy between a client and a server that can lose a reply on purpose.

``drop_next_reply()`` makes the proxy let the next request through, swallow the
server's reply to it and cut the client's connection, as a network failure after the
server did the work would: what a client must then do without applying the request
twice.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable


class ReplyDroppingProxy:
    """Listens on ``port`` and forwards every connection to ``target_port``."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._armed = threading.Event()
        self._meanwhile: Callable[[], None] | None = None
        self.dropped = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def drop_next_reply(self, meanwhile: Callable[[], None] | None = None) -> None:
        """Lose the next reply; ``meanwhile`` runs once it is lost, before the client
        sees its connection cut (so before it resends): another client's change."""
        self._meanwhile = meanwhile
        self._armed.set()

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target_port))
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, replies: bool) -> None:
        try:
            while data := source.recv(65536):
                if replies and self._armed.is_set():
                    self._armed.clear()
                    self.dropped += 1
                    meanwhile, self._meanwhile = self._meanwhile, None
                    if meanwhile is not None:
                        meanwhile()
                    break  # the reply is lost, and the connection with it
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
                end.close()
