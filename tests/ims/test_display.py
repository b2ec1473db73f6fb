"""/DISPLAY QCNT LTERM MSGAGE n (§9.12): output for an LTERM nobody logged on to waits
on the shared queues; the display lists it once it is older than n days (a ManualClock
moves the days on), and no more once the LTERM logs on and takes it."""

from __future__ import annotations

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cqs import Kind
from sharedq.ims import IMSError, IMSReason, Lterm
from sharedq.ims.display import QcntRow, stamp
from sharedq.testing import ManualClock

from .conftest import MakeIMS
from .helpers import define, echo, take, until, where
from .workers import TRANA

DAY_S = 86_400.0


def test_dead_letters_by_msgage(
    facility: CouplingFacility, make_ims: MakeIMS, clock: ManualClock
) -> None:
    lterms = (Lterm("LTERMA", "NODE1"), Lterm("LTERMB", "NODE2"))

    ims = make_ims(define("IMSA", transactions=(TRANA,), lterms=lterms), {"PGMA": echo()})
    assert stamp(1_700_000_000_000_000) == "23318/221320"
    for text in ("TRANA OLD1", "TRANA OLD2"):
        ims.enter("LTERMB", [text])  # replies to LTERMB, where no one is logged on
    assert until(lambda: len(where(facility).get("\x05LTERMB", [])) == 2)
    clock.advance_s(6 * DAY_S)
    ims.enter("LTERMB", ["TRANA NEW"])
    assert until(lambda: len(where(facility).get("\x05LTERMB", [])) == 3)

    assert ims.display_qcnt_lterm(5) == [QcntRow("LTERMB", 3, 2, "23318/221320", "23324/221320")]
    assert ims.display_qcnt_lterm(0) == [QcntRow("LTERMB", 3, 3, "23318/221320", "23324/221320")]
    assert ims.display_qcnt_lterm(7) == []
    assert ims.display_qcnt_lterm(5, lterms=["LTERMC"]) == ims.display_qcnt_lterm(5)

    node2 = ims.logon("NODE2")  # LTERMB registered: its output delivered
    assert take(node2, 3) == ["OUT TRANA OLD1", "OUT TRANA OLD2", "OUT TRANA NEW"]
    assert ims.display_qcnt_lterm(0) == []


@pytest.mark.parametrize("msgage", [-1, 366, 1.5, "5"])
def test_a_bad_msgage_is_refused(make_ims: MakeIMS, msgage: object) -> None:

    ims = make_ims(define("IMSA", transactions=(TRANA,)), {"PGMA": echo()})
    with pytest.raises(IMSError) as caught:
        ims.display_qcnt_lterm(msgage)  # type: ignore[arg-type]
    assert caught.value.reason is IMSReason.BAD_ARGUMENT


def test_display_overflowq_shows_each_pair_from_its_cqs(make_ims: MakeIMS) -> None:
    ims = make_ims(define("IMSA", transactions=(TRANA,)), {"PGMA": echo()})
    (shown,) = ims.display_overflowq()  # MSGQ only: no Fast Path
    assert shown == ims.cqs.display_overflowq()
    assert shown["structure"] == ims.cqs.pairs[Kind.MSGQ].primary and shown["queues"] == []
