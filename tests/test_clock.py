"""The one clock (``sharedq.clock``): its units, the manual clock, and retry_until."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sharedq.clock import SYSTEM_CLOCK, Backoff, Clock, ManualClock, SystemClock, retry_until
from sharedq.recovery import PairLayout, RecoveryError, RecoveryReason
from sharedq.testing import ManualClock as SeamManualClock


class RecordingClock(ManualClock):
    """A manual clock that keeps every pause asked of it."""

    def __init__(self) -> None:
        super().__init__()
        self.pauses: list[float] = []

    def sleep_s(self, seconds: float) -> None:
        self.pauses.append(seconds)
        super().sleep_s(seconds)


def test_both_clocks_are_clocks_and_the_seam_is_the_same_class() -> None:
    clocks: list[Clock] = [SystemClock(), ManualClock(), SYSTEM_CLOCK]
    assert all(isinstance(clock.now_us(), int) for clock in clocks)
    assert SeamManualClock is ManualClock


def test_the_system_clock_reads_the_host() -> None:
    before = time.time_ns() // 1000
    now_us = SYSTEM_CLOCK.now_us()
    assert before <= now_us <= time.time_ns() // 1000
    assert abs(SYSTEM_CLOCK.now_s() - now_us / 1e6) < 1
    start = SYSTEM_CLOCK.monotonic_s()
    SYSTEM_CLOCK.sleep_s(0.01)
    assert SYSTEM_CLOCK.monotonic_s() - start >= 0.01


def test_a_manual_clock_moves_only_when_told_and_ticks_at_each_reading() -> None:
    clock = ManualClock(1_700_000_000.0, tick_s=0.001)
    assert clock.now_us() == 1_700_000_000_000_000
    assert clock.now_us() == 1_700_000_000_001_000
    assert clock.now_s() == 1_700_000_000.002
    assert clock.monotonic_s() == 1_700_000_000.003  # one reading: the same time
    clock.advance_s(2.5)
    assert clock.now_us() == 1_700_000_002_504_000
    with pytest.raises(ValueError):
        clock.advance_s(-1)
    still = ManualClock(5.0)
    assert [still.now_s() for _ in range(3)] == [5.0, 5.0, 5.0]


def test_sleeping_on_a_manual_clock_moves_it_on_at_once() -> None:
    clock = ManualClock(100.0)
    started = time.monotonic()
    clock.sleep_s(3600)
    assert clock.monotonic_s() == 3700.0
    assert time.monotonic() - started < 1  # an hour's sleep, in no real time


def test_retry_until_returns_the_first_true_value_without_pausing_after_it() -> None:
    clock = RecordingClock()
    answers = iter([None, 0, "found", "never asked"])
    assert retry_until(answers.__next__, timeout_s=10, first_pause_s=0.5, clock=clock) == "found"
    assert clock.pauses == [0.5, 0.5]  # no longest: every pause is the first
    assert next(answers) == "never asked"


def test_pauses_double_up_to_the_longest_and_the_last_false_value_is_returned() -> None:
    clock = RecordingClock()
    tries: list[float] = []

    def attempt() -> bool:
        tries.append(clock.monotonic_s())
        return False

    assert (
        retry_until(attempt, timeout_s=1.0, first_pause_s=0.1, longest_pause_s=0.3, clock=clock)
        is False
    )
    assert clock.pauses == [0.1, 0.2, 0.3, 0.3, 0.3]  # 1.2 s: past the deadline
    # Attempt, deadline, pause: one attempt at the start and one after each pause, the
    # last one after the deadline passed.
    assert len(tries) == len(clock.pauses) + 1
    assert tries[-1] - tries[0] == pytest.approx(1.2)


def test_a_wait_with_no_time_makes_one_attempt() -> None:
    clock = RecordingClock()
    calls: list[int] = []
    assert not retry_until(lambda: calls.append(1), timeout_s=0, first_pause_s=1, clock=clock)
    assert calls == [1] and clock.pauses == []


def test_an_attempt_may_end_the_wait_with_its_own_error() -> None:
    def attempt() -> bool:
        raise KeyError("gone")

    with pytest.raises(KeyError):
        retry_until(attempt, timeout_s=10, first_pause_s=0.1, clock=ManualClock())


def test_a_backoff_drives_a_loop_by_hand() -> None:
    clock = RecordingClock()
    backoff = Backoff(timeout_s=0.05, first_pause_s=0.01, longest_pause_s=0.04, clock=clock)
    rounds = 0
    while not backoff.expired():
        backoff.pause()
        rounds += 1
    assert clock.pauses == [0.01, 0.02, 0.04] and rounds == 3
    assert backoff.elapsed_s() == pytest.approx(0.07)


def test_a_timeout_on_a_manual_clock_passes_at_once(tmp_path: Path) -> None:
    """The pair's recovery lock, held by another, times out after its 300 s of pauses
    on a manual clock without a real wait: the same attempts, the same error."""
    layout = PairLayout(tmp_path, "APP1")
    clock = RecordingClock()
    started = time.monotonic()
    with (
        layout.recovery_lock(1),
        pytest.raises(RecoveryError) as caught,
        layout.recovery_lock(300, clock=clock),
    ):
        pass
    assert caught.value.reason is RecoveryReason.RECOVERY_TIMEOUT
    assert "300 s" in str(caught.value)
    assert time.monotonic() - started < 5
    assert clock.pauses[:6] == [0.005, 0.01, 0.02, 0.04, 0.08, 0.1]
    assert sum(clock.pauses) == pytest.approx(300, abs=0.1)
