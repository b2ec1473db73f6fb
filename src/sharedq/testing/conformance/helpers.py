"""Small builders shared by the list-structure checks (and by sharedq's own tests)."""

from __future__ import annotations

from sharedq.cf import ListStructure


def key(n: int | str) -> bytes:
    """A 16-byte key: an int big-endian, or text left-aligned and zero-padded."""
    if isinstance(n, int):
        return n.to_bytes(16, "big")
    raw = n.encode()
    assert len(raw) <= 16
    return raw.ljust(16, b"\x00")


def eid(n: int) -> bytes:
    """A program-assigned 12-byte entry id (first byte non-zero, as the docs advise)."""
    return b"\x01" + n.to_bytes(11, "big")


def keys_on(struct: ListStructure, list_number: int) -> list[bytes]:
    return [entry.key for entry in struct.scan(list_number, with_data=False)]


def data_on(struct: ListStructure, list_number: int) -> list[bytes]:
    return [entry.data for entry in struct.scan(list_number)]
