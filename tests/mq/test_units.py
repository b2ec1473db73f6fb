"""Units of work: the context manager, ownership, states, two-phase commit, threads."""

from __future__ import annotations

import threading

import pytest

from sharedq.mq import MQReason, NoMessageAvailable, QueueManager, UowError, UowState
from tests.mq.conftest import APP, MakeManager
from tests.mq.helpers import committed, descriptor_count, get_list, put_list


@pytest.fixture
def q(qm: QueueManager):
    qm.define_queue("Q", structure=APP)
    return qm.open("Q")


def test_context_manager_commits_on_success(qm: QueueManager, q) -> None:
    with qm.unit_of_work() as uow:
        q.put(b"a", uow=uow)
    assert uow.state is UowState.ENDED
    assert committed(qm, "Q") == [b"a"]


def test_context_manager_backs_out_on_exception(qm: QueueManager, q) -> None:
    q.put(b"old")
    with pytest.raises(RuntimeError), qm.unit_of_work() as uow:
        q.put(b"new", uow=uow)
        assert q.get(uow=uow).body == b"old"
        raise RuntimeError("application failure")
    assert put_list(qm, "Q") == [("C", b"old")]
    assert q.get().backout_count == 1


def test_commit_after_backout_is_a_state_error(qm: QueueManager, q) -> None:
    uow = qm.unit_of_work()
    q.put(b"a", uow=uow)
    uow.backout()
    for call in (uow.commit, uow.backout, uow.prepare):
        with pytest.raises(UowError) as caught:
            call()
        assert caught.value.reason is MQReason.UOW_STATE_ERROR
    with pytest.raises(UowError):
        q.put(b"b", uow=uow)
    assert put_list(qm, "Q") == []


def test_one_unit_per_thread(qm: QueueManager, q) -> None:
    uow = qm.unit_of_work()
    with pytest.raises(UowError) as caught:
        qm.unit_of_work()
    assert caught.value.reason is MQReason.UOW_IN_PROGRESS
    uow.commit()
    qm.unit_of_work().commit()


def test_commit_of_a_unit_another_thread_owns(qm: QueueManager, q) -> None:
    uow = qm.unit_of_work()
    q.put(b"a", uow=uow)
    errors: list[BaseException] = []

    def intruder() -> None:
        for call in (uow.commit, lambda: q.put(b"b", uow=uow), lambda: q.get(uow=uow)):
            try:
                call()
            except UowError as error:
                errors.append(error)

    thread = threading.Thread(target=intruder)
    thread.start()
    thread.join()
    assert [e.reason for e in errors] == [MQReason.UOW_NOT_OWNER] * 3  # type: ignore[attr-defined]
    assert put_list(qm, "Q") == [("U", b"a")]
    uow.commit()
    assert put_list(qm, "Q") == [("C", b"a")]


def test_threads_each_with_their_own_unit(qm: QueueManager, q) -> None:
    """Several threads of one manager put and get in their own units concurrently."""
    for i in range(200):
        q.put(b"%d" % i)
    got: list[list[bytes]] = [[] for _ in range(4)]
    failures: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            work(n)
        except BaseException as error:  # reported by the main thread
            failures.append(error)

    def work(n: int) -> None:
        while True:
            with qm.unit_of_work() as uow:
                try:
                    message = q.get(uow=uow)
                except NoMessageAvailable:
                    return
                got[n].append(message.body)
                # Its own put, at a higher priority than anything committed, is
                # what its next get returns (best key rules); then both vanish.
                q.put(b"r" + message.body, uow=uow, priority=9)
                assert q.get(uow=uow).body == b"r" + message.body

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    everything = sorted(b for part in got for b in part)
    assert everything == sorted(b"%d" % i for i in range(200))
    assert put_list(qm, "Q") == [] and get_list(qm, APP) == []


def test_prepare_then_commit(make_qm: MakeManager) -> None:
    """C6: prepare writes descriptors "in prepare"; commit changes the status, acts,
    and deletes them."""
    qm1, qm2 = make_qm(1), make_qm(2)
    qm1.define_queue("Q", structure=APP)
    q1 = qm1.open("Q")
    q1.put(b"old")
    uow = qm1.unit_of_work()
    q1.put(b"new", uow=uow)
    q1.get(uow=uow)
    uow.prepare()
    assert uow.state is UowState.PREPARED
    assert descriptor_count(qm1) == 1
    with pytest.raises(UowError):
        q1.put(b"more", uow=uow)
    with pytest.raises(UowError):
        uow.prepare()
    [unit] = qm2.indoubt("QM1")
    assert (unit.uow_id, unit.status, unit.operations) == (uow.uow_id, "prepared", 2)
    uow.commit()
    assert descriptor_count(qm1) == 0
    assert committed(qm1, "Q") == [b"new"]


def test_prepare_then_backout(qm: QueueManager, q) -> None:
    q.put(b"old")
    uow = qm.unit_of_work()
    q.put(b"new", uow=uow)
    q.get(uow=uow)
    uow.prepare()
    uow.backout()
    assert descriptor_count(qm) == 0
    assert committed(qm, "Q") == [b"old"]


def test_empty_units(qm: QueueManager) -> None:
    qm.unit_of_work().commit()
    qm.unit_of_work().backout()
    uow = qm.unit_of_work()
    uow.prepare()
    uow.commit()
    assert descriptor_count(qm) == 0


def test_unit_of_another_manager_is_refused(make_qm: MakeManager) -> None:
    qm1, qm2 = make_qm(1), make_qm(2)
    qm1.define_queue("Q", structure=APP)
    uow = qm2.unit_of_work()
    with pytest.raises(Exception) as caught:
        qm1.open("Q").put(b"x", uow=uow)
    assert caught.value.reason is MQReason.BAD_ARGUMENT  # type: ignore[attr-defined]
    uow.backout()


def test_closed_manager_refuses_requests(make_qm: MakeManager) -> None:
    qm1 = make_qm(1)
    qm1.define_queue("Q", structure=APP)
    q = qm1.open("Q")
    uow = qm1.unit_of_work()
    q.put(b"uncommitted", uow=uow)
    qm1.close()
    with pytest.raises(Exception) as caught:
        q.put(b"x")
    assert caught.value.reason is MQReason.HCONN_ERROR  # type: ignore[attr-defined]
    qm2 = make_qm(2)
    assert put_list(qm2, "Q") == []  # close backed the active unit out
