"""Definitions are checked whole when made, with the IMS family's reasons; the DL/I
calls' status codes; the message format's round trip."""

from __future__ import annotations

import pytest

from sharedq.cf.memory import MemoryFacility
from sharedq.ims import (
    IMS,
    IMSError,
    IMSReason,
    InvalidIMSRequest,
    Lterm,
    Program,
    Region,
    SystemDefinition,
    Transaction,
)
from sharedq.ims.messages import buffers, decode, make


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (lambda: Transaction("trana", 1, "PGMA"), "transaction code"),
        (lambda: Transaction("TRANSACTN", 1, "PGMA"), "transaction code"),
        (lambda: Transaction("TRANA", 0, "PGMA"), "message class"),
        (lambda: Transaction("TRANA", 1000, "PGMA"), "message class"),
        (lambda: Transaction("TRANA", 1, "PGMA", maxrgn=-1), "MAXRGN"),
        (lambda: Transaction("TRANA", 1, "PGMA", serial="yes"), "serial"),  # type: ignore[arg-type]
        (lambda: Transaction("TRANA", 1, "PGMA", response=1), "response"),  # type: ignore[arg-type]
        (lambda: Region("MPR1", ()), "classes"),
        (lambda: Region("MPR1", (1, 2, 3, 4, 5)), "classes"),
        (lambda: Region("MPR1", [1]), "classes"),  # type: ignore[arg-type]
        (lambda: Lterm("LTERMA", "1NODE"), "node"),
        (lambda: SystemDefinition("IMSAB"), "IMSID"),
        (lambda: SystemDefinition("IMSA", queue_buffer=10), "queue_buffer"),
        (
            lambda: SystemDefinition("IMSA", transactions=(Transaction("T", 1, "P"),)),
            "PSB P undefined",
        ),
        (
            lambda: SystemDefinition(
                "IMSA",
                transactions=(Transaction("SAME", 1, "P"),),
                programs=(Program("P"),),
                lterms=(Lterm("SAME", "N"),),
            ),
            "SAME defined twice",
        ),
        (lambda: SystemDefinition("IMSA", regions=(Region("R", (1,)),) * 2), "twice"),
        (lambda: SystemDefinition("IMSA", programs=[Program("P")]), "tuple"),  # type: ignore[arg-type]
    ],
)
def test_a_bad_definition_is_refused_with_its_reason(build: object, words: str) -> None:
    with pytest.raises(InvalidIMSRequest) as caught:
        build()  # type: ignore[operator]
    assert caught.value.reason is IMSReason.BAD_DEFINITION
    assert words in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_every_psb_needs_a_program_and_commands_name_what_exists() -> None:
    definition = SystemDefinition(
        "IMSA",
        transactions=(Transaction("TRANA", 1, "PGMA"),),
        programs=(Program("PGMA"),),
        regions=(Region("MPR1", (1,)),),
        lterms=(Lterm("LTERMA", "NODE1"),),
    )
    facility = MemoryFacility()
    with pytest.raises(InvalidIMSRequest) as caught:
        IMS(facility, definition, {})
    assert caught.value.reason is IMSReason.NO_PROGRAM
    ims = IMS(facility, definition, {"PGMA": lambda dli: None})
    with pytest.raises(IMSError) as not_started:
        ims.logon("NODE1")
    assert not_started.value.reason is IMSReason.NOT_STARTED
    from sharedq.cqs import structure_params

    facility.create(structure_params("MSGQ01", messages=50))
    with ims:
        for call, arg, reason in [
            (ims.logon, "NODE9", IMSReason.UNKNOWN_NODE),
            (ims.stop_transaction, "NOSUCH", IMSReason.UNKNOWN_RESOURCE),
            (ims.stop_program, "NOSUCH", IMSReason.UNKNOWN_RESOURCE),
            (ims.stop_region, "NOSUCH", IMSReason.UNKNOWN_RESOURCE),
            (ims.start_region, "MPR1", IMSReason.ALREADY_STARTED),
        ]:
            with pytest.raises(IMSError) as refused:
                call(arg)
            assert refused.value.reason is reason
        node1 = ims.logon("NODE1")
        with pytest.raises(IMSError) as no_lterm:
            node1.enter("TRANA x", lterm="LTERMZ")
        assert no_lterm.value.reason is IMSReason.UNKNOWN_RESOURCE
        with pytest.raises(IMSError) as twice:
            ims.logon("NODE1")
        assert twice.value.reason is IMSReason.NODE_IN_SESSION
        with pytest.raises(IMSError) as started:
            ims.start()
        assert started.value.reason is IMSReason.ALREADY_STARTED
        node1.logoff()
        with pytest.raises(IMSError) as off:
            node1.enter("TRANA x")
        assert off.value.reason is IMSReason.NOT_IN_SESSION
    facility.close()


def test_a_message_round_trips_through_its_buffers() -> None:
    message = make([b"TRANA first", "second", b"x" * 300], source="LTERMA")
    encoded = message.encode()
    parts = buffers(encoded, 64)
    assert len(parts) == -(-len(encoded) // 64) and all(len(p) <= 64 for p in parts)
    assert decode(b"".join(parts)) == message
    with pytest.raises(InvalidIMSRequest):
        make([])
    with pytest.raises(InvalidIMSRequest):
        make([b""])
    with pytest.raises(IMSError) as bad:
        decode(b"\x07not ims")
    assert bad.value.reason is IMSReason.QUEUE_ERROR
