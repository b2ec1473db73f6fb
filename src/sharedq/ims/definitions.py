"""What an IMS system is defined with (its Stage 1 sysgen, in Python).

Transactions (code, message class, PSB, ``serial``, local or remote, ``maxrgn``),
programs (PSBs), message processing regions serving up to four classes, static LTERMs
bound to nodes, and the system's IMSID (redbook §1.16, §9.1-9.2, §9.6, §9.9).  The
definitions are checked as a whole when made (:class:`SystemDefinition`), so a running
IMS never meets a transaction whose PSB or class does not exist.

Decisions where the seed is silent: names are 1 to 8 characters, letters, digits and
``@#$`` (IMS's own rule), upper case; an IMSID is 1 to 4 of them (the queue name's
IMSID field); a message class is 1 to 999; ``maxrgn=0`` means no limit; limit priority
and ``PARLIM`` are not defined at all, since shared queues ignore them (§9.2).
``queue_buffer`` (bytes) is the IMS queue buffer size: a message that does not fit one
buffer cannot be processed locally and is put in several parts (§1.9, §9.2).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from sharedq.ims.errors import IMSReason, ims_error
from sharedq.ims.spa import Truncation, check_spa_size, check_truncation

_NAME = re.compile(r"^[A-Z@#$][A-Z0-9@#$]{0,7}$")
_IMSID = re.compile(r"^[A-Z@#$][A-Z0-9@#$]{0,3}$")
#: Classes a region may serve at most (IMS: four per MPR).
CLASSES_PER_REGION = 4
#: The default queue buffer size in bytes.
DEFAULT_QUEUE_BUFFER = 4096
#: The smallest queue buffer: a prefix and one short segment must fit.
MIN_QUEUE_BUFFER = 64


def check_name(value: object, what: str) -> str:
    """``value`` if it is a valid IMS resource name; else ``BAD_DEFINITION``."""
    if not isinstance(value, str) or not _NAME.match(value):
        raise ims_error(
            IMSReason.BAD_DEFINITION,
            f"{what} {value!r}: 1 to 8 upper-case letters, digits or @#$, not a digit first",
        )
    return value


def _check_class(value: object, what: str) -> int:
    if type(value) is not int or not 1 <= value <= 999:
        raise ims_error(IMSReason.BAD_DEFINITION, f"{what}: message class {value!r} is not 1-999")
    return value


@dataclass(frozen=True)
class Transaction:
    """A transaction code: its message class, the PSB that processes it, whether it
    is ``serial`` (processed only by the IMS that put it, in order) and ``remote``
    (defined here so that it can be entered here, processed elsewhere: this IMS never
    registers interest in it).  ``maxrgn``: at most this many regions of this IMS
    process it at once (0: no limit).  ``response``: response mode, the terminal that
    enters it takes no more input until its reply is delivered (§6.1 "Users").
    ``spa``: the size in bytes of its scratch pad area's user data, which makes it
    conversational (``TRANSACT SPA=``; 0: not conversational); ``truncation``: its SPA
    truncation option, ``STRUNC`` or ``RTRUNC`` (``None``: the conversation keeps the
    one it has; :mod:`sharedq.ims.spa`)."""

    code: str
    message_class: int
    psb: str
    serial: bool = False
    remote: bool = False
    maxrgn: int = 0
    response: bool = False
    spa: int = 0
    truncation: Truncation | None = None

    def __post_init__(self) -> None:
        check_name(self.code, "transaction code")
        _check_class(self.message_class, f"transaction {self.code}")
        check_name(self.psb, f"transaction {self.code}: PSB")
        for flag in ("serial", "remote", "response"):
            if type(getattr(self, flag)) is not bool:
                raise ims_error(IMSReason.BAD_DEFINITION, f"transaction {self.code}: {flag}")
        if type(self.maxrgn) is not int or not 0 <= self.maxrgn <= 999:
            raise ims_error(
                IMSReason.BAD_DEFINITION, f"transaction {self.code}: MAXRGN {self.maxrgn!r}"
            )
        check_spa_size(self.spa, f"transaction {self.code}")
        check_truncation(self.truncation, f"transaction {self.code}", optional=True)

    @property
    def conversational(self) -> bool:
        return self.spa > 0


@dataclass(frozen=True)
class Program:
    """An application program and its PSB (an MPP: the PSB has the program's name)."""

    psb: str

    def __post_init__(self) -> None:
        check_name(self.psb, "PSB")


@dataclass(frozen=True)
class Region:
    """A message processing region (MPR) serving up to four message classes, in the
    order it looks at them."""

    name: str
    classes: tuple[int, ...]

    def __post_init__(self) -> None:
        check_name(self.name, "region")
        if not isinstance(self.classes, tuple) or not 1 <= len(self.classes) <= 4:
            raise ims_error(
                IMSReason.BAD_DEFINITION,
                f"region {self.name}: 1 to {CLASSES_PER_REGION} classes, as a tuple",
            )
        for number in self.classes:
            _check_class(number, f"region {self.name}")


@dataclass(frozen=True)
class Lterm:
    """A static logical terminal bound to a node (VTAM terminal): registered when the
    node logs on, deregistered at logoff."""

    name: str
    node: str

    def __post_init__(self) -> None:
        check_name(self.name, "LTERM")
        check_name(self.node, f"LTERM {self.name}: node")


@dataclass(frozen=True)
class SystemDefinition:
    """One IMS system's resources.  Checked whole: names unique across transactions
    and LTERMs (one destination name space, as FINDDEST sees it), every transaction's
    PSB defined, regions and nodes named once.  ``local_processing=False``: every
    input goes global, as if no region were ever waiting (for a system that should
    only route, and to measure what local processing saves).  ``spa_truncation``: the
    SPA truncation option of a conversation whose transaction defines none
    (``DFSDCxxx TRUNC=``; the seed's default saves the truncated data, ``STRUNC``)."""

    imsid: str
    transactions: tuple[Transaction, ...] = ()
    programs: tuple[Program, ...] = ()
    regions: tuple[Region, ...] = ()
    lterms: tuple[Lterm, ...] = ()
    queue_buffer: int = DEFAULT_QUEUE_BUFFER
    local_processing: bool = True
    spa_truncation: Truncation = "STRUNC"
    _by_code: dict[str, Transaction] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.imsid, str) or not _IMSID.match(self.imsid):
            raise ims_error(
                IMSReason.BAD_DEFINITION, f"IMSID {self.imsid!r}: 1 to 4 letters, digits or @#$"
            )
        for name, kind in (
            ("transactions", Transaction),
            ("programs", Program),
            ("regions", Region),
            ("lterms", Lterm),
        ):
            items = getattr(self, name)
            if not isinstance(items, tuple) or not all(isinstance(i, kind) for i in items):
                raise ims_error(
                    IMSReason.BAD_DEFINITION, f"{name}: a tuple of {kind.__name__} definitions"
                )
        if type(self.queue_buffer) is not int or self.queue_buffer < MIN_QUEUE_BUFFER:
            raise ims_error(
                IMSReason.BAD_DEFINITION,
                f"queue_buffer {self.queue_buffer!r}: at least {MIN_QUEUE_BUFFER} bytes",
            )
        check_truncation(self.spa_truncation, f"IMS {self.imsid}", optional=False)
        _unique(
            "transaction or LTERM",
            [t.code for t in self.transactions] + [lt.name for lt in self.lterms],
        )
        _unique("PSB", [p.psb for p in self.programs])
        _unique("region", [r.name for r in self.regions])
        psbs = {p.psb for p in self.programs}
        for tran in self.transactions:
            if tran.psb not in psbs:
                raise ims_error(
                    IMSReason.BAD_DEFINITION, f"transaction {tran.code}: PSB {tran.psb} undefined"
                )
            self._by_code[tran.code] = tran

    def transaction(self, code: str) -> Transaction | None:
        """The transaction ``code`` (FINDDEST), or ``None``."""
        return self._by_code.get(code)

    def lterm(self, name: str) -> Lterm | None:
        return next((lt for lt in self.lterms if lt.name == name), None)

    def lterms_of(self, node: str) -> list[Lterm]:
        """The node's LTERMs, in definition order (the first is its input LTERM)."""
        return [lt for lt in self.lterms if lt.node == node]

    def serving(self, message_class: int) -> list[Region]:
        return [r for r in self.regions if message_class in r.classes]


def _unique(what: str, names: Iterable[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ims_error(IMSReason.BAD_DEFINITION, f"{what} {name} defined twice")
        seen.add(name)
