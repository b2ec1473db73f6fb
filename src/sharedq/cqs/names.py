"""CQS queue names: 16 bytes, the seed's 1 + 8 + 4 + 3 layout (redbook §2.4).

``type byte | resource name (8) | IMSID (4) | 3 blanks``.  The resource is a
transaction code, LTERM name, MSNAME or PSB name padded with blanks; the IMSID is
there when only one system may process the queue (``TRANA   IMSA``) and blank
otherwise.  The 16 bytes are the list entry's key (the cf ``KEY_LENGTH``), so a queue is
the sublist of the entries with its name.

Decision (the seed is silent): the resource and the IMSID are printable ASCII
(``0x20``-``0x7E``); APPC and OTMA queues, whose resource is a timestamp, give it in
printable form (hex digits).  A queue name then reads the same in the log, where it is
written as text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sharedq.cf.types import KEY_LENGTH
from sharedq.cqs.errors import CQSReason, cqs_error

#: Bytes in a queue name (the list entry key).
NAME_LENGTH = KEY_LENGTH
RESOURCE_LENGTH = 8
SYSTEM_LENGTH = 4
_TRAILER = b"   "

#: MSGQ client queue types (redbook §2.3): transaction ready, staging, suspend,
#: serial, LTERM ready, LTERM staging, APPC, remote (MSNAME), OTMA.
MSGQ_TYPES: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8, 9)
#: EMHQ client queue types: program ready (PSB), LTERM ready.
EMHQ_TYPES: tuple[int, ...] = (1, 5)
#: The staging queue type of a ready queue type (MSGQ): where parts 2..n go.
STAGING_TYPE = {1: 2, 3: 2, 4: 2, 5: 6, 7: 6, 8: 6, 9: 6}


#: The printable ASCII bytes (what a name's resource and IMSID may hold).
_PRINTABLE = bytes(range(0x20, 0x7F))


def _printable(value: bytes) -> bool:
    # Deleting every printable byte leaves nothing: one C call (every request checks
    # its queue name).
    return not value.translate(None, _PRINTABLE)


@dataclass(frozen=True, slots=True)
class QueueName:
    """A parsed queue name; ``bytes(name)`` gives its 16 bytes."""

    queue_type: int
    resource: str
    system: str = ""

    def __bytes__(self) -> bytes:
        return make_name(self.queue_type, self.resource, self.system)

    def __str__(self) -> str:
        return bytes(self).decode("ascii")


def make_name(queue_type: int, resource: str | bytes, system: str | bytes = "") -> bytes:
    """The 16-byte name of a queue: its type, resource name and (optional) IMSID.

    Raises ``InvalidCQSRequest`` (``BAD_QUEUE_NAME``) with what is wrong.
    """
    if type(queue_type) is not int or not 1 <= queue_type <= 255:
        raise cqs_error(CQSReason.BAD_QUEUE_NAME, f"queue type {queue_type!r} must be 1..255")
    res = resource.encode("ascii", "replace") if isinstance(resource, str) else resource
    sysid = system.encode("ascii", "replace") if isinstance(system, str) else system
    if not isinstance(res, bytes) or not 1 <= len(res) <= RESOURCE_LENGTH:
        raise cqs_error(
            CQSReason.BAD_QUEUE_NAME,
            f"resource name {resource!r} must be 1 to {RESOURCE_LENGTH} characters",
        )
    if not isinstance(sysid, bytes) or len(sysid) > SYSTEM_LENGTH:
        raise cqs_error(
            CQSReason.BAD_QUEUE_NAME, f"IMSID {system!r} must be at most {SYSTEM_LENGTH} characters"
        )
    name = (
        bytes((queue_type,))
        + res.ljust(RESOURCE_LENGTH, b" ")
        + sysid.ljust(SYSTEM_LENGTH, b" ")
        + _TRAILER
    )
    return check_name(name)


def check_name(name: object, types: tuple[int, ...] | None = None) -> bytes:
    """``name`` if it is a well-formed queue name (of one of ``types``, when given).

    Raises ``InvalidCQSRequest`` (``BAD_QUEUE_NAME``) saying what is wrong.
    """
    if isinstance(name, QueueName):
        name = bytes(name)
    if not isinstance(name, bytes):
        raise cqs_error(
            CQSReason.BAD_QUEUE_NAME, f"queue name must be 16 bytes, not {type(name).__name__}"
        )
    if len(name) != NAME_LENGTH:
        raise cqs_error(
            CQSReason.BAD_QUEUE_NAME, f"queue name {name!r} has {len(name)} bytes, not 16"
        )
    if types is not None and name[0] not in types:
        raise cqs_error(
            CQSReason.BAD_QUEUE_NAME,
            f"queue name {name!r}: type {name[0]} is not one of this structure's {types}",
        )
    if name[0] == 0:
        raise cqs_error(CQSReason.BAD_QUEUE_NAME, f"queue name {name!r}: type 0")
    if not _printable(name[1:]) or name[1:2] == b" ":
        raise cqs_error(
            CQSReason.BAD_QUEUE_NAME,
            f"queue name {name!r}: the resource name and IMSID are printable ASCII, "
            "the resource name not blank",
        )
    if name[-3:] != _TRAILER:
        raise cqs_error(CQSReason.BAD_QUEUE_NAME, f"queue name {name!r} must end in 3 blanks")
    return name


def parse_name(name: bytes) -> QueueName:
    """The parts of a well-formed queue name."""
    check_name(name)
    return QueueName(
        name[0], name[1:9].decode("ascii").rstrip(), name[9:13].decode("ascii").rstrip()
    )


def text(name: bytes) -> str:
    """A queue name as text (for log records and messages): its bytes as ASCII."""
    return name.decode("ascii")


def check_collection(values: object, what: str) -> Iterable[object]:
    """``values`` if a collection (of names, of ids): not one alone (read byte by byte)."""
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise cqs_error(CQSReason.BAD_ARGUMENT, f"{what} {values!r}: a collection (a list)")
    return values
