"""The journal seam: every change a manager makes reaches it, with what it meant."""

from __future__ import annotations

from sharedq.mq import ChangeKind, QueueManager
from tests.mq.conftest import ADMIN, APP, MakeManager
from tests.mq.recording import Recording


def _seq(qm: QueueManager, structure: str) -> int:
    return qm.view().seq(structure)


def test_every_change_reaches_the_journal(make_qm: MakeManager) -> None:
    """Between two points, the structures' sequence numbers taken are exactly those the
    journal was told about: no change bypasses the seam."""
    journal = Recording()
    qm = make_qm(1, journal=journal)
    start = {s: _seq(qm, s) for s in (ADMIN, APP)}
    journal.records.clear()
    qm.define_queue("Q", structure=APP)
    qm.define_queue("R", structure=ADMIN)
    q, r = qm.open("Q"), qm.open("R")
    q.put(b"out", persistent=True)
    with qm.unit_of_work() as uow:
        q.put(b"in", uow=uow)
        r.put(b"other", uow=uow)
        q.get(uow=uow)
    uow = qm.unit_of_work()
    q.get(uow=uow)
    r.get(uow=uow)
    uow.prepare()
    uow.backout()
    qm.alter_queue("Q", put_inhibited=True)
    q.get()
    end = {s: _seq(qm, s) for s in (ADMIN, APP)}
    for structure in (ADMIN, APP):
        told = sorted(
            s for rec in journal.records if rec["structure"] == structure for s in rec["seqs"]
        )
        assert told == list(range(start[structure] + 1, end[structure] + 1)), structure


def test_meanings(make_qm: MakeManager) -> None:
    journal = Recording()
    qm = make_qm(1, journal=journal)
    qm.define_queue("Q", structure=APP)
    q = qm.open("Q")
    journal.records.clear()
    sent = q.put(b"m", persistent=True)
    assert journal.kinds() == [ChangeKind.PUT, ChangeKind.SYNC_PUT]
    assert all(
        r["queue"] == "Q" and r["persistent"] is True and r["msg_id"] == sent.msg_id
        for r in journal.records
    )
    put_uow = journal.records[0]["uow"]
    assert put_uow is not None and put_uow[0] == qm.qm_id
    journal.records.clear()
    uow = qm.unit_of_work()
    q.put(b"np", uow=uow, persistent=False)
    got = q.get(uow=uow)
    assert got.body == b"m"
    uow.commit()
    assert journal.kinds() == [
        ChangeKind.PUT,
        ChangeKind.GET,
        ChangeKind.DESCRIPTOR,
        ChangeKind.DESCRIPTOR,
        ChangeKind.COMMIT_PUTS,
        ChangeKind.COMMIT_GETS,
        ChangeKind.DESCRIPTOR,
    ]
    get_record = journal.records[1]
    assert (get_record["persistent"], get_record["msg_id"]) == (True, sent.msg_id)
    assert all(r["uow"] == uow.uow_id for r in journal.records)
    commit_puts = journal.records[4]
    assert [(e.queue, e.persistent) for e in commit_puts["entries"]] == [("Q", False)]


def test_descriptors_deleted_last_part_first(make_qm: MakeManager) -> None:
    """U1: a unit's parts are deleted in LIFO order."""
    journal = Recording()
    qm = make_qm(1, journal=journal)
    qm.define_queue("Q", structure=APP)
    q = qm.open("Q")
    uow = qm.unit_of_work()
    for i in range(160):
        q.put(b"%d" % i, uow=uow)
    journal.records.clear()
    uow.commit()
    descriptors = [r for r in journal.records if r["kind"] is ChangeKind.DESCRIPTOR]
    written = [r["id"] for r in descriptors[:-2]]
    assert len(written) == 3  # parts
    deleted = descriptors[-1]
    assert [e.entry_id for e in deleted["entries"]] == written[::-1]
    assert len(deleted["seqs"]) == 3
