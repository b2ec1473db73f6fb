"""The leader's look at the committer slots: whether one is active in the last two
syncs and has not come in for the next (what a gathering leader waits for).

The look is two ``count`` calls over the slots rather than a generator over all 64
(cheaper where a leader looks at every arrival); it must answer what the rule says for
every value a slot can hold, including the empty slot (0) and the first syncs.
"""

from __future__ import annotations

import itertools

from sharedq.log.groupsync import _pending, _waiting_behind


def _rule(slots: tuple[int, ...], started: int) -> bool:
    low = max(started - 1, 1)
    return any(low <= mark <= started for mark in slots)


def test_the_look_at_the_slots_answers_the_rule_for_every_small_case() -> None:
    for started in range(0, 6):
        for slots in itertools.product(range(0, 8), repeat=3):
            assert _waiting_behind(slots, started) is _rule(slots, started), (slots, started)
            assert _pending([started, 0, *slots]) is _rule(slots, started)
