"""Which requests wait for the log's sync: every request (the default) or only puts
(``Sync.PUTS``: the others' records reach the disk with the next sync)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sharedq.cqs import CQS, InvalidCQSRequest, Sync
from sharedq.log import LogWriter
from sharedq.recovery import RecoverySettings

from .conftest import MSGQ, MakeCQS
from .helpers import TRANA, TRANB


def writer(cqs: CQS) -> LogWriter:
    assert cqs.recovery_log is not None
    return cqs.recovery_log.journal.writer_for(MSGQ)


def synced(cqs: CQS) -> bool:
    log = writer(cqs)
    return log.durable_lsn == log.last_lsn


def cycle(cqs: CQS) -> list[bool]:
    """Whether the log was synced after each request of put, read, move, read, unlock,
    read, delete."""
    after = []
    cqs.put(TRANA, b"message")
    after.append(synced(cqs))
    for step in ("read", "move", "read", "unlock", "read", "delete"):
        if step == "read":
            message = cqs.read(TRANA) or cqs.read(TRANB)
            assert message is not None and message.token is not None
            token = message.token
        elif step == "move":
            cqs.move(token, TRANB)
        elif step == "unlock":
            cqs.unlock(token)
        else:
            cqs.delete(token)
        after.append(synced(cqs))
    return after


def test_every_request_waits_for_the_sync_by_default(make_cqs: MakeCQS, tmp_path: Path) -> None:
    cqs = make_cqs("IMSA", recovery=RecoverySettings(tmp_path / "r", strchkpt=None))
    assert cycle(cqs) == [True] * 7


def test_with_sync_puts_only_puts_wait_the_rest_ride_the_next_sync(
    make_cqs: MakeCQS, tmp_path: Path
) -> None:
    cqs = make_cqs("IMSA", recovery=RecoverySettings(tmp_path / "r", strchkpt=None), sync=Sync.PUTS)
    assert cycle(cqs) == [True] + [False] * 6
    unsynced = writer(cqs).last_lsn
    cqs.put(TRANA, b"the next put")  # its sync takes the others' records with it
    assert synced(cqs) and writer(cqs).durable_lsn > unsynced


def test_sync_must_be_a_sync_setting(make_cqs: MakeCQS) -> None:
    with pytest.raises(InvalidCQSRequest):
        make_cqs("IMSA", sync="puts", connect=False)
