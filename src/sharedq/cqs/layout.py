"""Where a CQS structure keeps what: 192 list headers (redbook §2.2.2, §2.3).

==========  =======  ===================================================================
lists       count    what
==========  =======  ===================================================================
0           1        control queue: the recovery machinery's entries (checkpoint,
                     copy, identity, system checkpoint positions) and each CQS's entry
1-11        11       cold queue
12-22       11       rebuild queue
23-46       24       lock queue (messages being processed)
47-58       12       move queue (messages between two queues)
59-70       12       delete queue (messages being deleted)
71-191      121      client queues: 11 headers per client queue type, 11 types
==========  =======  ===================================================================

The seed gives 71 private and 121 client headers but not how the 71 divide; this split
(decision, docs/cqs.md) gives the busiest private queue, the lock queue, the most.

Client queue types take 11 headers each, in the order of the structure's types (MSGQ
types 1..9 use 99 headers, lists 71-169; EMHQ types 1 and 5 use 22, lists 71-92).  A
queue is the sublist of its name on one header of its type: the header is
``crc32(name) mod 11`` (decision: the seed gives none; crc32 is stable across
processes, releases and platforms, unlike Python's ``hash``).  A private queue with
several headers picks one by the same rule, so a message locked, moved or deleted under
a queue name is always found on the same header.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from enum import Enum

from sharedq.cf.params import StructureParams
from sharedq.cqs.errors import CQSReason, cqs_error
from sharedq.cqs.names import EMHQ_TYPES, MSGQ_TYPES

#: List headers in a CQS structure.
LIST_COUNT = 192
#: Headers for the private queues, and for the client queues.
PRIVATE_HEADERS = 71
CLIENT_HEADERS = 121
#: Headers per client queue type.
HEADERS_PER_TYPE = 11
#: Bytes per data element (redbook §2.2.2: messages in 512-byte elements).
ELEMENT_SIZE = 512
#: Lock-table entries (the recovery machinery uses 0 and 1: the control queue's lock
#: and the quiesce lock).
LOCK_COUNT = 16


class Private(Enum):
    """A private queue: its first list header and how many it has."""

    CONTROL = (0, 1)
    COLD = (1, 11)
    REBUILD = (12, 11)
    LOCK = (23, 24)
    MOVE = (47, 12)
    DELETE = (59, 12)

    @property
    def first(self) -> int:
        return self.value[0]

    @property
    def count(self) -> int:
        return self.value[1]

    def header(self, name: bytes) -> int:
        """The header of this private queue that holds entries keyed ``name``."""
        return self.first + _spread(name, self.count)

    def headers(self) -> range:
        return range(self.first, self.first + self.count)


def _spread(name: bytes, count: int) -> int:
    return zlib.crc32(name) % count


class Kind(Enum):
    """What a structure pair holds: the full-function message queues or Fast Path's."""

    MSGQ = "MSGQ"
    EMHQ = "EMHQ"

    def __repr__(self) -> str:
        return f"Kind.{self.name}"

    @property
    def types(self) -> tuple[int, ...]:
        """The client queue types of a structure of this kind (redbook §2.3)."""
        return MSGQ_TYPES if self is Kind.MSGQ else EMHQ_TYPES


@dataclass(frozen=True)
class Layout:
    """The list headers of one structure of ``kind``."""

    kind: Kind

    @property
    def types(self) -> tuple[int, ...]:
        return self.kind.types

    def header(self, name: bytes) -> int:
        """The client header that holds queue ``name`` (checked to be of a type here)."""
        try:
            index = self.types.index(name[0])
        except ValueError:
            raise cqs_error(
                CQSReason.BAD_QUEUE_NAME,
                f"queue type {name[0]} is not one of {self.kind.name}'s {self.types}",
            ) from None
        return PRIVATE_HEADERS + index * HEADERS_PER_TYPE + _spread(name, HEADERS_PER_TYPE)

    def client_headers(self) -> range:
        return range(PRIVATE_HEADERS, PRIVATE_HEADERS + len(self.types) * HEADERS_PER_TYPE)


def structure_params(
    name: str, *, messages: int = 10_000, message_bytes: int = 1024, emc_percent: int = 20
) -> StructureParams:
    """Parameters for a CQS structure of ``messages`` messages of ``message_bytes`` on
    average: 192 lists, 512-byte elements, the EMC share asked for (20 %, the seed's)."""
    if type(messages) is not int or messages < 1 or type(message_bytes) is not int:
        raise cqs_error(CQSReason.BAD_ARGUMENT, f"messages {messages!r}, bytes {message_bytes!r}")
    per = max(1, -(-(message_bytes + 64) // ELEMENT_SIZE))
    return StructureParams.for_capacity(
        name,
        list_count=LIST_COUNT,
        entries=messages + 64,
        elements=messages * per + 64,
        element_size=ELEMENT_SIZE,
        emc_percent=emc_percent,
        lock_count=LOCK_COUNT,
    )
