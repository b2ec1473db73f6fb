"""The Common Queue Server (redbook chapters 2 and 3): ``docs/cqs.md``.

A :class:`CQS` per client system serves the seed's requests on shared list structures:
CQSCONN (:meth:`CQS.connect`), CQSREG/CQSDEREG, CQSPUT, CQSREAD, CQSBROWSE, CQSMOVE,
CQSDEL, CQSUNLCK, CQSQUERY, CQSCHKPT and CQSDISC, with notification when a registered
queue goes from empty to non-empty.  It runs in its client's process, or in one of its
own (:func:`serve`), its client then holding a :class:`RemoteCQS`; both are a
:class:`CQSService`.
"""

from sharedq.cqs.errors import (
    CapacityExceeded,
    CQSError,
    CQSJournalFailed,
    CQSReason,
    InvalidCQSRequest,
    NotAuthorized,
    NotLocked,
    cqs_error,
)
from sharedq.cqs.journal import Sync
from sharedq.cqs.layout import (
    ELEMENT_SIZE,
    HEADERS_PER_TYPE,
    LIST_COUNT,
    Kind,
    Layout,
    Private,
    structure_params,
)
from sharedq.cqs.message import Message, QueueCounts
from sharedq.cqs.names import EMHQ_TYPES, MSGQ_TYPES, QueueName, check_name, make_name
from sharedq.cqs.pair import StructurePair
from sharedq.cqs.remote import RemoteCQS
from sharedq.cqs.serve_socket import authkey_file, serve
from sharedq.cqs.server import CQS
from sharedq.cqs.service import CQSService
from sharedq.cqs.site import LockToken
from sharedq.cqs.uow import TokenSource, Uow

__all__ = [
    "CQS",
    "ELEMENT_SIZE",
    "EMHQ_TYPES",
    "HEADERS_PER_TYPE",
    "LIST_COUNT",
    "MSGQ_TYPES",
    "CQSError",
    "CQSJournalFailed",
    "CQSReason",
    "CQSService",
    "CapacityExceeded",
    "InvalidCQSRequest",
    "Kind",
    "Layout",
    "LockToken",
    "Message",
    "NotAuthorized",
    "NotLocked",
    "Private",
    "QueueCounts",
    "QueueName",
    "RemoteCQS",
    "StructurePair",
    "Sync",
    "TokenSource",
    "Uow",
    "authkey_file",
    "check_name",
    "cqs_error",
    "make_name",
    "serve",
    "structure_params",
]
