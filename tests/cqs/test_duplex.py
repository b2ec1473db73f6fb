"""A CQS under duplex durability, its machine crashed and its structure lost, for real.

CQSIMSA (a process of its own, ``duplex_workers.put_and_die``) logs under
``Durability.duplex``: each request returns once its records are written to the
segment (the page cache) and pushed to the logging structure, Redis B; the sync
interval is longer than any test, so only a segment roll syncs (with small segments
the log rolls a few times, the last segment's tail unsynced; with the default size
nothing at all is synced, not even by the structure checkpoint in the workload).  It
is SIGKILLed, then the test plays the machine crash that would follow: every byte of
the pair's log segments after the last synced record reads as zeros, and the
machine's boot id changes.  Redis A, which held the queue structure, is SIGKILLed and
started empty.  A CQS connecting then rebuilds the structure from the SRDS and the
log, and the test counts every message on every list of it, and compares the
structure object for object with what the dead CQS left.

* machine crash, logging structure up: everything committed is back, exactly once,
  where it was (ready or locked); nothing deleted reappears.  Whether the CQS that
  recovers is CQSIMSA itself (its log writer, reopening, copies back) or a peer (its
  read of the log copies back for the dead writer).
* machine crash and the logging structure lost too (both copies of the unsynced
  records gone): recovery refuses, naming the loss, and leaves no structure behind;
  with the logging structure down rather than lost, it refuses as well.
* a process crash alone (the same boot): the page cache kept every record, so the
  segments alone rebuild the structure, the logging structure gone for good.
"""

from __future__ import annotations

import json
import multiprocessing
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sharedq.cf import CouplingFacility, open_facility
from sharedq.cf.types import HIGHEST_KEY, LOWEST_KEY
from sharedq.cqs import CQS, LIST_COUNT, Private, structure_params
from sharedq.cqs.messages import unpack
from sharedq.log import LogIOError, LogReason
from sharedq.log.codec import FRAME, FRAME_HEADER_BYTES, SEGMENT_HEADER_BYTES, decode_frames
from sharedq.log.layout import Layout
from sharedq.recovery import LogIncomplete, PairLayout, RecoveryReason, StructureContents
from sharedq.testing.redis_server import RedisServer

from . import duplex_workers as doomed
from .duplex_workers import DELETED, LOCKED, MSGQ, PUTS_AFTER, PUTS_BEFORE, body
from .helpers import snapshot

ALL = PUTS_BEFORE + PUTS_AFTER


@dataclass
class Rig:
    """Redis A (the queue structure), Redis B (the logging structure), the recovery
    root and this test's machine (its boot id file)."""

    queues: RedisServer
    logging: RedisServer
    facility: CouplingFacility
    root: Path
    boot: Path

    def cqs(self, name: str) -> CQS:
        system = name.removeprefix("CQS")
        settings = doomed.settings(self.root, self.logging.url)
        return CQS(self.facility, name, system=system, msgq=MSGQ, recovery=settings)


@pytest.fixture
def rig(
    redis_servers: Callable[..., RedisServer],
    tmp_path: Path,
    boot: Path,
) -> Iterator[Rig]:
    """Two private Redis servers, the MSGQ structure on A, and the machine's boot id
    file (this process's and the doomed CQS's)."""
    queues, logging = redis_servers(), redis_servers()
    facility = open_facility(f"{queues.url}?lease=2&retry=2")
    facility.create(structure_params(MSGQ, messages=500))
    rig = Rig(queues, logging, facility, tmp_path / "recovery", boot)
    yield rig
    facility.close()


#: A segment small enough for the doomed CQS's workload to roll (and so sync) a few
#: times, the last segment's tail unsynced; or the default, which it never fills.
SEGMENTS = {"rolled": 4096, "unsynced": None}


def run_doomed(rig: Rig, segment_bytes: int | None) -> dict[str, int | str]:
    """CQSIMSA's life to its SIGKILL; where its log writer stood when it died."""
    report = rig.root.parent / "doomed.json"
    process = multiprocessing.get_context("spawn").Process(
        target=doomed.put_and_die,
        args=(f"{rig.queues.url}?lease=2&retry=2", str(rig.root), rig.logging.url,
              str(rig.boot), str(report), segment_bytes),
    )  # fmt: skip
    process.start()
    process.join(timeout=120)
    assert process.exitcode == -signal.SIGKILL
    where: dict[str, int | str] = json.loads(report.read_text())
    return where


def crash_machine(log_root: Path, durable_lsn: int, boot: Path) -> int:
    """What a power loss leaves of the log: in every segment, every byte after the last
    record synced (lsn <= ``durable_lsn``) reads as zeros; the machine comes back with
    a new boot id.  Returns how many records the crash took."""
    layout = Layout(log_root)
    taken = 0
    for writer in layout.writers():
        for _, path in layout.segments(writer):
            buf = bytearray(path.read_bytes())
            pos = SEGMENT_HEADER_BYTES
            while pos + FRAME_HEADER_BYTES <= len(buf):
                length = FRAME.unpack_from(buf, pos)[0]
                if length == 0:
                    break
                frame = bytes(buf[pos : pos + FRAME_HEADER_BYTES + length])
                records = decode_frames(frame, str(path), 0)[0]
                assert records, f"{path}: a frame that does not decode at {pos}"
                if records[0].lsn > durable_lsn:
                    taken += 1
                    buf[pos : pos + len(frame)] = bytes(len(frame))
                pos += len(frame)
            path.write_bytes(bytes(buf))
    boot.write_text(f"boot-after-crash-{time.monotonic_ns()}\n")
    return taken


def messages(facility: CouplingFacility) -> dict[str, Counter[bytes]]:
    """Every message body on the MSGQ structure, by where it is: ``"ready"`` (a
    queue), ``"lock"``, ``"cold"``, ``"move"``, ``"delete"``, ``"rebuild"``."""
    found: dict[str, Counter[bytes]] = {}
    with facility.connect(MSGQ, "INSPECT") as conn:
        for number in range(1, LIST_COUNT):
            place = next((p.name.lower() for p in Private if number in p.headers()), "ready")
            for entry in conn.scan(number, LOWEST_KEY, HIGHEST_KEY):
                found.setdefault(place, Counter())[unpack(entry.data)[1]] += 1
    return found


def expected() -> dict[str, Counter[bytes]]:
    """The doomed CQS's puts, less the ones it deleted, and the ones it held locked."""
    deleted_or_locked = DELETED + LOCKED
    return {
        "ready": Counter(body(n) for n in range(deleted_or_locked, ALL)),
        "lock": Counter(body(n) for n in range(DELETED, deleted_or_locked)),
    }


def crash_all(
    rig: Rig, segment_bytes: int | None = SEGMENTS["rolled"], *, machine: bool = True
) -> StructureContents:
    """CQSIMSA killed, its machine crashed (``machine``; else its process alone), the
    queue structure lost with Redis A; returns the structure's recoverable contents as
    the dead CQS left them."""
    where = run_doomed(rig, segment_bytes)
    assert where["writer"] == "CQSIMSA"
    assert messages(rig.facility) == expected()  # what the dead CQS left, before the loss
    before = snapshot(rig.facility)
    durable, last = int(where["durable"]), int(where["last"])
    log = PairLayout(rig.root, MSGQ).log
    if segment_bytes is None:
        assert durable == 0 and len(Layout(log).segments("CQSIMSA")) == 1
    else:  # rolled, and each roll synced; the last segment's records only pushed
        assert 0 < durable < last and len(Layout(log).segments("CQSIMSA")) > 2
    if machine:
        assert crash_machine(log, durable, rig.boot) == last - durable
    rig.queues.restart()  # SIGKILL, and back empty: the structure is lost
    assert not rig.facility.exists(MSGQ)
    return before


def after_resync() -> dict[str, Counter[bytes]]:
    """What CQSIMSA's resync leaves: its locked messages back on their queue."""
    return {"ready": Counter(body(n) for n in range(DELETED, ALL))}


@pytest.mark.parametrize("segments", sorted(SEGMENTS))
@pytest.mark.parametrize("recoverer", ["CQSIMSA", "CQSIMSB"])
def test_a_machine_crash_and_a_lost_structure_lose_no_committed_message(
    rig: Rig, recoverer: str, segments: str
) -> None:
    before = crash_all(rig, SEGMENTS[segments])
    with rig.cqs(recoverer).connect() as cqs:
        assert cqs.recovery_log is not None and cqs.recovery_log.rebuilt() == [MSGQ]
        [outcome] = cqs.recovery_log.pairs[MSGQ].outcomes
        assert outcome.action == "recovered"  # the SRDS, then the log after it
        assert outcome.log is not None and outcome.log.clean and not outcome.log.lost
        assert messages(rig.facility) == expected()
        assert snapshot(rig.facility) == before  # object for object
    # CQSIMSA's own restart (after its peer's recovery, or its second) finds its locks
    # and no copy to take back twice.
    with rig.cqs("CQSIMSA").connect() as again:
        assert "warm start" in again.start_reason
        assert messages(rig.facility) == expected()
        assert len(again.resync().requeued) == LOCKED
        assert messages(rig.facility) == after_resync()


@pytest.mark.parametrize("recoverer", ["CQSIMSA", "CQSIMSB"])
def test_both_copies_lost_refuse_recovery_naming_the_loss(rig: Rig, recoverer: str) -> None:
    crash_all(rig)
    rig.logging.restart()  # SIGKILL, and back empty: the copy in Redis B is lost too
    with pytest.raises(LogIncomplete) as refused:
        rig.cqs(recoverer).connect()
    assert refused.value.reason is RecoveryReason.LOG_INCOMPLETE
    text = str(refused.value)
    assert "writer CQSIMSA" in text and "lost its copy" in text and rig.logging.url in text
    assert not rig.facility.exists(MSGQ)  # nothing rebuilt from what is left
    with pytest.raises(LogIncomplete):  # and not on a second try either
        rig.cqs("CQSIMSB" if recoverer == "CQSIMSA" else "CQSIMSA").connect()
    assert not rig.facility.exists(MSGQ)


def test_the_logging_structure_down_refuses_recovery_until_it_is_back(rig: Rig) -> None:
    crash_all(rig)
    rig.logging.save()  # down, not lost: it comes back with what it held
    rig.logging.kill()
    for recoverer in ("CQSIMSB", "CQSIMSA"):
        with pytest.raises(LogIOError) as refused:
            rig.cqs(recoverer).connect()
        assert refused.value.reason is LogReason.LOGGING_UNAVAILABLE
        assert "writer CQSIMSA" in str(refused.value) and rig.logging.url in str(refused.value)
        assert not rig.facility.exists(MSGQ)
    rig.logging.start()
    with rig.cqs("CQSIMSB").connect() as cqs:
        assert cqs.recovery_log is not None and cqs.recovery_log.rebuilt() == [MSGQ]
        assert messages(rig.facility) == expected()


@pytest.mark.parametrize("segments", sorted(SEGMENTS))
def test_a_process_crash_alone_recovers_from_the_segments_without_the_logging_structure(
    rig: Rig, segments: str
) -> None:
    before = crash_all(rig, SEGMENTS[segments], machine=False)  # the page cache kept all
    rig.logging.kill()  # gone for good
    with rig.cqs("CQSIMSB").connect() as cqs:
        assert cqs.recovery_log is not None and cqs.recovery_log.rebuilt() == [MSGQ]
        [outcome] = cqs.recovery_log.pairs[MSGQ].outcomes
        assert outcome.log is not None and outcome.log.clean
        assert messages(rig.facility) == expected()
        assert snapshot(rig.facility) == before
    with rig.cqs("CQSIMSA").connect() as again:
        assert messages(rig.facility) == expected()
        assert len(again.resync().requeued) == LOCKED
        assert messages(rig.facility) == after_resync()
