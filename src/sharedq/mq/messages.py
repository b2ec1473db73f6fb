"""Messages: what an application puts and gets, and how a list entry holds one.

A message's list entry carries, in its data, a fixed header (persistence, priority,
ids, put stamp, expiry, putting manager) followed by the body; its adjunct carries the
put list it belongs to and its two ids.  The adjunct is what recovery reads to return
a message from a failed manager's get list to the queue it came from, and what a get
by both ids checks the second id against (gap O6); the secondary key, the id the
queue is indexed by, is assigned only at commit (p[127]), so the adjunct is where the
id waits until then (gap O7: secondary key and adjunct are separate fields).

The backout count is not in the data: it is the entry's version number, which every
move from a get list back to a put list increments (p[264], p[265]).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field

from sharedq.mq.clock import STAMP_SHIFT, stamp_seconds
from sharedq.mq.errors import MQReason, mq_error

#: Bytes in a message id and a correlation id (MQ's MQBYTE24).
ID_LENGTH = 24
#: An id of all zeros: "none", as MQ's MQMI_NONE / MQCI_NONE.
NO_ID = b"\x00" * ID_LENGTH
#: The most backouts a get reports; the version number itself keeps counting (p[265]).
MAX_BACKOUT_COUNT = 255
#: Expiry value meaning "never" (MQ's MQEI_UNLIMITED), in the header.
UNLIMITED = _UNLIMITED = 0xFFFFFFFF
#: The longest queue-manager name, as MQ's MQ_Q_MGR_NAME_LENGTH.
MAX_QM_NAME = 48

# Format 1 (read only, for entries written before format 2): version, flags, priority,
# putting qm id, put stamp, expiry (tenths), msg id, correl id, putting qm name length;
# the name and the body follow.
_HEADER = struct.Struct(">BBBBQI24s24sB")
_FORMAT = 1
# Format 2, written now, leaves out what is known without it (Redis keeps every byte of
# a queued message, and these were half of a 100-byte message's data): version, flags,
# priority, putting qm id, put stamp, putting qm name length; then the expiry (4, only
# with _EXPIRES), the name, the msg id (its 3-byte nonce when the manager generated it,
# else 24 bytes), the correl id (24, only with _CORREL), the body.  At most as long as
# format 1, so a queue's largest body is the same.
_HEADER2 = struct.Struct(">BBBBQB")
_FORMAT2 = 2
_PERSISTENT = 0x01
_GENERATED = 0x02
_EXPIRES = 0x04
_CORREL = 0x08
_U32 = struct.Struct(">I")
_ZERO4 = b"\x00" * 4
# Adjunct, format 1: put list number, msg id, correl id.  Format 2: put list number with
# its top bit set (list numbers stay below 4096), the msg id's length, then both ids
# without their trailing zeros (ids are padded with zeros to 24 bytes), or for a msg id
# generated with the entry's id the 4 bytes of it the entry id does not hold.
_ADJUNCT = struct.Struct(">H24s24s")
_ADJUNCT2_MARK = 0x8000
#: The msg id's length byte of an adjunct keeping a generated msg id in the entry id.
_FROM_ENTRY_ID = 0xFF


@dataclass(slots=True)
class Message:
    """A message as an application sees it.

    ``expiry`` is the lifetime the putter gave, in seconds (``None``: never); the
    message may be discarded once ``put_time + expiry`` has passed.  ``put_time`` is
    the time of day, in seconds since the epoch, that the putting manager stamped it
    with.  ``backout_count`` says how many times a get of it was backed out (at most
    255).  When a get accepted truncation, ``body`` is cut to the length asked for and
    ``data_length`` is the full length.
    """

    body: bytes
    priority: int = 0
    persistent: bool = False
    msg_id: bytes = NO_ID
    correl_id: bytes = NO_ID
    expiry: float | None = None
    put_time: float = 0.0
    put_qmgr: str = ""
    backout_count: int = 0
    data_length: int = 0
    truncated: bool = False
    #: Identifies the get that returned this message, for mark-skip-backout.
    token: bytes = field(default=b"", repr=False, compare=False)

    @property
    def expires_at(self) -> float | None:
        """The time of day after which the message may be discarded, or ``None``."""
        return None if self.expiry is None else self.put_time + self.expiry


def header_length(qm_name: str) -> int:
    return _HEADER.size + len(qm_name.encode())


def expiry_tenths(expiry: float | None) -> int:
    """A lifetime in seconds as the header holds it; ``InvalidArgument`` if not valid."""
    if expiry is None:
        return _UNLIMITED
    if (
        isinstance(expiry, bool)
        or not isinstance(expiry, int | float)
        or not math.isfinite(expiry)
        or not expiry > 0
    ):
        raise mq_error(
            MQReason.EXPIRY_ERROR,
            f"expiry {expiry!r} must be a finite number of seconds above 0 (None: unlimited)",
        )
    tenths = max(1, round(expiry * 10))
    if tenths >= _UNLIMITED:
        raise mq_error(
            MQReason.EXPIRY_ERROR,
            f"expiry {expiry!r} seconds is too long: at most {(_UNLIMITED - 1) / 10:.1f} "
            f"(None: unlimited)",
        )
    return tenths


def generated_msg_id(qm_name: bytes, stamp: int, qm_id: int, nonce: bytes) -> bytes:
    """The msg id a manager generates for a put (see ``ManagerCore``): its name's first
    four characters, the put stamp, its id and its nonce."""
    return (
        b"CSQ "
        + qm_name[:4].ljust(4)
        + stamp.to_bytes(8, "big")
        + bytes((qm_id,))
        + nonce
        + b"\x00" * 4
    )


def encode(
    body: bytes,
    priority: int,
    persistent: bool,
    msg_id: bytes,
    correl_id: bytes,
    stamp: int,
    expiry: int,
    qm_id: int,
    qm_name: bytes,
    generated: bool = False,
) -> bytes:
    """The data of a message's list entry (format 2).  ``expiry`` is in tenths (or
    unlimited).  ``generated``: the caller made ``msg_id`` with :func:`generated_msg_id`
    from these facts (otherwise the id is compared with the one they would give)."""
    flags = _PERSISTENT if persistent else 0
    parts = [b"", b"", qm_name]
    if expiry != _UNLIMITED:
        flags |= _EXPIRES
        parts[1] = _U32.pack(expiry)
    nonce = msg_id[17:20]
    if generated or msg_id == generated_msg_id(qm_name, stamp, qm_id, nonce):
        flags |= _GENERATED
        parts.append(nonce)
    else:
        parts.append(msg_id)
    if correl_id != NO_ID:
        flags |= _CORREL
        parts.append(correl_id)
    parts.append(body)
    parts[0] = _HEADER2.pack(_FORMAT2, flags, priority, qm_id, stamp, len(qm_name))
    return b"".join(parts)


def generated_frame(
    priority: int, persistent: bool, expiry: int, qm_id: int, qm_name: bytes, nonce: bytes
) -> tuple[bytes, bytes]:
    """``(head, tail)`` of the data :func:`encode` makes for a message with a generated
    msg id (made with ``nonce``) and no correl id: ``head + stamp (8 bytes, big-endian)
    + tail + body`` is that data, for any stamp and body (a batch makes them once)."""
    flags = _GENERATED | (_PERSISTENT if persistent else 0)
    expires = b""
    if expiry != _UNLIMITED:
        flags |= _EXPIRES
        expires = _U32.pack(expiry)
    head = _HEADER2.pack(_FORMAT2, flags, priority, qm_id, 0, len(qm_name))
    return head[:4], head[12:] + expires + qm_name + nonce


def _generated_id_in(data: bytes, id_head: bytes, nonce_at: int) -> bytes:
    """``generated_msg_id(name, stamp, qm_id, nonce)`` of format-2 ``data``, from the
    header's own bytes (qm id at 3, stamp at 4..12, the nonce at ``nonce_at``) and the
    name's ``id_head`` (:func:`_name_facts`): no integer to convert back."""
    return b"".join((id_head, data[4:12], data[3:4], data[nonce_at : nonce_at + 3], _ZERO4))


#: A manager name as a header holds it -> the name, and the first 8 bytes of the msg
#: ids that manager generates: worked out once a name (every get decodes one).
_NAMES: dict[bytes, tuple[str, bytes]] = {}
#: Names kept at most (a group has few managers; the table starts afresh past this).
_NAMES_KEPT = 1024


def _name_facts(name: bytes) -> tuple[str, bytes]:
    facts = _NAMES.get(name)
    if facts is None:
        facts = (name.decode(), b"CSQ " + name[:4].ljust(4))
        if len(_NAMES) >= _NAMES_KEPT:
            _NAMES.clear()
        _NAMES[name] = facts
    return facts


class Decoded:
    """The header fields of a message entry, decoded without copying the body."""

    __slots__ = (
        "body_offset",
        "correl_id",
        "expires_at",
        "expiry_tenths",
        "msg_id",
        "persistent",
        "priority",
        "qm_id",
        "qm_name",
        "stamp",
    )

    def __init__(self, data: bytes) -> None:
        if data[:1] == b"\x02":
            self._format2(data)
        elif data[:1] == b"\x01":
            (
                _,
                flags,
                self.priority,
                self.qm_id,
                self.stamp,
                self.expiry_tenths,
                self.msg_id,
                self.correl_id,
                name_length,
            ) = _HEADER.unpack_from(data)
            self.persistent = bool(flags & _PERSISTENT)
            start = _HEADER.size
            self.body_offset = start + name_length
            self.qm_name = data[start : self.body_offset].decode()
        else:
            raise mq_error(MQReason.UNEXPECTED_ERROR, f"unknown message format {data[:1]!r}")
        tenths = self.expiry_tenths
        self.expires_at: float | None = (
            None if tenths == _UNLIMITED else stamp_seconds(self.stamp) + tenths / 10
        )

    def _format2(self, data: bytes) -> None:
        _, flags, self.priority, qm_id, stamp, name_length = _HEADER2.unpack_from(data)
        self.qm_id, self.stamp = qm_id, stamp
        self.persistent = bool(flags & _PERSISTENT)
        at = 13
        if flags & _EXPIRES:
            self.expiry_tenths = _U32.unpack_from(data, at)[0]
            at += 4
        else:
            self.expiry_tenths = _UNLIMITED
        name = data[at : at + name_length]
        self.qm_name, id_head = _NAMES.get(name) or _name_facts(name)
        at += name_length
        if flags & _GENERATED:
            self.msg_id = _generated_id_in(data, id_head, at)
            at += 3
        else:
            self.msg_id = data[at : at + ID_LENGTH]
            at += ID_LENGTH
        if flags & _CORREL:
            self.correl_id = data[at : at + ID_LENGTH]
            at += ID_LENGTH
        else:
            self.correl_id = NO_ID
        self.body_offset = at

    def expired(self, now: float) -> bool:
        deadline = self.expires_at
        return deadline is not None and now >= deadline


def to_message(
    data: bytes,
    version: int,
    token: bytes,
    *,
    max_length: int | None = None,
    header: Decoded | None = None,
) -> Message:
    """The application's view of a message entry, cut to ``max_length`` if given."""
    h = header if header is not None else Decoded(data)
    body = data[h.body_offset :]
    length = len(body)
    truncated = max_length is not None and length > max_length
    if truncated:
        body = body[:max_length]
    # Positional: this runs once per get, and keywords cost more than the rest of it.
    return Message(
        body,
        h.priority,
        h.persistent,
        h.msg_id,
        h.correl_id,
        None if h.expiry_tenths == _UNLIMITED else h.expiry_tenths / 10,
        stamp_seconds(h.stamp),
        h.qm_name,
        version if version < MAX_BACKOUT_COUNT else MAX_BACKOUT_COUNT,
        length,
        truncated,
        token,
    )


def whole_message(data: bytes, version: int, token: bytes) -> Message:
    """``to_message(data, version, token)``: the whole message, decoded in one pass
    (without a :class:`Decoded`) for the format written now; a batch of gets makes one
    a message."""
    if data[:1] != b"\x02":
        return to_message(data, version, token)
    _, flags, priority, _, stamp, name_length = _HEADER2.unpack_from(data)
    at = 13
    expiry = None
    if flags & _EXPIRES:
        tenths = _U32.unpack_from(data, 13)[0]
        if tenths != _UNLIMITED:
            expiry = tenths / 10
        at = 17
    end = at + name_length
    name = data[at:end]
    qm_name, id_head = _NAMES.get(name) or _name_facts(name)
    if flags & _GENERATED:
        msg_id = _generated_id_in(data, id_head, end)
        at = end + 3
    else:
        at = end + ID_LENGTH
        msg_id = data[end:at]
    if flags & _CORREL:
        correl_id = data[at : at + ID_LENGTH]
        at += ID_LENGTH
    else:
        correl_id = NO_ID
    body = data[at:]
    return Message(
        body,
        priority,
        bool(flags & _PERSISTENT),
        msg_id,
        correl_id,
        expiry,
        (stamp >> STAMP_SHIFT) / 1_000_000,  # stamp_seconds(stamp), without the call
        qm_name,
        version if version < MAX_BACKOUT_COUNT else MAX_BACKOUT_COUNT,
        len(body),
        False,
        token,
    )


def message_facts(data: bytes) -> tuple[bool, int, bytes, bytes]:
    """``(persistent, priority, msg id, correl id)`` of a message entry's data."""
    h = Decoded(data)
    return h.persistent, h.priority, h.msg_id, h.correl_id


def entry_facts(data: bytes) -> tuple[bool, bytes]:
    """``(persistent, msg id)`` of a message entry, for a journal that must know them."""
    h = Decoded(data)
    return h.persistent, h.msg_id


def _generated_for(msg_id: bytes, entry_id: bytes) -> bool:
    """Whether ``msg_id`` is the one the manager generated with entry ``entry_id`` (both
    made of its id, the put stamp and its nonce: ``qm id | stamp | nonce``)."""
    return (
        len(entry_id) == 12
        and msg_id[:4] == b"CSQ "
        and msg_id[8:] == entry_id[1:9] + entry_id[:1] + entry_id[9:] + b"\x00" * 4
    )


def encode_adjunct(
    put_list: int,
    msg_id: bytes,
    correl_id: bytes,
    entry_id: bytes | None = None,
    generated: bool = False,
) -> bytes:
    """A message entry's adjunct (format 2).  Given the entry's id, a msg id generated
    with it is kept as the four characters of the manager's name it holds (length byte
    255), the rest being in the entry id.  ``generated``: the caller made both ids from
    the same stamp (no need to compare them)."""
    if entry_id is not None and (generated or _generated_for(msg_id, entry_id)):
        mid = msg_id[4:8]
        length = _FROM_ENTRY_ID
    else:
        mid = msg_id.rstrip(b"\x00")
        length = len(mid)
    return (
        (put_list | _ADJUNCT2_MARK).to_bytes(2, "big")
        + bytes((length,))
        + mid
        + correl_id.rstrip(b"\x00")
    )


def adjunct_put_list(adjunct: bytes) -> int:
    """The put list a message entry's adjunct names (either format)."""
    return int.from_bytes(adjunct[:2], "big") & ~_ADJUNCT2_MARK


def decode_adjunct(adjunct: bytes, entry_id: bytes | None = None) -> tuple[int, bytes, bytes]:
    """``(put list, msg id, correl id)`` of a message entry's adjunct (either format).

    ``entry_id`` is the entry's: an adjunct that keeps its msg id in it cannot be read
    without it, and is refused rather than read wrong.
    """
    head = int.from_bytes(adjunct[:2], "big")
    if not head & _ADJUNCT2_MARK:
        put_list, msg_id, correl_id = _ADJUNCT.unpack_from(adjunct)
        return put_list, msg_id, correl_id
    length = adjunct[2]
    if length == _FROM_ENTRY_ID:
        if entry_id is None or len(entry_id) != 12:
            raise mq_error(MQReason.UNEXPECTED_ERROR, "a message adjunct read without its entry id")
        end = 7
        msg_id = b"CSQ " + adjunct[3:7] + entry_id[1:9] + entry_id[:1] + entry_id[9:]
        msg_id += b"\x00" * 4
    else:
        end = 3 + length
        msg_id = adjunct[3:end].ljust(ID_LENGTH, b"\x00")
    return head & ~_ADJUNCT2_MARK, msg_id, adjunct[end:].ljust(ID_LENGTH, b"\x00")


def check_id(value: bytes | None, what: str, reason: MQReason) -> bytes | None:
    """An id as given, padded to 24 bytes, or ``None``; ``InvalidArgument`` if bad."""
    if value is None:
        return None
    if not isinstance(value, bytes) or len(value) > ID_LENGTH:
        raise mq_error(reason, f"{what} must be at most {ID_LENGTH} bytes, not {value!r}")
    return value.ljust(ID_LENGTH, b"\x00")
