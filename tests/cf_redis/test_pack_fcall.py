"""A request's packed bytes: ``pack_fcall`` against hiredis' ``pack_command``."""

from __future__ import annotations

from typing import Any

import hiredis
import pytest

from sharedq.cf.redis.client import pack_fcall

SIZES = (0, 1, 34, 100, 511, 512, 513, 4096, 70_000)


@pytest.mark.parametrize("count", range(7))
def test_bytes_arguments_pack_as_pack_command_packs_them(count: int) -> None:
    for first in SIZES:
        args = [
            bytes([65 + i]) * (first if i == 0 else SIZES[i % len(SIZES)]) for i in range(count)
        ]
        for key in ("sharedq:{s}:m", "sharedq:{other}:m"):
            expected = hiredis.pack_command(("FCALL", "sq_put", 1, key, *args))
            assert pack_fcall("sq_put", key, args) == expected
            assert pack_fcall("sq_put", key, args) == expected  # the head kept


def test_other_arguments_are_packed_by_pack_command() -> None:
    args: list[Any] = [b"header", 7, "é", 2.5, b""]
    expected = hiredis.pack_command(("FCALL", "sq_move", 1, "k", *args))
    assert pack_fcall("sq_move", "k", args) == expected


def test_heads_table_starts_afresh_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    from sharedq.cf.redis import client

    heads: dict[tuple[str, str, int], bytes] = {}
    monkeypatch.setattr(client, "_FCALL_HEADS", heads)
    monkeypatch.setattr(client, "_FCALL_HEADS_KEPT", 3)
    for n in range(10):
        key = f"sharedq:{{s{n}}}:m"
        assert pack_fcall("f", key, [b"x"]) == hiredis.pack_command(("FCALL", "f", 1, key, b"x"))
        assert 1 <= len(heads) <= 3
