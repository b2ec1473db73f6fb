"""The DL/I calls an application program makes on its message PCBs.

An application program is a Python callable taking one :class:`DLI`.  Like an IMS
message processing program it loops: ``GU`` on the I/O PCB gets the next input message
(its first segment), ``GN`` its next segments, ``ISRT`` on the I/O PCB adds a segment
to the reply for the input's LTERM, ``ISRT`` on an alternate PCB to another LTERM or,
as a program-to-program switch, to another transaction; ``PURG`` ends the message
being built on a PCB.  Each ``GU`` after the first is a sync point for the message
before (its inserts put, the input deleted); the end of the program is the last one.

The status code is on the PCB after each call, as in IMS: blanks on success, ``QC``
no more messages (a ``GU`` that lost the race for a message, or found none), ``QD``
no more segments, ``A1`` an unknown destination, ``A7`` the shared queue structure
is full (the seed's A7/QF: this model gives ``A7``).  A program that raises abends:
its unit of work backs out (:mod:`sharedq.ims.region`).

Conversational transactions (redbook §10): the ``GU`` of a conversational message
returns its SPA (the code and the user area, at this transaction's size) and ``GN``
the message's segments; the first ``ISRT`` on the I/O PCB is the SPA the program
returns, whose code says what follows (blanks: the conversation ends; a conversational
transaction's code: the next input goes there), and the next ones are the response.
The first ``ISRT`` on an alternate PCB to a conversational transaction is the SPA too
(an immediate switch).  :mod:`sharedq.ims.spa` keeps the sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from sharedq.cqs import LockToken, Uow
from sharedq.ims.definitions import Transaction
from sharedq.ims.messages import ImsMessage, make
from sharedq.ims.spa import CODE_BYTES, Spa

OK = "  "
QC = "QC"
QD = "QD"
A1 = "A1"
A7 = "A7"


@dataclass(frozen=True)
class Destination:
    """Where an insert goes: an LTERM (``transaction=False``) or a transaction."""

    name: str
    transaction: bool


@dataclass
class Input:
    """The input message a program holds: its message, unit of work and lock."""

    transaction: str
    message: ImsMessage
    uow: Uow
    token: LockToken


@dataclass
class Output:
    """A message a program inserted, put at its sync point; ``spa``: the SPA segment it
    carries first (a conversational message)."""

    destination: Destination
    segments: list[bytes] = field(default_factory=list)
    spa: bytes | None = None


class Runtime(Protocol):
    """What the region gives the DL/I calls (:class:`sharedq.ims.region.Region`)."""

    def next_input(self, previous: Input | None, outputs: list[Output]) -> Input | None:
        """Sync point for ``previous`` (``outputs`` put, it deleted), then the next
        input message, or ``None`` (QC)."""

    def destination(self, name: str) -> Destination | None: ...

    def transaction(self, code: str) -> Transaction | None:
        """The transaction ``code`` as this IMS defines it (a switch's SPA size)."""

    def scheduled(self) -> Transaction:
        """The transaction this scheduling processes."""

    def structure_full(self) -> bool: ...


class PCB:
    """A message PCB; ``status`` is the last call's status code."""

    def __init__(self, dli: DLI, destination: Destination | None, valid: bool = True) -> None:
        self._dli = dli
        self.destination = destination
        self.valid = valid
        self.status = OK
        self._building: Output | None = None

    def isrt(self, segment: bytes | str) -> str:
        """Insert a segment into the message being built on this PCB (a conversational
        message's first: its SPA)."""
        target = self.destination if self.destination is not None else self._dli.reply_to()
        if target is None or not self.valid:
            self.status = A1
        elif self._dli.full():
            self.status = A7
        else:
            (raw,) = make([segment]).segments
            if self._building is None:
                if self._dli.takes_spa(self, target):
                    self.status = self._dli.insert_spa(self, target, raw)
                    return self.status
                self._building = Output(target)
                self._dli.outputs.append(self._building)
            self._building.segments.append(raw)
            self.status = OK
        return self.status

    def purg(self) -> str:
        """End the message being built on this PCB (the next insert starts another)."""
        self._building = None
        self.status = OK
        return self.status

    def end_message(self) -> None:
        """The sync point ended the message being built."""
        self._building = None

    def start_message(self, output: Output) -> None:
        """``output`` (a SPA alone, so far) is the message being built here."""
        self._building = output


class IOPCB(PCB):
    """The I/O PCB: input messages in, the reply to the input's LTERM out."""

    def gu(self) -> bytes | None:
        """The next input message's first segment; ``None`` with status ``QC``."""
        got = self._dli.next_message()
        self.status = OK if got is not None else QC
        return got

    def gn(self) -> bytes | None:
        """The input message's next segment; ``None`` with status ``QD``."""
        got = self._dli.next_segment()
        self.status = OK if got is not None else QD
        return got

    @property
    def lterm(self) -> str:
        """The LTERM the input message came from (blank: none)."""
        held = self._dli.input
        return held.message.source if held is not None else ""


class DLI:
    """One scheduling of a program in a region: its PCBs and its unit of work."""

    def __init__(self, runtime: Runtime, imsid: str, first: Input | None = None) -> None:
        self._runtime = runtime
        self.imsid = imsid
        self.input: Input | None = None
        self.outputs: list[Output] = []
        self._pending_first = first
        self._segment = 0
        self._alts: list[PCB] = []
        self.io = IOPCB(self, None)
        #: Messages this scheduling processed to a sync point, and the ``QC`` it saw.
        self.processed = 0
        #: The SPA the program inserted on each PCB since the last sync point.
        self._spas: dict[int, bytes] = {}

    # -- conversations ------------------------------------------------------------------------

    @property
    def conversational(self) -> bool:
        """Whether the input message held is a conversation's (its first segment a SPA)."""
        return self.input is not None and self.input.message.spa

    @property
    def spa_size(self) -> int:
        """This transaction's SPA size (0: not conversational)."""
        return self._runtime.scheduled().spa

    def _stored_spa(self) -> Spa | None:
        held = self.input
        return Spa.decode(held.message.segments[0]) if held and held.message.spa else None

    def takes_spa(self, pcb: PCB, target: Destination) -> bool:
        """Whether the next insert on ``pcb`` is a SPA: the first of a conversational
        input's reply on the I/O PCB, or of a message to a conversational transaction
        (once per PCB and sync point: a message after ``PURG`` carries none)."""
        if id(pcb) in self._spas:
            return False
        if not target.transaction:
            return self.conversational and pcb is self.io
        tran = self._runtime.transaction(target.name)
        return tran is not None and tran.conversational

    def insert_spa(self, pcb: PCB, target: Destination, raw: bytes) -> str:
        """The SPA a program inserts: on the I/O PCB its code says what follows (blank,
        or a non-conversational transaction's: the conversation ends); on an alternate
        PCB to a conversational transaction the code is that transaction's.  ``A1`` for
        a code no transaction has, and for a message to a conversational transaction
        from a program outside a conversation (no front end holds a CCB for it)."""
        base = self._stored_spa()
        if base is None:  # outside a conversation: no CCB would ever take its reply
            return A1
        padded = raw.ljust(CODE_BYTES)
        returned = base.returned(padded)
        code = target.name if target.transaction else returned.code
        if code:
            tran = self._runtime.transaction(code)
            if tran is None:
                return A1
            if tran.conversational:
                returned = returned.switched(tran.code, tran.spa, tran.truncation)
            else:
                code = ""  # a deferred switch to a non-conversational one ends it
        spa = Spa(code, returned.data, returned.truncation).encode()
        self._spas[id(pcb)] = spa
        output = Output(target, spa=spa)
        self.outputs.append(output)
        pcb.start_message(output)
        return OK

    @property
    def uow(self) -> Uow | None:
        """The unit of work of the input message held."""
        return self.input.uow if self.input is not None else None

    def alt_pcb(self, destination: str) -> PCB:
        """An alternate PCB to ``destination`` (an LTERM or a transaction of this IMS);
        its inserts get ``A1`` if there is no such destination."""
        found = self._runtime.destination(destination)
        pcb = PCB(self, found or Destination(destination, False), valid=found is not None)
        self._alts.append(pcb)
        return pcb

    def reply_to(self) -> Destination | None:
        if self.input is None or not self.input.message.source:
            return None
        return Destination(self.input.message.source, False)

    def full(self) -> bool:
        return self._runtime.structure_full()

    def next_message(self) -> bytes | None:
        got: Input | None
        if self._pending_first is not None:
            got, self._pending_first = self._pending_first, None
        else:
            got = self._runtime.next_input(self.input, self.take_outputs())
            if self.input is not None:
                self.processed += 1
        self.input = got
        self._segment = 1
        if got is None:
            return None
        if got.message.spa:  # the SPA first, at this transaction's size
            return Spa.decode(got.message.segments[0]).presented(self.spa_size)
        return got.message.segments[0]

    def next_segment(self) -> bytes | None:
        if self.input is None or self._segment >= len(self.input.message.segments):
            return None
        self._segment += 1
        return self.input.message.segments[self._segment - 1]

    def take_outputs(self) -> list[Output]:
        """The messages inserted since the last sync point (and forget them)."""
        outputs, self.outputs = self.outputs, []
        for pcb in (self.io, *self._alts):
            pcb.end_message()
        self._spas.clear()
        return outputs


#: An application program: called with its DL/I interface for one scheduling.
Program = Callable[[DLI], object]
