"""The bodies a remote CQS and its server exchange: msgpack, with the CQS's own types.

Only data crosses the socket (never pickles): bytes, numbers, strings, lists, maps,
and these types as msgpack extension types, each rebuilt field by field:
:class:`~sharedq.cqs.Kind`, :class:`~sharedq.cqs.LockToken`,
:class:`~sharedq.cqs.Uow`, :class:`~sharedq.cqs.Message`,
:class:`~sharedq.cqs.QueueCounts`, :class:`~sharedq.cf.StructureStats`,
:class:`~sharedq.cqs.resync.Resynced` and :class:`~sharedq.cqs.StructurePair`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import msgpack

from sharedq.cf import StructureStats
from sharedq.cqs.errors import CQSReason, cqs_error
from sharedq.cqs.layout import Kind
from sharedq.cqs.message import Message, QueueCounts
from sharedq.cqs.overflow_select import Target
from sharedq.cqs.pair import StructurePair
from sharedq.cqs.resync import Resynced
from sharedq.cqs.site import LockToken
from sharedq.cqs.uow import Uow

_KIND, _TOKEN, _UOW, _MESSAGE, _COUNTS, _STATS, _RESYNCED, _PAIR, _TUPLE = range(1, 10)


def _plain(value: Any) -> Any:
    """``value`` with every CQS type made an extension type, tuples kept as tuples."""
    if isinstance(value, msgpack.ExtType):
        return value
    if isinstance(value, Kind):
        return msgpack.ExtType(_KIND, value.value.encode("ascii"))
    if isinstance(value, LockToken):
        token: list[Any] = [value.kind.value, value.queue, value.entry_id, value.staged]
        return msgpack.ExtType(_TOKEN, _pack(token))
    if isinstance(value, Uow):
        return msgpack.ExtType(_UOW, bytes(value))
    if isinstance(value, Message):
        fields: list[Any] = [
            value.queue,
            list(value.parts),
            bytes(value.uow),
            value.put_us,
            value.recoverable,
            value.entry_id,
            value.token,
        ]
        return msgpack.ExtType(_MESSAGE, _pack(fields))
    if isinstance(value, QueueCounts):
        return msgpack.ExtType(_COUNTS, _pack(dataclasses.astuple(value)))
    if isinstance(value, StructureStats):
        return msgpack.ExtType(_STATS, _pack(dataclasses.astuple(value)))
    if isinstance(value, Resynced):
        return msgpack.ExtType(_RESYNCED, _pack([value.deleted, value.requeued]))
    if isinstance(value, StructurePair):
        pair: list[Any] = [value.primary, value.overflow, value.kind.value, value.ovflwmax]
        return msgpack.ExtType(_PAIR, _pack([*pair, value.target.value]))
    if isinstance(value, tuple):
        return msgpack.ExtType(_TUPLE, _pack(list(value)))
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    return value


def _pack(value: Any) -> bytes:
    packed: bytes = msgpack.packb(_plain(value), use_bin_type=True)
    return packed


def _ext(code: int, data: bytes) -> Any:
    if code == _KIND:
        return Kind(data.decode("ascii"))
    if code == _UOW:
        return Uow.from_bytes(data)
    fields = unpack(data)
    if code == _TOKEN:
        kind, queue, entry_id, staged = fields
        return LockToken(Kind(kind), queue, entry_id, staged)
    if code == _MESSAGE:
        queue, parts, uow, put_us, recoverable, entry_id, token = fields
        return Message(
            queue, tuple(parts), Uow.from_bytes(uow), put_us, recoverable, entry_id, token
        )
    if code == _COUNTS:
        return QueueCounts(*fields)
    if code == _STATS:
        return StructureStats(*fields)
    if code == _RESYNCED:
        return Resynced(*fields)
    if code == _PAIR:
        primary, overflow, kind, ovflwmax, target = fields
        return StructurePair(primary, overflow, Kind(kind), ovflwmax, Target(target))
    if code == _TUPLE:
        return tuple(fields)
    raise cqs_error(CQSReason.BAD_ARGUMENT, f"unknown type {code} in a remote CQS body")


def pack(value: Any) -> bytes:
    """One body: a request, a reply or an event."""
    return _pack(value)


def unpack(data: bytes) -> Any:
    """A body back, its CQS types rebuilt; anything malformed is ``BAD_ARGUMENT``."""
    try:
        return msgpack.unpackb(data, raw=False, ext_hook=_ext, strict_map_key=False)
    except (ValueError, TypeError, msgpack.UnpackException) as error:
        raise cqs_error(CQSReason.BAD_ARGUMENT, f"a malformed remote CQS body: {error}") from error
