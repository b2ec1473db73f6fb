"""A new entry's checks on Redis take no command for the id when the write succeeds
(``HSETNX`` is both the check and the first write), yet a write that fails for two
reasons reports what the memory backend reports: the id in use first, then locks,
authority, the list's limit and the structure's room.  Each case runs on both
backends, so a Redis function that checked in another order would fail here."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sharedq.cf import ById, CFError, ListStructure, StructureParams
from tests.conftest import facility_on

BACKENDS = ["memory", "redis"]


def key(n: int) -> bytes:
    return n.to_bytes(16, "big")


def eid(n: int) -> bytes:
    return b"\x07" + n.to_bytes(11, "big")


def params() -> StructureParams:
    return StructureParams.for_capacity("NEWIDS", list_count=4, entries=3, elements=12)


def reason_of(call: Callable[[], object]) -> str:
    with pytest.raises(CFError) as info:
        call()
    return info.value.reason_name


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rekey", [False, True], ids=["write", "write_and_rekey"])
def test_an_id_in_use_is_reported_before_every_other_failure(
    backend: str, rekey: bool, request: pytest.FixtureRequest
) -> None:
    with facility_on(backend, request, params()) as fac:
        owner: ListStructure = fac.connect("NEWIDS", "OWNER")
        other: ListStructure = fac.connect("NEWIDS", "OTHER")

        def write(conn: ListStructure, n: int, entry_id: bytes, **kw: object) -> object:
            if rekey:
                return conn.write_and_rekey(
                    0, key(n), b"d", entry_id=entry_id, new_key=key(n + 100), **kw
                )
            return conn.write(0, key(n), b"d", entry_id=entry_id, **kw)

        write(owner, 1, eid(1))
        other.lock(5)
        # A lock held by another user, or an authority not as expected: the id first.
        assert reason_of(lambda: write(owner, 2, eid(1), not_locked=[5])) == "ENTRY_EXISTS"
        assert reason_of(lambda: write(owner, 2, eid(2), not_locked=[5])) == "LOCK_HELD"
        assert reason_of(lambda: write(owner, 2, eid(1), expect_authority=9)) == "ENTRY_EXISTS"
        assert reason_of(lambda: write(owner, 2, eid(2), expect_authority=9)) == (
            "AUTHORITY_MISMATCH"
        )
        # The list at its limit.
        owner.set_list_controls(0, limit=1)
        assert reason_of(lambda: write(owner, 2, eid(1))) == "ENTRY_EXISTS"
        assert reason_of(lambda: write(owner, 2, eid(2))) == "LIST_FULL"
        owner.set_list_controls(0, limit=None)
        # The structure full (three entries).
        write(owner, 2, eid(2))
        write(owner, 3, eid(3))
        assert reason_of(lambda: write(owner, 4, eid(3))) == "ENTRY_EXISTS"
        assert reason_of(lambda: write(owner, 4, eid(4))) == "STRUCTURE_FULL"
        # Nothing of the failed writes is there; the id checked last is still free.
        assert owner.list_info(0).entries == 3
        assert reason_of(lambda: write(owner, 5, eid(1))) == "ENTRY_EXISTS"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_generated_id_a_caller_chose_before_is_refused_and_nothing_written(
    backend: str, request: pytest.FixtureRequest
) -> None:
    with facility_on(backend, request, params()) as fac:
        conn: ListStructure = fac.connect("NEWIDS", "OWNER")
        first = conn.write(0, key(1), b"a")
        # The next generated id is the next seq's, as 12 big-endian bytes.
        taken = (first.seq + 2).to_bytes(12, "big")
        conn.write(1, key(2), b"b", entry_id=taken)
        assert reason_of(lambda: conn.write(0, key(3), b"c")) == "ENTRY_EXISTS"
        assert conn.list_info(0).entries == 1
        assert conn.list_info(1).entries == 1
        # A failed write takes no seq: once the id is free, the same write gets it.
        conn.delete(ById(taken))
        assert conn.write(0, key(3), b"c").entry.entry_id == (first.seq + 3).to_bytes(12, "big")
