"""Fast Path on shared queues (§1.17, §9.3): every branch of the sysplex processing
codes, the PSB name tables through the EMHQ structure, DFS2533 and DFS2529I; on
memory and Redis."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cqs import structure_params
from sharedq.ims import IMS, IMSError, IMSReason
from sharedq.ims.fastpath import (
    DFS555I,
    DFS2529I,
    DFS2533,
    SPC,
    FastPath,
    FastPathDefinition,
    FPTransaction,
    local_first,
)
from tests.ims.conftest import MakeIMS
from tests.ims.helpers import WAIT_S, define, until

EMHQ = "EMHQ01"
GROUP = ("IMSA", "IMSB")
TRANS = (
    FPTransaction("FPLF", "PSBF"),
    FPTransaction("FPLO", "PSBF", SPC.LOCAL_ONLY),
    FPTransaction("FPGO", "PSBF", SPC.GLOBAL_ONLY),
)


class Blocked:
    """An IFP program that holds each message until the gate opens; counts entries."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Semaphore(0)

    def __call__(self, data: bytes) -> bytes:
        self.entered.release()
        assert self.gate.wait(WAIT_S)
        return b"R " + data

    def wait_entered(self, count: int) -> None:
        for _ in range(count):
            assert self.entered.acquire(timeout=WAIT_S)


def echo(data: bytes) -> bytes:
    return b"R " + data


@pytest.fixture
def fp(facility: CouplingFacility, make_ims: MakeIMS) -> Callable[..., FastPath]:
    facility.create(structure_params(EMHQ, messages=200))

    def make(imsid: str, regions: dict[str, str], program: Callable[[bytes], bytes]) -> FastPath:
        ims: IMS = make_ims(
            define(imsid),
            {},
            fastpath=FastPathDefinition(TRANS, regions, GROUP),
            ifp_programs={"PSBF": program},
            emhq=EMHQ,
        )
        assert ims.fastpath is not None
        return ims.fastpath

    return make


def fastpath_query(fastpath: FastPath) -> list[int]:
    return [fastpath.global_queued("PSBF")]


def receive(fastpath: FastPath, lterm: str, count: int) -> list[str]:
    got = [fastpath.receive(lterm, WAIT_S) for _ in range(count)]
    assert None not in got, got
    return sorted(str(g) for g in got)


def test_local_first_rule() -> None:
    assert not local_first(0, 0)  # no local IFP region
    assert local_first(1, 0)
    assert local_first(1, 5)  # not greater than 5
    assert not local_first(1, 6)  # more than 5, 1 / 4 <= 6
    assert local_first(28, 6)  # more than 5, 28 / 4 = 7 > 6
    assert not local_first(28, 7)  # 7 > 7 is false
    assert not local_first(24, 6)


def test_local_first_up_to_five_queued(fp: Callable[..., FastPath]) -> None:
    program = Blocked()
    a = fp("IMSA", {"IFP1": "PSBF"}, program)
    assert a.enter("LTA", "FPLF", b"0") == "local"
    program.wait_entered(1)  # the region has it: nothing queued
    routes = [a.enter("LTA", "FPLF", str(i).encode()) for i in range(1, 8)]
    # queued 0..5 at entry: local; 6 queued: more than 5 and 1 / 4 <= 6: global
    assert routes == ["local"] * 6 + ["global"]
    assert a.queued("PSBF") == 6
    assert fastpath_query(a) == [1]
    program.gate.set()
    assert receive(a, "LTA", 8) == sorted(f"R {i}" for i in range(8))
    assert a.counts["local"] == 7 and a.counts["global"] == 1


def test_local_first_regions_over_four(fp: Callable[..., FastPath]) -> None:
    program = Blocked()
    a = fp("IMSA", {f"IFP{i}": "PSBF" for i in range(28)}, program)
    for _ in range(28):
        assert a.enter("LTA", "FPLF", b"x") == "local"
        program.wait_entered(1)  # a region has it: nothing stays queued
    routes = [a.enter("LTA", "FPLF", b"y") for _ in range(8)]
    # queued 0..5: local; 6 queued: 28 / 4 = 7 > 6: local; 7 queued: global
    assert routes == ["local"] * 7 + ["global"]
    program.gate.set()
    assert len(receive(a, "LTA", 36)) == 36


def test_local_first_without_local_region_goes_global(fp: Callable[..., FastPath]) -> None:
    b = fp("IMSB", {"IFP1": "PSBF"}, echo)
    a = fp("IMSA", {}, echo)
    assert a.local_table() == {} and a.global_table("PSBF") == ["IMSB"]
    assert b.local_table() == {"PSBF": 1} and b.global_table("PSBF") == []
    assert a.enter("LTA", "FPLF", b"1") == "global"
    assert receive(a, "LTA", 1) == ["R 1"]  # processed by IMSB, delivered by IMSA
    assert b.counts["processed"] == 1
    b.stop_region("IFP1")
    assert a.global_table("PSBF") == [] and b.local_table() == {}
    with pytest.raises(IMSError) as caught:
        a.enter("LTA", "FPLF", b"2")  # no IFP region in the group
    assert caught.value.reason is IMSReason.ROUTING_NOT_ACTIVE
    assert DFS2533 in str(caught.value)


def test_local_only(fp: Callable[..., FastPath]) -> None:
    program = Blocked()
    b = fp("IMSB", {"IFP1": "PSBF"}, echo)
    a = fp("IMSA", {"IFP1": "PSBF"}, program)
    routes = [a.enter("LTA", "FPLO", str(i).encode()) for i in range(9)]
    assert routes == ["local"] * 9  # never the EMHQ, however many are queued
    assert fastpath_query(a) == [0]
    program.gate.set()
    assert len(receive(a, "LTA", 9)) == 9
    assert b.counts["processed"] == 0
    a.stop_region("IFP1")
    # IMSB serves the PSB, but local only needs a local IFP region
    with pytest.raises(IMSError, match="DFS2533") as caught:
        a.enter("LTA", "FPLO", b"x")
    assert caught.value.reason is IMSReason.ROUTING_NOT_ACTIVE


def test_global_only(fp: Callable[..., FastPath]) -> None:
    a = fp("IMSA", {"IFP1": "PSBF"}, echo)
    assert a.enter("LTA", "FPGO", b"1") == "global"  # even with a local region
    assert receive(a, "LTA", 1) == ["R 1"]
    a.stop_region("IFP1")
    b = fp("IMSB", {}, echo)
    with pytest.raises(IMSError, match="DFS2533"):
        b.enter("LTB", "FPGO", b"2")  # no IFP region in the group


@pytest.mark.parametrize("code", ["FPLF", "FPLO", "FPGO"])
def test_stopped_routing_code(fp: Callable[..., FastPath], code: str) -> None:
    a = fp("IMSA", {"IFP1": "PSBF"}, echo)
    a.stop_routing_code(code)
    with pytest.raises(IMSError, match="DFS2533") as caught:
        a.enter("LTA", code, b"1")
    assert caught.value.reason is IMSReason.ROUTING_NOT_ACTIVE
    a.start_routing_code(code)
    a.enter("LTA", code, b"2")
    assert receive(a, "LTA", 1) == ["R 2"]


def test_dfs2529i_when_the_last_ifp_region_stops(fp: Callable[..., FastPath]) -> None:
    program = Blocked()
    b = fp("IMSB", {"IFP1": "PSBF"}, program)
    a = fp("IMSA", {}, echo)
    assert a.enter("LTA", "FPLF", b"1") == "global"
    program.wait_entered(1)  # IMSB's only region holds message 1
    assert [a.enter("LTA", "FPLF", b"2"), a.enter("LTA", "FPGO", b"3")] == ["global"] * 2
    assert fastpath_query(a) == [2]
    stopper = threading.Thread(target=b.stop_region, args=("IFP1",))
    stopper.start()
    assert until(lambda: "IFP1" not in b.regions())
    program.gate.set()
    stopper.join(WAIT_S)
    assert not stopper.is_alive()
    # message 1 was answered; 2 and 3 were deleted and the terminal told DFS2529I
    assert receive(a, "LTA", 3) == sorted(["R 1", DFS2529I, DFS2529I])
    assert fastpath_query(a) == [0]
    assert b.counts["dfs2529i"] == 2


def test_dfs2529i_for_work_queued_locally(fp: Callable[..., FastPath]) -> None:
    program = Blocked()
    a = fp("IMSA", {"IFP1": "PSBF"}, program)
    a.enter("LTA", "FPLO", b"1")
    program.wait_entered(1)
    a.enter("LTA", "FPLO", b"2")
    assert a.queued("PSBF") == 1
    stopper = threading.Thread(target=a.stop_region, args=("IFP1",))
    stopper.start()
    assert until(lambda: not a.regions())
    program.gate.set()
    stopper.join(WAIT_S)
    assert receive(a, "LTA", 2) == sorted(["R 1", DFS2529I])


def test_last_local_region_hands_queued_work_to_the_group(
    fp: Callable[..., FastPath],
) -> None:
    program = Blocked()
    b = fp("IMSB", {"IFP1": "PSBF"}, echo)
    a = fp("IMSA", {"IFP1": "PSBF"}, program)
    a.enter("LTA", "FPLF", b"1")
    program.wait_entered(1)
    assert a.enter("LTA", "FPLF", b"2") == "local"
    stopper = threading.Thread(target=a.stop_region, args=("IFP1",))
    stopper.start()
    assert until(lambda: not a.regions())
    program.gate.set()
    stopper.join(WAIT_S)
    assert receive(a, "LTA", 2) == ["R 1", "R 2"]
    assert b.counts["processed"] == 1


def test_ifp_abend_discards_the_input(fp: Callable[..., FastPath]) -> None:
    def program(data: bytes) -> bytes:
        if data == b"bad":
            raise RuntimeError("abend")
        return b"R " + data

    a = fp("IMSA", {"IFP1": "PSBF"}, program)
    a.enter("LTA", "FPGO", b"bad")
    assert receive(a, "LTA", 1) == [f"{DFS555I} FPGO"]
    a.enter("LTA", "FPLF", b"ok")  # the region goes on
    assert receive(a, "LTA", 1) == ["R ok"]
    assert a.counts["abends"] == 1 and a.global_queued("PSBF") == 0
