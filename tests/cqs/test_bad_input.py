"""Bad input: each refused with a CQS error naming what is wrong, nothing changed."""

from __future__ import annotations

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cqs import (
    CQS,
    CQSError,
    CQSReason,
    InvalidCQSRequest,
    Kind,
    LockToken,
    StructurePair,
    Uow,
    check_name,
    make_name,
)

from .conftest import MSGQ, MakeCQS
from .helpers import TRANA, where


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        (b"short", "has 5 bytes"),
        ("TRANA", "must be 16 bytes"),
        (b"\x00TRANA          ", "type 0"),
        (b"\x01TRANA        xx", "3 blanks"),
        (b"\x01TR\xffNA          ", "printable"),
        (b"\x01        IMSA   ", "not blank"),
    ],
)
def test_a_bad_queue_name_says_what_is_wrong(name: object, problem: str) -> None:
    with pytest.raises(InvalidCQSRequest) as bad:
        check_name(name)
    assert bad.value.reason is CQSReason.BAD_QUEUE_NAME and problem in str(bad.value)


def test_names_are_built_in_the_1_8_4_3_layout() -> None:
    assert make_name(1, "TRANA", "IMSA") == b"\x01TRANA   IMSA   "
    assert make_name(5, "LTERMA") == b"\x05LTERMA         "
    for args in ((0, "X"), (1, ""), (1, "NINECHARS"), (1, "X", "IMSAB")):
        with pytest.raises(InvalidCQSRequest):
            make_name(*args)  # type: ignore[arg-type]


def test_requests_refuse_bad_arguments(facility: CouplingFacility, make_cqs: MakeCQS) -> None:
    cqs = make_cqs("IMSA")
    emhq_only = make_name(3, "TRANA")
    cases = [
        (lambda: cqs.put(TRANA, "text"), CQSReason.BAD_ARGUMENT),  # type: ignore[arg-type]
        (lambda: cqs.put(TRANA, []), CQSReason.BAD_ARGUMENT),
        (lambda: cqs.put(TRANA, [b"x" * 70_000]), CQSReason.MESSAGE_TOO_LARGE),
        (lambda: cqs.put(TRANA, b"x", uow=b"short"), CQSReason.BAD_UOW),
        (lambda: cqs.put(TRANA, b"x", local=1), CQSReason.BAD_ARGUMENT),  # type: ignore[arg-type]
        (lambda: cqs.read(b"\x01bad"), CQSReason.BAD_QUEUE_NAME),
        (lambda: cqs.put(make_name(10, "X"), b"x"), CQSReason.BAD_QUEUE_NAME),
        (lambda: cqs.delete("token"), CQSReason.BAD_TOKEN),  # type: ignore[arg-type]
        (lambda: cqs.browse(TRANA, limit=-1), CQSReason.BAD_ARGUMENT),
        (lambda: cqs.read(TRANA, kind=Kind.EMHQ), CQSReason.NOT_CONNECTED),
        (lambda: cqs.checkpoint(), CQSReason.BAD_ARGUMENT),
    ]
    for call, reason in cases:
        with pytest.raises(CQSError) as refused:
            call()
        assert refused.value.reason is reason, (reason, refused.value)
    assert where(facility, MSGQ) == {}
    cqs.put(emhq_only, b"fine")  # type 3 is an MSGQ type


def test_a_token_for_a_message_not_locked(make_cqs: MakeCQS) -> None:
    cqs = make_cqs("IMSA")
    ghost = LockToken(Kind.MSGQ, TRANA, bytes(12))
    with pytest.raises(CQSError) as refused:
        cqs.delete(ghost)
    assert refused.value.reason is CQSReason.NOT_LOCKED


def test_bad_server_arguments(facility: CouplingFacility) -> None:
    for kwargs in (
        {"system": "TOOLONG"},
        {"system": ""},
        {"system": "IMSA", "msgq": "bad name!"},
        {"system": "IMSA", "msgq": StructurePair("MSGQ01", kind=Kind.EMHQ)},
        {"system": "IMSA", "msgq": "MSGQ01", "emhq": "MSGQ01"},
    ):
        kwargs.setdefault("msgq", MSGQ)
        with pytest.raises(InvalidCQSRequest):
            CQS(facility, "CQSA", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidCQSRequest):
        StructurePair("MSGQ01", "MSGQ01")
    with pytest.raises(InvalidCQSRequest):
        Uow.from_bytes(b"x" * 31)


def test_requests_before_connect_and_after_disconnect(make_cqs: MakeCQS) -> None:
    cqs = make_cqs("IMSA", connect=False)
    with pytest.raises(CQSError) as early:
        cqs.put(TRANA, b"x")
    assert early.value.reason is CQSReason.NOT_CONNECTED
    cqs.connect()
    with pytest.raises(CQSError) as twice:
        cqs.connect()
    assert twice.value.reason is CQSReason.ALREADY_CONNECTED
    cqs.disconnect()
    cqs.disconnect()
    with pytest.raises(CQSError) as late:
        cqs.read(TRANA)
    assert late.value.reason is CQSReason.NOT_CONNECTED
