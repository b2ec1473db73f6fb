"""What the demo's IMS terminals enter, and the ledger that counts every input and reply.

Each input carries an id (``IN00042``) in its first segment; every program answers with
the id in its reply, so the ledger can tell, per IMS, which inputs were answered, and
that none was answered twice, across an IMS killed and emergency-restarted.
"""

from __future__ import annotations

import random
import re
import threading
from collections import Counter
from dataclasses import dataclass, field

from sharedq.ims import DLI, IMS, Terminal

#: Kinds of input, and the transaction (or Fast Path routing code) each is entered for.
KINDS: dict[str, str] = {
    "ff": "TRANFF",  # full-function, one queue buffer: local when a region waits
    "big": "TRANFF",  # several queue buffers: global, through the staging queue
    "switch": "TRANSW",  # a program-to-program switch to TRANFB, which answers
    "serial": "TRANSER",  # serial: this IMS's serial queue, in order
    "fp-local": "FPLF",  # Fast Path, Local First
    "fp-global": "FPGO",  # Fast Path, Global Only (through the EMHQ)
}
#: How often each kind is drawn (the workload's mix).
MIX: tuple[tuple[str, int], ...] = (
    ("ff", 5),
    ("big", 1),
    ("switch", 2),
    ("serial", 1),
    ("fp-local", 2),
    ("fp-global", 1),
)
#: Bytes of one queue buffer in the demo's IMSs (a "big" input takes three).
QUEUE_BUFFER = 256
#: The longest the demo waits for one reply (seconds): a reply that does not come
#: within it is counted as not delivered, and the balance sheet says so.
REPLY_WAIT_S = 20.0
_ID = re.compile(rb"IN\d{5}")


def input_id(data: bytes | str) -> str | None:
    """The input id a message or reply carries, if any."""
    raw = data.encode("ascii", "replace") if isinstance(data, str) else data
    found = _ID.search(raw)
    return found.group().decode() if found else None


@dataclass
class Ledger:
    """Every input entered (by id: the IMS it was entered at, its kind, its routing) and
    every reply delivered (how many times each id was answered, and by which IMS)."""

    #: id -> (IMSID entered at, kind, routing, LTERM)
    entered: dict[str, tuple[str, str, str, str]] = field(default_factory=dict)
    answered: Counter[str] = field(default_factory=Counter)
    delivered_by: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _next: int = 0

    def new_id(self) -> str:
        with self._lock:
            self._next += 1
            return f"IN{self._next:05}"

    def enter(self, ident: str, imsid: str, kind: str, routing: str, lterm: str) -> None:
        with self._lock:
            self.entered[ident] = (imsid, kind, routing, lterm)

    def answer(self, ident: str | None, imsid: str) -> None:
        if ident is None:
            return
        with self._lock:
            self.answered[ident] += 1
            self.delivered_by.setdefault(ident, imsid)

    def waiting(self, idents: set[str]) -> set[str]:
        with self._lock:
            return {i for i in idents if not self.answered[i]}

    def unanswered_at(self, lterm: str) -> set[str]:
        """The full-function inputs entered from ``lterm`` not answered yet."""
        with self._lock:
            return {
                i
                for i, (_, kind, _, source) in self.entered.items()
                if source == lterm and not kind.startswith("fp") and not self.answered[i]
            }

    def per_ims(self) -> dict[str, dict[str, int]]:
        """Per IMS (where the input was entered): entered, delivered (answered at least
        once), answered twice or more, and the routing of each full-function input."""
        rows: dict[str, dict[str, int]] = {}
        with self._lock:
            for ident, (imsid, kind, routing, _) in self.entered.items():
                row = rows.setdefault(
                    imsid,
                    dict.fromkeys(
                        (
                            "entered",
                            "delivered",
                            "duplicates",
                            "local",
                            "global",
                            "serial",
                            "fp_local",
                            "fp_global",
                        ),
                        0,
                    ),
                )
                row["entered"] += 1
                row["delivered"] += 1 if self.answered[ident] else 0
                row["duplicates"] += 1 if self.answered[ident] > 1 else 0
                column = f"fp_{routing}" if kind.startswith("fp") else routing
                row[column] = row.get(column, 0) + 1
        return rows


def draw(rng: random.Random, count: int) -> list[str]:
    """``count`` kinds of input drawn from the mix."""
    kinds = [k for k, _ in MIX]
    weights = [w for _, w in MIX]
    return rng.choices(kinds, weights, k=count)


def text_of(kind: str, ident: str, *, hold: bool = False) -> str:
    """The input's first segment: transaction code, id, and for ``big`` enough bytes to
    need three queue buffers."""
    body = f"{KINDS[kind]} {ident}"
    if hold:
        body += " HOLD"
    if kind == "big":
        body += " " + "x" * (2 * QUEUE_BUFFER + 10)
    return body


def enter_batch(
    ims: IMS, terminal: Terminal, kinds: list[str], ledger: Ledger
) -> tuple[set[str], list[tuple[str, str]]]:
    """Enter ``kinds`` at ``terminal`` one after another (so that later ones find the
    regions busy and go global); returns the full-function ids entered and the Fast
    Path (LTERM, id) pairs."""
    full: set[str] = set()
    fast: list[tuple[str, str]] = []
    lterm = terminal.lterms[0]
    for kind in kinds:
        ident = ledger.new_id()
        if kind.startswith("fp"):
            assert ims.fastpath is not None
            routing = ims.fastpath.enter(lterm, KINDS[kind], ident.encode())
            ledger.enter(ident, ims.imsid, kind, routing, lterm)
            fast.append((lterm, ident))
        else:
            routed = terminal.enter(text_of(kind, ident))
            ledger.enter(ident, ims.imsid, kind, routed.routing, lterm)
            full.add(ident)
    return full, fast


def collect(
    ims: IMS, terminal: Terminal, full: set[str], fast: list[tuple[str, str]], ledger: Ledger
) -> None:
    """Receive and acknowledge replies at ``terminal`` until every id in ``full`` is
    answered (or a reply is ``REPLY_WAIT_S`` late), and take the Fast Path replies."""
    while ledger.waiting(full):
        out = terminal.receive(REPLY_WAIT_S)
        if out is None:
            break
        ledger.answer(input_id(out.text), ims.imsid)
        terminal.ack(out)
    for lterm, _ in fast:
        assert ims.fastpath is not None
        reply = ims.fastpath.receive(lterm, REPLY_WAIT_S)
        if reply is not None:
            ledger.answer(input_id(reply), ims.imsid)


def run_terminal(ims: IMS, terminal: Terminal, batches: list[list[str]], ledger: Ledger) -> None:
    """One terminal's work: each batch entered, then its replies collected."""
    for kinds in batches:
        full, fast = enter_batch(ims, terminal, kinds, ledger)
        collect(ims, terminal, full, fast, ledger)


def run_terminals(work: list[tuple[IMS, Terminal, list[list[str]]]], ledger: Ledger) -> None:
    """Every terminal's work at once, a thread each."""
    threads = [
        threading.Thread(
            target=run_terminal,
            args=(ims, terminal, batches, ledger),
            name=terminal.node,
            daemon=True,
        )
        for ims, terminal, batches in work
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


# -- the programs --------------------------------------------------------------------------


def echo(dli: DLI) -> None:
    """PGMFF, PGMFB, PGMSER: answer each message on the I/O PCB (its first 40 bytes)."""
    while (segment := dli.io.gu()) is not None:
        dli.io.isrt(b"OUT " + segment[:40])


def switch(dli: DLI) -> None:
    """PGMSW: a program-to-program switch to TRANFB, which answers the terminal."""
    while (segment := dli.io.gu()) is not None:
        ident = input_id(segment) or "?"
        dli.alt_pcb("TRANFB").isrt(f"TRANFB {ident} SWITCHED".encode())


def ifp(data: bytes) -> bytes:
    """The Fast Path programs: the reply is the input."""
    return b"FPOUT " + data


class Holder:
    """PGMFF on the IMS that is killed: a message marked ``HOLD`` is held (no sync
    point) until the IMS is dead; then the program goes on and finds ``QC``."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self._held = threading.Semaphore(0)
        self._done = threading.Semaphore(0)

    def __call__(self, dli: DLI) -> None:
        while (segment := dli.io.gu()) is not None:
            if b"HOLD" in segment:
                self._held.release()
                self.release.wait(REPLY_WAIT_S)
                dli.io.isrt(b"OUT " + segment[:40])  # never reaches the structure
                self._done.release()
                continue
            dli.io.isrt(b"OUT " + segment[:40])

    def wait_held(self, count: int, timeout: float = 5.0) -> int:
        """Wait until ``count`` messages are held (or the wait ends); how many are."""
        held = 0
        while held < count and self._held.acquire(timeout=timeout):
            held += 1
        return held

    def wait_done(self, count: int) -> None:
        for _ in range(count):
            self._done.acquire(timeout=REPLY_WAIT_S)
