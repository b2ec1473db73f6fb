"""The change helpers (``log_write``, ``log_move``, ``log_delete``, ``log_update``) and the
server journal write exactly the records their fields say.

The helpers build a record's values in one list display each; here every record they
write is held, field by field, to the one ``LogWriter.append`` writes from the fields
``docs/log-records.md`` gives each change.  The journal's reuse of a message's info
for the records that follow (same data, same unit and queue) must never carry one
message's or one unit's fields into another's record.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from sharedq.cf import Change, ListEntry, Position
from sharedq.log import (
    ChangeOp,
    LogRecord,
    LogStream,
    LogWriter,
    MessageInfo,
    PackedPayload,
    RecordType,
)
from sharedq.seam.logjournal import LogJournal
from sharedq.seam.notes import About, DeleteNote, MoveNote, WriteNote

from .helpers import MakeStream

#: What differs between a record and its reference: who wrote it, when, its lsn.
_OWN = ("writer", "lsn", "time_us")


def _entry(rng: random.Random, seq: int) -> Change:
    entry = ListEntry(
        entry_id=rng.randbytes(12),
        list_number=rng.randrange(0, 50),
        key=rng.randbytes(16),
        data=rng.randbytes(rng.choice((0, 1, 100, 4000))),
        adjunct=rng.choice((b"", rng.randbytes(64))),
        secondary_key=rng.choice((None, b"", rng.randbytes(rng.randrange(1, 33)))),
        version=rng.choice((0, 1, 2**64 - 1, rng.randrange(2**64))),
        elements=1,
    )
    return Change(seq, entry, rng.choice((None, 0, 3)))


def _message(rng: random.Random) -> MessageInfo | None:
    if rng.random() < 0.2:
        return None
    return MessageInfo(
        uow=rng.choice((None, rng.randbytes(rng.randrange(1, 33)))),
        queue=rng.choice((None, b"Q", rng.randbytes(16))),
        message_id=rng.choice((None, rng.randbytes(24))),
        correl_id=rng.choice((None, rng.randbytes(24))),
        priority=rng.choice((None, 0, 9)),
        persistent=rng.choice((None, True)),
    )


def _message_fields(message: MessageInfo | None) -> dict[str, Any]:
    if message is None:
        return {}
    return message._asdict()


def _log_one(
    rng: random.Random, w: LogWriter, ref: LogWriter, seq: int
) -> tuple[object, object] | None:
    """One change through a helper of ``w`` and its fields through ``ref.append``."""
    change = _entry(rng, seq)
    entry = change.entry
    message = _message(rng)
    payload = rng.choice((None, {"mq": "put"}, PackedPayload({"mq": "get"})))
    commit = rng.random() < 0.1
    common: dict[str, Any] = {"message": message, "payload": payload, "commit": commit}
    fields: dict[str, Any] = {
        "seq": seq,
        "entry_id": entry.entry_id,
        "list_number": entry.list_number,
        "key": entry.key,
        "version": entry.version,
        "payload": payload.value if isinstance(payload, PackedPayload) else payload,
        **_message_fields(message),
    }
    kind = rng.choice(("write", "move", "delete", "update"))
    position = rng.choice((Position.HEAD, Position.TAIL))
    ignore_limit = rng.random() < 0.3
    placed = {
        "secondary_key": entry.secondary_key,
        "set_secondary_key": True,
        "at_head": position is Position.HEAD,
        "ignore_limit": ignore_limit,
    }
    if kind == "write":
        record_type = rng.choice((RecordType.PUT, RecordType.CHANGE))
        got = w.log_write(
            change,
            record_type=record_type,
            position=position,
            ignore_limit=ignore_limit,
            **common,
        )
        op, fields = ChangeOp.WRITE, {**fields, **placed}
        fields.update(data=entry.data, adjunct=entry.adjunct)
    elif kind == "move":
        record_type = rng.choice((RecordType.MOVE, RecordType.READ, RecordType.UNLOCK))
        from_list = rng.choice((None, 0, 7))
        got = w.log_move(
            change,
            record_type=record_type,
            from_list=from_list,
            position=position,
            ignore_limit=ignore_limit,
            **common,
        )
        op, fields = ChangeOp.MOVE, {**fields, **placed, "from_list": from_list}
    elif kind == "delete":
        record_type = RecordType.DELETE
        got = w.log_delete(change, **common)
        op = ChangeOp.DELETE
    else:
        record_type = RecordType.CHANGE
        data_changed, adjunct_changed = rng.random() < 0.5, rng.random() < 0.5
        increment_authority = rng.random() < 0.5
        got = w.log_update(
            change,
            data_changed=data_changed,
            adjunct_changed=adjunct_changed,
            increment_authority=increment_authority,
            **common,
        )
        op = ChangeOp.UPDATE
        fields["increment_authority"] = increment_authority
        if data_changed:
            fields["data"] = entry.data
        if adjunct_changed:
            fields["adjunct"] = entry.adjunct
    expected = ref.append(record_type, op=op, commit=commit, **fields)
    if expected is None:
        assert got is None
        return None
    assert got is not None
    return got, expected


def _by_writer(stream: LogStream) -> dict[str, list[LogRecord]]:
    found: dict[str, list[LogRecord]] = {}
    for record in stream.records():
        found.setdefault(record.writer, []).append(record)
    return found


def _without_own(record: LogRecord) -> dict[str, Any]:
    return {k: v for k, v in record._asdict().items() if k not in _OWN}


def test_each_helper_writes_the_fields_its_change_gives(make_stream: MakeStream) -> None:
    stream = make_stream(segment_bytes=1 << 20, staging_bytes=1 << 24)
    rng = random.Random(16)
    pairs = []
    with stream.writer("QM1") as w, stream.writer("REF") as ref:
        for seq in range(1, 600):
            made = _log_one(rng, w, ref, seq)
            if made is not None:
                pairs.append(made)
        # The positions the helpers return are the records' own.
        assert all(got[:2] == expected[:2] for got, expected in pairs)  # type: ignore[index]
    written = _by_writer(stream)
    assert len(written["QM1"]) == len(written["REF"]) == len(pairs) > 400
    for record, reference in zip(written["QM1"], written["REF"], strict=True):
        assert _without_own(record) == _without_own(reference)
    assert [r.lsn for r in written["QM1"]] == list(range(1, len(pairs) + 1))


def test_a_nonpersistent_message_is_not_logged(make_stream: MakeStream) -> None:
    stream = make_stream()
    change = _entry(random.Random(1), 5)
    nonpersistent = MessageInfo(uow=b"U", persistent=False)
    with stream.writer("QM1") as w:
        assert w.log_write(change, message=nonpersistent) is None
        assert w.log_move(change, message=nonpersistent) is None
        assert w.log_delete(change, message=nonpersistent) is None
        assert w.log_update(change, message=nonpersistent) is None
        assert w.last_lsn == 0


class _Kind:
    """A meaning, as a server's change kinds are."""

    def __init__(self, tag: str, record_type: RecordType, ends: bool = False) -> None:
        self.tag, self.record_type, self.ends_operation = tag, record_type, ends
        self.learns_facts = False


_PUT = _Kind("put", RecordType.PUT)
_GET = _Kind("get", RecordType.READ)
_DONE = _Kind("commit-gets", RecordType.DELETE, ends=True)


def _facts(data: bytes) -> tuple[Any, ...]:
    """A message's facts as a server reads them from its data: here, its first bytes."""
    return (data[0] != 0, data[1], data[2:10], None if data[10] == 0 else data[10:14])


def _notes(rng: random.Random, seq: int, datas: Sequence[bytes]) -> list[Any]:
    data = rng.choice(datas)
    change = Change(seq, ListEntry(rng.randbytes(12), 1, rng.randbytes(16), data, b"", None, 0, 1))
    about = About(
        queue=rng.choice(("A", "B", None)),
        uow_id=rng.choice((b"U1", b"U2", None)),
        persistent=rng.choice((True, True, None, False)),
    )
    kind = rng.choice(("write", "move", "delete"))
    if kind == "write":
        return [WriteNote(_PUT, "S1", change, Position.TAIL, False, about)]
    if kind == "move":
        return [MoveNote(_GET, "S1", change, 4, Position.TAIL, False, about)]
    return [DeleteNote(_DONE, "S1", change, about)]


def test_the_journal_gives_each_record_its_own_message(make_stream: MakeStream) -> None:
    """Records in a row about the same data, unit or queue, or about others (equal
    data in another object too): each carries its own note's unit and queue and its
    own data's facts."""
    stream = make_stream(segment_bytes=1 << 20, staging_bytes=1 << 24)
    rng = random.Random(7)
    datas = [
        bytes([1, 3]) + b"m" * 8 + bytes([0]) + b"x" * 20,
        bytes([1, 5]) + b"n" * 8 + b"corr" + b"y" * 20,
        bytes([0, 0]) + b"o" * 8 + bytes([0]) + b"z" * 20,
    ]
    datas += [bytes(bytearray(d)) for d in datas]  # equal, not the same object
    journal = LogJournal("QM1", {"S1": stream}, payload_key="mq", facts=_facts)
    notes = []
    try:
        for seq in range(1, 400):
            for note in _notes(rng, seq, datas):
                journal.changed(note)
                notes.append(note)
    finally:
        journal.close()
    logged = [
        n
        for n in notes
        if n.about.persistent is None or (n.about.persistent and _facts(n.change.entry.data)[0])
    ]
    records = _by_writer(stream)["QM1"]
    assert len(records) == len(logged) > 150
    for record, note in zip(records, logged, strict=True):
        about = note.about
        assert record.seq == note.change.seq
        assert record.uow == about.uow_id
        assert record.queue == (None if about.queue is None else about.queue.encode())
        if about.persistent is None:
            assert (record.message_id, record.priority, record.persistent) == (None,) * 3
        else:
            persistent, priority, msg_id, correl_id = _facts(note.change.entry.data)
            assert (record.persistent, record.priority) == (persistent, priority)
            assert (record.message_id, record.correl_id) == (msg_id, correl_id)
        assert record.payload_value() == {"mq": note.meaning.tag}
