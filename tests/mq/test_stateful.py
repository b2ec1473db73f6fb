"""A state machine: random puts, gets, batches of both, commits, backouts and browses by
one to three managers sharing a structure, checked step by step against a reference
model.

The model is a few lines per rule: a queue is its committed messages ordered by
(priority, put order); a unit of work holds its own puts and its gets.  A get in
syncpoint takes the committed head if it comes no later than the unit's best own
uncommitted put, else that put (spec §5.5); commit publishes puts and drops gets;
backout drops puts and returns gets with their backout count + 1.
"""

from __future__ import annotations

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
from sharedq.mq import NoMessageAvailable, QueueManager, structure_params
from sharedq.testing import ManualClock
from tests.mq.conftest import OpenFacility

QUEUES = {"SQA": "SMADM", "SQB": "SMAPP"}
#: Examples on Redis, as a share of the profile's number (all of them on memory):
#: every request there is a round trip, and the conformance suite's differential and
#: stateful tests already hold Redis to memory's behaviour request by request.
REDIS_SHARE = 4


@dataclass
class Msg:
    body: bytes
    priority: int
    seq: int
    persistent: bool
    backouts: int = 0

    @property
    def key(self) -> tuple[int, int]:
        return (9 - self.priority, self.seq)


@dataclass
class ModelUnit:
    puts: dict[str, list[Msg]] = field(default_factory=dict)  # still puts
    own_got: dict[str, list[Msg]] = field(default_factory=dict)  # own puts gotten
    gets: list[tuple[str, Msg]] = field(default_factory=list)


class SharedQueues(RuleBasedStateMachine):
    #: Opens an empty facility for each example (set by the test).
    open_facility: OpenFacility

    def __init__(self) -> None:
        super().__init__()
        self.facility: CouplingFacility = self.open_facility()
        self.facility.create(structure_params("SMADM", queues=4, managers=4, messages=500))
        self.facility.create(structure_params("SMAPP", queues=4, managers=4, messages=500))
        self.clock = ManualClock(tick_s=0.00001)
        self.managers: list[QueueManager] = []
        self.units: list[ModelUnit | None] = []
        self.real_units: list = []
        self.committed: dict[str, list[Msg]] = {q: [] for q in QUEUES}
        self.seq = 0

    def teardown(self) -> None:
        for qm in self.managers:
            qm.close()
        self.facility.close()

    @precondition(lambda self: not self.managers)
    @rule(count=st.integers(1, 3))
    def start(self, count: int) -> None:
        for n in range(1, count + 1):
            qm = QueueManager(
                self.facility, f"QM{n}", n, admin="SMADM", structures=["SMAPP"], clock=self.clock
            )
            if n == 1:
                for queue, structure in QUEUES.items():
                    qm.define_queue(queue, structure=structure, max_depth=10_000)
            self.managers.append(qm)
            self.units.append(None)
            self.real_units.append(None)

    # -- helpers ------------------------------------------------------------------------

    def _unit(self, m: int) -> ModelUnit:
        if self.units[m] is None:
            self.units[m] = ModelUnit()
            self.real_units[m] = self.managers[m].unit_of_work()
        unit = self.units[m]
        assert unit is not None
        return unit

    def _best(self, unit: ModelUnit | None, queue: str, persistent_only: bool) -> Msg | None:
        if unit is None:
            return None
        candidates = [
            msg for msg in unit.puts.get(queue, []) if msg.persistent or not persistent_only
        ]
        return min(candidates, key=lambda msg: msg.key, default=None)

    def _head(self, queue: str) -> Msg | None:
        return min(self.committed[queue], key=lambda msg: msg.key, default=None)

    # -- rules ---------------------------------------------------------------------------

    @precondition(lambda self: self.managers)
    @rule(
        data=st.data(),
        queue=st.sampled_from(sorted(QUEUES)),
        priority=st.integers(0, 9),
        persistent=st.booleans(),
        syncpoint=st.booleans(),
    )
    def put(
        self, data: st.DataObject, queue: str, priority: int, persistent: bool, syncpoint: bool
    ) -> None:
        m = data.draw(st.integers(0, len(self.managers) - 1))
        self.seq += 1
        msg = Msg(b"m%d" % self.seq, priority, self.seq, persistent)
        unit = self._unit(m) if syncpoint else None
        self.managers[m].open(queue).put(
            msg.body,
            priority=priority,
            persistent=persistent,
            uow=self.real_units[m] if syncpoint else None,
        )
        if unit is None:
            self.committed[queue].append(msg)
        else:
            unit.puts.setdefault(queue, []).append(msg)

    @precondition(lambda self: self.managers)
    @rule(
        data=st.data(),
        queue=st.sampled_from(sorted(QUEUES)),
        priority=st.integers(0, 9),
        persistent=st.booleans(),
        syncpoint=st.booleans(),
        count=st.integers(1, 4),
    )
    def put_many(
        self,
        data: st.DataObject,
        queue: str,
        priority: int,
        persistent: bool,
        syncpoint: bool,
        count: int,
    ) -> None:
        """A batch of puts: what ``count`` puts would do (one ``write_entries``)."""
        m = data.draw(st.integers(0, len(self.managers) - 1))
        unit = self._unit(m) if syncpoint else None
        msgs = []
        for _ in range(count):
            self.seq += 1
            msgs.append(Msg(b"m%d" % self.seq, priority, self.seq, persistent))
        self.managers[m].open(queue).put_many(
            [msg.body for msg in msgs],
            priority=priority,
            persistent=persistent,
            uow=self.real_units[m] if syncpoint else None,
        )
        if unit is None:
            self.committed[queue].extend(msgs)
        else:
            unit.puts.setdefault(queue, []).extend(msgs)

    @precondition(lambda self: self.managers)
    @rule(
        data=st.data(),
        queue=st.sampled_from(sorted(QUEUES)),
        mode=st.sampled_from(["out", "sync", "if-persistent"]),
    )
    def get(self, data: st.DataObject, queue: str, mode: str) -> None:
        m = data.draw(st.integers(0, len(self.managers) - 1))
        unit = self._unit(m) if mode != "out" else None
        real_unit = self.real_units[m] if mode != "out" else None
        expected = self._expected_get(unit, queue, mode)
        try:
            got = (
                self.managers[m]
                .open(queue)
                .get(uow=real_unit, if_persistent=mode == "if-persistent")
            )
        except NoMessageAvailable:
            assert expected is None, f"expected {expected}, got nothing"
            return
        assert expected is not None, f"expected nothing, got {got.body!r}"
        assert (got.body, got.backout_count) == (expected.body, expected.backouts)

    @precondition(lambda self: self.managers)
    @rule(
        data=st.data(),
        queue=st.sampled_from(sorted(QUEUES)),
        mode=st.sampled_from(["out", "sync"]),
        count=st.integers(1, 4),
    )
    def get_many(self, data: st.DataObject, queue: str, mode: str, count: int) -> None:
        """A batch: what ``count`` gets, one after another, would return (``take_many``)."""
        m = data.draw(st.integers(0, len(self.managers) - 1))
        unit = self._unit(m) if mode != "out" else None
        real_unit = self.real_units[m] if mode != "out" else None
        expected = []
        for _ in range(count):
            one = self._expected_get(unit, queue, mode)
            if one is None:
                break
            expected.append(one)
        got = self.managers[m].open(queue).get_many(count, uow=real_unit)
        assert [(g.body, g.backout_count) for g in got] == [(e.body, e.backouts) for e in expected]

    def _expected_get(self, unit: ModelUnit | None, queue: str, mode: str) -> Msg | None:
        """Apply the get to the model; return what it must return."""
        best = self._best(unit, queue, mode == "if-persistent")
        head = self._head(queue)
        if head is not None and (best is None or head.key <= best.key):
            self.committed[queue].remove(head)
            keep = unit is not None and (mode == "sync" or head.persistent)
            if keep:
                assert unit is not None
                unit.gets.append((queue, head))
            return head
        if best is not None:
            assert unit is not None
            unit.puts[queue].remove(best)
            unit.own_got.setdefault(queue, []).append(best)
            return Msg(best.body, best.priority, best.seq, best.persistent)
        return None

    @precondition(lambda self: any(u is not None for u in self.units))
    @rule(data=st.data(), two_phase=st.booleans())
    def commit(self, data: st.DataObject, two_phase: bool) -> None:
        m = data.draw(st.sampled_from([i for i, u in enumerate(self.units) if u is not None]))
        unit = self.units[m]
        assert unit is not None
        if two_phase:
            self.real_units[m].prepare()
        self.real_units[m].commit()
        for queue, msgs in unit.puts.items():
            self.committed[queue].extend(msgs)
        self.units[m] = self.real_units[m] = None

    @precondition(lambda self: any(u is not None for u in self.units))
    @rule(data=st.data(), two_phase=st.booleans())
    def backout(self, data: st.DataObject, two_phase: bool) -> None:
        m = data.draw(st.sampled_from([i for i, u in enumerate(self.units) if u is not None]))
        unit = self.units[m]
        assert unit is not None
        if two_phase:
            self.real_units[m].prepare()
        self.real_units[m].backout()
        for queue, msg in unit.gets:
            msg.backouts += 1
            self.committed[queue].append(msg)
        self.units[m] = self.real_units[m] = None

    @precondition(lambda self: self.managers)
    @rule(data=st.data(), queue=st.sampled_from(sorted(QUEUES)))
    def browse(self, data: st.DataObject, queue: str) -> None:
        m = data.draw(st.integers(0, len(self.managers) - 1))
        seen = [(msg.body, msg.backout_count) for msg in self.managers[m].open(queue).browser()]
        expected = sorted(self.committed[queue], key=lambda msg: msg.key)
        assert seen == [(msg.body, msg.backouts) for msg in expected]

    @invariant()
    def depths(self) -> None:
        if not self.managers:
            return
        for queue in QUEUES:
            uncommitted = sum(
                len(u.puts.get(queue, [])) + len(u.own_got.get(queue, []))
                for u in self.units
                if u is not None
            )
            expected = len(self.committed[queue]) + uncommitted
            assert self.managers[0].open(queue).depth() == expected


def test_shared_queues_match_the_model(backend: str, open_backend: OpenFacility) -> None:
    machine = type(
        "SharedQueuesOn" + backend.title(),
        (SharedQueues,),
        {"open_facility": staticmethod(open_backend)},
    )
    examples = settings().max_examples
    if backend == "redis":
        examples = max(1, examples // REDIS_SHARE)
    tuned = settings(max_examples=examples)
    run_state_machine_as_test(machine, settings=tuned)
