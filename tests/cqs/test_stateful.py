"""The CQS requests against a reference model, on memory and Redis side by side.

Two CQSs (A and B) on each backend make the same requests; after every step each
queue's messages, in order and whole, equal the model's on both backends, and every
request answered alike (the same message read, the same refusal).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from sharedq.cf import CouplingFacility
from sharedq.cf.memory import MemoryFacility
from sharedq.cf.redis import RedisFacility
from sharedq.cqs import CQS, CQSError, LockToken, structure_params
from sharedq.testing.redis_server import RedisServer

from .conftest import MSGQ
from .helpers import TRANA, TRANB

QUEUES = (TRANA, TRANB)
OWNERS = ("IMSA", "IMSB")


@dataclass
class Lock:
    owner: int
    queue: bytes
    parts: tuple[bytes, ...]
    tokens: list[LockToken] = field(default_factory=list)  # one per backend


class CQSModel(RuleBasedStateMachine):
    """Reference: each queue a FIFO list of messages (their parts); locks by owner."""

    open_facilities: Callable[[], list[CouplingFacility]]

    def __init__(self) -> None:
        super().__init__()
        self.facilities = self.open_facilities()
        self.sides: list[list[CQS]] = []
        for facility in self.facilities:
            facility.create(structure_params(MSGQ, messages=300))
            self.sides.append(
                [CQS(facility, f"CQS{s}", system=s, msgq=MSGQ).connect() for s in OWNERS]
            )
        self.ready: dict[bytes, list[tuple[bytes, ...]]] = {q: [] for q in QUEUES}
        self.locks: list[Lock] = []
        self.count = 0

    def teardown(self) -> None:
        for side in self.sides:
            for cqs in side:
                with contextlib.suppress(CQSError):
                    cqs.disconnect()
        for facility in self.facilities:
            facility.close()

    def _parts(self, pieces: int) -> tuple[bytes, ...]:
        self.count += 1
        return tuple(b"msg%d.%d" % (self.count, i) for i in range(pieces))

    @rule(
        owner=st.sampled_from([0, 1]),
        queue=st.sampled_from(QUEUES),
        pieces=st.integers(1, 3),
        local=st.booleans(),
    )
    def put(self, owner: int, queue: bytes, pieces: int, local: bool) -> None:
        parts = self._parts(pieces)
        results = [side[owner].put(queue, list(parts), local=local) for side in self.sides]
        if local:
            tokens = [r for r in results if isinstance(r, LockToken)]
            self.locks.append(Lock(owner, queue, parts, tokens))
        else:
            self.ready[queue].append(parts)

    @rule(owner=st.sampled_from([0, 1]), queue=st.sampled_from(QUEUES))
    def read(self, owner: int, queue: bytes) -> None:
        got = [side[owner].read(queue) for side in self.sides]
        expected = self.ready[queue].pop(0) if self.ready[queue] else None
        assert [None if m is None else m.parts for m in got] == [expected] * len(got)
        if expected is not None:
            tokens = [m.token for m in got if m is not None and m.token is not None]
            self.locks.append(Lock(owner, queue, expected, tokens))

    @precondition(lambda self: self.locks)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        lock = self.locks.pop(data.draw(st.integers(0, len(self.locks) - 1)))
        for side, token in zip(self.sides, lock.tokens, strict=True):
            side[lock.owner].delete(token)

    @precondition(lambda self: self.locks)
    @rule(data=st.data(), first=st.booleans(), elsewhere=st.booleans())
    def unlock(self, data: st.DataObject, first: bool, elsewhere: bool) -> None:
        lock = self.locks.pop(data.draw(st.integers(0, len(self.locks) - 1)))
        target = TRANB if elsewhere else lock.queue
        for side, token in zip(self.sides, lock.tokens, strict=True):
            side[lock.owner].unlock(token, first=first, to_queue=target if elsewhere else None)
        if first:
            self.ready[target].insert(0, lock.parts)
        else:
            self.ready[target].append(lock.parts)

    @precondition(lambda self: self.locks)
    @rule(data=st.data(), to=st.sampled_from(QUEUES))
    def move(self, data: st.DataObject, to: bytes) -> None:
        lock = self.locks.pop(data.draw(st.integers(0, len(self.locks) - 1)))
        for side, token in zip(self.sides, lock.tokens, strict=True):
            side[lock.owner].move(token, to)
        self.ready[to].append(lock.parts)

    @precondition(lambda self: self.locks)
    @rule(data=st.data())
    def someone_elses_lock_is_refused(self, data: st.DataObject) -> None:
        lock = self.locks[data.draw(st.integers(0, len(self.locks) - 1))]
        for side, token in zip(self.sides, lock.tokens, strict=True):
            try:
                side[1 - lock.owner].delete(token)
            except CQSError as error:
                assert error.reason_name == "NOT_LOCKED_BY_YOU"
            else:
                raise AssertionError("another CQS deleted a lock not its own")

    @invariant()
    def queues_match_the_model(self) -> None:
        for side in self.sides:
            for queue in QUEUES:
                assert [m.parts for m in side[0].browse(queue)] == self.ready[queue]
            for owner in (0, 1):
                held = sorted(
                    tuple(side[owner].browse_locked(t).parts) for t in side[owner].locks()
                )
                assert held == sorted(lk.parts for lk in self.locks if lk.owner == owner)


def test_the_requests_match_the_model_on_memory_and_redis(redis_server: RedisServer) -> None:
    def open_both() -> list[CouplingFacility]:
        redis_server.flush()
        return [MemoryFacility(), RedisFacility.from_url(redis_server.url)]

    machine = type("CQSModelSideBySide", (CQSModel,), {"open_facilities": staticmethod(open_both)})
    run_state_machine_as_test(
        machine, settings=settings(max_examples=30, stateful_step_count=30, deadline=None)
    )
    redis_server.flush()
