"""The spec's derived tests: browse (§7.8), list limit (§7.9), list authority (§7.10),
backout counts (§7.11), entry sizes (§7.12), commit mechanics (§7.13), get variants
(§7.14)."""

from __future__ import annotations

import pytest

from sharedq.cf import CouplingFacility, StructureParams
from sharedq.mq import (
    IndexType,
    Inhibited,
    MessageTooBig,
    MQReason,
    NoMessageAvailable,
    QueueFull,
    QueueManager,
    Truncated,
    UowError,
    keys,
)
from sharedq.mq.messages import header_length
from tests.mq.conftest import APP, MakeManager
from tests.mq.helpers import committed, expiry_list, get_list, put_list, versions
from tests.mq.recording import Recording

# -- browse ------------------------------------------------------------------------------


def _browse_setup(qm: QueueManager):
    qm.define_queue("Q", structure=APP)
    q = qm.open("Q")
    q.put(b"C1", priority=7)
    q.put(b"C2", priority=4)
    q.put(b"C3", priority=4)
    uow = qm.unit_of_work()
    q.put(b"U", uow=uow)
    return q, uow


def test_browse_first_next_stops_at_uncommitted(qm: QueueManager) -> None:
    """B1: C1, C2, C3, then no message (the next entry is uncommitted); nothing moves."""
    q, uow = _browse_setup(qm)
    before = put_list(qm, "Q")
    cursor = q.browser()
    assert cursor.first().body == b"C1"
    assert cursor.next().body == b"C2"
    assert cursor.next().body == b"C3"
    with pytest.raises(NoMessageAvailable):
        cursor.next()
    assert put_list(qm, "Q") == before
    assert [m.body for m in q.browser()] == [b"C1", b"C2", b"C3"]
    uow.backout()


def test_browse_token_is_committed_key_with_zero_low_bytes(qm: QueueManager) -> None:
    """B2: the cursor is the committed key; its low four bytes are zero."""
    q, uow = _browse_setup(qm)
    cursor = q.browser()
    cursor.first()
    assert cursor.token is not None and cursor.token[12:] == b"\x00" * 4
    assert keys.browse_next_key(cursor.token)[12:] == b"\x00\x00\x00\x01"
    uow.backout()


def test_browse_next_after_browsed_message_was_taken(make_qm: MakeManager) -> None:
    """B3: browse-next works from the token even after its message was gotten."""
    qm1, qm2 = make_qm(1), make_qm(2)
    q, uow = _browse_setup(qm1)
    cursor = q.browser()
    assert cursor.first().body == b"C1"
    assert qm2.open("Q").get().body == b"C1"
    assert cursor.next().body == b"C2"
    uow.backout()


def test_get_under_cursor(make_qm: MakeManager) -> None:
    """Get under cursor takes the browsed message; B4: not if another took it first."""
    qm1, qm2 = make_qm(1), make_qm(2)
    q, uow = _browse_setup(qm1)
    cursor = q.browser()
    cursor.first()
    cursor.next()
    assert cursor.get(uow=uow).body == b"C2"
    assert committed(qm1, "Q") == [b"C1", b"C3"]
    cursor.next()
    assert qm2.open("Q").get().body == b"C1"
    assert qm2.open("Q").get().body == b"C3"
    with pytest.raises(NoMessageAvailable):
        cursor.get()
    uow.backout()
    assert committed(qm1, "Q") == [b"C2"]


def test_browse_by_index_key(qm: QueueManager) -> None:
    qm.define_queue("Q", structure=APP, index=IndexType.CORREL_ID)
    q = qm.open("Q")
    for i, correl in enumerate([b"A", b"B", b"A", b"A"]):
        q.put(b"m%d" % i, correl_id=correl, priority=9 if i == 3 else 0)
    assert [m.body for m in q.browser(correl_id=b"A")] == [b"m3", b"m0", b"m2"]
    assert [m.body for m in q.browser(correl_id=b"B")] == [b"m1"]


# -- list limit ------------------------------------------------------------------------------


def test_list_limit_is_max_depth_plus_one(qm: QueueManager) -> None:
    """L1: max depth 10: ten uncommitted puts fit, the eleventh is QUEUE_FULL."""
    qm.define_queue("Q", structure=APP, max_depth=10)
    q = qm.open("Q")
    where = qm.view().queue("Q")
    assert qm.view().list_info(where.structure, where.put_list).limit == 11
    uow = qm.unit_of_work()
    for i in range(10):
        q.put(b"%d" % i, uow=uow)
    with pytest.raises(QueueFull) as caught:
        q.put(b"10", uow=uow)
    assert caught.value.reason is MQReason.Q_FULL and caught.value.reason_code == 2053
    uow.commit()
    assert q.depth() == 10


def test_lowering_max_depth_keeps_messages(qm: QueueManager) -> None:
    """L2: max depth 10 -> 5 with 10 messages: all stay; puts fail until depth < 5."""
    qm.define_queue("Q", structure=APP, max_depth=10)
    q = qm.open("Q")
    for i in range(10):
        q.put(b"%d" % i)
    qm.alter_queue("Q", max_depth=5)
    assert q.depth() == 10
    with pytest.raises(QueueFull):
        q.put(b"x")
    for _ in range(6):
        q.get()
    q.put(b"y")
    with pytest.raises(QueueFull):
        q.put(b"z")


def test_backout_ignores_list_limit(make_qm: MakeManager) -> None:
    """L3: gets backed out return despite the limit; depth 15 > max depth 10."""
    qm1, qm2 = make_qm(1), make_qm(2)
    qm1.define_queue("Q", structure=APP, max_depth=10)
    q1, q2 = qm1.open("Q"), qm2.open("Q")
    for i in range(10):
        q1.put(b"old%d" % i)
    uow_a = qm1.unit_of_work()
    for _ in range(5):
        q1.get(uow=uow_a)
    with qm2.unit_of_work() as uow_b:
        for i in range(5):
            q2.put(b"new%d" % i, uow=uow_b)
    uow_a.backout()
    assert q1.depth() == 15
    with pytest.raises(QueueFull):
        q1.put(b"more")


def test_max_depth_zero_admits_nothing(qm: QueueManager) -> None:
    """L4: the LHQC counts: max depth 0 gives limit 1 and no message fits."""
    qm.define_queue("Q", structure=APP, max_depth=0)
    with pytest.raises(QueueFull):
        qm.open("Q").put(b"x")


# -- list authority ----------------------------------------------------------------------------


def test_put_inhibit_on_one_manager_is_honoured_by_all(make_qm: MakeManager) -> None:
    """§7.10 (p[119]): QM1 inhibits puts; QM2's next put fails its authority check,
    re-reads the LHQC and fails with PUT_INHIBITED; enabled again, it succeeds."""
    qm1, qm2 = make_qm(1), make_qm(2)
    qm1.define_queue("Q", structure=APP)
    q2 = qm2.open("Q")
    q2.put(b"before")
    authority = qm2.view().queue("Q").authority
    qm1.alter_queue("Q", put_inhibited=True)
    assert qm2.view().queue("Q").authority == authority  # QM2 does not know yet
    with pytest.raises(Inhibited) as caught:
        q2.put(b"refused")
    assert caught.value.reason is MQReason.PUT_INHIBITED
    assert qm2.view().queue("Q").authority == authority + 1
    qm1.alter_queue("Q", put_inhibited=False)
    q2.put(b"after")
    assert qm2.view().queue("Q").authority == authority + 2
    assert committed(qm1, "Q") == [b"before", b"after"]


def test_get_inhibit_is_honoured_by_peers(make_qm: MakeManager) -> None:
    qm1, qm2 = make_qm(1), make_qm(2)
    qm1.define_queue("Q", structure=APP)
    q2 = qm2.open("Q")
    q2.put(b"m")
    qm1.alter_queue("Q", get_inhibited=True)
    with pytest.raises(Inhibited) as caught:
        q2.get()
    assert caught.value.reason_code == 2016
    with pytest.raises(Inhibited):
        q2.browser().first()
    qm1.alter_queue("Q", get_inhibited=False)
    assert q2.get().body == b"m"


# -- backout counts -------------------------------------------------------------------------


def test_backout_count_from_version_capped_at_255(qm: QueueManager) -> None:
    """§7.11: three backouts: the fourth get says 3; after 300, 255; version goes on."""
    qm.define_queue("Q", structure=APP)
    q = qm.open("Q")
    q.put(b"m")
    for expected in range(3):
        uow = qm.unit_of_work()
        assert q.get(uow=uow).backout_count == expected
        uow.backout()
    assert q.browser().first().backout_count == 3
    for _ in range(297):
        uow = qm.unit_of_work()
        q.get(uow=uow)
        uow.backout()
    assert versions(qm, "Q")[b"m"] == 300
    assert q.get().backout_count == 255
    q.put(b"fresh")
    assert q.get().backout_count == 0


# -- entry sizes ----------------------------------------------------------------------------


@pytest.mark.parametrize(("element_size", "fits"), [(256, 65_280), (4096, 65_536)])
def test_largest_message_an_entry_holds(
    facility: CouplingFacility, element_size: int, fits: int
) -> None:
    """E4/E5: 255 elements of 256 bytes, or 16 of 4096; the header counts too."""
    facility.create(
        StructureParams.for_capacity(
            "BIG",
            list_count=16,
            entries=100,
            elements=400 * 4096 // element_size,
            element_size=element_size,
        )
    )
    with QueueManager(facility, "QM1", 1, admin="BIG") as qm:
        qm.define_queue("Q")
        q = qm.open("Q")
        limit = fits - header_length("QM1")
        assert qm.view().queue("Q").max_body == limit
        q.put(b"x" * limit)
        with pytest.raises(MessageTooBig) as caught:
            q.put(b"x" * (limit + 1))
        assert caught.value.reason is MQReason.MSG_TOO_BIG_FOR_Q_MGR
        assert q.depth() == 1
        assert len(q.get().body) == limit


def test_queue_max_message_length(qm: QueueManager) -> None:
    qm.define_queue("Q", structure=APP, max_message_length=100)
    q = qm.open("Q")
    q.put(b"x" * 100)
    with pytest.raises(MessageTooBig) as caught:
        q.put(b"x" * 101)
    assert caught.value.reason_code == 2030


# -- commit mechanics ----------------------------------------------------------------------------


def test_indexed_secondary_key_assigned_at_commit(make_qm: MakeManager) -> None:
    """C4: before commit no get by id finds the message; after commit one does."""
    qm1, qm2 = make_qm(1), make_qm(2)
    qm1.define_queue("Q", structure=APP, index=IndexType.MSG_ID)
    q1, q2 = qm1.open("Q"), qm2.open("Q")
    uow = qm1.unit_of_work()
    sent = q1.put(b"m", msg_id=b"ID-1", uow=uow)
    view = qm1.view()
    where = view.queue("Q")
    [entry] = view.entries(
        where.structure, where.put_list, keys.UNCOMMITTED_LOW, keys.UNCOMMITTED_HIGH
    )
    assert entry.secondary_key is None
    with pytest.raises(NoMessageAvailable):
        q2.get(msg_id=b"ID-1")
    with pytest.raises(NoMessageAvailable):
        q1.get(msg_id=b"ID-1", uow=uow)  # not even its own: the index is set at commit
    uow.commit()
    got = q2.get(msg_id=b"ID-1")
    assert got.body == b"m" and got.msg_id == sent.msg_id


def test_failed_put_leaves_nothing_in_the_unit(qm: QueueManager) -> None:
    """C8: a put that fails (queue full) adds no operation; commit touches nothing."""
    qm.define_queue("Q", structure=APP, max_depth=0)
    q = qm.open("Q")
    uow = qm.unit_of_work()
    with pytest.raises(QueueFull):
        q.put(b"x", uow=uow)
    assert uow.operation_count == 0
    uow.commit()


# -- get variants ------------------------------------------------------------------------------


def test_mark_skip_backout(qm: QueueManager) -> None:
    """S1: the marked get stays gotten through a backout, in a new unit; a second mark
    and a mark of the unit's own put are refused."""
    qm.define_queue("Q", structure=APP)
    q = qm.open("Q")
    for i in range(3):
        q.put(b"M%d" % i)
    uow = qm.unit_of_work()
    got = [q.get(uow=uow) for _ in range(3)]
    own = q.put(b"own", uow=uow)
    uow.mark_skip_backout(got[2])
    with pytest.raises(UowError) as second:
        uow.mark_skip_backout(got[1])
    assert second.value.reason is MQReason.SECOND_MARK_NOT_ALLOWED
    with pytest.raises(UowError):
        uow.mark_skip_backout(own)
    first_id = uow.uow_id
    uow.backout()
    assert committed(qm, "Q") == [b"M0", b"M1"]
    assert get_list(qm, APP) == [b"M2"]
    assert uow.active and uow.uow_id != first_id and uow.operation_count == 1
    uow.commit()
    assert get_list(qm, APP) == []
    assert committed(qm, "Q") == [b"M0", b"M1"]


def test_backout_last_message_on_truncation(qm: QueueManager) -> None:
    """S2: a committed message too long for max_length stays at its place, count
    unchanged; the unit's own put stays a put and commits normally."""
    qm.define_queue("Q", structure=APP)
    q = qm.open("Q")
    q.put(b"long message", priority=5)
    q.put(b"second", priority=5)
    uow = qm.unit_of_work()
    with pytest.raises(Truncated) as caught:
        q.get(uow=uow, max_length=4)
    assert caught.value.context["data_length"] == 12
    assert caught.value.reason_code == 2080
    assert committed(qm, "Q") == [b"long message", b"second"]
    assert versions(qm, "Q")[b"long message"] == 0
    assert uow.operation_count == 0
    cut = q.get(uow=uow, max_length=4, accept_truncated=True)
    assert (cut.body, cut.truncated, cut.data_length) == (b"long", True, 12)
    q.get(uow=uow)
    own = q.put(b"own message", uow=uow)
    with pytest.raises(Truncated):
        q.get(uow=uow, max_length=3)
    uow.commit()
    assert committed(qm, "Q") == [own.body]


def test_expired_message_goes_to_expiry_list(qm: QueueManager, clock) -> None:
    """S3: a get finds a message expired: to the expiry list, and the get goes on;
    one that expires while gotten goes there instead of back at backout."""
    qm.define_queue("Q", structure=APP)
    q = qm.open("Q")
    q.put(b"short", expiry=1.0, priority=9)
    q.put(b"long", expiry=100.0)
    clock.advance_s(2.0)
    uow = qm.unit_of_work()
    assert q.get(uow=uow).body == b"long"
    assert expiry_list(qm, APP) == [b"short"]
    clock.advance_s(200.0)
    uow.backout()
    assert committed(qm, "Q") == []
    assert sorted(expiry_list(qm, APP)) == [b"long", b"short"]
    assert [m.body for m in qm.expired_messages()] == [b"short", b"long"]  # key order
    assert qm.purge_expired() == 2
    assert expiry_list(qm, APP) == []


def _bulk_budget(facility: CouplingFacility) -> int:
    """The backend's default bulk budget: how many entries one bulk request handles
    when not told (a delete of absent ids, allowed to be missing, changes nothing)."""
    absent = [n.to_bytes(12, "big") for n in range(1, 5001)]
    with facility.connect(APP, "PROBE") as probe:
        result = probe.delete_entries(absent, missing_ok=True)
    assert result.seqs == () and 0 < result.processed < len(absent)
    return result.processed


def test_commit_redrives_bulk_requests(make_qm: MakeManager, facility: CouplingFacility) -> None:
    """C3: a commit's bulk move stops at the structure's budget and is redriven from
    the first entry not processed; every entry moves exactly once."""
    budget = _bulk_budget(facility)
    journal = Recording()
    qm = make_qm(1, journal=journal)
    qm.define_queue("Q", structure=APP, max_depth=10_000)
    q = qm.open("Q")
    uow = qm.unit_of_work()
    total = budget + 76
    for i in range(total):
        q.put(b"%04d" % i, uow=uow)
    journal.records.clear()
    uow.commit()
    moves = [r for r in journal.records if r["kind"].value == "commit-puts"]
    assert [len(r["seqs"]) for r in moves] == [budget, 76]
    # The redrive is the request's entries from the first one not processed.
    first, redrive = (r["entries"] for r in moves)
    assert len(first) == total and redrive == first[budget:]
    assert len({e.entry_id for e in first}) == total
    assert committed(qm, "Q") == [b"%04d" % i for i in range(total)]


def test_commit_without_room_for_descriptors_backs_out(make_qm: MakeManager) -> None:
    """No room in the administrative structure for the descriptors: BACKED_OUT (2003),
    and the unit is backed out."""
    from sharedq.mq import BackedOut, StorageFull
    from sharedq.seam import Journal

    # A journal that records nothing: with one, the unit commits through descriptors
    # (with none, a unit of one structure commits in one request and needs no room).
    qm = make_qm(1, journal=Journal())
    qm.define_queue("Q", structure=APP)
    qm.define_queue("FILLER", max_depth=100_000)  # in the administrative structure
    q, filler = qm.open("Q"), qm.open("FILLER")
    q.put(b"old")
    with pytest.raises(StorageFull):
        while True:
            filler.put(b"x" * 200)
    uow = qm.unit_of_work()
    q.put(b"new", uow=uow)
    q.get(uow=uow)
    with pytest.raises(BackedOut) as caught:
        uow.commit()
    assert caught.value.reason_code == 2003
    assert put_list(qm, "Q") == [("C", b"old")]
    assert q.get().backout_count == 1
