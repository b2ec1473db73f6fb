"""The scratch pad area (SPA) of a conversation, and how its size follows the switches.

On shared queues the SPA is the first segment of a conversational message (redbook
§10.1; the SPA pool is gone): every iteration's input and output carry it, so that any
IMS can process the next step.  A program is presented a SPA of its own transaction's
size (``TRANSACT SPA=``) and returns one; what is kept on the queue depends on the
conversation's truncation option (§10.4, figures 67 and 68):

* ``STRUNC`` (the system default, ``DFSDCxxx TRUNC=``): nothing is lost.  A program with
  a smaller SPA than the one stored is presented the first bytes; what it returns
  replaces them and the stored tail follows, so the stored SPA is the largest of the
  conversation's.
* ``RTRUNC``: a switch to a transaction with a smaller SPA discards the tail.

The option is set when the conversation starts (the transaction's, else the system's)
and at each switch to a transaction that defines one; otherwise it stays.

Here a SPA segment is the transaction code (8 bytes, blank padded; blanks end the
conversation), one byte for the option in force, then the user area.  A program sees
the code and the user area, as an IMS program sees the SPA after its ``LLZZ``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sharedq.ims.errors import IMSReason, ims_error

Truncation = Literal["STRUNC", "RTRUNC"]
TRUNCATIONS: tuple[Truncation, ...] = ("STRUNC", "RTRUNC")
#: The largest SPA user area accepted (IMS: 32,767 bytes less its fixed fields).
MAX_SPA = 32_000
#: The code's bytes at the front of a SPA.
CODE_BYTES = 8
#: The code that ends the conversation.
BLANK = " " * CODE_BYTES
_OPTION = {"STRUNC": b"S", "RTRUNC": b"R"}
_OPTION_OF = {b"S": "STRUNC", b"R": "RTRUNC"}


@dataclass(frozen=True)
class Spa:
    """A conversation's SPA as the queues hold it: the next transaction's code, the
    truncation option in force and the user area as stored (the largest under
    ``STRUNC``)."""

    code: str
    data: bytes
    truncation: Truncation

    @classmethod
    def start(cls, code: str, size: int, truncation: Truncation) -> Spa:
        """The first SPA of a conversation: ``size`` bytes of binary zeros."""
        return cls(code, bytes(size), truncation)

    def encode(self) -> bytes:
        """The SPA segment as it travels on the queues."""
        return self.code.ljust(CODE_BYTES).encode("ascii") + _OPTION[self.truncation] + self.data

    @classmethod
    def decode(cls, segment: bytes) -> Spa:
        """The SPA of a message's first segment; ``QUEUE_ERROR`` if it is not one."""
        option = _OPTION_OF.get(segment[CODE_BYTES : CODE_BYTES + 1])
        if len(segment) < CODE_BYTES + 1 or option is None:
            raise ims_error(IMSReason.QUEUE_ERROR, f"not a SPA segment: {segment[:16]!r}")
        code = segment[:CODE_BYTES].decode("ascii", "replace").rstrip()
        return cls(code, segment[CODE_BYTES + 1 :], option)  # type: ignore[arg-type]

    def presented(self, size: int) -> bytes:
        """What a program with a SPA of ``size`` bytes gets: the code and the stored user
        area cut to ``size`` or padded with binary zeros."""
        data = self.data[:size] if len(self.data) >= size else self.data.ljust(size, b"\0")
        return self.code.ljust(CODE_BYTES).encode("ascii") + data

    def returned(self, segment: bytes) -> Spa:
        """The SPA a program inserted (``segment``: code and user area): what it returns
        replaces the stored bytes it covers; under ``STRUNC`` the stored tail it was not
        presented follows."""
        code = segment[:CODE_BYTES].decode("ascii", "replace").rstrip()
        data = segment[CODE_BYTES:]
        if self.truncation == "STRUNC" and len(self.data) > len(data):
            data += self.data[len(data) :]
        return Spa(code, data, self.truncation)

    def switched(self, code: str, size: int, option: Truncation | None) -> Spa:
        """This SPA going to transaction ``code`` (its SPA ``size`` bytes and its
        option, if it defines one): the option set anew, and under ``RTRUNC`` the tail
        beyond ``size`` discarded."""
        truncation = option or self.truncation
        data = self.data[:size] if truncation == "RTRUNC" else self.data
        return Spa(code, data, truncation)


def check_spa_size(value: object, what: str) -> int:
    """``value`` if it is a SPA size (0: not conversational); else ``BAD_DEFINITION``."""
    if type(value) is not int or not 0 <= value <= MAX_SPA:
        raise ims_error(IMSReason.BAD_DEFINITION, f"{what}: SPA size {value!r} is not 0-{MAX_SPA}")
    return value


def check_truncation(value: object, what: str, *, optional: bool) -> Truncation | None:
    """``value`` if it is ``STRUNC`` or ``RTRUNC`` (or ``None`` where ``optional``)."""
    if value is None and optional:
        return None
    if value not in TRUNCATIONS:
        raise ims_error(
            IMSReason.BAD_DEFINITION, f"{what}: SPA truncation {value!r} is not STRUNC or RTRUNC"
        )
    return value
