"""The looks at the committer slots: whether one is active in the last two syncs and
has not come in for the next (what a gathering leader waits for), and whether a
committer other than this one is active (else a commit syncs its own files alone).

The look is two ``count`` calls over the slots rather than a generator over all 64
(cheaper where a leader looks at every arrival); it must answer what the rule says for
every value a slot can hold, including the empty slot (0) and the first syncs.  The
second is a set of the slots rather than a ``max`` over them, and looks for the marks a
committer can have written (never above ``started + 1``).
"""

from __future__ import annotations

import itertools

from sharedq.log.groupsync import _others_active, _pending, _waiting_behind


def _rule(slots: tuple[int, ...], started: int) -> bool:
    low = max(started - 1, 1)
    return any(low <= mark <= started for mark in slots)


def test_the_look_at_the_slots_answers_the_rule_for_every_small_case() -> None:
    for started in range(0, 6):
        for slots in itertools.product(range(0, 8), repeat=3):
            assert _waiting_behind(slots, started) is _rule(slots, started), (slots, started)
            assert _pending([started, 0, *slots]) is _rule(slots, started)


def _active_rule(slots: tuple[int, ...], started: int, slot: int | None) -> bool:
    others = [mark for n, mark in enumerate(slots) if n != slot]
    return max(others, default=0) >= max(started - 1, 1)


def test_the_look_for_other_active_committers_answers_the_rule_for_every_mark_written() -> None:
    for started in range(0, 6):
        # a committer's mark is the sync that covers it: at most started + 1
        for slots in itertools.product(range(0, started + 2), repeat=3):
            for slot in (None, 0, 1, 2):
                assert _others_active(slots, started, slot) is _active_rule(slots, started, slot)
