"""A change the log could not record is taken back (``JOURNAL_FAILED``).

The fault is put on the journal itself: the pair's log listener, which the journal
calls for each change it logs, raises for the chosen change, so that exactly that
request fails, deterministically (a full log hits whichever request comes next).  After
each failure the message is where it was, with its lock, the client's token still
names it, and a structure rebuilt from the log alone is the structure as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cqs import CQS, CQSJournalFailed, CQSReason, LockToken
from sharedq.recovery import RecoverySettings

from .conftest import MSGQ, MakeCQS
from .helpers import TRANA, TRANB, snapshot, where


def fail_change(cqs: CQS, at: int = 1) -> None:
    """The journal fails on the ``at``-th change it logs from now on (only that one)."""
    assert cqs.recovery_log is not None
    listeners = cqs.recovery_log.journal.listeners
    original = listeners[MSGQ]
    seen = [0]

    def listener() -> None:
        seen[0] += 1
        if seen[0] == at:
            raise OSError("journal fault injected by the test")
        original()

    listeners[MSGQ] = listener


def locked(cqs: CQS, body: bytes | list[bytes] = b"one") -> LockToken:
    cqs.put(TRANA, body)
    message = cqs.read(TRANA)
    assert message is not None and message.token is not None
    return message.token


def expect_failure(request: Callable[[], object]) -> CQSJournalFailed:
    with pytest.raises(CQSJournalFailed) as failed:
        request()
    assert failed.value.reason is CQSReason.JOURNAL_FAILED
    return failed.value


@pytest.fixture
def logged(make_cqs: MakeCQS, tmp_path: Path) -> tuple[CQS, CQS, RecoverySettings]:
    settings = RecoverySettings(tmp_path / "recovery", strchkpt=None)
    return make_cqs("IMSA", recovery=settings), make_cqs("IMSB", recovery=settings), settings


def rebuilt_from_the_log_matches(
    facility: CouplingFacility, make_cqs: MakeCQS, settings: RecoverySettings, *cqss: CQS
) -> None:
    before = snapshot(facility)
    for cqs in cqss:
        cqs.disconnect()
    facility.delete(MSGQ, force=True)
    again = make_cqs("IMSC", recovery=settings)
    assert again.recovery_log is not None and again.recovery_log.rebuilt() == [MSGQ]
    assert snapshot(facility) == before


def test_a_read_is_taken_back_to_the_head_of_its_queue(
    facility: CouplingFacility, make_cqs: MakeCQS, logged: tuple[CQS, CQS, RecoverySettings]
) -> None:
    a, b, settings = logged
    a.put(TRANA, b"first")
    a.put(TRANA, b"second")
    fail_change(a)
    expect_failure(lambda: a.read(TRANA))
    lists = where(facility, MSGQ)
    assert lists["ready"] == [(TRANA, b"first"), (TRANA, b"second")] and "lock" not in lists
    rebuilt_from_the_log_matches(facility, make_cqs, settings, a, b)


def test_an_unlock_is_taken_back_the_lock_kept(
    facility: CouplingFacility, make_cqs: MakeCQS, logged: tuple[CQS, CQS, RecoverySettings]
) -> None:
    a, b, settings = logged
    token = locked(a)
    fail_change(a)
    expect_failure(lambda: a.unlock(token))
    assert where(facility, MSGQ)["lock"] == [(TRANA, b"CQSIMSA")]
    theirs = locked(b, b"theirs")
    fail_change(a)
    expect_failure(lambda: a.unlock(theirs, force=True))  # a failed client's lock
    assert sorted(where(facility, MSGQ)["lock"]) == [(TRANA, b"CQSIMSA"), (TRANA, b"CQSIMSB")]
    rebuilt_from_the_log_matches(facility, make_cqs, settings, a, b)
    # (and the tokens still name the messages: the next test deletes with one)


@pytest.mark.parametrize("step", [1, 2])
def test_a_move_is_taken_back_at_either_step(
    facility: CouplingFacility,
    make_cqs: MakeCQS,
    logged: tuple[CQS, CQS, RecoverySettings],
    step: int,
) -> None:
    a, b, settings = logged
    token = locked(a, [b"part 1", b"part 2"])
    fail_change(a, at=step)
    expect_failure(lambda: a.move(token, TRANB))
    lists = where(facility, MSGQ)
    assert lists["lock"] == [(TRANA, b"CQSIMSA")] and "move" not in lists
    assert "ready" not in lists and len(lists["staging"]) == 1
    assert a.browse_locked(token).parts == (b"part 1", b"part 2")  # the token still works
    a.put(TRANA, b"ready one")
    a.put(TRANA, b"ready two")
    fail_change(a, at=step)
    expect_failure(lambda: a.move(TRANA, TRANB))  # a queue's first message
    assert where(facility, MSGQ)["ready"] == [(TRANA, b"ready one"), (TRANA, b"ready two")]
    rebuilt_from_the_log_matches(facility, make_cqs, settings, a, b)


def test_a_one_part_delete_is_taken_back_under_the_same_token(
    facility: CouplingFacility, make_cqs: MakeCQS, logged: tuple[CQS, CQS, RecoverySettings]
) -> None:
    a, b, settings = logged
    token = locked(a, b"keep me")
    fail_change(a)
    expect_failure(lambda: a.delete(token))
    assert where(facility, MSGQ)["lock"] == [(TRANA, b"CQSIMSA")]
    assert a.browse_locked(token).body == b"keep me"
    snapshot_before = snapshot(facility)
    rebuilt_from_the_log_matches(facility, make_cqs, settings, a, b)
    assert snapshot(facility) == snapshot_before


def test_a_one_part_delete_taken_back_can_be_done_again(
    facility: CouplingFacility, logged: tuple[CQS, CQS, RecoverySettings]
) -> None:
    a, _, _ = logged
    token = locked(a, b"delete me")
    fail_change(a)
    expect_failure(lambda: a.delete(token))
    a.delete(token)
    assert "lock" not in where(facility, MSGQ)


def test_a_multi_part_delete_is_taken_back_at_its_first_step_finished_after(
    facility: CouplingFacility, make_cqs: MakeCQS, logged: tuple[CQS, CQS, RecoverySettings]
) -> None:
    a, b, settings = logged
    token = locked(a, [b"part 1", b"part 2", b"part 3"])
    fail_change(a)
    first = expect_failure(lambda: a.delete(token))
    assert "deleted" not in first.context
    lists = where(facility, MSGQ)
    assert lists["lock"] == [(TRANA, b"CQSIMSA")] and len(lists["staging"]) == 2
    fail_change(a, at=2)  # a staged part's delete: the message is on its way out
    later = expect_failure(lambda: a.delete(token))
    assert later.context["deleted"] is True
    lists = where(facility, MSGQ)
    assert "lock" not in lists and "staging" not in lists and "delete" not in lists
    rebuilt_from_the_log_matches(facility, make_cqs, settings, a, b)
