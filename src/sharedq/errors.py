"""The root of every exception sharedq raises.

Each layer (list structures, queue manager, log, ...) declares its own ``IntEnum`` of
reasons in its own module, in its own range of codes, and raises subclasses of
:class:`SharedqError`.  A caller can therefore catch "any sharedq error" with one
``except`` clause, branch on the exception class for the broad kind of fault, and
report or match the exact condition through :attr:`SharedqError.reason`, whose
``name`` and ``value`` are the reason name and numeric code.

A bad argument has one name in every layer: the reason ``BAD_ARGUMENT`` (each layer
with its own code), and an exception that is an :class:`InvalidArgument` (and so a
``ValueError``), whatever the layer calls its own class.  Layers keep more specific
reasons for bad input where they have them (``BAD_KEY``, ``PRIORITY_ERROR``,
``BAD_CONFIG``, ...), raised with the same class as their ``BAD_ARGUMENT``.

Code ranges, so that a code alone identifies its layer, and each layer's
``BAD_ARGUMENT`` (``tests/test_errors.py`` holds every reason of every layer to this
table):

=========  ================================================  ============
codes      layer                                             BAD_ARGUMENT
=========  ================================================  ============
1000-1999  list structures (``sharedq.cf``), every backend   1008
2000-2999  queue manager (``sharedq.mq``)                    2906
3000-3499  log stream (``sharedq.log``)                      3004
3500-3599  checkpoints and recovery (``sharedq.recovery``)   3501
3600-3699  authorization profiles (``sharedq.security``)     3601
4000-4099  Spark pipeline (``sharedq.pipeline``)             4001
5000-5499  Common Queue Server (``sharedq.cqs``)             5001
5500-5999  IMS systems (``sharedq.ims``)                     5501
=========  ================================================  ============

The queue manager's codes are IBM MQ's reason codes (MQRC) where MQ has one for the
condition, and 2900-2999 where it has none.  No other layer has reasons of its own:
the server seam's (``sharedq.seam``) few exceptions are signals to the server above
it, which reports them with its own reasons (a journal that could not record a change
is the queue manager's ``JournalFailed``: 2195, or 2192 when the log is full);
``sharedq.security``'s reasons are about its profiles file, and a request the profiles
refuse is the server's to report (the queue manager's ``NOT_AUTHORIZED``, 2035); the
demo raises the layers' errors, and the ``sharedq`` command reports them and exits
with the codes of ``sharedq.cli.exits``.
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


class InvalidArgument(SharedqError, ValueError):
    """A request was refused for a bad argument before anything was looked at or
    changed: the base of every layer's bad-argument class (``sharedq.cf.InvalidRequest``,
    ``sharedq.mq.InvalidArgument``, ``sharedq.log.InvalidLogRequest``,
    ``sharedq.recovery.InvalidRecoveryRequest``,
    ``sharedq.pipeline.InvalidPipelineRequest``), whose reason is that layer's
    ``BAD_ARGUMENT`` or a more specific one."""
