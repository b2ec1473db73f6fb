"""The root of every exception sharedq raises.

Each layer (list structures, queue manager, log, ...) declares its own ``IntEnum`` of
reasons in its own module, in its own range of codes, and raises subclasses of
:class:`SharedqError`.  A caller can therefore catch "any sharedq error" with one
``except`` clause, branch on the exception class for the broad kind of fault, and
report or match the exact condition through :attr:`SharedqError.reason`, whose
``name`` and ``value`` are the reason name and numeric code.

Code ranges, so that a code alone identifies its layer:

=========  ==========================================
1000-1999  list structures (``sharedq.cf``)
2000-2999  queue manager (``sharedq.mq``), MQRC values where MQ has one
3000-3999  log stream, checkpoints and recovery (``sharedq.log``)
4000-4999  pipeline and CLI
=========  ==========================================
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class SharedqError(Exception):
    """Base of every sharedq exception; carries a reason with a name and a code."""

    reason: IntEnum

    def __init__(self, reason: IntEnum, detail: str = "", **context: Any) -> None:
        self.reason = reason
        self.detail = detail
        self.context = context
        super().__init__(self._message())

    @property
    def reason_name(self) -> str:
        return self.reason.name

    @property
    def reason_code(self) -> int:
        return int(self.reason.value)

    def _message(self) -> str:
        text = f"{self.reason.name} ({int(self.reason.value)})"
        return f"{text}: {self.detail}" if self.detail else text

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions cross process boundaries in the multi-process tests and the
        # CLI's worker processes; keep reason, detail and context when pickled.
        return (_rebuild, (type(self), self.reason, self.detail, self.context))


def _rebuild(
    cls: type[SharedqError], reason: IntEnum, detail: str, context: dict[str, Any]
) -> SharedqError:
    return cls(reason, detail, **context)
