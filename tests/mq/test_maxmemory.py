"""A queue-sharing group on a Redis server that reaches ``maxmemory``.

Producers put until the server is out of memory and their puts are refused
(``StorageFull``, 2192) without changing anything; consumers of another manager then
drain every message, with gets in units of work (committed or backed out first) and
out of syncpoint, each get and commit running while the server is still out of memory;
afterwards puts work again.  Every acknowledged message is gotten exactly once.  Run
with and without a recovery log, whose journal changes what a commit asks of the
structure (the deleted message's data).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sharedq.cf import ListStructure
from sharedq.cf.redis import RedisFacility
from sharedq.mq import (
    BackedOut,
    Message,
    NoMessageAvailable,
    Queue,
    QueueManager,
    StorageFull,
    structure_params,
)
from sharedq.recovery.settings import RecoverySettings
from sharedq.testing.redis_server import RedisServer
from tests.cf_redis.maxmemory import (
    fill_until_refused,
    hold_out_of_memory,
    is_out_of_memory_error,
    limit_above_use,
    set_maxmemory,
)

ADMIN = "QSGADMIN"
APP = "APP1"
#: Bytes of body per message (after an 8-digit number that names it).
BODY = 2000
#: How far below its use the server's limit is held once it is full: the drain's
#: first hundred or so gets and commits run out of memory.
MARGIN = 256 << 10


@dataclass
class Group:
    server: RedisServer
    facility: RedisFacility
    producer: QueueManager
    consumer: QueueManager
    watcher: ListStructure
    acked: list[bytes] = field(default_factory=list)

    @property
    def put_queue(self) -> Queue:
        return self.producer.open("Q")

    @property
    def get_queue(self) -> Queue:
        return self.consumer.open("Q")


def body(n: int) -> bytes:
    return b"%08d" % n + bytes(BODY)


@pytest.fixture(params=["plain", "recovery-log"])
def group(
    request: pytest.FixtureRequest, redis_servers: Callable[..., RedisServer], tmp_path: Path
) -> Iterator[Group]:
    """Two managers on a private server, the queue ``Q`` defined, nothing put yet."""
    server = redis_servers()
    facility = RedisFacility.from_url(server.url)
    managers: list[QueueManager] = []
    try:
        for name in (ADMIN, APP):
            # Room for far more than the server holds: Redis runs out of memory first.
            facility.create(structure_params(name, queues=4, managers=4, messages=100_000))
        recovery = None
        if request.param == "recovery-log":
            recovery = RecoverySettings(
                tmp_path / "recovery", poll_seconds=0.05, max_wait_seconds=30
            )
        for qm_id in (1, 2):
            managers.append(
                QueueManager(
                    facility, f"QM{qm_id}", qm_id, admin=ADMIN, structures=[APP], recovery=recovery
                )
            )
        producer, consumer = managers
        producer.define_queue("Q", structure=APP, max_depth=999_999_999)
        producer.define_queue("EMPTY", structure=APP, max_depth=999_999_999)
        watcher = facility.connect(APP, "WATCHER")
        yield Group(server, facility, producer, consumer, watcher)
    finally:
        set_maxmemory(server, 0)  # whatever the test left, let the managers close
        for qm in managers:
            with contextlib.suppress(Exception):
                qm.close()
        facility.close()


def fill(group: Group) -> int:
    """Put until the server is out of memory: persistent and nonpersistent, out of
    syncpoint and in units of work.  Returns how many puts were acknowledged."""
    limit_above_use(group.server, 2 << 20)
    queue = group.put_queue

    def put(n: int) -> None:
        persistent = n % 2 == 0
        if n % 3 == 2:
            with group.producer.unit_of_work() as uow:
                queue.put(body(n), persistent=persistent, uow=uow)
        else:
            queue.put(body(n), persistent=persistent)
        group.acked.append(body(n))

    return fill_until_refused(put)


def assert_puts_refused(group: Group) -> None:
    """Still out of memory: a put is refused, out of syncpoint and in a unit of work,
    and the queue is as it was."""
    queue = group.put_queue
    depth = queue.depth()
    entries = group.watcher.statistics().entries
    with pytest.raises(StorageFull) as caught:
        queue.put(b"refused", persistent=True)
    assert is_out_of_memory_error(caught.value.__cause__ or caught.value)
    uow = group.producer.unit_of_work()
    with pytest.raises(StorageFull):
        queue.put(b"refused", uow=uow)
    uow.backout()
    assert queue.depth() == depth
    assert group.watcher.statistics().entries == entries


def get_one(group: Group, n: int) -> Message | None:
    """The n-th get of the drain, in one of five ways; ``None``: the queue is empty."""
    queue, consumer = group.get_queue, group.consumer
    try:
        way = n % 5
        if way == 0:
            return queue.get()  # out of syncpoint
        if way == 1:
            with consumer.unit_of_work() as uow:
                return queue.get(uow=uow)
        if way == 2:
            # Backed out first: the message goes back and is gotten again.
            uow = consumer.unit_of_work()
            try:
                first = queue.get(uow=uow)
            except NoMessageAvailable:
                uow.backout()  # the drain ended here: the thread's unit must end too
                raise
            uow.backout()
            with consumer.unit_of_work() as uow:
                again = queue.get(uow=uow)
            assert again.body == first.body and again.backout_count == 1
            return again
        if way == 3:
            with consumer.unit_of_work() as uow:
                return queue.get(uow=uow, wait=1.0)
        return queue.get(wait=1.0)
    except NoMessageAvailable:
        return None


def test_a_full_group_is_drained_and_then_takes_puts_again(group: Group) -> None:
    entries_empty = group.watcher.statistics().entries
    acked = fill(group)
    assert acked == len(group.acked) > 100
    assert group.put_queue.depth() == acked
    # Held out of memory: client buffers the server trims now and then could otherwise
    # take it back under its limit by the few bytes it went over.
    hold_out_of_memory(group.server, MARGIN)
    assert_puts_refused(group)
    gotten: list[bytes] = []
    while True:
        message = get_one(group, len(gotten))
        if message is None:
            break
        gotten.append(message.body)
        if len(gotten) == 10:
            assert_puts_refused(group)  # the first gets and commits ran out of memory
    assert len(gotten) == len(set(gotten)) == acked
    assert sorted(gotten) == sorted(group.acked)
    assert group.get_queue.depth() == 0
    assert group.watcher.statistics().entries == entries_empty

    # The memory is free again: puts and gets work as before.
    group.put_queue.put(b"after", persistent=True)
    with group.consumer.unit_of_work() as uow:
        assert group.get_queue.get(uow=uow).body == b"after"
    assert group.get_queue.depth() == 0


def test_a_unit_with_several_gets_at_maxmemory_loses_nothing(group: Group) -> None:
    """Committed, or backed out (see the next test): either way nothing is lost."""
    fill(group)
    hold_out_of_memory(group.server, MARGIN)
    queue = group.get_queue
    depth = queue.depth()
    uow = group.consumer.unit_of_work()
    got = [queue.get(uow=uow).body for _ in range(3)]
    assert got == group.acked[:3]
    try:
        uow.commit()
    except BackedOut:
        assert queue.depth() == depth
        again = [queue.get().body for _ in range(3)]
        assert again == got
    else:
        assert queue.depth() == depth - 3


def test_a_unit_with_several_gets_commits_at_maxmemory(group: Group) -> None:
    fill(group)
    hold_out_of_memory(group.server, MARGIN)
    queue = group.get_queue
    depth = queue.depth()
    with group.consumer.unit_of_work() as uow:
        got = [queue.get(uow=uow).body for _ in range(2)]
    assert got == group.acked[:2]
    assert queue.depth() == depth - 2


def test_a_get_waits_on_an_empty_queue_at_maxmemory(group: Group) -> None:
    fill(group)
    hold_out_of_memory(group.server, MARGIN)
    with pytest.raises(NoMessageAvailable):
        group.consumer.open("EMPTY").get(wait=0.2)
