"""The patent's worked examples (spec §7.1-§7.7), as tests.

Priorities in the patent's examples are inverted (0 highest); here they are MQ
priorities (9 highest): inverted 9 is MQ priority 0, inverted 0 is MQ priority 9.
"""

from __future__ import annotations

import pytest

from sharedq.mq import NoMessageAvailable, QueueManager
from tests.mq.conftest import APP, MakeManager
from tests.mq.helpers import committed, get_list, put_list, versions


def _example_puts(qm: QueueManager, *, p3: int = 0, p4: int = 0, persistent_out: bool = False):
    """Example 1's puts: M1, M2 out of syncpoint; M3 (non-persistent) and M4
    (persistent) in syncpoint; M5 out of syncpoint.  Returns the unit of work."""
    qm.define_queue("Q", structure=APP)
    q = qm.open("Q")
    uow = qm.unit_of_work()
    q.put(b"M1", priority=0, persistent=persistent_out)
    q.put(b"M2", priority=0, persistent=persistent_out)
    q.put(b"M3", priority=p3, persistent=False, uow=uow)
    q.put(b"M4", priority=p4, persistent=True, uow=uow)
    q.put(b"M5", priority=0, persistent=persistent_out)
    return q, uow


def test_example_1_get_in_syncpoint_returns_own_puts_in_order(qm: QueueManager) -> None:
    """EXAMPLE 1 (p[147]): PLH M1, M2, M5, M3, M4; five gets return M1..M5."""
    q, uow = _example_puts(qm)
    assert put_list(qm, "Q") == [
        ("C", b"M1"),
        ("C", b"M2"),
        ("C", b"M5"),
        ("U", b"M3"),
        ("U", b"M4"),
    ]
    got = [q.get(uow=uow).body for _ in range(5)]
    assert got == [b"M1", b"M2", b"M3", b"M4", b"M5"]
    with pytest.raises(NoMessageAvailable):
        q.get(uow=uow)
    # M3 and M4 never moved: they are still uncommitted entries on the put list.
    assert put_list(qm, "Q") == [("U", b"M3"), ("U", b"M4")]
    assert get_list(qm, APP) == [b"M1", b"M2", b"M5"]
    uow.commit()
    assert put_list(qm, "Q") == []
    assert get_list(qm, APP) == []


def test_example_1_backout_returns_gets_and_deletes_own_puts(qm: QueueManager) -> None:
    """After Example 1's gets, a backout returns M1, M2, M5 (count +1), deletes M3, M4."""
    q, uow = _example_puts(qm)
    for _ in range(5):
        q.get(uow=uow)
    uow.backout()
    assert put_list(qm, "Q") == [("C", b"M1"), ("C", b"M2"), ("C", b"M5")]
    assert versions(qm, "Q") == {b"M1": 1, b"M2": 1, b"M5": 1}
    assert [q.get().backout_count for _ in range(3)] == [1, 1, 1]


@pytest.mark.parametrize("persistent_out", [False, True])
def test_example_2_get_in_syncpoint_if_persistent(qm: QueueManager, persistent_out: bool) -> None:
    """EXAMPLE 2 (p[149]): M1, M2, M4, M5, then no message; M3 is never returned."""
    q, uow = _example_puts(qm, persistent_out=persistent_out)
    got = [q.get(uow=uow, if_persistent=True).body for _ in range(4)]
    assert got == [b"M1", b"M2", b"M4", b"M5"]
    with pytest.raises(NoMessageAvailable):
        q.get(uow=uow, if_persistent=True)
    # Non-persistent messages were gotten out of syncpoint (gone for good); persistent
    # ones are in the unit.
    expected_get_list = [b"M1", b"M2", b"M5"] if persistent_out else []
    assert get_list(qm, APP) == expected_get_list
    uow.backout()
    assert committed(qm, "Q") == expected_get_list


@pytest.mark.parametrize(
    ("high", "plh", "gets"),
    [
        # EXAMPLE 3 (p[150]): which message had the high priority was stripped; the
        # likely intent is one of the unit's own uncommitted puts (spec §7.5).
        ("M3", ["M1", "M2", "M5", "M3", "M4"], ["M3", "M1", "M2", "M4", "M5"]),
        ("M4", ["M1", "M2", "M5", "M4", "M3"], ["M4", "M1", "M2", "M3", "M5"]),
    ],
)
def test_example_3_one_high_priority_own_put(
    qm: QueueManager, high: str, plh: list[str], gets: list[str]
) -> None:
    q, uow = _example_puts(qm, p3=9 if high == "M3" else 0, p4=9 if high == "M4" else 0)
    assert [body.decode() for _, body in put_list(qm, "Q")] == plh
    assert [q.get(uow=uow).body.decode() for _ in range(5)] == gets
    uow.commit()


@pytest.mark.parametrize(
    ("p3", "p4", "gets"),
    [
        # EXAMPLE 4 (p[152]): illustrative instances from spec §7.6 (inverted 0/1/5).
        (9, 8, ["M3", "M4", "M1", "M2", "M5"]),
        (8, 9, ["M4", "M3", "M1", "M2", "M5"]),
        (4, 9, ["M4", "M3", "M1", "M2", "M5"]),
    ],
)
def test_example_4_mixed_priorities(qm: QueueManager, p3: int, p4: int, gets: list[str]) -> None:
    q, uow = _example_puts(qm, p3=p3, p4=p4)
    assert [q.get(uow=uow).body.decode() for _ in range(5)] == gets
    uow.commit()


@pytest.mark.parametrize(("p_r", "p_n", "order"), [(7, 3, [b"R", b"N"]), (3, 7, [b"N", b"R"])])
def test_backed_out_get_reinserted_by_priority(
    make_qm: MakeManager, p_r: int, p_n: int, order: list[bytes]
) -> None:
    """§7.1 (p[36]): a backed-out get returns at its priority, around a newer commit."""
    qm1, qm2 = make_qm(1), make_qm(2)
    qm1.define_queue("Q", structure=APP)
    q1, q2 = qm1.open("Q"), qm2.open("Q")
    q1.put(b"R", priority=p_r)
    uow1 = qm1.unit_of_work()
    assert q1.get(uow=uow1).body == b"R"
    with qm2.unit_of_work() as uow2:
        q2.put(b"N", priority=p_n, uow=uow2)
    uow1.backout()
    assert committed(qm1, "Q") == order
    assert versions(qm1, "Q")[b"R"] == 1
    assert q2.get().body == order[0]


@pytest.mark.parametrize(
    ("p_x", "order"), [(9, [b"MX", b"M1", b"M1'"]), (4, [b"M1", b"M1'", b"MX"])]
)
def test_backed_out_get_goes_before_later_same_priority(
    make_qm: MakeManager, p_x: int, order: list[bytes]
) -> None:
    """§7.2 (p[37], p[38]): M1 returns ahead of M1', put later at the same priority."""
    qm1, qm2 = make_qm(1), make_qm(2)
    qm1.define_queue("Q", structure=APP)
    q1, q2 = qm1.open("Q"), qm2.open("Q")
    q1.put(b"M1", priority=8)
    uow1 = qm1.unit_of_work()
    q1.get(uow=uow1)
    q2.put(b"MX", priority=p_x)
    q2.put(b"M1'", priority=8)
    uow1.backout()
    assert committed(qm1, "Q") == order


def test_order_is_put_time_not_commit_time(make_qm: MakeManager) -> None:
    """V5: MA put before MB, committed after it; after MB's backout, MA comes first."""
    qm1, qm2, qm3 = make_qm(1), make_qm(2), make_qm(3)
    qm1.define_queue("Q", structure=APP)
    qa, qb, qc = qm1.open("Q"), qm2.open("Q"), qm3.open("Q")
    uow_a = qm1.unit_of_work()
    qa.put(b"MA", priority=5, uow=uow_a)
    with qm2.unit_of_work() as uow_b:
        qb.put(b"MB", priority=5, uow=uow_b)
    uow_c = qm3.unit_of_work()
    assert qc.get(uow=uow_c).body == b"MB"
    uow_c.backout()
    uow_a.commit()
    assert committed(qm1, "Q") == [b"MA", b"MB"]


def test_uncommitted_put_invisible_to_others(make_qm: MakeManager) -> None:
    """V1: another unit cannot get or browse an uncommitted put; after commit it can."""
    qm1, qm2 = make_qm(1), make_qm(2)
    qm1.define_queue("Q", structure=APP)
    q1, q2 = qm1.open("Q"), qm2.open("Q")
    uow = qm1.unit_of_work()
    q1.put(b"M", uow=uow)
    with pytest.raises(NoMessageAvailable):
        q2.get()
    with pytest.raises(NoMessageAvailable):
        q2.browser().first()
    uow.commit()
    assert q2.get().body == b"M"


def test_get_out_of_syncpoint_never_returns_own_uncommitted_put(qm: QueueManager) -> None:
    """V2/V4: only uncommitted entries: get out of syncpoint and browse find nothing."""
    qm.define_queue("Q", structure=APP)
    q = qm.open("Q")
    uow = qm.unit_of_work()
    q.put(b"U", uow=uow)
    with pytest.raises(NoMessageAvailable):
        q.get()
    with pytest.raises(NoMessageAvailable):
        q.browser().first()
    uow.backout()


def test_priority_inversion(qm: QueueManager) -> None:
    """V3: one message at each priority 0..9, committed; gets return 9, 8, ..., 0."""
    qm.define_queue("Q", structure=APP)
    q = qm.open("Q")
    with qm.unit_of_work() as uow:
        for priority in range(10):
            q.put(bytes([priority]), priority=priority, uow=uow)
    assert [q.get().priority for _ in range(10)] == list(range(9, -1, -1))


def test_ten_gets_from_ten_queues_backout_each_to_its_own(qm: QueueManager) -> None:
    """V6: gets from ten queues in two structures go back each to its own put list."""
    from tests.mq.conftest import ADMIN

    names = [f"Q{i}" for i in range(10)]
    for i, name in enumerate(names):
        qm.define_queue(name, structure=APP if i % 2 else ADMIN)
        qm.open(name).put(name.encode())
    uow = qm.unit_of_work()
    for name in names:
        assert qm.open(name).get(uow=uow).body == name.encode()
    uow.backout()
    for name in names:
        assert committed(qm, name) == [name.encode()]
