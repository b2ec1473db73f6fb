"""What the IMS tests share: definitions, programs that report, gates, the structure's view."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from multiprocessing.queues import Queue
from typing import Any

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cf.types import HIGHEST_KEY, LOWEST_KEY
from sharedq.cqs import CQS, LIST_COUNT, CQSError, CQSReason, Private, make_name
from sharedq.cqs.messages import unpack
from sharedq.ims import DLI, Lterm, Program, Region, SystemDefinition, Terminal, Transaction
from sharedq.ims.messages import decode

WAIT_S = 30.0


def define(
    imsid: str,
    *,
    regions: tuple[Region, ...] = (Region("MPR1", (1,)),),
    transactions: tuple[Transaction, ...] = (),
    lterms: tuple[Lterm, ...] = (),
    queue_buffer: int = 4096,
    **options: Any,
) -> SystemDefinition:
    """A system with the transactions given (and a program for each PSB they name);
    ``options``: SystemDefinition's others (``local_processing``, ``spa_truncation``)."""
    psbs = sorted({t.psb for t in transactions})
    return SystemDefinition(
        imsid,
        transactions=transactions,
        programs=tuple(Program(p) for p in psbs),
        regions=regions,
        lterms=lterms,
        queue_buffer=queue_buffer,
        **options,
    )


class Gate:
    """Points a program stops at until the test lets it on (no sleeps: events)."""

    def __init__(self) -> None:
        self._reached: dict[str, threading.Event] = {}
        self._open: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def _events(self, name: str) -> tuple[threading.Event, threading.Event]:
        with self._lock:
            return (
                self._reached.setdefault(name, threading.Event()),
                self._open.setdefault(name, threading.Event()),
            )

    def stop_at(self, name: str) -> None:
        """The program's side: say it is here and wait to be let on."""
        reached, opened = self._events(name)
        reached.set()
        assert opened.wait(WAIT_S), f"gate {name} never opened"

    def wait_reached(self, name: str) -> None:
        reached, _ = self._events(name)
        assert reached.wait(WAIT_S), f"no program reached {name}"

    def open(self, name: str) -> None:
        self._events(name)[1].set()


@dataclass
class Runs:
    """What each scheduling of a program saw: per run, the first segments it got
    (``None`` for a ``QC``)."""

    runs: list[tuple[str, list[bytes | None]]] = field(default_factory=list)
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def record(self, imsid: str, got: list[bytes | None]) -> None:
        with self._changed:
            self.runs.append((imsid, got))
            self._changed.notify_all()

    def wait_for(self, count: int) -> list[tuple[str, list[bytes | None]]]:
        with self._changed:
            assert self._changed.wait_for(lambda: len(self.runs) >= count, WAIT_S), self.runs
            return list(self.runs)


def echo(runs: Runs | None = None, *, prefix: bytes = b"OUT ") -> Program:
    """A program that answers each message on the I/O PCB with ``prefix`` + its first
    segment, looping until ``QC``."""

    def program(dli: DLI) -> None:
        got: list[bytes | None] = []
        while True:
            segment = dli.io.gu()
            got.append(segment)
            if segment is None:
                break
            dli.io.isrt(prefix + segment)
        if runs is not None:
            runs.record(dli.imsid, got)

    return program


def blocker(gate: Gate, name: str = "busy") -> Program:
    """A program that holds its region until the gate opens (for "no region waiting")."""

    def program(dli: DLI) -> None:
        dli.io.gu()
        gate.stop_at(name)
        while dli.io.gu() is not None:
            pass

    return program


def where(facility: CouplingFacility, structure: str = "MSGQ01") -> dict[str, list[bytes]]:
    """Every message entry by the queue it is on: ``"lock"``, ``"staging"`` or the
    ready/serial queue's name as text; lock and staging entries as their queue names,
    ready entries as their data (the IMS message's first segment, for part 1)."""
    found: dict[str, list[bytes]] = {}
    with facility.connect(structure, "INSPECT") as conn:
        for number in range(1, LIST_COUNT):
            private = next((p for p in Private if number in p.headers()), None)
            for entry in conn.scan(number, LOWEST_KEY, HIGHEST_KEY):
                if private is not None:
                    found.setdefault(private.name.lower(), []).append(entry.key)
                elif entry.key[0] in (2, 6):
                    found.setdefault("staging", []).append(entry.key)
                else:
                    body = unpack(entry.data)[1]
                    name = entry.key.decode("ascii").rstrip()
                    found.setdefault(name, []).append(first_segment(body))
    return found


def first_segment(body: bytes) -> bytes:
    try:
        return decode(body).segments[0]
    except Exception:  # a first buffer of several: not decodable alone
        return body


def until(condition: Callable[[], bool]) -> bool:
    """Wait (on real time, with backoff) for a condition another thread makes true."""
    from sharedq.clock import retry_until

    return bool(retry_until(condition, timeout_s=WAIT_S, first_pause_s=0.002, longest_pause_s=0.05))


#: The filler's queues: on every header, since a header's list limit is not enough.
FILL = [make_name(1, f"FILL{n}") for n in range(40)]


def fill(facility: CouplingFacility, msgq: str = "MSGQ01") -> CQS:
    """Fill the structure from a CQS of its own, until a put is refused."""
    filler = CQS(facility, "FILLER", system="FILL", msgq=msgq).connect()
    for size in (400, 1):  # big messages, then small ones into what room is left
        for queue in FILL:
            with pytest.raises(CQSError) as full:
                while True:
                    filler.put(queue, b"f" * size)
            assert full.value.reason is CQSReason.STRUCTURE_FULL
    return filler


def drain(filler: CQS) -> None:
    """Room again: the filler's messages deleted, its CQS disconnected."""
    for queue in FILL:
        while (message := filler.read(queue)) is not None:
            assert message.token is not None
            filler.delete(message.token)
    filler.disconnect()


def take(terminal: Terminal, count: int) -> list[str]:
    """Receive and acknowledge ``count`` outputs at ``terminal``; their texts in order."""
    texts = []
    for _ in range(count):
        out = terminal.receive(WAIT_S)
        assert out is not None, f"{terminal}: {len(texts)} of {count} outputs came"
        texts.append(out.text)
        terminal.ack(out)
    return texts


def kill_holding(
    terminal: Terminal, doomed: BaseProcess, reached: Queue[bytes], in_flight: int, queued: int
) -> list[str]:
    """Enter ``in_flight`` inputs for the IMS in ``doomed`` (started) and wait until its
    regions hold each (they say so on ``reached``), enter ``queued`` more, then SIGKILL
    the process.  Returns every input's text, the held ones first."""
    sent = [f"TRANA {n:02}" for n in range(in_flight + queued)]
    for text in sent[:in_flight]:
        assert terminal.enter(text).routing == "global"
    held = sorted(reached.get(timeout=120) for _ in range(in_flight))
    assert held == [t.encode() for t in sent[:in_flight]]
    for text in sent[in_flight:]:
        terminal.enter(text)
    assert doomed.pid is not None
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.join(timeout=60)
    assert doomed.exitcode == -signal.SIGKILL
    return sent


def reply(data: bytes) -> bytes:
    """An IFP program: the reply to a Fast Path input."""
    return b"R " + data


def gated(gate: Gate) -> Program:
    """Echo each message; stop at the gate named by a message that says HOLD."""

    def program(dli: DLI) -> None:
        while (segment := dli.io.gu()) is not None:
            if b"HOLD" in segment:
                gate.stop_at(segment.decode())
            dli.io.isrt(b"OUT " + segment)

    return program


def lockers(facility: CouplingFacility, structure: str) -> list[bytes]:
    """Who holds each message on the structure's lock queue (its CQS's name)."""
    with facility.connect(structure, "INSPECT") as conn:
        return sorted(
            entry.secondary_key or b""
            for header in Private.LOCK.headers()
            for entry in conn.scan(header, LOWEST_KEY, HIGHEST_KEY)
        )
