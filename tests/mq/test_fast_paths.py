"""The fast paths: a get out of syncpoint in one request, a batch of gets or of puts in
one request, on both backends, with the semantics of the requests they replace.

Round trips are counted with a fault hook (one call per structure request), never
timed.  Each fast path is held to the slow one: the same messages, in the same order,
with the same state left behind.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sharedq.cf import BulkWrite, CouplingFacility, Head, MonitorSpec, StructureParams
from sharedq.clock import ManualClock
from sharedq.mq import IndexType, Message, MQError, NoMessageAvailable, QueueFull, QueueManager
from sharedq.mq.journal import ChangeKind
from sharedq.recovery import RecoverySettings
from sharedq.seam import StructureAccess
from sharedq.seam.access import JournalFailure
from sharedq.seam.notes import EntryMeaning
from tests.mq.conftest import APP, MakeManager
from tests.mq.recording import Recording


class Counting:
    """A fault hook that records the structure requests a manager makes."""

    def __init__(self) -> None:
        self.requests: list[str] = []

    def __call__(self, request: str, structure: str, before: bool) -> None:
        if before:
            self.requests.append(request)

    def during(self, work: object) -> list[str]:
        self.requests.clear()
        assert callable(work)
        work()
        return list(self.requests)


def _fill(qm: QueueManager, name: str, bodies: list[bytes], priorities: list[int]) -> None:
    queue = qm.open(name)
    for body, priority in zip(bodies, priorities, strict=True):
        queue.put(body, priority=priority)


def _view(message: Message) -> tuple[bytes, int, bytes, int]:
    return message.body, message.priority, message.msg_id, message.backout_count


BODIES = [b"m%d" % n for n in range(12)]
PRIORITIES = [n % 4 for n in range(12)]


def test_a_get_out_of_syncpoint_is_one_request(make_qm: MakeManager) -> None:
    counting = Counting()
    qm = make_qm(1, faults=counting)
    qm.define_queue("Q", structure=APP)
    queue = qm.open("Q")
    queue.put(b"one")
    got: list[Message] = []
    assert counting.during(lambda: got.append(queue.get())) == ["take"]
    assert got[0].body == b"one"
    assert queue.depth() == 0
    with pytest.raises(NoMessageAvailable):
        queue.get()
    # The simple cycle: a put and a get, two requests.
    assert counting.during(lambda: (queue.put(b"two"), queue.get())) == [
        "write_and_rekey",
        "take",
    ]


def test_a_get_out_of_syncpoint_finds_an_expired_message_and_goes_on(
    make_qm: MakeManager, clock: ManualClock
) -> None:
    """Taken and found expired, a message goes to the expiry list, as a move would put it."""
    qm = make_qm(1)
    qm.define_queue("Q", structure=APP)
    queue = qm.open("Q")
    queue.put(b"old", expiry=1.0, priority=9)
    queue.put(b"fresh", priority=0)
    clock.advance_s(5.0)
    assert queue.get().body == b"fresh"
    view = qm.view()
    expired = view.entries(APP, view.queue("Q").expiry_list)
    assert [e.data.endswith(b"old") for e in expired] == [True]


def test_get_many_returns_what_that_many_gets_would(make_qm: MakeManager) -> None:
    qm1, qm2 = make_qm(1), make_qm(2)
    qm1.define_queue("FAST", structure=APP)
    qm1.define_queue("SLOW", structure=APP)
    _fill(qm1, "FAST", BODIES, PRIORITIES)
    _fill(qm1, "SLOW", BODIES, PRIORITIES)
    fast, slow = qm2.open("FAST"), qm2.open("SLOW")
    batch = fast.get_many(5) + fast.get_many(100)
    singles = []
    while True:
        try:
            singles.append(slow.get())
        except NoMessageAvailable:
            break
    assert [m.body for m in batch] == [m.body for m in singles]
    assert [m.priority for m in batch] == [m.priority for m in singles]
    assert fast.get_many(10) == []
    assert fast.depth() == slow.depth() == 0


def test_get_many_in_a_unit_is_one_request_and_its_commit_one(make_qm: MakeManager) -> None:
    counting = Counting()
    qm1, qm2 = make_qm(1), make_qm(2, faults=counting)
    qm1.define_queue("Q", structure=APP)
    _fill(qm1, "Q", [b"m%d" % n for n in range(100)], [5] * 100)
    queue = qm2.open("Q")
    uow = qm2.unit_of_work()
    got: list[Message] = []
    assert counting.during(lambda: got.extend(queue.get_many(100, uow=uow))) == ["take_many"]
    assert [m.body for m in got] == [b"m%d" % n for n in range(100)]
    commit = counting.during(uow.commit)
    # A unit of gets only, on one structure, with no log: the hundred gets deleted in
    # one bulk request, no descriptors (sharedq.mq.onecommit).
    assert commit == ["delete_entries"]
    assert queue.depth() == 0


def test_a_backed_out_batch_goes_back_in_order(make_qm: MakeManager) -> None:
    qm = make_qm(1)
    qm.define_queue("Q", structure=APP)
    _fill(qm, "Q", BODIES, PRIORITIES)
    queue = qm.open("Q")
    with qm.unit_of_work() as uow:
        first = queue.get_many(7, uow=uow)
        uow.backout()
    again = queue.get_many(12)
    assert [_view(m)[:3] for m in again] == sorted(
        [_view(m)[:3] for m in again], key=lambda v: -v[1]
    )
    assert {m.body for m in again} == set(BODIES)
    backed = {m.body for m in first}
    assert all(m.backout_count == (1 if m.body in backed else 0) for m in again)


def test_get_many_takes_the_units_own_puts_where_gets_would(make_qm: MakeManager) -> None:
    """Example 1: a unit's own put is gotten where it would stand once committed."""
    results = []
    for name in ("FAST", "SLOW"):
        qm = make_qm(1 if name == "FAST" else 2)
        qm.define_queue(name, structure=APP)
        queue = qm.open(name)
        queue.put(b"c9", priority=9)
        queue.put(b"c1", priority=1)
        uow = qm.unit_of_work()
        queue.put(b"own5", uow=uow, priority=5)
        queue.put(b"own0", uow=uow, priority=0)
        if name == "FAST":
            got = queue.get_many(10, uow=uow)
        else:
            got = []
            for _ in range(10):
                try:
                    got.append(queue.get(uow=uow))
                except NoMessageAvailable:
                    break
        results.append([m.body for m in got])
        uow.commit()
        assert queue.depth() == 0
    assert results[0] == results[1] == [b"c9", b"own5", b"c1", b"own0"]


def test_get_many_waits_for_the_first(make_qm: MakeManager) -> None:
    qm = make_qm(1)
    qm.define_queue("Q", structure=APP)
    queue = qm.open("Q")
    assert queue.get_many(3, wait=0.05) == []
    queue.put(b"a")
    assert [m.body for m in queue.get_many(3, wait=5)] == [b"a"]


@pytest.mark.parametrize("count", [0, 1001, "3", None])
def test_get_many_refuses_a_bad_count(make_qm: MakeManager, count: object) -> None:
    qm = make_qm(1)
    qm.define_queue("Q", structure=APP)
    queue = qm.open("Q")
    queue.put(b"stays")
    with pytest.raises(Exception, match="count"):
        queue.get_many(count)  # type: ignore[arg-type]
    assert queue.depth() == 1


def test_with_a_log_the_fast_paths_keep_the_logged_requests(
    make_qm: MakeManager, tmp_path: Path
) -> None:
    """With a recovery log a get's changes are logged one by one, as before: a get out
    of syncpoint is a move and a delete, and get_many is that many gets."""
    counting = Counting()
    qm = make_qm(1, faults=counting, recovery=RecoverySettings(tmp_path / "recovery"))
    qm.define_queue("Q", structure=APP)
    queue = qm.open("Q")
    for n in range(3):
        queue.put(b"m%d" % n)
    assert counting.during(queue.get) == ["move", "delete"]
    got: list[Message] = []
    requests = counting.during(lambda: got.extend(queue.get_many(5)))
    assert [m.body for m in got] == [b"m1", b"m2"]
    assert requests.count("take_many") == 0 and requests.count("move") == 3


# -- put many ---------------------------------------------------------------------------


def test_put_many_puts_what_that_many_puts_would(make_qm: MakeManager) -> None:
    counting = Counting()
    qm = make_qm(1, faults=counting)
    for name in ("FAST", "SLOW"):
        qm.define_queue(name, structure=APP)
    fast, slow = qm.open("FAST"), qm.open("SLOW")
    for priority in (3, 7, 3):
        bodies = [b"p%d-%d" % (priority, n) for n in range(4)]
        requests = counting.during(lambda b=bodies, p=priority: fast.put_many(b, priority=p))
        assert requests == ["write_entries", "move_entries"]  # out of syncpoint: two
        for body in bodies:
            slow.put(body, priority=priority)
    assert [_view(m)[:2] for m in fast.get_many(100)] == [_view(m)[:2] for m in slow.get_many(100)]


def test_put_many_in_a_unit_is_invisible_until_commit(make_qm: MakeManager) -> None:
    counting = Counting()
    qm1, qm2 = make_qm(1, faults=counting), make_qm(2)
    qm1.define_queue("Q", structure=APP)
    queue, other = qm1.open("Q"), qm2.open("Q")
    uow = qm1.unit_of_work()
    bodies = [b"u%d" % n for n in range(300)]
    assert counting.during(lambda: queue.put_many(bodies, uow=uow)) == ["write_entries"] * 2
    assert other.get_many(10) == [] and other.depth() == 300  # uncommitted puts count
    assert [m.body for m in queue.get_many(2, uow=uow)] == [b"u0", b"u1"]  # its own
    uow.commit()
    assert [m.body for m in other.get_many(1000)] == bodies[2:]


def test_a_backed_out_put_many_leaves_nothing(make_qm: MakeManager) -> None:
    qm = make_qm(1)
    qm.define_queue("Q", structure=APP)
    queue = qm.open("Q")
    with qm.unit_of_work() as uow:
        queue.put_many([b"a", b"b"], uow=uow)
        uow.backout()
    assert queue.depth() == 0 and queue.get_many(5) == []


@pytest.mark.parametrize("syncpoint", [False, True])
def test_put_many_is_whole_or_nothing_at_max_depth(make_qm: MakeManager, syncpoint: bool) -> None:
    """The queue's maximum depth holds exactly: a batch that does not fit puts nothing."""
    qm = make_qm(1)
    qm.define_queue("Q", structure=APP, max_depth=5)
    queue = qm.open("Q")
    queue.put_many([b"1", b"2"])
    uow = qm.unit_of_work() if syncpoint else None
    with pytest.raises(QueueFull):
        queue.put_many([b"3", b"4", b"5", b"6"], uow=uow)
    assert queue.depth() == 2
    queue.put_many([b"3", b"4", b"5"], uow=uow)
    assert queue.depth() == 5
    if uow is not None:
        uow.commit()
    assert [m.body for m in queue.get_many(10)] == [b"1", b"2", b"3", b"4", b"5"]


def test_put_many_on_an_indexed_queue_gets_by_id(make_qm: MakeManager) -> None:
    qm = make_qm(1)
    qm.define_queue("Q", structure=APP, index=IndexType.MSG_ID)
    queue = qm.open("Q")
    put = queue.put_many([b"x", b"y", b"z"])
    assert queue.get(msg_id=put[1].msg_id).body == b"y"


def test_put_many_refuses_what_put_refuses(make_qm: MakeManager) -> None:
    qm = make_qm(1)
    qm.define_queue("Q", structure=APP, max_message_length=4)
    queue = qm.open("Q")
    with pytest.raises(MQError):
        queue.put_many([b"ok", b"too long"])
    with pytest.raises(MQError):
        queue.put_many(b"bytes, not a list")  # type: ignore[arg-type]
    with pytest.raises(MQError):
        queue.put_many([])
    with pytest.raises(MQError):
        queue.put_many([b"x"], priority=10)
    assert queue.depth() == 0


def test_put_many_sees_a_definition_another_manager_changed(make_qm: MakeManager) -> None:
    """Conditioned on the list authority as each put is: a stale definition is re-read."""
    qm1, qm2 = make_qm(1), make_qm(2)
    qm1.define_queue("Q", structure=APP)
    queue = qm1.open("Q")
    queue.put_many([b"before"])
    qm2.alter_queue("Q", put_inhibited=True)
    with pytest.raises(MQError, match="inhibited"):
        queue.put_many([b"after"])
    assert queue.depth() == 1


# -- the seam: one note per change, fused or batched --------------------------------------


def test_fused_and_batched_requests_tell_the_journal_each_change(
    facility: CouplingFacility,
) -> None:
    """``take``, ``take_many`` and ``write_entries`` through the structure access: the
    journal hears of every change, each as the single request would note it."""
    facility.create(StructureParams.for_capacity("SEAMT", list_count=4, entries=50, elements=200))
    journal = Recording()
    conn = facility.connect("SEAMT", "U1")

    def failure(error: Exception, note: object) -> JournalFailure:
        return JournalFailure(str(error))

    acc = StructureAccess(conn, 1, journal, failure)
    start = conn.statistics().seq
    writes = [BulkWrite(0, bytes([n]) * 16, b"d%d" % n, entry_id=bytes([1, n]) * 6) for n in (1, 2)]
    meanings = [EntryMeaning(w.entry_id or b"", "Q", True, None) for w in writes]
    acc.write_entries(writes, kind=ChangeKind.PUT, uow=None, meanings=meanings)
    for _ in range(3):
        acc.write(0, bytes([9]) * 16, b"x", kind=ChangeKind.PUT)
    taken = acc.take(Head(0), 1, delete=True, kind=ChangeKind.GET, then=ChangeKind.SYNC_GET)
    assert taken.deleted is not None
    many = acc.take_many(Head(0), 2, 10, kind=ChangeKind.GET)
    assert len(many) == 4
    assert acc.take(Head(0), 1, monitor=MonitorSpec(0), kind=ChangeKind.GET).registration
    end = conn.statistics().seq
    told = sorted(s for rec in journal.records for s in rec["seqs"])
    # Every change but the registration (a monitor is no change a log records).
    assert told == list(range(start + 1, end))
    assert [(r["kind"], r["request"]) for r in journal.records[:2]] == [
        (ChangeKind.PUT, "write"),
        (ChangeKind.PUT, "write"),
    ]
    assert journal.records[0]["id"] == writes[0].entry_id
    assert [r["kind"] for r in journal.records[5:7]] == [ChangeKind.GET, ChangeKind.SYNC_GET]
    conn.disconnect()
