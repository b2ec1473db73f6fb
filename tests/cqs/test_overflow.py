"""Structure overflow (seed 000; patent §8.3 OV-T1..OV-T8), on memory and on Redis.

Structures here have exactly 1,000 data elements of 512 bytes, so one per cent of the
structure is ten elements: a message of ``UNIT_BODY`` bytes (with the CQS's 62-byte
prefix) takes ten, and a queue of ``n`` such messages uses ``n`` per cent.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cf.params import StructureParams
from sharedq.cqs import CQSError, CQSReason, Kind, StructurePair, make_name
from sharedq.cqs.overflow import OverflowOptions, OverflowReport
from sharedq.cqs.overflow_select import MAX_QUEUES, Target, select
from sharedq.log import LogStream, RecordType
from sharedq.recovery import PairLayout, RecoverySettings
from sharedq.testing import ManualClock, SimulatedFailure
from tests.cqs.conftest import MakeCQS
from tests.cqs.helpers import MSGQ_LAYOUT

PRIMARY, OVERFLOW = "OVFQ01", "OVFQ02"
UNIT_BODY = 10 * 512 - 62  # the prefix is 62 bytes
A, B, C, D = (make_name(1, f"TRAN{x}") for x in "ABCD")


def allocate(facility: CouplingFacility, *, growth: float = 1.0, elements: int = 1000) -> None:
    params = StructureParams.for_capacity(
        PRIMARY,
        list_count=192,
        entries=elements + 400,
        elements=elements,
        element_size=512,
        growth=growth,
        lock_count=16,
    )
    assert facility.create(params).max_elements == elements


def fill(cqs, sizes: dict[bytes, int], body: bytes = b"x" * UNIT_BODY) -> None:  # type: ignore[no-untyped-def]
    for queue, count in sizes.items():
        for _ in range(count):
            cqs.put(queue, body)


def thin(count: int) -> dict[bytes, int]:
    """``count`` queues of one per cent each, named after A..D in sort order."""
    return {make_name(1, f"T{i:04d}"): 1 for i in range(count)}


def pair(overflow: bool, **options: object) -> StructurePair:
    return StructurePair(PRIMARY, OVERFLOW if overflow else None, **options)  # type: ignore[arg-type]


def options(**kw: object) -> OverflowOptions:
    kw.setdefault("check_every", 10**6)
    kw.setdefault("refresh_s", 0.0)
    return OverflowOptions(**kw)  # type: ignore[arg-type]


def test_ov_t1_alter_succeeds_no_overflow(facility: CouplingFacility, make_cqs: MakeCQS) -> None:
    allocate(facility, growth=2.0)
    asked: list[bytes] = []
    told: list[str] = []
    cqs = make_cqs(
        "IMSA",
        msgq=pair(True),
        overflow=options(
            exit=lambda s, q: asked.append(q) or True,
            notify=lambda s, e, q: told.append(e),
            check_every=1,
        ),
    )
    fill(cqs, {A: 30, B: 20, C: 10, D: 10})  # the 70th put reaches 70 %: checked there
    flow = cqs.overflow[Kind.MSGQ]
    assert flow.state()["mode"] is False
    assert asked == [] and told == ["altered"]
    assert cqs.statistics().max_elements > 1000
    cqs.put(A, b"more")  # puts continue


def test_ov_t2_largest_queue_moves_whole(
    facility: CouplingFacility, make_cqs: MakeCQS, tmp_path: object
) -> None:
    allocate(facility)
    told: list[tuple[str, tuple[bytes, ...]]] = []
    cqs = make_cqs(
        "IMSA",
        msgq=pair(True),
        recovery=RecoverySettings(tmp_path),  # type: ignore[arg-type]
        overflow=options(notify=lambda s, e, q: told.append((e, q))),
    )
    fill(cqs, {A: 30, B: 20, C: 10, D: 10})
    flow = cqs.overflow[Kind.MSGQ]
    log = cqs.recovery_log
    assert log is not None
    before = log.pairs[PRIMARY].last_checkpoint
    used = cqs.statistics().elements  # 700, and the recovery machinery's control entries
    report = flow.check()
    assert report is not None and report.left <= 56.0
    assert report == OverflowReport(False, (A,), (A,), 30, 56.0, report.left)
    assert [q["queue"] for q in flow.state()["queues"]] == [A]  # type: ignore[union-attr]
    header = MSGQ_LAYOUT.header(A)
    with facility.connect(PRIMARY, "LOOK") as conn:
        assert list(conn.scan(header, A, A)) == []  # A left the primary whole
        assert conn.statistics().elements < used - 290
    with facility.connect(OVERFLOW, "LOOK") as conn:
        assert len(list(conn.scan(header, A, A))) == 30
    assert log.pairs[PRIMARY].last_checkpoint is not before  # a structure checkpoint
    assert told == [("overflow", (A,))]
    # Transparent to the client: put, browse, read, delete of A go to the overflow.
    cqs.put(A, b"last")
    assert len(cqs.browse(A)) == 31
    message = cqs.read(A)
    assert message is not None and len(message.body) == UNIT_BODY
    cqs.delete(message.token)
    assert cqs.query([A])[0].ready == 30


@pytest.mark.parametrize(
    ("target", "expected", "left"),
    [
        (Target.RELATIVE, (A, B), 62.0),
        (Target.ABSOLUTE, (A, B, C), 56.0),
        (Target.DROP, (A, B), 62.0),
    ],
)
def test_ov_t3_discriminating_targets(
    facility: CouplingFacility,
    make_cqs: MakeCQS,
    target: Target,
    expected: tuple[bytes, ...],
    left: float,
) -> None:
    allocate(facility)
    cqs = make_cqs("IMSA", msgq=pair(False, ovflwmax=80, target=target), overflow=options())
    fill(cqs, {A: 10, B: 8, C: 6, D: 6, **thin(50)})
    report = cqs.overflow[Kind.MSGQ].check()
    assert report is not None
    assert report.candidates == expected and report.left == left


def test_ov_t3_targets_by_arithmetic() -> None:
    sizes = {A: 10, B: 8, C: 6, D: 6, **thin(50)}
    runs = {t: select(80, 100, sizes, threshold=80, target=t) for t in Target}
    assert runs[Target.RELATIVE].queues == (A, B) and runs[Target.RELATIVE].target == 64
    assert runs[Target.ABSOLUTE].queues == (A, B, C) and runs[Target.ABSOLUTE].target == 60
    assert runs[Target.DROP].queues == (A, B) and runs[Target.DROP].target == 64


def test_ov_t4_exit_rejects_every_candidate(facility: CouplingFacility, make_cqs: MakeCQS) -> None:
    allocate(facility)
    asked: list[bytes] = []
    cqs = make_cqs(
        "IMSA", msgq=pair(True), overflow=options(exit=lambda s, q: asked.append(q) is not None)
    )
    fill(cqs, {A: 30, B: 20, C: 10, D: 10})
    report = cqs.overflow[Kind.MSGQ].check()
    assert report is not None and report.candidates == (A,) and report.approved == ()
    assert asked == [A]  # no re-selection to make up for the rejected one
    state = cqs.overflow[Kind.MSGQ].state()
    assert state["mode"] is True and state["queues"] == []
    assert cqs.statistics().elements == 701  # nothing moved; one for the table
    cqs.put(A, b"accepted")


def test_ov_t5_no_overflow_structure_rejects_puts(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    allocate(facility)
    told: list[str] = []
    cqs = make_cqs(
        "IMSA", msgq=pair(False), overflow=options(notify=lambda s, e, q: told.append(e))
    )
    fill(cqs, {A: 30, B: 20, C: 10, D: 10})
    flow = cqs.overflow[Kind.MSGQ]
    assert flow.check() is not None
    with pytest.raises(CQSError) as refused:
        cqs.put(A, b"no")
    assert refused.value.reason is CQSReason.QUEUE_IN_OVERFLOW
    cqs.put(B, b"yes")
    # A's messages stay readable; reading 15 of them takes usage to 55.x <= 56.
    for _ in range(15):
        message = cqs.read(A)
        assert message is not None
        cqs.delete(message.token)
    assert flow.check() is None
    assert flow.state()["mode"] is False and told == ["overflow", "normal"]
    cqs.put(A, b"accepted again")


def test_ov_t6_periodic_scan_returns_empty_queues(
    facility: CouplingFacility, make_cqs: MakeCQS, clock: ManualClock
) -> None:
    allocate(facility)
    cqs = make_cqs("IMSA", msgq=pair(True), overflow=options())
    fill(cqs, {A: 10, B: 10, **thin(50)})
    flow = cqs.overflow[Kind.MSGQ]
    flow.last_scan_s = clock.monotonic_s()
    report = flow.check()
    assert report is not None and report.approved == (A, B)

    def drain(queue: bytes) -> None:
        while (message := cqs.read(queue)) is not None:
            cqs.delete(message.token)

    def in_overflow() -> list[bytes]:
        return [q["queue"] for q in flow.state()["queues"]]  # type: ignore[union-attr]

    clock.advance_s(3 * 60)
    drain(A)
    assert flow.scan() == () and in_overflow() == [A, B]  # minute 3: not yet
    clock.advance_s(12 * 60)
    assert flow.scan() == (A,) and in_overflow() == [B]  # minute 15
    assert flow.state()["mode"] is True
    clock.advance_s(5 * 60)
    drain(B)  # minute 20
    assert flow.scan() == () and in_overflow() == [B]
    clock.advance_s(10 * 60)
    assert flow.scan() == (B,)  # minute 30
    assert flow.state()["mode"] is False
    cqs.put(A, b"back in the primary")
    assert cqs.statistics().elements == 500 + 1 + 1  # the thin queues, the table, the put


@pytest.mark.parametrize("recovers", [True, False])
def test_ov_t7_requests_during_selection_are_held(
    facility: CouplingFacility, make_cqs: MakeCQS, tmp_path: object, recovers: bool
) -> None:
    """Held by the recovery machinery's quiesce gate, or without recovery settings by
    the gate a CQS gets of its own at connect."""
    allocate(facility)
    started, done = threading.Event(), threading.Event()
    seen: dict[str, bool] = {}
    settings = RecoverySettings(tmp_path) if recovers else None  # type: ignore[arg-type]
    cqsb = make_cqs("IMSB", msgq=pair(True), recovery=settings)

    def put_from_b() -> None:
        started.set()
        cqsb.put(D, b"during selection")
        done.set()

    thread = threading.Thread(target=put_from_b)

    def fault(point: str) -> None:
        if point == "quiesced":
            thread.start()
            started.wait()
        if point == "selected":
            seen["done_during_selection"] = done.is_set()

    cqsa = make_cqs("IMSA", msgq=pair(True), recovery=settings, overflow=options(faults=fault))
    fill(cqsa, {A: 30, B: 20, C: 10, D: 10})
    report = cqsa.overflow[Kind.MSGQ].check()
    thread.join()
    assert report is not None and report.approved == (A,)
    assert done.is_set() and seen == {"done_during_selection": False}
    assert cqsa.query([D])[0].ready == 11  # held, then made: not rejected


def test_ov_t8_at_most_512_queues(facility: CouplingFacility, make_cqs: MakeCQS) -> None:
    allocate(facility, elements=5000)
    cqs = make_cqs("IMSA", msgq=pair(False), overflow=options())
    tiny = {make_name(1, f"Q{i:05d}"): 1 for i in range(3500)}
    fill(cqs, tiny, b"x")  # 3,500 one-element queues: 70 %; 700 would have to go
    report = cqs.overflow[Kind.MSGQ].check()
    assert report is not None and len(report.candidates) == MAX_QUEUES


def test_ov_t8_by_arithmetic() -> None:
    sizes = {make_name(1, f"Q{i:05d}"): 1 for i in range(3500)}
    assert len(select(3500, 5000, sizes, threshold=70).queues) == MAX_QUEUES


def test_the_first_put_over_the_threshold_starts_it(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    allocate(facility)
    cqs = make_cqs("IMSA", msgq=pair(True), overflow=options(check_every=1))
    other = make_cqs("IMSB", msgq=pair(True), overflow=options())
    fill(cqs, {A: 30, B: 20, C: 10, D: 9})
    assert cqs.overflow[Kind.MSGQ].state()["mode"] is False
    cqs.put(D, b"x" * UNIT_BODY)
    assert other.overflow[Kind.MSGQ].state()["queues"][0]["queue"] == A  # type: ignore[index]
    assert len(other.browse(A)) == 30  # the other CQS routes the same way


@pytest.mark.parametrize("at", ["recorded", "on-move-queue", "written", "moved"])
def test_a_master_that_dies_mid_way_is_replaced(
    facility: CouplingFacility, make_cqs: MakeCQS, tmp_path: object, at: str
) -> None:
    """The master stops at a step of the process (the third time it gets there); the
    other CQS takes over at its next check: A is whole in the overflow structure, once."""
    allocate(facility)
    seen: list[str] = []

    def fault(point: str) -> None:
        seen.append(point)
        if point == at and seen.count(point) == (1 if at in ("recorded", "moved") else 3):
            raise SimulatedFailure(f"master stopped at {point}")

    settings = RecoverySettings(tmp_path)  # type: ignore[arg-type]
    master = make_cqs("IMSA", msgq=pair(True), recovery=settings, overflow=options(faults=fault))
    peer = make_cqs("IMSB", msgq=pair(True), recovery=settings, overflow=options())
    fill(master, {A: 30, B: 20, C: 10, D: 10})
    with pytest.raises(SimulatedFailure):
        master.overflow[Kind.MSGQ].check()
    master.stop_dead()
    with facility.connect(PRIMARY, "INSPECT") as conn:
        [user] = [u.user_id for u in conn.users() if u.name == master.name]
        conn.mark_failed(user)
    assert peer.overflow[Kind.MSGQ].take_over()
    header = MSGQ_LAYOUT.header(A)
    with facility.connect(PRIMARY, "LOOK") as conn:
        assert list(conn.scan(header, A, A)) == []
    with facility.connect(OVERFLOW, "LOOK") as conn:
        assert len(list(conn.scan(header, A, A))) == 30
    assert len(peer.browse(A)) == 30 and len(peer.browse(B)) == 20
    peer.put(C, b"not held: the dead master's quiesce went with it")


def test_recovery_rebuilds_both_structures_and_the_table(
    facility: CouplingFacility, make_cqs: MakeCQS, tmp_path: object
) -> None:
    """The overflow table is in the primary's control queue: the structure checkpoint
    after the process holds it, and the moves are logged, so a pair lost after an
    overflow comes back with A in the overflow structure and routed there."""
    allocate(facility)
    settings = RecoverySettings(tmp_path)  # type: ignore[arg-type]
    cqs = make_cqs("IMSA", msgq=pair(True), recovery=settings, overflow=options())
    fill(cqs, {A: 30, B: 20, C: 10, D: 10})
    assert cqs.overflow[Kind.MSGQ].check() is not None
    cqs.put(A, b"after the checkpoint: only in the log")
    cqs.disconnect()
    facility.delete(PRIMARY, force=True)
    facility.delete(OVERFLOW, force=True)
    again = make_cqs("IMSB", msgq=pair(True), recovery=settings, overflow=options())
    assert again.recovery_log is not None
    assert sorted(again.recovery_log.rebuilt()) == [PRIMARY, OVERFLOW]
    assert [q["queue"] for q in again.overflow[Kind.MSGQ].state()["queues"]] == [A]  # type: ignore[union-attr]
    assert len(again.browse(A)) == 31 and len(again.browse(B)) == 20
    with facility.connect(OVERFLOW, "LOOK") as conn:
        assert len(list(conn.scan(MSGQ_LAYOUT.header(A), A, A))) == 31


def test_stopped_printer_story(
    facility: CouplingFacility, make_cqs: MakeCQS, clock: ManualClock
) -> None:
    """Seed 000's story: one LTERM queue (a printer that stopped) grows until the pair
    overflows; every other queue goes on undisturbed; the registered client is still
    told of the printer's work in the overflow structure; the printer starts again,
    the queue drains, and the next scan returns it."""
    allocate(facility)
    printer = make_name(5, "PRINTER1")
    ims = make_cqs("IMSA", msgq=pair(True), overflow=options(check_every=1))
    ims.register(printer)
    assert ims.wait_for_work(0) is None
    for i in range(75):  # the printer's output piles up; the transactions flow
        ims.put(printer, b"p" * UNIT_BODY)
        ims.put(A, b"order %d" % i)
        message = ims.read(A)
        assert message is not None and message.body == b"order %d" % i
        ims.delete(message.token)
    flow = ims.overflow[Kind.MSGQ]
    assert [q["queue"] for q in flow.state()["queues"]] == [printer]  # type: ignore[union-attr]
    assert ims.query([printer])[0].ready == 75
    while ims.wait_for_work(0) is not None:  # what was told before and during the move
        pass
    while (message := ims.read(printer)) is not None:  # the printer starts again
        ims.delete(message.token)
    ims.put(printer, b"one more")  # empty to non-empty in the overflow structure: told
    assert ims.wait_for_work(10) == (Kind.MSGQ, printer)
    message = ims.read(printer)
    assert message is not None and message.body == b"one more"
    ims.delete(message.token)
    clock.advance_s(15 * 60)
    ims.put(A, b"the next put's check scans")
    assert flow.state()["mode"] is False
    ims.put(printer, b"back in the primary")
    with facility.connect(PRIMARY, "LOOK") as conn:
        header = MSGQ_LAYOUT.header(printer)
        assert len(list(conn.scan(header, printer, printer))) == 1


def test_the_overflow_record_is_logged(
    facility: CouplingFacility, make_cqs: MakeCQS, tmp_path: Path
) -> None:
    """OVERFLOW (type 44) in the pair's log stream, naming the queues moved."""
    allocate(facility)
    cqs = make_cqs("IMSA", msgq=pair(True), recovery=RecoverySettings(tmp_path), overflow=options())
    fill(cqs, {A: 30, B: 20, C: 10, D: 10})
    assert cqs.overflow[Kind.MSGQ].check() is not None
    cqs.disconnect()
    layout = PairLayout(tmp_path, PRIMARY)
    stream = LogStream(layout.log, name=f"{PRIMARY}.LOG", structure=PRIMARY)
    records = [r for r in stream.records() if r.type == RecordType.OVERFLOW]
    assert len(records) == 1
    assert b"overflow" in records[0].payload and b"TRANA" in records[0].payload


def test_a_put_to_the_primary_by_a_cqs_that_had_not_seen_the_table(
    facility: CouplingFacility, make_cqs: MakeCQS, clock: ManualClock
) -> None:
    """A CQS that reads the table every second may put to the primary a queue that
    just moved: the next scan moves it over, so the queue is again in one structure."""
    allocate(facility)
    master = make_cqs("IMSA", msgq=pair(True), overflow=options())
    late = make_cqs("IMSB", msgq=pair(True), overflow=options(refresh_s=3600.0))
    fill(master, {A: 30, B: 20, C: 10, D: 10})
    assert master.overflow[Kind.MSGQ].check() is not None
    late.put(A, b"to the primary: IMSB has not read the table yet")
    header = MSGQ_LAYOUT.header(A)
    with facility.connect(PRIMARY, "LOOK") as conn:
        assert len(list(conn.scan(header, A, A))) == 1
    assert master.overflow[Kind.MSGQ].scan(force=True) == ()
    with facility.connect(PRIMARY, "LOOK") as conn:
        assert list(conn.scan(header, A, A)) == []
    assert len(master.browse(A)) == 31


def test_display_overflowq_is_the_pairs_overflow_state(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    allocate(facility)
    cqs = make_cqs("IMSA", msgq=pair(True), overflow=options())
    assert cqs.display_overflowq() == {
        "structure": PRIMARY,
        "overflow_structure": OVERFLOW,
        "mode": False,
        "queues": [],
    }
    fill(cqs, {A: 30, B: 20, C: 10, D: 10})
    assert cqs.overflow[Kind.MSGQ].check() is not None
    shown = cqs.display_overflowq()
    assert shown["mode"] is True
    assert [(q["queue"], q["elements"]) for q in shown["queues"]] == [(A, 300)]  # type: ignore[union-attr]
    with pytest.raises(CQSError) as refused:
        cqs.display_overflowq(kind=Kind.EMHQ)  # no EMHQ pair
    assert refused.value.reason is CQSReason.NOT_CONNECTED
