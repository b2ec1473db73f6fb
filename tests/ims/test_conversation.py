"""Conversational transactions on shared queues (redbook §9.14, Chapter 10; spec §9.14).

The SPA is the first segment of the message on the shared queue; the conversation's
state (the CCB) lives only on the front-end IMS, where it started; between iterations
the response stays on the lock queue, held with the SPA, until the terminal's next
input.  Each test drives the flow from a terminal and checks what every program was
presented (the SPA's length and bytes) and, through helpers.where, what is on the
structure, so that a SPA lost, kept too long or cut wrongly shows up as a wrong byte or
a message left behind.  Programs stop at gates (no sleeps) where a test looks at a step.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest

from sharedq.cf import CouplingFacility
from sharedq.ims import (
    A1,
    DLI,
    IMS,
    OK,
    ConversationEnd,
    IMSError,
    IMSReason,
    Lterm,
    Region,
    SystemDefinition,
    Terminal,
    Transaction,
)
from sharedq.ims.dli import Program as AppProgram
from sharedq.ims.queues import lterm_ready, transaction_ready

from .conftest import MSGQ, MakeIMS
from .helpers import WAIT_S, Gate, define, drain, fill, take, until, where

BLANK = " "
LTERMA = Lterm("LTERMA", "NODE1")
LTERMB = Lterm("LTERMB", "NODE2")
LTERMZ = Lterm("LTERMZ", "NODEZ")
DFS576I = "DFS576I EXIT COMPLETED"
DFS577I = "DFS577I EXIT COMPLETED. TRANSACTION STILL ACTIVE."


def spa(code: str, area: bytes = b"") -> bytes:
    """A SPA as a program inserts it (and is presented it): the 8-byte transaction
    code, blank padded (``BLANK`` ends the conversation), then the user area."""
    return code.ljust(8).encode("ascii") + area


@dataclass(frozen=True)
class Seen:
    """What one iteration's program was presented: the GU (the SPA), the GN segments
    after it, and what the DL/I interface says of the transaction."""

    program: str
    imsid: str
    spa: bytes
    segments: tuple[bytes, ...]
    spa_size: int
    conversational: bool
    lterm: str

    @property
    def text(self) -> bytes:
        """The input message's first segment."""
        return self.segments[0] if self.segments else b""


#: What a program does with an iteration: returns the I/O PCB inserts (the SPA first,
#: then the response), may insert elsewhere itself and may stop at a gate.
Answer = Callable[[DLI, Seen], Sequence[bytes | str]]


@dataclass
class Talk:
    """Conversational programs that record every iteration (before answering, so a
    test sees what a program held at a gate was given) and the status of every I/O
    PCB insert they make; assertions stay in the test, since a program that raises
    abends and backs out instead of failing."""

    seen: list[Seen] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def program(self, name: str, answer: Answer) -> AppProgram:
        def run(dli: DLI) -> None:
            while (first := dli.io.gu()) is not None:
                segments = []
                while (segment := dli.io.gn()) is not None:
                    segments.append(segment)
                seen = Seen(
                    name,
                    dli.imsid,
                    first,
                    tuple(segments),
                    dli.spa_size,
                    dli.conversational,
                    dli.io.lterm,
                )
                with self._changed:
                    self.seen.append(seen)
                    self._changed.notify_all()
                statuses = [dli.io.isrt(data) for data in answer(dli, seen)]
                with self._changed:
                    self.statuses.extend(statuses)

        return run

    def wait_for(self, count: int) -> list[Seen]:
        with self._changed:
            assert self._changed.wait_for(lambda: len(self.seen) >= count, WAIT_S), self.seen
            return list(self.seen)


@dataclass
class Ends:
    """A conversation exit (DFSCONE0) that records each call and returns ``answer``."""

    answer: bool | None = None
    calls: list[tuple[str, bytes | None, str]] = field(default_factory=list)

    def __call__(self, end: ConversationEnd) -> bool | None:
        self.calls.append((end.lterm, end.spa, end.reason))
        return self.answer


def system(
    imsid: str,
    transactions: tuple[Transaction, ...],
    *,
    regions: tuple[Region, ...] = (Region("MPR1", (1,)),),
    lterms: tuple[Lterm, ...] = (),
    **options: object,
) -> SystemDefinition:
    """A system with the transactions given (and a PSB for each they name)."""
    return define(imsid, transactions=transactions, regions=regions, lterms=lterms, **options)


def rows(ims: IMS) -> list[tuple[object, ...]]:
    """``display_conversations()`` as (node, user, lterm, transaction, state), sorted."""
    return sorted(
        (r["node"], r["user"], r["lterm"], r["transaction"], r["state"])
        for r in ims.display_conversations()
    )


def refused(terminal: Terminal, text: str, reason: IMSReason) -> None:
    with pytest.raises(IMSError) as caught:
        terminal.enter(text)
    assert caught.value.reason is reason, text


def exit_refused(terminal: Terminal) -> None:
    with pytest.raises(IMSError) as caught:
        terminal.exit()
    assert caught.value.reason is IMSReason.NO_CONVERSATION


# -- 1. the §10.3 flow across two systems ----------------------------------------------------

TRANA64 = Transaction("TRANA", 1, "PGMA", spa=64)
TRANB64 = Transaction("TRANB", 1, "PGMB", spa=64)


def test_the_10_3_flow_iterations_processed_by_another_ims(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    """Steps 1-13: the terminal on IMSA, every iteration processed on IMSB; the
    response held on the lock queue between iterations, deleted by the next input."""
    gate = Gate()
    talk = Talk()
    from_a = b"FROM-A".ljust(64, b".")
    from_b = b"FROM-B".ljust(64, b":")

    def trana(dli: DLI, seen: Seen) -> list[bytes]:  # step 4: deferred switch to TRANB
        return [spa("TRANB", from_a), b"RESP-1 " + seen.text]

    def tranb(dli: DLI, seen: Seen) -> list[bytes]:  # blank code: the conversation ends
        gate.stop_at("TRANB")
        return [spa(BLANK, from_b), b"RESP-2 " + seen.text]

    programs = {"PGMA": talk.program("PGMA", trana), "PGMB": talk.program("PGMB", tranb)}
    imsa = make_ims(
        system("IMSA", (TRANA64, TRANB64), regions=(), lterms=(LTERMZ,), local_processing=False),
        programs,
    )
    imsb = make_ims(system("IMSB", (TRANA64, TRANB64)), programs)
    assert imsa.interests() == [] and imsb.interests() == ["TRANA", "TRANB"]
    nodez = imsa.logon("NODEZ")

    assert nodez.enter("TRANA MSG-1").routing == "global"  # steps 1-3
    assert nodez.in_conversation  # the CCB is made at the input, on IMSA
    first = nodez.receive(WAIT_S)  # steps 5-8
    assert first is not None and first.segments == (b"RESP-1 TRANA MSG-1",)  # no SPA
    assert first.lterm == "LTERMZ"
    nodez.ack(first)
    # step 8: SPA-2 MSG-2 stays on the lock queue until the next iteration
    assert until(lambda: where(facility) == {"lock": [lterm_ready("LTERMZ")]})
    assert nodez.in_conversation
    assert rows(imsa) == [("NODEZ", None, "LTERMZ", "TRANB", "HELD")]
    assert rows(imsb) == []  # the CCB is local to the front end

    assert nodez.enter("MSG-3").routing == "global"  # steps 9-11: no code needed
    gate.wait_reached("TRANB")
    # step 12: the held output is deleted; only the new input (locked on IMSB) is left
    assert until(lambda: where(facility) == {"lock": [transaction_ready("TRANB")]})
    assert rows(imsa) == [("NODEZ", None, "LTERMZ", "TRANB", "ACTIVE")]
    gate.open("TRANB")
    last = nodez.receive(WAIT_S)
    assert last is not None and last.segments == (b"RESP-2 MSG-3",)
    nodez.ack(last)
    assert not nodez.in_conversation and rows(imsa) == []
    assert until(lambda: imsb.counts["processed"] == 2)  # counted after the delete
    assert until(lambda: where(facility) == {})

    seen = talk.wait_for(2)
    assert [(s.program, s.imsid) for s in seen] == [("PGMA", "IMSB"), ("PGMB", "IMSB")]
    assert seen[0].spa == spa("TRANA", bytes(64))  # step 2: SPA-1 all binary zeros
    assert seen[0].segments == (b"TRANA MSG-1",)  # the input as entered
    assert seen[1].spa == spa("TRANB", from_a)  # what PGMA wrote, under TRANB's code
    assert seen[1].segments == (b"MSG-3",)
    assert all(s.conversational and s.spa_size == 64 for s in seen)
    assert all(s.lterm == "LTERMZ" for s in seen)
    assert talk.statuses == [OK] * 4
    assert imsa.counts["processed"] == 0


# -- 2. SPA truncation: figures 67 (STRUNC) and 68 (RTRUNC) ----------------------------------

A_AREA = bytes(range(1, 101))  # PROGRAMA's 100 bytes: A's tail is bytes 61-100
B_AREA = b"B" * 60
C_AREA = b"C" * 150
FIG67 = [  # the user area each program is presented (the table's "SPA presented")
    bytes(100),  # 100 bytes of binary zeros
    A_AREA[:60],  # the first 60 of the 100 stored
    B_AREA + A_AREA[60:] + bytes(50),  # B's 60 + A's saved 40 + 50 zeros
    C_AREA,  # stored after C's insert: 150
]
FIG68 = [
    bytes(100),
    A_AREA[:60],  # A's tail was discarded at the switch: 60 stored
    B_AREA + bytes(90),  # 60 from B + 90 zeros: nothing of A's tail
    C_AREA,
]
TRUNCATION = {  # system default, the transactions that define an option, the figure
    "fig67-system-default": ("STRUNC", {}, FIG67),
    "fig67-set-at-start": ("RTRUNC", {"TRANA": "STRUNC"}, FIG67),
    "fig67-reset-at-switch": ("RTRUNC", {"TRANB": "STRUNC"}, FIG67),
    "fig68-system-default": ("RTRUNC", {}, FIG68),
    "fig68-set-at-start": ("STRUNC", {"TRANA": "RTRUNC"}, FIG68),
    "fig68-set-at-switch": ("STRUNC", {"TRANB": "RTRUNC"}, FIG68),
}


@pytest.mark.parametrize("case", sorted(TRUNCATION))
def test_spa_truncation_figures_67_and_68(
    facility: CouplingFacility, make_ims: MakeIMS, case: str
) -> None:
    """TranA (100) switches to TranB (60), which switches to TRANC (150): under STRUNC
    the stored SPA keeps A's tail behind B's data; under RTRUNC the switch to the
    smaller SPA discards it.  The option comes from the conversation's start (the
    transaction's, else the system's) and from each switch to a transaction that
    defines one.  TRANC continues once, so its stored 150 bytes are seen too."""
    default, options, presented = TRUNCATION[case]
    talk = Talk()
    answers = {
        "PROGRAMA": lambda dli, seen: [spa("TRANB", A_AREA), b"A DONE"],
        "PROGRAMB": lambda dli, seen: [spa("TRANC", B_AREA), b"B DONE"],
        "PROGRAMC": lambda dli, seen: [
            spa(BLANK if seen.text == b"END" else "TRANC", C_AREA),
            b"C DONE",
        ],
    }
    sizes = {"TRANA": 100, "TRANB": 60, "TRANC": 150}
    trans = tuple(
        Transaction(code, 1, f"PROGRAM{code[-1]}", spa=size, truncation=options.get(code))
        for code, size in sizes.items()
    )
    ims = make_ims(
        system("IMSA", trans, lterms=(LTERMA,), spa_truncation=default),
        {name: talk.program(name, answer) for name, answer in answers.items()},
    )
    node1 = ims.logon("NODE1")
    for text, reply in (
        ("TRANA GO", "A DONE"),
        ("NEXT", "B DONE"),
        ("LAST", "C DONE"),
        ("END", "C DONE"),
    ):
        node1.enter(text)
        assert take(node1, 1) == [reply], text
    assert not node1.in_conversation
    assert until(lambda: where(facility) == {})

    seen = talk.wait_for(4)
    assert [s.program for s in seen] == ["PROGRAMA", "PROGRAMB", "PROGRAMC", "PROGRAMC"]
    assert [s.spa_size for s in seen] == [100, 60, 150, 150]
    assert [len(s.spa) for s in seen] == [108, 68, 158, 158]  # each its own size
    assert [s.spa[:8] for s in seen] == [b"TRANA   ", b"TRANB   ", b"TRANC   ", b"TRANC   "]
    assert [s.spa[8:] for s in seen] == presented
    assert talk.statuses == [OK] * 8


# -- 3. immediate program switch --------------------------------------------------------------


def test_an_immediate_switch_through_an_alternate_pcb(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    """TRANA's program inserts the SPA and a message on an alternate PCB to TRANB
    (conversational) and nothing on its I/O PCB; TRANB's program gets that SPA under
    its own code and answers the terminal, and the conversation goes on with TRANB."""
    talk = Talk()
    alt_statuses: list[str] = []
    switched = b"SWITCHED".ljust(40, b"!")

    def trana(dli: DLI, seen: Seen) -> list[bytes]:
        pcb = dli.alt_pcb("TRANB")
        alt_statuses.append(pcb.isrt(spa("TRANA", switched)))  # the code becomes TRANB's
        alt_statuses.append(pcb.isrt(b"FOR B " + seen.text))
        return []

    def tranb(dli: DLI, seen: Seen) -> list[bytes]:
        if seen.text == b"AGAIN":
            return [spa(BLANK, seen.spa[8:]), b"B ENDS"]
        return [spa("TRANB", b"B-KEPT".ljust(40, b"-")), b"B ANSWERS"]

    ims = make_ims(
        system(
            "IMSA",
            (
                Transaction("TRANA", 1, "PGMA", spa=40),
                Transaction("TRANB", 1, "PGMB", spa=40),
                Transaction("TRANC", 1, "PGMC"),  # not conversational
            ),
            lterms=(LTERMA,),
        ),
        {
            "PGMA": talk.program("PGMA", trana),
            "PGMB": talk.program("PGMB", tranb),
            "PGMC": talk.program("PGMC", lambda dli, seen: [b"PLAIN " + seen.spa]),
        },
    )
    node1 = ims.logon("NODE1")
    node1.enter("TRANA FIRST")
    out = node1.receive(WAIT_S)
    assert out is not None and out.segments == (b"B ANSWERS",) and out.lterm == "LTERMA"
    node1.ack(out)
    assert node1.in_conversation
    assert rows(ims) == [("NODE1", None, "LTERMA", "TRANB", "HELD")]
    node1.enter("AGAIN")  # the conversation is TRANB's now
    assert take(node1, 1) == ["B ENDS"]
    assert not node1.in_conversation
    assert until(lambda: where(facility) == {})

    seen = talk.wait_for(3)
    assert [s.program for s in seen] == ["PGMA", "PGMB", "PGMB"]
    assert seen[0].spa == spa("TRANA", bytes(40)) and seen[0].segments == (b"TRANA FIRST",)
    assert seen[1].spa == spa("TRANB", switched)
    assert seen[1].segments == (b"FOR B TRANA FIRST",)
    assert seen[1].lterm == "LTERMA"  # it answers the input's LTERM
    assert seen[2].spa == spa("TRANB", b"B-KEPT".ljust(40, b"-"))
    assert seen[2].segments == (b"AGAIN",)
    assert alt_statuses == [OK, OK] and talk.statuses == [OK] * 4

    # a non-conversational transaction beside them: no SPA, as before
    node1.enter("TRANC PLAIN")
    assert take(node1, 1) == ["PLAIN TRANC PLAIN"]
    plain = talk.wait_for(4)[3]
    assert (plain.spa_size, plain.conversational, plain.segments) == (0, False, ())
    assert not node1.in_conversation


# -- 4. /EXIT ----------------------------------------------------------------------------------

TRANA32 = Transaction("TRANA", 1, "PGMA", spa=32)
KEPT = b"KEPT".ljust(32, b"-")


def continuing(gate: Gate | None = None) -> Answer:
    """TRANA's answer: continue with ``KEPT`` + the iteration's number in the SPA
    (``END`` ends it); an input with ``HOLD`` in it stops at the gate first."""

    def answer(dli: DLI, seen: Seen) -> list[bytes]:
        if gate is not None and b"HOLD" in seen.text:
            gate.stop_at("HOLD")
        if b"END" in seen.text:
            return [spa(BLANK, seen.spa[8:]), b"BYE"]
        count = seen.spa[8] + 1
        return [spa("TRANA", bytes([count]) + KEPT[1:]), f"OUT {count} ".encode() + seen.text]

    return answer


@pytest.mark.parametrize("custom", [False, True], ids=["default-exit", "custom-exit"])
def test_exit_with_the_spa_available(
    facility: CouplingFacility, make_ims: MakeIMS, custom: bool
) -> None:
    """DFS576I: the response was sent and no input followed, so IMS has the SPA: the
    exit gets it, the held output is deleted, and a new conversation can start."""
    talk, ends = Talk(), Ends()
    ims = make_ims(
        system("IMSA", (TRANA32,), lterms=(LTERMA,)),
        {"PGMA": talk.program("PGMA", continuing())},
        **({"conversation_exit": ends} if custom else {}),
    )
    node1 = ims.logon("NODE1")
    node1.enter("TRANA ONE")
    assert take(node1, 1) == ["OUT 1 TRANA ONE"]
    assert until(lambda: where(facility) == {"lock": [lterm_ready("LTERMA")]})
    assert node1.exit() == DFS576I
    assert not node1.in_conversation and rows(ims) == []
    assert until(lambda: where(facility) == {})  # the held output deleted
    if custom:
        assert ends.calls == [("LTERMA", spa("TRANA", b"\x01" + KEPT[1:]), "exit")]
    exit_refused(node1)  # nothing to exit now

    node1.enter("TRANA TWO")  # a new conversation: a fresh SPA
    assert take(node1, 1) == ["OUT 1 TRANA TWO"]
    node1.enter("END")
    assert take(node1, 1) == ["BYE"]
    assert until(lambda: where(facility) == {})
    seen = talk.wait_for(3)
    assert [s.spa for s in seen] == [
        spa("TRANA", bytes(32)),
        spa("TRANA", bytes(32)),
        spa("TRANA", b"\x01" + KEPT[1:]),
    ]
    assert [s.segments for s in seen] == [(b"TRANA ONE",), (b"TRANA TWO",), (b"END",)]


def exit_while_running(
    make_ims: MakeIMS, gate: Gate, talk: Talk, ends: Ends | None = None
) -> tuple[IMS, Terminal]:
    """IMSA, NODE1 in conversation: one iteration answered, the next (``HOLD IT``) held
    at ``gate`` in its region when the terminal's /EXIT answers DFS577I."""
    ims = make_ims(
        system("IMSA", (TRANA32,), lterms=(LTERMA,)),
        {"PGMA": talk.program("PGMA", continuing(gate))},
        **({"conversation_exit": ends} if ends is not None else {}),
    )
    node1 = ims.logon("NODE1")
    node1.enter("TRANA ONE")
    assert take(node1, 1) == ["OUT 1 TRANA ONE"]
    node1.enter("HOLD IT")
    gate.wait_reached("HOLD")
    assert node1.exit() == DFS577I
    return ims, node1


@pytest.mark.parametrize("custom", [False, True], ids=["default-exit", "custom-exit"])
def test_exit_with_the_spa_unavailable(
    facility: CouplingFacility, make_ims: MakeIMS, custom: bool
) -> None:
    """DFS577I: the next input is being processed, so the exit gets the dummy SPA; the
    transaction runs on, and its response, finding no conversation, is deleted and
    never sent (the exit called again with the SPA the program returned)."""
    gate, talk, ends = Gate(), Talk(), Ends()
    ims, node1 = exit_while_running(make_ims, gate, talk, ends if custom else None)
    assert not node1.in_conversation and rows(ims) == []
    if custom:
        assert ends.calls == [("LTERMA", None, "exit")]
    gate.open("HOLD")
    assert until(lambda: ims.counts["processed"] == 2)  # counted after the delete
    assert until(lambda: where(facility) == {})  # the response read and deleted
    assert node1.receive(0) is None  # never sent
    assert ims.counts["delivered"] == 1
    if custom:
        assert until(lambda: len(ends.calls) == 2)
        assert ends.calls[1] == ("LTERMA", spa("TRANA", b"\x02" + KEPT[1:]), "no-conversation")

    node1.enter("TRANA AGAIN")  # a new conversation
    assert take(node1, 1) == ["OUT 1 TRANA AGAIN"]
    assert talk.wait_for(3)[2].spa == spa("TRANA", bytes(32))


def test_exit_is_accepted_only_where_the_conversation_is(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    """/EXIT on an IMS that holds no conversation for the terminal: NO_CONVERSATION,
    also when the terminal's conversation is held on another IMS of the group."""
    programs = {"PGMA": Talk().program("PGMA", continuing())}
    imsa = make_ims(system("IMSA", (TRANA32,), lterms=(LTERMA,)), programs)
    imsb = make_ims(system("IMSB", (TRANA32,), lterms=(LTERMA,)), programs)
    node1 = imsa.logon("NODE1")
    exit_refused(node1)  # never in a conversation
    node1.enter("TRANA ONE")
    assert take(node1, 1) == ["OUT 1 TRANA ONE"]
    node1.logoff()
    on_b = imsb.logon("NODE1")
    assert not on_b.in_conversation
    exit_refused(on_b)
    assert until(lambda: where(facility) == {"lock": [lterm_ready("LTERMA")]})
    on_b.logoff()
    node1 = imsa.logon("NODE1")
    assert node1.in_conversation
    assert node1.exit() == DFS576I
    assert until(lambda: where(facility) == {})


# -- 5. input while the conversation waits for its output; the display ------------------------


def test_input_while_waiting_for_output_is_refused_and_the_display_shows_each_ccb(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    """One CCB per terminal (the node, or the user for ETO): ACTIVE while the output
    is awaited (input refused: CONVERSATION_BUSY), HELD once it was sent, with the
    code the program put in the SPA; gone when the conversation ends."""
    gate = Gate()

    def trana(dli: DLI, seen: Seen) -> list[bytes]:  # deferred switch to TRANB
        if b"HOLD" in seen.text:
            gate.stop_at("HOLD")
        return [spa("TRANB", seen.spa[8:]), b"A " + seen.text]

    ims = make_ims(
        system(
            "IMSA",
            (Transaction("TRANA", 1, "PGMA", spa=16), Transaction("TRANB", 1, "PGMB", spa=16)),
            lterms=(LTERMA, LTERMB),
        ),
        {
            "PGMA": Talk().program("PGMA", trana),
            "PGMB": Talk().program("PGMB", lambda dli, seen: [spa(BLANK), b"B " + seen.text]),
        },
    )
    node1, node2 = ims.logon("NODE1"), ims.logon("NODE2")
    user = ims.signon("USERA", node="VNODE1")
    assert rows(ims) == []
    node2.enter("TRANA NODE2")
    assert take(node2, 1) == ["A TRANA NODE2"]
    user.enter("TRANA ETO")
    assert take(user, 1) == ["A TRANA ETO"]

    node1.enter("TRANA HOLD")
    gate.wait_reached("HOLD")
    assert node1.in_conversation
    assert rows(ims) == [
        ("NODE1", None, "LTERMA", "TRANA", "ACTIVE"),
        ("NODE2", None, "LTERMB", "TRANB", "HELD"),
        ("VNODE1", "USERA", "USERA", "TRANB", "HELD"),
    ]
    for text in ("MORE", "TRANA AGAIN", "TRANB OTHER"):
        refused(node1, text, IMSReason.CONVERSATION_BUSY)
    gate.open("HOLD")
    assert take(node1, 1) == ["A TRANA HOLD"]
    assert rows(ims)[0] == ("NODE1", None, "LTERMA", "TRANB", "HELD")

    for terminal in (node1, node2, user):
        terminal.enter("DONE")
        assert take(terminal, 1) == ["B DONE"]
        assert not terminal.in_conversation
    assert rows(ims) == []
    assert until(lambda: where(facility) == {})


# -- 6. logoff mid-conversation, logon to another IMS ------------------------------------------


@pytest.mark.parametrize("mode", ["default", "delete", "deliver"])
def test_a_response_reaching_an_ims_without_the_conversation(
    facility: CouplingFacility, make_ims: MakeIMS, mode: str
) -> None:
    """The user logs off IMSA while the input is processed and logs on to IMSB: the
    response with its SPA reaches IMSB, which has no CCB for the LTERM.  The default
    exit deletes it; a custom exit sees the SPA ("no-conversation") and a False from
    it delivers the response (without the SPA) as ordinary output."""
    gate = Gate()
    talk = Talk()
    ends = Ends(answer=False if mode == "deliver" else None)
    programs = {"PGMA": talk.program("PGMA", continuing(gate))}
    imsa = make_ims(system("IMSA", (TRANA32,), lterms=(LTERMZ,)), programs)
    imsb = make_ims(
        system("IMSB", (TRANA32,), lterms=(LTERMZ,)),
        programs,
        **({} if mode == "default" else {"conversation_exit": ends}),
    )
    nodez = imsa.logon("NODEZ")
    assert nodez.enter("TRANA HOLD").routing == "local"
    gate.wait_reached("HOLD")
    nodez.logoff()
    on_b = imsb.logon("NODEZ")
    gate.open("HOLD")
    assert until(lambda: imsa.counts["processed"] == 1)
    if mode == "deliver":
        out = on_b.receive(WAIT_S)
        assert out is not None and out.segments == (b"OUT 1 TRANA HOLD",)  # no SPA
        on_b.ack(out)
    assert until(lambda: where(facility) == {})
    assert on_b.receive(0) is None
    if mode != "default":
        assert ends.calls == [("LTERMZ", spa("TRANA", b"\x01" + KEPT[1:]), "no-conversation")]
    assert not on_b.in_conversation and rows(imsb) == []

    on_b.enter("TRANA NEW")  # a new conversation on IMSB
    assert take(on_b, 1) == ["OUT 1 TRANA NEW"]
    assert on_b.in_conversation
    assert talk.wait_for(2)[1].spa == spa("TRANA", bytes(32))


def test_logon_to_the_original_ims_resumes_a_held_conversation(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    """A logoff while the conversation is HELD suspends it on IMSA (the output stays
    held on the lock queue); on IMSB the terminal is in no conversation and can run
    another; back on IMSA the conversation goes on with the SPA it had."""
    talk = Talk()
    programs = {"PGMA": talk.program("PGMA", continuing())}
    imsa = make_ims(system("IMSA", (TRANA32,), lterms=(LTERMZ,)), programs)
    imsb = make_ims(system("IMSB", (TRANA32,), lterms=(LTERMZ,)), programs)
    nodez = imsa.logon("NODEZ")
    nodez.enter("TRANA ONE")
    assert take(nodez, 1) == ["OUT 1 TRANA ONE"]
    nodez.logoff()
    assert rows(imsa) == [("NODEZ", None, "LTERMZ", "TRANA", "HELD")]  # suspended
    assert until(lambda: where(facility) == {"lock": [lterm_ready("LTERMZ")]})

    on_b = imsb.logon("NODEZ")
    assert not on_b.in_conversation and on_b.receive(0) is None
    on_b.enter("TRANA OTHER")
    assert take(on_b, 1) == ["OUT 1 TRANA OTHER"]
    on_b.enter("END")
    assert take(on_b, 1) == ["BYE"]
    assert not on_b.in_conversation
    on_b.logoff()

    nodez = imsa.logon("NODEZ")
    assert nodez.in_conversation
    assert rows(imsa) == [("NODEZ", None, "LTERMZ", "TRANA", "HELD")]
    nodez.enter("TWO")
    assert take(nodez, 1) == ["OUT 2 TWO"]  # the SPA kept: its count went on
    nodez.enter("END")
    assert take(nodez, 1) == ["BYE"]
    assert not nodez.in_conversation
    assert until(lambda: where(facility, MSGQ) == {})
    # Each conversation's count went on from its own SPA (which IMS processed an
    # iteration depends on which had a region free: both define TRANA).
    seen = talk.wait_for(5)
    assert [(s.segments[0], s.spa[8]) for s in seen] == [
        (b"TRANA ONE", 0),
        (b"TRANA OTHER", 0),
        (b"END", 1),
        (b"TWO", 1),
        (b"END", 2),
    ]


# -- 7. bad definitions, a bad SPA insert, ending by a switch ----------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: Transaction("TRANA", 1, "PGMA", spa=-1),
        lambda: Transaction("TRANA", 1, "PGMA", spa=32001),
        lambda: Transaction("TRANA", 1, "PGMA", spa=40000),
        lambda: Transaction("TRANA", 1, "PGMA", spa=10, truncation="X"),
        lambda: SystemDefinition("IMSA", spa_truncation="X"),
    ],
    ids=["spa-1", "spa32001", "spa40000", "truncation", "spa_truncation"],
)
def test_bad_conversational_definitions(make: Callable[[], object]) -> None:
    with pytest.raises(IMSError) as caught:
        make()
    assert caught.value.reason is IMSReason.BAD_DEFINITION


def test_good_conversational_definitions() -> None:
    """The bounds and options the API names are accepted."""
    for size in (0, 1, 32000):
        assert Transaction("TRANA", 1, "PGMA", spa=size).spa == size
    for option in ("STRUNC", "RTRUNC", None):
        Transaction("TRANA", 1, "PGMA", spa=10, truncation=option)
    for default in ("STRUNC", "RTRUNC"):
        SystemDefinition("IMSA", spa_truncation=default)
    assert SystemDefinition("IMSA").spa_truncation == "STRUNC"


def test_a_spa_naming_an_unknown_transaction_gets_A1_and_is_not_kept(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    """An unknown code in the SPA insert: A1, and nothing kept, so the program's next
    insert is its SPA again; a deferred switch to a non-conversational transaction
    then ends the conversation."""
    statuses: list[str] = []
    talk = Talk()

    def trana(dli: DLI, seen: Seen) -> list[bytes]:
        if seen.text == b"TRANA FIRST":
            statuses.append(dli.io.isrt(spa("NOSUCH", KEPT)))
            return [spa("TRANA", KEPT), b"KEPT"]
        return [spa("TRANC", seen.spa[8:]), b"TO TRANC"]

    ims = make_ims(
        system(
            "IMSA",
            (TRANA32, Transaction("TRANC", 1, "PGMC")),
            lterms=(LTERMA,),
        ),
        {
            "PGMA": talk.program("PGMA", trana),
            "PGMC": talk.program("PGMC", lambda dli, seen: [b"PLAIN " + seen.spa]),
        },
    )
    node1 = ims.logon("NODE1")
    node1.enter("TRANA FIRST")
    assert take(node1, 1) == ["KEPT"]
    assert statuses == [A1]
    assert node1.in_conversation
    node1.enter("SECOND")
    assert take(node1, 1) == ["TO TRANC"]
    assert not node1.in_conversation and rows(ims) == []
    assert until(lambda: where(facility) == {})
    seen = talk.wait_for(2)
    assert seen[1].spa == spa("TRANA", KEPT) and seen[1].segments == (b"SECOND",)
    assert talk.statuses == [OK] * 4


# -- more: a SPA in many queue buffers, ETO, logoff before the ack, /EXIT then a new start ----


def test_a_largest_spa_travels_in_several_queue_buffers(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    """A 32,000-byte SPA does not fit a 4 KB queue buffer: every iteration's input
    and output go as multi-part messages (staging queues), and the SPA comes through
    whole, processed on IMSB for a terminal on IMSA."""
    talk = Talk()
    big = bytes(n % 251 for n in range(32000))

    def trana(dli: DLI, seen: Seen) -> list[bytes | str]:
        if seen.text == b"END":
            return [BLANK * 8, "DONE"]  # str inserts: the SPA and the response
        return [spa("TRANA", big), b"BIG"]

    tran = Transaction("TRANA", 1, "PGMA", spa=32000)
    programs = {"PGMA": talk.program("PGMA", trana)}
    imsa = make_ims(
        system("IMSA", (tran,), regions=(), lterms=(LTERMA,), local_processing=False), programs
    )
    imsb = make_ims(system("IMSB", (tran,)), programs)
    node1 = imsa.logon("NODE1")
    node1.enter("TRANA FIRST")
    assert take(node1, 1) == ["BIG"]
    node1.enter("END")
    assert take(node1, 1) == ["DONE"]
    assert not node1.in_conversation
    assert until(lambda: imsb.counts["processed"] == 2)
    assert until(lambda: where(facility) == {})
    seen = talk.wait_for(2)
    assert [s.spa for s in seen] == [spa("TRANA", bytes(32000)), spa("TRANA", big)]
    assert [s.imsid for s in seen] == ["IMSB", "IMSB"]


def test_an_eto_conversation_is_the_users_not_the_nodes(make_ims: MakeIMS) -> None:
    """ETO: the CCB is anchored off the user, so a signon from another node of the
    same IMS resumes the conversation with its SPA."""
    talk = Talk()
    ims = make_ims(system("IMSA", (TRANA32,)), {"PGMA": talk.program("PGMA", continuing())})
    user = ims.signon("USERA", node="VNODE1")
    user.enter("TRANA ONE")
    assert take(user, 1) == ["OUT 1 TRANA ONE"]
    user.signoff()
    other = ims.signon("USERB", node="VNODE1")  # the node, another user: none
    assert not other.in_conversation
    other.signoff()
    again = ims.signon("USERA", node="VNODE2")
    assert again.in_conversation
    again.enter("TWO")
    assert take(again, 1) == ["OUT 2 TWO"]
    again.enter("END")
    assert take(again, 1) == ["BYE"]
    assert not again.in_conversation


def test_a_response_not_acknowledged_at_logoff_is_sent_again_at_logon(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    """Before the ack, a conversation's response follows the ordinary logoff rule: it
    goes back to the head of its queue and is sent at the next logon; the
    conversation then goes on."""
    talk = Talk()
    ims = make_ims(
        system("IMSA", (TRANA32,), lterms=(LTERMZ,)),
        {"PGMA": talk.program("PGMA", continuing())},
    )
    nodez = ims.logon("NODEZ")
    nodez.enter("TRANA ONE")
    out = nodez.receive(WAIT_S)
    assert out is not None and out.text == "OUT 1 TRANA ONE"
    nodez.logoff()  # not acknowledged
    assert "lock" not in where(facility)  # back on LTERMZ's queue
    nodez = ims.logon("NODEZ")
    assert take(nodez, 1) == ["OUT 1 TRANA ONE"]
    nodez.enter("TWO")
    assert take(nodez, 1) == ["OUT 2 TWO"]


def test_a_new_conversation_after_dfs577i_does_not_get_the_old_response(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    """/EXIT while the input runs, then at once a new conversation: the old input's
    response, when it comes, belongs to no conversation and is deleted; the new
    conversation gets its own response."""
    gate = Gate()
    ims, node1 = exit_while_running(make_ims, gate, Talk())
    node1.enter("TRANA NEW")  # the region is busy: it waits on the queue
    assert rows(ims) == [("NODE1", None, "LTERMA", "TRANA", "ACTIVE")]
    gate.open("HOLD")
    assert take(node1, 1) == ["OUT 1 TRANA NEW"]
    node1.enter("END")
    assert take(node1, 1) == ["BYE"]
    assert until(lambda: where(facility) == {})


def test_a_next_input_the_structure_has_no_room_for_leaves_the_conversation_held(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    """DFS070 on the next input: nothing was put, so the held response and its SPA
    stay (HELD) and the input can be entered again once there is room."""
    talk = Talk()
    ims = make_ims(
        system("IMSA", (TRANA32,), lterms=(LTERMA,)), {"PGMA": talk.program("PGMA", continuing())}
    )
    node1 = ims.logon("NODE1")
    node1.enter("TRANA ONE")
    assert take(node1, 1) == ["OUT 1 TRANA ONE"]
    filler = fill(facility)
    refused(node1, "TWO", IMSReason.STRUCTURE_FULL)
    assert rows(ims) == [("NODE1", None, "LTERMA", "TRANA", "HELD")]
    assert where(facility)["lock"] == [lterm_ready("LTERMA")]
    drain(filler)
    node1.enter("TWO")
    assert take(node1, 1) == ["OUT 2 TWO"]  # the SPA kept through the refusal
    node1.enter("END")
    assert take(node1, 1) == ["BYE"]
    assert until(lambda: where(facility) == {})


def test_back_on_the_original_ims_after_the_response_was_deleted_elsewhere(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    """§10.2: the response went to IMSB, which deleted it; back on IMSA the
    conversation still waits for it (input refused) until /EXIT (DFS577I: no SPA
    there), after which a new conversation starts."""
    gate = Gate()
    talk = Talk()
    programs = {"PGMA": talk.program("PGMA", continuing(gate))}
    imsa = make_ims(system("IMSA", (TRANA32,), lterms=(LTERMZ,)), programs)
    imsb = make_ims(system("IMSB", (TRANA32,), lterms=(LTERMZ,)), programs)
    nodez = imsa.logon("NODEZ")
    nodez.enter("TRANA HOLD")
    gate.wait_reached("HOLD")
    nodez.logoff()
    on_b = imsb.logon("NODEZ")
    gate.open("HOLD")
    assert until(lambda: imsa.counts["processed"] == 1)
    assert until(lambda: where(facility) == {})  # deleted by IMSB's default exit
    on_b.logoff()
    nodez = imsa.logon("NODEZ")
    assert nodez.in_conversation
    assert rows(imsa) == [("NODEZ", None, "LTERMZ", "TRANA", "ACTIVE")]
    refused(nodez, "MORE", IMSReason.CONVERSATION_BUSY)
    assert nodez.exit() == DFS577I
    nodez.enter("TRANA AGAIN")
    assert take(nodez, 1) == ["OUT 1 TRANA AGAIN"]


def test_a_message_to_a_conversational_transaction_from_outside_a_conversation_gets_A1(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    """A plain program's insert to a conversational transaction (alternate PCB): no
    front end holds a CCB that would take its reply, so it is refused with A1 and
    nothing is queued for it; the program's own reply goes on."""
    statuses: list[str] = []

    def plain(dli: DLI) -> None:
        while dli.io.gu() is not None:
            statuses.append(dli.alt_pcb("TRANA").isrt(spa("TRANA", KEPT)))
            dli.io.isrt(b"PLAIN DONE")

    ims = make_ims(
        system("IMSA", (TRANA32, Transaction("TRANP", 1, "PGMP")), lterms=(LTERMA,)),
        {"PGMA": lambda dli: None, "PGMP": plain},
    )
    node1 = ims.logon("NODE1")
    node1.enter("TRANP GO")
    assert take(node1, 1) == ["PLAIN DONE"]
    assert statuses == [A1]
    assert not node1.in_conversation
    assert until(lambda: where(facility) == {})


def test_a_next_input_before_the_ack_then_a_logoff(
    facility: CouplingFacility, make_ims: MakeIMS
) -> None:
    """The terminal received a response and entered its next input without
    acknowledging it (the next input deleted it), then logged off: nothing is put back
    or unlocked, and at the next logon the new input's response comes."""
    talk = Talk()
    ims = make_ims(
        system("IMSA", (TRANA32,), lterms=(LTERMA,)), {"PGMA": talk.program("PGMA", continuing())}
    )
    node1 = ims.logon("NODE1")
    node1.enter("TRANA ONE")
    first = node1.receive(WAIT_S)
    assert first is not None and first.text == "OUT 1 TRANA ONE"  # not acknowledged
    node1.enter("TWO")  # the held response is deleted now
    node1.logoff()
    node1 = ims.logon("NODE1")
    assert take(node1, 1) == ["OUT 2 TWO"]
    node1.enter("END")
    assert take(node1, 1) == ["BYE"]
    assert until(lambda: where(facility) == {})
