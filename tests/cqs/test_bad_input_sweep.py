"""A sweep of the CQS requests with arguments of the wrong kind.

Each used to escape as a raw ``TypeError``/``AttributeError``/``OverflowError``, to
wait for ever, or to be taken for something it is not (a truthy ``"no"`` for
``force=True``, a bad ``kind`` ignored on a move).  Now each is ``InvalidCQSRequest``
naming what is wrong, and the message the test holds locked is still locked, on its
queue, unchanged.  The memory backend: every check comes before the structure.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Callable
from typing import Any

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cf.redis import RedisFacility
from sharedq.cqs import CQS, CQSReason, InvalidCQSRequest, LockToken, make_name
from sharedq.testing.redis_server import RedisServer

from .conftest import MakeCQS
from .helpers import TRANA
from .remote_server import ServedCQS

TRANB = make_name(1, "TRANB")


@pytest.fixture
def backend() -> str:
    return "memory"


@pytest.fixture
def held(make_cqs: MakeCQS) -> tuple[CQS, LockToken]:
    """A CQS holding the one message of ``TRANA`` locked."""
    cqs = make_cqs("IMSA")
    cqs.put(TRANA, b"kept")
    message = cqs.read(TRANA)
    assert message is not None
    return cqs, message.token


def _seq(facility: CouplingFacility) -> int:
    with facility.connect("MSGQ01", "WATCHER") as watcher:
        return watcher.statistics().seq


def refused(
    facility: CouplingFacility,
    held: tuple[CQS, LockToken],
    call: Callable[[], object],
    reason: CQSReason,
    *words: str,
) -> None:
    """``call`` raises ``InvalidCQSRequest`` for ``reason`` naming ``words``; nothing changed."""
    cqs, token = held
    before = _seq(facility)
    with pytest.raises(InvalidCQSRequest) as caught:
        call()
    assert _seq(facility) == before + 2  # the watcher's connect and disconnect alone
    assert caught.value.reason is reason, caught.value
    for word in words:
        assert word in str(caught.value), (word, str(caught.value))
    assert cqs.locks() == [token]
    assert cqs.browse_locked(token).parts == (b"kept",)
    assert cqs.browse(TRANB) == []


@pytest.mark.parametrize("kind", [[1], bytearray(b"MSGQ"), {}], ids=repr)
@pytest.mark.parametrize(
    "request_",
    ["put", "read", "browse", "register", "locks", "statistics", "cold_queue", "move"],
)
def test_a_kind_that_is_no_kind_is_refused(
    facility: CouplingFacility, held: tuple[CQS, LockToken], request_: str, kind: object
) -> None:
    """It used to escape as ``TypeError: unhashable type`` (or, on a move of a locked
    message, be ignored)."""
    cqs, token = held
    calls: dict[str, Callable[[], object]] = {
        "put": lambda: cqs.put(TRANB, b"x", kind=kind),  # type: ignore[arg-type]
        "read": lambda: cqs.read(TRANB, kind=kind),  # type: ignore[arg-type]
        "browse": lambda: cqs.browse(TRANB, kind=kind),  # type: ignore[arg-type]
        "register": lambda: cqs.register(TRANB, kind=kind),  # type: ignore[arg-type]
        "locks": lambda: cqs.locks(kind=kind),  # type: ignore[arg-type]
        "statistics": lambda: cqs.statistics(kind=kind),  # type: ignore[arg-type]
        "cold_queue": lambda: cqs.cold_queue(kind=kind),  # type: ignore[arg-type]
        "move": lambda: cqs.move(token, TRANB, kind=kind),  # type: ignore[arg-type]
    }
    refused(facility, held, calls[request_], CQSReason.BAD_ARGUMENT, f"kind {kind!r}")


@pytest.mark.parametrize("kind", ["MSGQ", None, 1], ids=repr)
def test_a_move_of_a_locked_message_checks_its_kind_too(
    facility: CouplingFacility, held: tuple[CQS, LockToken], kind: object
) -> None:
    """It used to ignore ``kind`` (the token's is used) and move the message."""
    cqs, token = held
    call = lambda: cqs.move(token, TRANB, kind=kind)  # type: ignore[arg-type]  # noqa: E731
    refused(facility, held, call, CQSReason.BAD_ARGUMENT, f"kind {kind!r}")


@pytest.mark.parametrize("value", ["no", 0, 1, None, [], 1.0], ids=repr)
@pytest.mark.parametrize("flag", ["first", "force"])
def test_unlock_flags_that_are_no_bool_are_refused(
    facility: CouplingFacility, held: tuple[CQS, LockToken], flag: str, value: object
) -> None:
    """``force="no"`` used to force the unlock: any truthy value was ``True``."""
    cqs, token = held
    refused(
        facility,
        held,
        lambda: cqs.unlock(token, **{flag: value}),
        CQSReason.BAD_ARGUMENT,
        "first and force are True or False",
    )


@pytest.mark.parametrize("body", [None, 5, 1.5, True], ids=repr)
def test_a_body_that_is_no_bytes_nor_parts_is_refused(
    facility: CouplingFacility, held: tuple[CQS, LockToken], body: Any
) -> None:
    """It used to escape as ``TypeError: ... object is not iterable``."""
    cqs, _ = held
    refused(
        facility,
        held,
        lambda: cqs.put(TRANB, body),
        CQSReason.BAD_ARGUMENT,
        "a message is bytes or parts of bytes",
    )


@pytest.mark.parametrize("values", [None, 5, TRANB, "TRANB"], ids=repr)
@pytest.mark.parametrize("request_", ["query", "resync"])
def test_query_and_resync_take_a_collection(
    facility: CouplingFacility, held: tuple[CQS, LockToken], request_: str, values: Any
) -> None:
    """``None`` or a number escaped as ``TypeError``; one name or id alone was read
    byte by byte, the message naming its first byte."""
    cqs, _ = held
    what = "queues" if request_ == "query" else "done"
    refused(
        facility,
        held,
        lambda: getattr(cqs, request_)(values),
        CQSReason.BAD_ARGUMENT,
        f"{what} {values!r}: a collection",
    )


@pytest.mark.parametrize("owner", [5, b"CQSIMSA", ["CQSIMSA"], "../CQS"], ids=repr)
def test_locks_refuses_an_owner_that_is_no_cqs_name(
    facility: CouplingFacility, held: tuple[CQS, LockToken], owner: Any
) -> None:
    """It used to escape as ``AttributeError: ... has no attribute 'encode'``."""
    cqs, _ = held
    refused(facility, held, lambda: cqs.locks(owner=owner), CQSReason.BAD_ARGUMENT, "owner")


@pytest.mark.parametrize(
    "token_change",
    [
        {"queue": "TRANA"},
        {"queue": None},
        {"queue": 1},
        {"entry_id": "x" * 12},
        {"staged": "no"},
        {"staged": 1},
        {"staged": None},
    ],
    ids=repr,
)
@pytest.mark.parametrize("request_", ["delete", "unlock", "browse_locked", "move"])
def test_a_token_with_fields_of_the_wrong_kind_is_no_token(
    facility: CouplingFacility,
    held: tuple[CQS, LockToken],
    request_: str,
    token_change: dict[str, Any],
) -> None:
    """A text queue name used to escape as ``TypeError: a bytes-like object is
    required``; a text entry id reached the structure and came back as its error; a
    ``staged`` that is no bool was taken for its truth (``"no"``: a one-part message
    deleted through the delete queue)."""
    cqs, token = held
    bad = dataclasses.replace(token, **token_change)
    calls: dict[str, Callable[[], object]] = {
        "delete": lambda: cqs.delete(bad),
        "unlock": lambda: cqs.unlock(bad),
        "browse_locked": lambda: cqs.browse_locked(bad),
        "move": lambda: cqs.move(bad, TRANB),
    }
    refused(facility, held, calls[request_], CQSReason.BAD_TOKEN, "is not a lock token")


@pytest.mark.parametrize("timeout", [math.nan, math.inf, 1e300, "1", [1], True], ids=repr)
def test_wait_for_work_refuses_a_timeout_that_is_no_finite_number(
    facility: CouplingFacility, held: tuple[CQS, LockToken], timeout: Any
) -> None:
    """``nan`` used to wait for ever, ``1e300`` to escape as ``OverflowError`` and text
    as ``TypeError``.  Refused at once: a thread would hang if it were not."""
    cqs, _ = held
    outcome: list[BaseException | None] = []

    def wait() -> None:
        try:
            cqs.wait_for_work(timeout)
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    waiter.join(timeout=30)  # not a timed assertion: only so that a hang cannot stop the run
    assert outcome, "wait_for_work did not return"
    error = outcome[0]
    assert isinstance(error, InvalidCQSRequest), repr(error)
    assert error.reason is CQSReason.BAD_ARGUMENT
    assert f"timeout {timeout!r}" in str(error)


@pytest.mark.parametrize(
    ("part", "value", "words"),
    [
        ("clock", "now", "clock 'now': not a Clock"),
        ("overflow", 70, "overflow 70: not a OverflowOptions"),
        ("recovery", "/tmp/recovery", "not a RecoverySettings"),
        ("security", "ADMIN", "not a SecuritySettings"),
        ("on_work", "print", "on_work 'print': not a function"),
        ("faults", 1, "faults 1: not a function"),
        ("checkpoint_faults", [], "not a function"),
    ],
)
def test_a_server_part_of_the_wrong_kind_is_refused_before_connecting(
    facility: CouplingFacility, part: str, value: object, words: str
) -> None:
    """A clock or overflow options of the wrong kind used to fail with
    ``AttributeError`` after the connect, leaving the CQS connected (its next start
    then refused as ``USER_ACTIVE``); the others failed later or not at all (a text
    ``on_work`` only in the listener's thread)."""
    with pytest.raises(InvalidCQSRequest) as caught:
        CQS(facility, "CQSA", system="IMSA", msgq="MSGQ01", **{part: value}).connect()
    assert caught.value.reason is CQSReason.BAD_ARGUMENT and words in str(caught.value)
    with facility.connect("MSGQ01", "WATCHER") as watcher:
        assert [u.name for u in watcher.users()] == ["WATCHER"]
    with CQS(facility, "CQSA", system="IMSA", msgq="MSGQ01") as cqs:  # starts as before
        assert cqs.locks() == []


@pytest.mark.parametrize("value", [None, "memory://", 5], ids=repr)
def test_a_facility_of_the_wrong_kind_is_refused(value: object) -> None:
    """It used to escape as ``AttributeError: ... has no attribute 'connect'``."""
    with pytest.raises(InvalidCQSRequest) as caught:
        CQS(value, "CQSA", system="IMSA", msgq="MSGQ01")  # type: ignore[arg-type]
    assert "not a CouplingFacility" in str(caught.value)


@pytest.mark.parametrize("values", [None, 5, TRANB], ids=repr)
def test_a_remote_client_refuses_what_is_no_collection_before_sending(
    redis_server: RedisServer, redis_facility: RedisFacility, values: Any
) -> None:
    """``RemoteCQS.query`` and ``resync`` used to make a list of their argument in the
    client: ``None`` or a number escaped there as ``TypeError``, and one name went to
    the server as a list of its bytes.  (Redis: a served CQS is another process.)"""
    server = ServedCQS(redis_server.url, "CQSIMSA", "IMSA").start()
    try:
        remote = server.client().connect()
        try:
            remote.put(TRANA, b"kept")
            for call, what in ((remote.query, "queues"), (remote.resync, "done")):
                with pytest.raises(InvalidCQSRequest) as caught:
                    call(values)
                assert caught.value.reason is CQSReason.BAD_ARGUMENT
                assert f"{what} {values!r}: a collection" in str(caught.value)
            assert [m.parts for m in remote.browse(TRANA)] == [(b"kept",)]
        finally:
            remote.disconnect()
    finally:
        server.stop()
