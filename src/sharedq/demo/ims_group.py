"""The demo's IMS shared-queues group: three IMSs, their terminals, a kill, a restart.

IMSA, IMSB and IMSC, each with its CQS, share the MSGQ structure ``DEMOMSGQ`` and the
EMHQ structure ``DEMOEMHQ`` (their own, apart from the MQ group's), and log to one log
stream per structure under ``<output>/ims/recovery``.  Two terminals on each IMS enter
a mixed workload (:mod:`sharedq.demo.ims_workload`): full-function transactions
(processed local when a region waits, global otherwise; multi-buffer ones through the
staging queue), a program-to-program switch, a serial transaction, Fast Path Local
First and Global Only.  Then IMSB is killed (``IMS.stop_dead``, in this process, on
memory and on Redis alike) while two of its regions hold inputs and an output is in
flight to one of its terminals: those messages stay on the lock queue, locked by its
CQS.  IMSA and IMSC work on; IMSB's next incarnation starts with an emergency restart,
which puts them back on their queues, and every input is answered exactly once.
"""

from __future__ import annotations

import contextlib
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sharedq.cf import CouplingFacility
from sharedq.cf.types import HIGHEST_KEY, LOWEST_KEY
from sharedq.clock import retry_until
from sharedq.cqs import LIST_COUNT, Private, structure_params
from sharedq.demo.ims_workload import (
    QUEUE_BUFFER,
    Holder,
    Ledger,
    collect,
    draw,
    echo,
    enter_batch,
    ifp,
    run_terminals,
    switch,
    text_of,
)
from sharedq.ims import (
    IMS,
    SPC,
    FastPathDefinition,
    FPTransaction,
    Lterm,
    Program,
    Region,
    SystemDefinition,
    Terminal,
    Transaction,
)
from sharedq.ims.restart import Restart
from sharedq.log import LogConfig
from sharedq.recovery import RecoverySettings

MSGQ = "DEMOMSGQ"
EMHQ = "DEMOEMHQ"
IMS_STRUCTURES = (MSGQ, EMHQ)
GROUP = ("IMSA", "IMSB", "IMSC")
#: The IMS that is killed and emergency-restarted.
VICTIM = "IMSB"
#: Inputs a batch enters before collecting its replies.
BATCH = 3
#: Regions of each IMS serving class 1 (TRANFF, TRANSW): as many inputs are held at the kill.
CLASS1_REGIONS = 2
#: Inputs entered at the victim while its regions are held: processed by the others,
#: their replies wait for the victim (one in flight to its terminal).
WAITING_REPLIES = 3
IMS_LOG = LogConfig(staging_bytes=2 << 20, segment_bytes=256 << 10)


@dataclass
class IMSGroupResult:
    """What the IMS part did and counted."""

    ledger: Ledger
    #: Per IMSID: its counts (both incarnations of the victim added), and Fast Path's.
    counts: dict[str, dict[str, int]]
    held_at_kill: int
    locked_at_kill: int
    requeued: int
    #: Messages left on the client queues and on the cold queue at the end.
    still_queued: int
    cold: int
    seconds: float = 0.0
    phases: dict[str, int] = field(default_factory=dict)

    @property
    def entered(self) -> int:
        return len(self.ledger.entered)

    @property
    def delivered(self) -> int:
        return sum(1 for i in self.ledger.entered if self.ledger.answered[i])

    @property
    def duplicates(self) -> int:
        return sum(1 for i in self.ledger.entered if self.ledger.answered[i] > 1)

    @property
    def balanced(self) -> bool:
        """Entered = delivered + still queued + cold, and no input answered twice."""
        return (
            self.entered == self.delivered + self.still_queued + self.cold and self.duplicates == 0
        )


def ims_recovery(output: Path) -> Path:
    """Where the IMS group's CQSs log (a recovery root of its own)."""
    return output / "ims" / "recovery"


def define(imsid: str) -> SystemDefinition:
    lterms = tuple(Lterm(f"LT{imsid[-1]}{n}", f"NODE{imsid[-1]}{n}") for n in (1, 2))
    return SystemDefinition(
        imsid,
        transactions=(
            Transaction("TRANFF", 1, "PGMFF"),
            Transaction("TRANSW", 1, "PGMSW"),
            Transaction("TRANFB", 2, "PGMFB"),
            Transaction("TRANSER", 3, "PGMSER", serial=True),
        ),
        programs=tuple(Program(p) for p in ("PGMFF", "PGMSW", "PGMFB", "PGMSER")),
        regions=(
            *(Region(f"MPR{n}", (1, 2)) for n in range(1, CLASS1_REGIONS + 1)),
            Region("MPRS", (2, 3)),
        ),
        lterms=lterms,
        queue_buffer=QUEUE_BUFFER,
    )


FAST_PATH = FastPathDefinition(
    transactions=(
        FPTransaction("FPLF", "IFPLF", SPC.LOCAL_FIRST),
        FPTransaction("FPGO", "IFPGO", SPC.GLOBAL_ONLY),
    ),
    regions={"IFP1": "IFPLF", "IFP2": "IFPGO"},
    group=GROUP,
)


def create_ims_structures(facility: CouplingFacility, messages: int = 4000) -> None:
    for name in IMS_STRUCTURES:
        with contextlib.suppress(Exception):
            facility.delete(name, force=True)
        facility.create(structure_params(name, messages=messages))


def destroy_ims_structures(facility: CouplingFacility) -> None:
    for name in IMS_STRUCTURES:
        with contextlib.suppress(Exception):
            facility.delete(name, force=True)


def start_ims(
    facility: CouplingFacility,
    imsid: str,
    recovery: RecoverySettings,
    *,
    pgmff: Any = None,
    restart: Restart = "normal",
) -> IMS:
    programs = {"PGMFF": pgmff or echo, "PGMSW": switch, "PGMFB": echo, "PGMSER": echo}
    ims = IMS(
        facility,
        define(imsid),
        programs,
        msgq=MSGQ,
        emhq=EMHQ,
        recovery=recovery,
        fastpath=FAST_PATH,
        ifp_programs={"IFPLF": ifp, "IFPGO": ifp},
    )
    return ims.start(restart=restart)


def count_entries(facility: CouplingFacility, structure: str) -> dict[str, int]:
    """Entries on the lock queue, the cold queue and the client queues of ``structure``
    now (staging parts are counted with their message: not at all)."""
    found = {"lock": 0, "cold": 0, "client": 0}
    with facility.connect(structure, "DEMOLOOK") as conn:
        for number in range(1, LIST_COUNT):
            private = next((p for p in Private if number in p.headers()), None)
            if private not in (None, Private.LOCK, Private.COLD):
                continue
            for entry in conn.scan(number, LOWEST_KEY, HIGHEST_KEY, with_data=False):
                if private is Private.LOCK:
                    found["lock"] += 1
                elif private is Private.COLD:
                    found["cold"] += 1
                elif entry.key[0] not in (2, 6):  # a staged part belongs to its message
                    found["client"] += 1
    return found


def run_ims_group(
    facility: CouplingFacility,
    output: Path,
    *,
    batches: int = 4,
    seed: int = 7,
    log_config: LogConfig = IMS_LOG,
    on_phase: Callable[[str], None] | None = None,
) -> IMSGroupResult:
    """Run the IMS group's story on ``facility`` (structures made afresh and, at the
    end, left empty); the log under :func:`ims_recovery` ``(output)``, emptied first."""
    import time

    began = time.perf_counter()
    tell = on_phase or (lambda _: None)
    root = ims_recovery(output)
    if root.exists():  # an old run's log would be recovered into the new structures
        shutil.rmtree(root)
    recovery = RecoverySettings(root, poll_seconds=0.1, log_config=log_config)
    create_ims_structures(facility)
    rng = random.Random(seed)
    ledger = Ledger()
    holder = Holder()
    systems: dict[str, IMS] = {}
    incarnations: list[IMS] = []
    try:
        for imsid in GROUP:
            systems[imsid] = start_ims(
                facility, imsid, recovery, pgmff=holder if imsid == VICTIM else None
            )
            incarnations.append(systems[imsid])
        terminals = {
            imsid: [ims.logon(lt.node) for lt in ims.definition.lterms]
            for imsid, ims in systems.items()
        }
        tell("IMS: mixed workload on three systems")
        run_terminals(_work(systems, terminals, rng, batches), ledger)
        tell(f"IMS: {VICTIM} killed with work in progress")
        victim, (t1, t2) = systems[VICTIM], terminals[VICTIM]
        _quiet(facility)
        held = _hold(victim, t1, ledger, holder)
        in_flight = _reply_waiting(systems, victim, t2, ledger)
        victim.stop_dead()
        holder.release.set()
        holder.wait_done(held)
        # The others may still be deleting an input they answered: wait until only
        # what the victim left is on the lock queue.
        locked = _locked_at_most(facility, held + in_flight)
        tell("IMS: the others work on")
        others = {k: v for k, v in systems.items() if k != VICTIM}
        run_terminals(_work(others, terminals, rng, max(1, batches // 2)), ledger)
        tell(f"IMS: {VICTIM} emergency restart")
        again = start_ims(facility, VICTIM, recovery, restart="emergency")
        systems[VICTIM] = again
        incarnations.append(again)
        requeued = again.restarted.requeued
        for terminal in (again.logon(t1.node), again.logon(t2.node)):
            collect(again, terminal, ledger.unanswered_at(terminal.lterms[0]), [], ledger)
    finally:
        for ims in systems.values():
            with contextlib.suppress(Exception):
                ims.shutdown()
    counts: dict[str, dict[str, int]] = {}
    for ims in incarnations:
        _add(counts, ims)
    left = {name: count_entries(facility, name) for name in IMS_STRUCTURES}
    return IMSGroupResult(
        ledger,
        counts,
        held_at_kill=held,
        locked_at_kill=locked,
        requeued=requeued,
        still_queued=sum(v["client"] + v["lock"] for v in left.values()),
        cold=sum(v["cold"] for v in left.values()),
        seconds=time.perf_counter() - began,
    )


def _work(
    systems: dict[str, IMS], terminals: dict[str, list[Terminal]], rng: random.Random, batches: int
) -> list[tuple[IMS, Terminal, list[list[str]]]]:
    return [
        (ims, terminal, [draw(rng, BATCH) for _ in range(batches)])
        for imsid, ims in systems.items()
        for terminal in terminals[imsid]
    ]


def _hold(victim: IMS, terminal: Terminal, ledger: Ledger, holder: Holder) -> int:
    """Inputs the victim's regions take and hold (local: a region waits for each)."""
    for _ in range(CLASS1_REGIONS):
        ident = ledger.new_id()
        routed = terminal.enter(text_of("ff", ident, hold=True))
        ledger.enter(ident, victim.imsid, "ff", routed.routing, terminal.lterms[0])
    return holder.wait_held(CLASS1_REGIONS)


def _quiet(facility: CouplingFacility) -> None:
    """Wait until no message is on the MSGQ (every input's sync point done), so that
    the victim's regions are all waiting when the held inputs come."""
    retry_until(
        lambda: count_entries(facility, MSGQ) == {"lock": 0, "cold": 0, "client": 0},
        timeout_s=10.0,
        first_pause_s=0.002,
        longest_pause_s=0.05,
    )


def _locked_at_most(facility: CouplingFacility, limit: int) -> int:
    """The MSGQ's lock queue entries, once they are no more than ``limit`` (or after
    5 s, whatever they are)."""

    def attempt() -> tuple[int] | None:
        count = count_entries(facility, MSGQ)["lock"]
        return (count,) if count <= limit else None

    found = retry_until(attempt, timeout_s=5.0, first_pause_s=0.005, longest_pause_s=0.05)
    return found[0] if found else count_entries(facility, MSGQ)["lock"]


def _reply_waiting(systems: dict[str, IMS], victim: IMS, terminal: Terminal, ledger: Ledger) -> int:
    """Inputs at the victim whose regions are busy: global, processed by the others;
    their replies wait for the victim's terminal, the first in flight to it (returns 1
    when it came, else 0)."""
    others = [ims for imsid, ims in systems.items() if imsid != victim.imsid]
    before = sum(ims.counts["processed"] for ims in others)
    full, _ = enter_batch(victim, terminal, ["ff"] * WAITING_REPLIES, ledger)
    retry_until(
        lambda: sum(ims.counts["processed"] for ims in others) >= before + len(full),
        timeout_s=20.0,
        first_pause_s=0.005,
        longest_pause_s=0.05,
    )
    # sent to the terminal, never acknowledged: in flight when the victim dies
    return 0 if terminal.receive(20.0) is None else 1


def _add(counts: dict[str, dict[str, int]], ims: IMS) -> None:
    row = counts.setdefault(ims.imsid, {})
    for key, value in ims.counts.items():
        row[key] = row.get(key, 0) + value
    if ims.fastpath is not None:
        for key, value in ims.fastpath.counts.items():
            row[f"fp_{key}"] = row.get(f"fp_{key}", 0) + value
