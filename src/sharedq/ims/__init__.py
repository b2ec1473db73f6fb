"""IMS systems on shared queues (redbook §1.16, §9, Appendix A): ``docs/ims.md``.

An :class:`IMS` is a client of its own CQS: definitions (:mod:`sharedq.ims.definitions`),
application programs as Python callables on a DL/I-like interface
(:mod:`sharedq.ims.dli`), full-function processing local or global, and terminals that
receive and acknowledge their output, and conversations that carry their SPA from
one iteration to the next on the shared queues (:mod:`sharedq.ims.conversation`).
"""

from sharedq.ims.conversation import ConversationEnd, ConversationExit
from sharedq.ims.definitions import Lterm, Program, Region, SystemDefinition, Transaction
from sharedq.ims.dli import A1, A7, DLI, IOPCB, OK, PCB, QC, QD
from sharedq.ims.errors import U3303, IMSError, IMSReason, InvalidIMSRequest, ims_error
from sharedq.ims.eto import Signon, SignonExit, ims_suffix
from sharedq.ims.fastpath import SPC, FastPath, FastPathDefinition, FPTransaction
from sharedq.ims.queues import Routed
from sharedq.ims.system import IMS
from sharedq.ims.terminal import Delivered, Terminal

__all__ = [
    "A1",
    "A7",
    "DLI",
    "IMS",
    "IOPCB",
    "OK",
    "PCB",
    "QC",
    "QD",
    "SPC",
    "U3303",
    "ConversationEnd",
    "ConversationExit",
    "Delivered",
    "FPTransaction",
    "FastPath",
    "FastPathDefinition",
    "IMSError",
    "IMSReason",
    "InvalidIMSRequest",
    "Lterm",
    "Program",
    "Region",
    "Routed",
    "Signon",
    "SignonExit",
    "SystemDefinition",
    "Terminal",
    "Transaction",
    "ims_error",
    "ims_suffix",
]
