"""CQSREG and CQSDEREG: one EMC per CQS and queue, and the EMC area running out."""

from __future__ import annotations

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cqs import CapacityExceeded, CQSReason, Kind, make_name, structure_params

from .conftest import MakeCQS
from .helpers import TRANA, TRANB


def test_one_emc_per_cqs_and_queue(make_cqs: MakeCQS) -> None:
    cqss = [make_cqs(s) for s in ("IMSA", "IMSB", "IMSC")]
    before = cqss[0].statistics().emcs
    for cqs in cqss:
        cqs.register(TRANA)
        cqs.register(TRANA)  # again: no second EMC
    assert cqss[0].statistics().emcs == before + 3  # the seed's "3 CQSs, TRANA: 3 EMCs"
    cqss[0].register(TRANB)
    assert cqss[0].statistics().emcs == before + 4
    assert cqss[0].registered() == [(Kind.MSGQ, TRANA), (Kind.MSGQ, TRANB)]
    cqss[0].deregister(TRANA)
    assert cqss[0].statistics().emcs == before + 3
    with pytest.raises(Exception) as not_there:
        cqss[0].deregister(TRANA)
    assert getattr(not_there.value, "reason", None) is CQSReason.NOT_REGISTERED


def test_registering_a_queue_with_messages_says_so(make_cqs: MakeCQS) -> None:
    cqsa, cqsb = make_cqs("IMSA"), make_cqs("IMSB")
    cqsa.put(TRANA, b"waiting")
    assert cqsb.register(TRANA) is True
    assert cqsb.register(TRANA) is True
    assert cqsb.register(TRANB) is False


def test_registration_is_refused_when_the_emc_area_is_full(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    facility.create(structure_params("TINYQ", messages=10, emc_percent=1))
    cqs = make_cqs("IMSA", msgq="TINYQ")
    room = cqs.statistics().max_emcs - cqs.statistics().emcs
    assert 0 < room < 1000
    for n in range(room):
        cqs.register(make_name(1, f"T{n}"))
    with pytest.raises(CapacityExceeded) as full:
        cqs.register(make_name(1, "ONEMORE"))
    assert full.value.reason is CQSReason.EMC_FULL
    # Nothing changed: the refused queue is not registered, the others still are.
    assert len(cqs.registered()) == room
    cqs.deregister(make_name(1, "T0"))
    cqs.register(make_name(1, "ONEMORE"))


def test_a_queue_emptied_and_refilled_tells_again(make_cqs: MakeCQS) -> None:
    cqsa, cqsb = make_cqs("IMSA"), make_cqs("IMSB")
    cqsb.register(TRANA)
    cqsa.put(TRANA, b"1")
    assert cqsb.wait_for_work(30) == (Kind.MSGQ, TRANA)
    cqsa.put(TRANA, b"2")  # not empty before: no event
    first, second = cqsb.read(TRANA), cqsb.read(TRANA)
    assert first is not None and second is not None
    cqsa.put(TRANA, b"3")  # empty again before this one: told
    assert cqsb.wait_for_work(30) == (Kind.MSGQ, TRANA)
    assert [m.body for m in cqsb.browse(TRANA)] == [b"3"]


def test_a_restarted_cqs_registers_afresh_with_one_emc_per_queue(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    from .conftest import MSGQ

    first = make_cqs("IMSA")
    first.register(TRANA)
    before = first.statistics().emcs
    first.stop_dead()
    with facility.connect(MSGQ, "PEER") as peer:  # a peer declares it failed
        [user] = [u.user_id for u in peer.users() if u.name == first.name]
        peer.mark_failed(user)
    again = make_cqs("IMSA")
    assert again.statistics().emcs == before - 1  # the failed user's EMC released
    again.register(TRANA)
    again.register(TRANB)
    assert again.statistics().emcs == before + 1
    again.put(TRANA, b"one")
    assert again.wait_for_work(30) == (Kind.MSGQ, TRANA)
    again.put(TRANB, b"sentinel")  # told once for TRANA: the next is TRANB's
    assert again.wait_for_work(30) == (Kind.MSGQ, TRANB)
