"""A private ``redis-server`` for tests and benchmarks: its own port, directory and
socket, no persistence.

Tests get real servers they may kill (SIGKILL, as a crash would) and start again, never
a stand-in.  A missing ``redis-server`` binary is an error, not a reason to skip: the
README's test command installs it (Debian package ``redis-server``).  The environment
variable ``SHAREDQ_REDIS_SERVER`` names another binary to use.  Commands sent to a
server (``RedisServer.command``) need the ``redis`` extra (``pip install sharedq[redis]``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from sharedq.clock import Backoff, retry_until

__all__ = [
    "MISSING",
    "START_TIMEOUT",
    "RedisCluster",
    "RedisSentinel",
    "RedisServer",
    "free_port",
    "make_certificates",
    "redis_server_binary",
]

#: How long a server may take to answer its first PING, in seconds.
START_TIMEOUT = 15.0

#: The error raised when there is no ``redis-server`` binary.
MISSING = (
    "the tests need the redis-server binary on PATH: run `bash scripts/setup.sh --dev` "
    "(it installs the Debian package redis-server when run as root), or install it "
    "yourself (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis)"
)


def redis_server_binary() -> str:
    """The ``redis-server`` to run: ``$SHAREDQ_REDIS_SERVER``, else the one on ``PATH``."""
    found = os.environ.get("SHAREDQ_REDIS_SERVER") or shutil.which("redis-server")
    if not found:
        raise RuntimeError(MISSING)
    return found


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the system's choice)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class RedisServer:
    """One private server; ``start()``, ``kill()``, ``restart()``, ``stop()``, ``save()``.

    ``args`` are extra ``redis-server`` options (``["--maxmemory-policy", "allkeys-lru"]``);
    ``password`` sets ``requirepass``; ``tls`` adds a TLS port with a certificate from a
    private CA made for this server (``ca_path``, ``tls_url``).  The ports stay the same
    across restarts, so clients can reconnect, and so does the directory: a server
    restarted after ``save()`` (or started with persistence in ``args``, e.g.
    ``["--appendonly", "yes"]``) comes back with what it had persisted.
    """

    def __init__(
        self, args: Sequence[str] = (), password: str | None = None, tls: bool = False
    ) -> None:
        self.args = list(args)
        self.password = password
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="sharedq-redis-"))
        self.socket_path = self.dir / "redis.sock"
        self.process: subprocess.Popen[bytes] | None = None
        self.tls_port = free_port() if tls else None
        if tls:
            make_certificates(self.dir)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<RedisServer port={self.port} {state}>"

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``redis://`` URL of database 0, with the password if the server has one."""
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    @property
    def unix_url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"unix://{auth}{self.socket_path}?db=0"

    @property
    def ca_path(self) -> Path:
        """The private CA that signed the server's TLS certificate."""
        return self.dir / "ca.crt"

    @property
    def tls_url(self) -> str:
        """``rediss://`` URL of database 0 that verifies the server against ``ca_path``."""
        assert self.tls_port is not None, "start the server with tls=True"
        auth = f":{self.password}@" if self.password else ""
        return f"rediss://{auth}localhost:{self.tls_port}/0?ssl_ca_certs={self.ca_path}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> RedisServer:
        command = [
            redis_server_binary(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.dir),
            "--unixsocket", str(self.socket_path),
            "--unixsocketperm", "700",
            "--logfile", str(self.dir / "redis.log"),
            *(["--requirepass", self.password] if self.password else []),
            *(self._tls_options() if self.tls_port else []),
            *self.args,
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            self._wait_until_up()
        except BaseException:
            self.stop()  # nothing left behind by a server that did not come up
            raise
        return self

    def _tls_options(self) -> list[str]:
        return [
            "--tls-port", str(self.tls_port),
            "--tls-cert-file", str(self.dir / "server.crt"),
            "--tls-key-file", str(self.dir / "server.key"),
            "--tls-ca-cert-file", str(self.ca_path),
            "--tls-auth-clients", "no",
        ]  # fmt: skip

    def _wait_until_up(self) -> None:
        def up() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited at start: {self._log_tail()}")
            return self.ping()

        if not retry_until(up, timeout_s=START_TIMEOUT, first_pause_s=0.02):
            raise RuntimeError(
                f"redis-server did not answer within {START_TIMEOUT}s: {self._log_tail()}"
            )

    def ping(self) -> bool:
        """Whether the server answers (any reply, even NOAUTH, means it is up)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(64)[:1] in (b"+", b"-")
        except OSError:
            return False

    def command(self, *args: str | bytes | int) -> object:
        """Run one command with redis-py (for tests that set the server up)."""
        import redis

        client = redis.Redis(port=self.port, password=self.password, socket_timeout=10)
        try:
            return client.execute_command(*args)  # type: ignore[no-untyped-call]
        finally:
            client.close()

    def flush(self) -> None:
        """Empty every database and forget cached scripts."""
        self.command("FLUSHALL")
        self.command("SCRIPT", "FLUSH")

    def kill(self) -> None:
        """SIGKILL the server, as a crash would, and reap it."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self._reap()

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and remove its directory."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self._reap()
        shutil.rmtree(self.dir, ignore_errors=True)

    def restart(self) -> RedisServer:
        """Kill the server if it runs and start it again on the same port and directory.

        It comes back empty unless it persisted something: an RDB snapshot taken with
        ``save()`` (loaded as it was then, however old), or an AOF it was started with.
        """
        self.kill()
        return self.start()

    def save(self) -> None:
        """Take an RDB snapshot now (``SAVE``): what a restart will load."""
        self.command("SAVE")

    @property
    def run_id(self) -> str:
        """The server process's ``run_id`` (a new one each start)."""
        info = self.command("INFO", "server")
        assert isinstance(info, dict)
        return str(info["run_id"])

    def _reap(self) -> None:
        if self.process is not None:
            self.process.wait(timeout=10)
            if self.process.stderr is not None:
                self.process.stderr.close()

    def _log_tail(self) -> str:
        log = self.dir / "redis.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        process = self.process
        if process is not None and process.stderr is not None and process.poll() is not None:
            text += process.stderr.read().decode(errors="replace")
        return text[-2000:] or "(no log)"


def make_certificates(directory: Path) -> None:
    """A private CA and a certificate for ``localhost`` signed by it (openssl CLI)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError(
            "the TLS tests need the openssl command: run `bash scripts/setup.sh --dev` "
            "(Debian/Ubuntu: apt-get install openssl)"
        )

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], cwd=directory, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", "/CN=sharedq test CA", "-keyout", "ca.key", "-out", "ca.crt")  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
        "-keyout", "server.key", "-out", "server.csr")  # fmt: skip
    (directory / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "server.crt")  # fmt: skip


class RedisCluster:
    """A private Redis Cluster of ``size`` primaries (no replicas), slots split evenly.

    ``url`` names the first node; a client finds the others from it.
    """

    SLOTS = 16384

    def __init__(self, size: int = 3) -> None:
        # Each node's cluster bus port is given, not port + 10000 (which may be > 65535).
        self.bus_ports = [free_port() for _ in range(size)]
        self.options = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                        "--cluster-node-timeout", "2000"]  # fmt: skip
        self.nodes = [
            RedisServer([*self.options, "--cluster-port", str(bus_port)])
            for bus_port in self.bus_ports
        ]
        #: Replicas added with ``add_replica`` (not in ``nodes``, which are the primaries).
        self.replicas: list[RedisServer] = []
        self.ranges = [
            (n * self.SLOTS // size, (n + 1) * self.SLOTS // size - 1) for n in range(size)
        ]

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def start(self) -> RedisCluster:
        try:
            self._start()
        except BaseException:
            self.stop()  # no node left running by a cluster that did not come up
            raise
        return self

    def _start(self) -> None:
        for node in self.nodes:
            node.start()
        for epoch, (node, (first, last)) in enumerate(zip(self.nodes, self.ranges, strict=True)):
            node.command("CLUSTER", "SET-CONFIG-EPOCH", epoch + 1)
            node.command("CLUSTER", "ADDSLOTSRANGE", first, last)
        for node, bus_port in zip(self.nodes[1:], self.bus_ports[1:], strict=True):
            self.nodes[0].command("CLUSTER", "MEET", "127.0.0.1", node.port, bus_port)
        if not retry_until(
            lambda: all(self._ready(node) for node in self.nodes),
            timeout_s=START_TIMEOUT,
            first_pause_s=0.05,
        ):
            raise RuntimeError("the test cluster did not come up")

    def _ready(self, node: RedisServer) -> bool:
        info = node.command("CLUSTER", "INFO")
        assert isinstance(info, bytes | str)
        text = info.decode() if isinstance(info, bytes) else info
        return "cluster_state:ok" in text and f"cluster_known_nodes:{len(self.nodes)}" in text

    def node_of(self, key: str) -> RedisServer:
        """The node that owns ``key``'s slot (as set up; ``move_slot`` changes it)."""
        from redis.crc import key_slot

        slot = key_slot(key.encode())
        return next(
            node for node, (first, last) in zip(self.nodes, self.ranges, strict=True)
            if first <= slot <= last
        )  # fmt: skip

    def move_slot(self, slot: int, source: RedisServer, target: RedisServer) -> None:
        """Migrate a slot and its keys from ``source`` to ``target``, as resharding does."""
        source_id, target_id = (node.command("CLUSTER", "MYID") for node in (source, target))
        target.command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)  # type: ignore[arg-type]
        source.command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)  # type: ignore[arg-type]
        while keys := source.command("CLUSTER", "GETKEYSINSLOT", slot, 100):
            assert isinstance(keys, list)
            source.command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys)
        for node in self.nodes:
            node.command("CLUSTER", "SETSLOT", slot, "NODE", target_id)  # type: ignore[arg-type]

    def add_replica(self, primary: RedisServer) -> RedisServer:
        """Start a replica of ``primary`` in the cluster and wait until it is in sync.

        When ``primary`` dies, the cluster promotes it (after the node timeout, 2 s).
        """
        bus_port = self.bus_ports[self.nodes.index(primary)]
        for attempt in range(3):  # a free port may be taken before the server binds it
            replica = RedisServer([*self.options, "--cluster-port", str(free_port())])
            try:
                replica.start()
                break
            except RuntimeError:
                if attempt == 2:
                    raise
        self.replicas.append(replica)
        replica.command("CLUSTER", "MEET", "127.0.0.1", primary.port, bus_port)
        primary_id = primary.command("CLUSTER", "MYID")
        assert isinstance(primary_id, bytes | str)
        backoff = Backoff(timeout_s=START_TIMEOUT, first_pause_s=0.05)  # for both waits
        refused: list[Exception] = []

        def replicating() -> bool:
            try:
                replica.command("CLUSTER", "REPLICATE", primary_id)
            except Exception as error:  # it has not heard of the primary yet
                refused.append(error)
                return False
            return True

        def in_sync() -> bool:
            info = replica.command("INFO", "replication")
            assert isinstance(info, dict)
            return bool(info.get("master_link_status") == "up")

        if not backoff.retry(replicating):
            raise refused[-1]
        if not backoff.retry(in_sync):
            raise RuntimeError("the test replica did not come in sync")
        return replica

    def flush(self) -> None:
        for node in self.nodes:
            node.flush()

    def stop(self) -> None:
        for node in [*self.nodes, *self.replicas]:
            node.stop()


class RedisSentinel(RedisServer):
    """A private Redis Sentinel watching ``primary`` as ``service``: a failover starts
    ``down_after_ms`` after the primary stops answering (Redis's default is 30 s; a
    test wants it soon).  ``failover_timeout_ms`` stays long: shorter, a lone sentinel
    may fail over again and again between the replicas.  ``url`` is the
    ``redis+sentinel://`` URL of the service."""

    def __init__(
        self,
        primary: RedisServer,
        service: str = "sharedq",
        *,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 60_000,
    ) -> None:
        super().__init__()
        self.primary = primary
        self.service = service
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.port}/{self.service}/0"

    def start(self) -> RedisSentinel:
        config = self.dir / "sentinel.conf"  # a sentinel rewrites its own file
        config.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {self.dir}\n"
            f"logfile {self.dir / 'redis.log'}\n"
            f"sentinel monitor {self.service} 127.0.0.1 {self.primary.port} 1\n"
            f"sentinel down-after-milliseconds {self.service} {self.down_after_ms}\n"
            f"sentinel failover-timeout {self.service} {self.failover_timeout_ms}\n"
        )
        self.process = subprocess.Popen(
            [redis_server_binary(), str(config), "--sentinel"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            self._wait_until_up()
        except BaseException:
            self.stop()
            raise
        return self

    def settled(self) -> tuple[str, int] | None:
        """The primary once no failover is under way and the sentinel sees it up (what a
        client asking the sentinel is then told), else ``None``."""
        reply = self.command("SENTINEL", "MASTER", self.service)
        assert isinstance(reply, dict), reply  # redis-py parses it into one
        flags = reply.get(b"flags", reply.get("flags"))
        return self.master() if flags in (b"master", "master") else None

    def master(self) -> tuple[str, int]:
        """Where the sentinel says the service's primary is now."""
        reply = self.command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
        assert isinstance(reply, list | tuple) and len(reply) == 2, reply
        host, port = reply
        return host.decode() if isinstance(host, bytes) else str(host), int(port)
