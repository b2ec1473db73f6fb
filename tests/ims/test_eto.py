"""ETO dynamic LTERMs (redbook §9.11, seed Chapter 9): an LTERM made at signon (the
userid, or the signon exit's name), MSGQ interest at signon, EMHQ interest at the first
Fast Path input, both deregistered at signoff; output waiting on the shared queue while
nobody is signed on; the exit renaming (IMS suffix) or rejecting; duplicates across
the group not refused."""

from __future__ import annotations

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cqs import Kind, make_name, structure_params
from sharedq.ims import (
    DLI,
    FastPathDefinition,
    FPTransaction,
    IMSError,
    IMSReason,
    Lterm,
    Signon,
    Transaction,
    ims_suffix,
)
from sharedq.ims.queues import lterm_ready

from .conftest import MSGQ, MakeIMS
from .helpers import WAIT_S, Gate, define, echo, take, until, where

TRANA = Transaction("TRANA", 1, "PGMA")
EMHQ = "EMHQ01"


def msgq_lterm(name: str) -> tuple[Kind, bytes]:
    return (Kind.MSGQ, lterm_ready(name))


def emhq_lterm(name: str) -> tuple[Kind, bytes]:
    return (Kind.EMHQ, make_name(5, name))


def test_signon_registers_a_dynamic_lterm_until_signoff(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    facility.create(structure_params(EMHQ, messages=100))
    ims = make_ims(
        define("IMSA", transactions=(TRANA,), lterms=(Lterm("LTERMA", "NODE1"),)),
        {"PGMA": echo()},
        fastpath=FastPathDefinition((FPTransaction("FPLF", "PSBF"),), {"IFP1": "PSBF"}, ("IMSA",)),
        ifp_programs={"PSBF": lambda data: b"R " + data},
        emhq=EMHQ,
    )
    assert ims.fastpath is not None
    user = ims.signon("USERA", node="VNODE1")
    assert (user.lterms, user.user, user.node) == (["USERA"], "USERA", "VNODE1")
    assert ims.dynamic_lterms() == {"USERA": "USERA"}
    assert msgq_lterm("USERA") in ims.cqs.registered()
    assert emhq_lterm("USERA") not in ims.cqs.registered()  # no Fast Path input yet
    user.enter("TRANA HELLO")
    assert take(user, 1) == ["OUT TRANA HELLO"]
    assert ims.fastpath.enter("USERA", "FPLF", b"fast") == "local"
    assert emhq_lterm("USERA") in ims.cqs.registered()  # at the first Fast Path input
    assert ims.fastpath.receive("USERA", WAIT_S) == "R fast"
    user.signoff()
    assert msgq_lterm("USERA") not in ims.cqs.registered()
    assert emhq_lterm("USERA") not in ims.cqs.registered()
    assert ims.dynamic_lterms() == {}
    with pytest.raises(IMSError) as caught:
        user.enter("TRANA AFTER")
    assert caught.value.reason is IMSReason.NOT_IN_SESSION
    again = ims.signon("USERA", node="VNODE2")  # the name is free again
    assert again.lterms == ["USERA"]


def test_output_waits_on_the_shared_queue_for_the_next_signon(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    gate = Gate()

    def held(dli: DLI) -> None:
        while (segment := dli.io.gu()) is not None:
            gate.stop_at("reply")
            dli.io.isrt(b"OUT " + segment)

    imsa = make_ims(define("IMSA", transactions=(TRANA,)), {"PGMA": held})
    imsb = make_ims(define("IMSB", transactions=(TRANA,)), {"PGMA": echo()})
    user = imsa.signon("USERA", node="VNODE1")
    assert user.enter("TRANA LATE").routing == "local"
    gate.wait_reached("reply")
    user.signoff()  # nobody signed on with USERA: the reply waits on the shared queue
    gate.open("reply")
    assert until(lambda: where(facility, MSGQ).get("\x05USERA") == [b"OUT TRANA LATE"])
    back = imsb.signon("USERA", node="VNODE9")  # on another IMS of the group
    assert take(back, 1) == ["OUT TRANA LATE"]
    assert until(lambda: where(facility, MSGQ) == {})


def test_the_signon_exit_renames_or_rejects_and_duplicates_are_not_refused(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    imsa = make_ims(
        define("IMSA", transactions=(TRANA,), lterms=(Lterm("LTERMA", "NODE1"),)),
        {"PGMA": echo()},
    )
    imsb = make_ims(define("IMSB", transactions=(TRANA,)), {"PGMA": echo()})
    on_a = imsa.signon("USERA", node="V1", exit=ims_suffix)
    on_b = imsb.signon("USERA", node="V2", exit=ims_suffix)
    assert (on_a.lterms, on_b.lterms) == (["USERAA"], ["USERAB"])  # unique per IMS
    on_a.enter("TRANA ONA")
    on_b.enter("TRANA ONB")
    assert take(on_a, 1) == ["OUT TRANA ONA"] and take(on_b, 1) == ["OUT TRANA ONB"]

    seen: list[Signon] = []

    def one_signon_per_ims(signon: Signon) -> str | None:
        seen.append(signon)
        return None if signon.lterm in signon.active else signon.lterm

    first = imsa.signon("USERB", node="V3", exit=one_signon_per_ims)
    with pytest.raises(IMSError) as caught:
        imsa.signon("USERB", node="V4", exit=one_signon_per_ims)
    assert caught.value.reason is IMSReason.SIGNON_REJECTED
    assert seen[-1] == Signon("USERB", "V4", "IMSA", "USERB", frozenset({"USERAA", "USERB"}))
    with pytest.raises(IMSError) as caught:  # no exit: the active name is refused here
        imsa.signon("USERB", node="V5")
    assert caught.value.reason is IMSReason.LTERM_ACTIVE
    for userid, node, reason in (
        ("LTERMA", "V6", IMSReason.LTERM_ACTIVE),  # a static LTERM's name
        ("TRANA", "V6", IMSReason.LTERM_ACTIVE),  # a transaction's (one name space)
        ("USERC", "NODE1", IMSReason.BAD_ARGUMENT),  # a static node: logon
        ("USERC", "V3", IMSReason.NODE_IN_SESSION),
    ):
        with pytest.raises(IMSError) as caught:
            imsa.signon(userid, node=node)
        assert caught.value.reason is reason, userid
    with pytest.raises(IMSError) as caught:
        imsa.signon("USERC", node="V7", exit=lambda s: "bad name")
    assert caught.value.reason is IMSReason.BAD_ARGUMENT
    assert set(imsa.dynamic_lterms()) == {"USERAA", "USERB"}

    dup = imsb.signon("USERB", node="V8")  # the same user on IMSB: the same LTERM
    assert msgq_lterm("USERB") in imsa.cqs.registered()
    assert msgq_lterm("USERB") in imsb.cqs.registered()
    first.logoff()
    dup.logoff()
