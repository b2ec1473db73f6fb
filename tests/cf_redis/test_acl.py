"""The ACL of docs/redis.md, run as written there on a private Redis server.

The ``ACL SETUSER`` lines are read out of the document itself, so that what it tells
operators to grant is what these tests grant: the administrator's user passes the
list-structure conformance suite; a group's user runs queue managers with a recovery
log on its own structures and is refused on any other, and neither may run what
sharedq never sends (``FLUSHALL`` and the rest of ``@dangerous``).
"""

from __future__ import annotations

import re
import shlex
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
from redis import exceptions as rx

import sharedq.cf.redis
from sharedq.cf import AuthenticationFailed, CFReason, CouplingFacility, open_facility
from sharedq.mq import MQReason, NotAuthorized, QueueManager, structure_params
from sharedq.recovery import RecoverySettings
from sharedq.testing.conformance import CHECKS, check_list_structure
from sharedq.testing.redis_server import RedisServer

ServerFactory = Callable[..., RedisServer]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "redis.md"
LUA = Path(sharedq.cf.redis.__file__).parent / "lua"
#: The structures the document's group user is given, and one it is not.
OWN = ("QSG1ADMIN", "QSG1APP")
OTHER = "QSG2ADMIN"


def documented() -> dict[str, list[list[str]]]:
    """The ``ACL SETUSER`` lines of the "ACL and TLS" section, by user."""
    section = DOCS.read_text().split("## ACL and TLS", 1)[1].split("\n## ", 1)[0]
    found: dict[str, list[list[str]]] = {}
    for line in section.splitlines():
        if line.startswith("ACL SETUSER "):
            words = shlex.split(line)
            found.setdefault(words[2], []).append(words)
    return found


def rules(user: str) -> list[str]:
    return [rule for words in documented()[user] for rule in words[3:]]


def granted(user: str) -> set[str]:
    """The commands (``name`` or ``name|sub``) the document grants ``user``."""
    return {rule[1:].lower() for rule in rules(user) if rule.startswith("+")}


def secret(user: str) -> str:
    (password,) = [rule[1:] for rule in rules(user) if rule.startswith(">")]
    return password


def function_commands() -> set[str]:
    """Every command sharedq's functions run (``redis.call('HSET', ...)``)."""
    calls: set[str] = set()
    for path in LUA.glob("*.lua"):
        text = path.read_text()
        assert not re.search(r"redis\.p?call\(\s*[^'\"\s]", text), f"{path.name}: a computed call"
        calls |= {c.lower() for c in re.findall(r"redis\.p?call\(\s*['\"](\w+)['\"]", text)}
    return calls


def test_the_document_has_an_administrator_and_a_group_user() -> None:
    users = documented()
    assert set(users) == {"sqadmin", "qsg1"}
    for user in users:
        assert rules(user)[:2] == ["reset", "on"], "each user starts from nothing"
        assert "resetchannels" in rules(user)
    assert [r for r in rules("qsg1") if r.startswith("~")] == [f"~sq:{{{s}}}:*" for s in OWN]
    assert [r for r in rules("sqadmin") if r.startswith("~")] == ["~sq:*"]
    assert granted("sqadmin") - granted("qsg1") == {"function|load", "scan"}
    assert granted("qsg1") < granted("sqadmin")


def test_the_documented_acl_grants_no_category_and_nothing_dangerous(
    redis_servers: ServerFactory,
) -> None:
    server = redis_servers()
    reply = server.command("ACL", "CAT", "dangerous")
    assert isinstance(reply, list)
    dangerous = {name.decode() for name in reply}
    for user in documented():
        assert not [r for r in rules(user) if "@" in r or r in ("allcommands", "allkeys")]
        assert "~*" not in rules(user) and "&*" not in rules(user)
        assert {c.split("|")[0] for c in granted(user)} & dangerous == {"info"}
        assert "info" not in granted(user)  # only its sections


def test_every_command_sharedqs_functions_run_is_granted() -> None:
    """A command added to a function without its grant would fail for ACL users, maybe
    after the function's first write, which Redis does not roll back."""
    calls = function_commands()
    assert {"hset", "zadd", "xadd", "copy"} <= calls
    assert calls - granted("qsg1") == set()
    assert calls - granted("sqadmin") == set()


@contextmanager
def acl_server(redis_servers: ServerFactory) -> Iterator[RedisServer]:
    """A fresh server (no library loaded yet) with the document's users."""
    server = redis_servers()
    for lines in documented().values():
        for words in lines:
            assert server.command(*words) == b"OK", words
    yield server


def url(server: RedisServer, user: str) -> str:
    return f"redis://{user}:{secret(user)}@127.0.0.1:{server.port}/0"


def test_the_administrator_passes_the_conformance_suite(redis_servers: ServerFactory) -> None:
    with acl_server(redis_servers) as server:

        @contextmanager
        def as_admin() -> Iterator[CouplingFacility]:
            try:
                with open_facility(url(server, "sqadmin")) as facility:
                    yield facility
            finally:
                server.flush()  # as the default user

        check_list_structure(as_admin, checks=[c for c in CHECKS if not c.slow], fail_fast=True)


def test_a_group_user_works_on_its_structures_and_is_refused_on_any_other(
    redis_servers: ServerFactory, tmp_path: Path
) -> None:
    with acl_server(redis_servers) as server:
        with open_facility(url(server, "sqadmin")) as admin:  # loads the library
            for name in (*OWN, OTHER):
                admin.create(structure_params(name, queues=8, managers=4, messages=500))
        facility = open_facility(url(server, "qsg1"))
        try:
            settings = RecoverySettings(tmp_path / "recovery", max_wait_seconds=30)
            qm1 = QueueManager(
                facility, "QM1", 1, admin=OWN[0], structures=[OWN[1]], recovery=settings
            )
            qm2 = QueueManager(
                facility, "QM2", 2, admin=OWN[0], structures=[OWN[1]], recovery=settings
            )
            try:
                qm1.define_queue("ORDERS", structure=OWN[1])
                # a get that waits (XREAD on its event stream), woken by a commit
                waiter = threading.Timer(0.2, lambda: qm2.open("ORDERS").put(b"late"))
                waiter.start()
                assert qm1.open("ORDERS").get(wait=10).body == b"late"
                waiter.join()
                with qm2.unit_of_work() as uow:
                    qm2.open("ORDERS").put(b"one", persistent=True, uow=uow)
                qm1.checkpoint()  # a snapshot, read and dropped; an SRDS
                qm1.system_checkpoint()
                qm1.copy_structure(structure_params(OWN[1], queues=8, managers=4, messages=900))
                with qm1.unit_of_work() as uow:
                    assert qm1.open("ORDERS").get(uow=uow).body == b"one"
                assert facility.exists(OWN[0])
            finally:
                qm2.close()
                qm1.close()

            # Another group's structure: refused by the server, nothing attached.
            with pytest.raises(AuthenticationFailed) as info:
                facility.connect(OTHER, "QM1")
            assert info.value.reason is CFReason.AUTHENTICATION_FAILED
            assert "no permissions to access one of the keys" in str(info.value)
            assert "docs/redis.md" in str(info.value)
            with pytest.raises(NotAuthorized) as refused:
                QueueManager(facility, "QM1", 1, admin=OTHER)
            assert refused.value.reason is MQReason.CF_STRUC_AUTH_FAILED
            assert refused.value.reason_code == 2348
            with pytest.raises(AuthenticationFailed):
                facility.structure_names()  # SCAN is the administrator's
        finally:
            facility.close()
        with open_facility(url(server, "sqadmin")) as admin:
            assert admin.structure_names() == sorted((*OWN, OTHER))
            peek = admin.connect(OTHER, "PEEK")
            assert [u.name for u in peek.users()] == ["PEEK"]
            peek.disconnect()


def test_only_the_administrator_loads_the_function_library(
    redis_servers: ServerFactory,
) -> None:
    """A server without the library (new, or restarted without persistence) refuses a
    group's facility, naming what it lacks, until the administrator opens one."""
    with acl_server(redis_servers) as server:
        with pytest.raises(AuthenticationFailed) as info:
            open_facility(url(server, "qsg1"))
        assert "function|load" in str(info.value)
        assert server.command("FUNCTION", "LIST") == []
        open_facility(url(server, "sqadmin")).close()
        open_facility(url(server, "qsg1")).close()


def test_a_group_user_cannot_flush_or_reconfigure_the_server(
    redis_servers: ServerFactory,
) -> None:
    with acl_server(redis_servers) as server:
        with open_facility(url(server, "sqadmin")) as admin:
            admin.create(structure_params(OWN[0], queues=8, managers=4, messages=500))
        client = redis.Redis(port=server.port, username="qsg1", password=secret("qsg1"))
        try:
            for command in (
                ["FLUSHALL"],
                ["FLUSHDB"],
                ["KEYS", "*"],
                ["CONFIG", "GET", "*"],
                ["FUNCTION", "FLUSH"],
                ["FUNCTION", "DELETE", "anything"],
                ["FUNCTION", "LOAD", "#!lua name=mine\nredis.register_function('f', tostring)"],
                ["SCRIPT", "FLUSH"],
                ["CLIENT", "LIST"],
                ["INFO", "keyspace"],
                ["DEL", f"sq:{{{OTHER}}}:m"],
                ["PUBLISH", "channel", "hello"],
            ):
                with pytest.raises(rx.NoPermissionError):
                    client.execute_command(*command)
        finally:
            client.close()
        assert server.command("EXISTS", f"sq:{{{OWN[0]}}}:m") == 1
        libraries = server.command("FUNCTION", "LIST")
        assert isinstance(libraries, list) and len(libraries) == 1
