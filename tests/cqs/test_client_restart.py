"""A client's restart: emergency (resync) and cold (to the cold queue), and a CQS's
own cold start, which sends its client's locked messages to the cold queue."""

from __future__ import annotations

from pathlib import Path

from sharedq.cf import CouplingFacility
from sharedq.cqs import CQS, Kind
from sharedq.recovery import RecoverySettings

from .conftest import MSGQ, MakeCQS
from .helpers import TRANA, TRANB, where


def held_three(cqs: CQS) -> list:  # type: ignore[type-arg]
    """Three messages put and read by ``cqs`` (one of two parts); their messages."""
    cqs.put(TRANA, b"done")
    cqs.put(TRANA, [b"not ", b"done"])
    cqs.put(TRANB, b"local", local=True)
    first, second = cqs.read(TRANA), cqs.read(TRANA)
    assert first is not None and second is not None
    return [first, second]


def test_emergency_restart_deletes_what_was_done_and_requeues_the_rest(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    cqs = make_cqs("IMSA")
    done, _ = held_three(cqs)
    other = make_cqs("IMSB")
    other.put(TRANA, b"someone else's")
    theirs = other.read(TRANA)
    assert theirs is not None

    report = cqs.resync([done.uow])
    assert [m.body for m in report.deleted] == [b"done"]
    assert sorted(m.body for m in report.requeued) == [b"local", b"not done"]
    lists = where(facility, MSGQ)
    assert sorted(lists["ready"]) == [(TRANA, b"not "), (TRANB, b"local")]
    assert lists["lock"] == [(TRANA, b"CQSIMSB")]  # another CQS's lock is untouched
    assert cqs.locks() == []


def test_cold_start_moves_the_locked_messages_to_the_cold_queue(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    cqs = make_cqs("IMSA")
    held_three(cqs)
    moved = cqs.cold_start_client()
    assert sorted(m.body for m in moved) == [b"done", b"local", b"not done"]
    lists = where(facility, MSGQ)
    assert "lock" not in lists and "ready" not in lists
    assert sorted(lists["cold"]) == [(TRANA, b"done"), (TRANA, b"not "), (TRANB, b"local")]
    assert sorted(m.body for m in cqs.cold_queue()) == [b"done", b"local", b"not done"]
    assert cqs.read(TRANA) is None  # nobody processes them


def test_a_cqs_cold_start_sends_its_clients_locks_to_the_cold_queue(
    facility: CouplingFacility, make_cqs: MakeCQS, tmp_path: Path
) -> None:
    root = tmp_path / "recovery"
    cqs = make_cqs("IMSA", recovery=RecoverySettings(root))
    held_three(cqs)
    cqs.disconnect()
    again = make_cqs("IMSA", recovery=RecoverySettings(root, cold_start=True))
    assert "cold" in again.start_reason.lower()
    assert sorted(m.body for m in again.cold[Kind.MSGQ]) == [b"done", b"local", b"not done"]
    assert "lock" not in where(facility, MSGQ)
