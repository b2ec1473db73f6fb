"""Random work on a structure, logged as a server logs it, and SRDS images of it: what
the rebuild tests (``test_restore``) and the pipeline's fold test share."""

from __future__ import annotations

import random
from collections.abc import Callable

from sharedq.cf import BulkMove, ById, Head, ListStructure, Position, StructureParams
from sharedq.log import LogWriter, MessageInfo, RecordType
from sharedq.recovery import (
    EntryRow,
    SrdsImage,
    StructureImage,
    contents,
    rows_to_table,
)

NAME = "APP1"
PARAMS = StructureParams.for_capacity(NAME, list_count=6, entries=2000, elements=4000)


def random_key(rng: random.Random) -> bytes:
    """A key whose first byte is one of four (1, 4, 9, 0xF6), then two random bytes."""
    return bytes([rng.choice((1, 4, 9, 0xF6))]) + rng.randbytes(2) + bytes(13)


def random_work(
    conn: ListStructure,
    log: LogWriter,
    rng: random.Random,
    steps: int,
    *,
    key: Callable[[random.Random], bytes] = random_key,
) -> None:
    """Random changes of every kind, each logged as a server logs it; ``key`` draws the
    keys of writes and moves."""
    for _ in range(steps):
        entries = [e for n in range(6) for e in conn.scan(n, with_data=False)]
        choice = rng.random()
        if choice < 0.4 or not entries:
            position = rng.choice((Position.TAIL, Position.HEAD))
            change = conn.write(
                rng.randrange(6),
                key(rng),
                rng.randbytes(rng.randrange(0, 700)),
                adjunct=rng.randbytes(8),
                secondary_key=rng.choice((None, b"ID1", b"ID2")),
                version=rng.randrange(3),
                position=position,
                ignore_limit=True,
            )
            log.log_write(
                change, position=position, message=MessageInfo(queue=b"Q", persistent=True)
            )
        elif choice < 0.6:
            entry = rng.choice(entries)
            moved = conn.move(
                ById(entry.entry_id),
                rng.randrange(6),
                new_key=rng.choice((None, key(rng))),
                increment_version=rng.random() < 0.5,
                ignore_limit=True,
            )
            assert moved is not None
            log.log_move(moved, record_type=RecordType.READ, from_list=entry.list_number)
        elif choice < 0.7:
            chosen = rng.sample(entries, min(len(entries), 3))
            moves = [BulkMove(e.entry_id, rng.randrange(6), increment_version=True) for e in chosen]
            result = conn.move_entries(moves, ignore_limit=True)
            log.log_bulk_move(moves, result, ignore_limit=True)
        elif choice < 0.85:
            deleted = conn.delete(ById(rng.choice(entries).entry_id))
            assert deleted is not None
            log.log_delete(deleted)
        elif choice < 0.95:
            updated = conn.update(Head(rng.choice(entries).list_number), data=rng.randbytes(300))
            if updated is not None:
                log.log_update(updated, adjunct_changed=False)
        else:
            number = rng.randrange(6)
            seq = conn.set_list_controls(number, limit=rng.randrange(50), increment_authority=True)
            log.log_list_controls(
                seq, number, limit=conn.list_info(number).limit, increment_authority=True
            )


def srds_image(conn: ListStructure, slot: int) -> SrdsImage:
    """An SRDS image of the structure ``conn`` is connected to, as it is now."""
    now = contents(conn)
    rows = [
        EntryRow(NAME, entry, position, recoverable=True)
        for entries in now.lists.values()
        for position, entry in enumerate(entries)
    ]
    seq = conn.statistics().seq
    return SrdsImage(
        pair=NAME,
        slot=slot,
        seq=seq,
        taken_at_us=0,
        master="TEST",
        checkpoint_id=slot,
        structures={
            NAME: StructureImage(NAME, PARAMS, seq, tuple(now.controls.values()), len(rows))
        },
        entries=rows_to_table(rows),
    )
