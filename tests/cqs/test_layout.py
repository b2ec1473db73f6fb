"""The structure layout: 192 headers, the private split, the stable header rule."""

from __future__ import annotations

import zlib

from sharedq.cqs import HEADERS_PER_TYPE, LIST_COUNT, Kind, Layout, Private, make_name
from sharedq.cqs.layout import CLIENT_HEADERS, PRIVATE_HEADERS


def test_71_private_and_121_client_headers() -> None:
    assert PRIVATE_HEADERS + CLIENT_HEADERS == LIST_COUNT == 192
    covered = sorted(n for p in Private for n in p.headers())
    assert covered == list(range(PRIVATE_HEADERS))
    assert CLIENT_HEADERS == 11 * HEADERS_PER_TYPE
    msgq, emhq = Layout(Kind.MSGQ), Layout(Kind.EMHQ)
    assert len(msgq.client_headers()) == 99 and len(emhq.client_headers()) == 22
    assert msgq.client_headers().stop <= LIST_COUNT


def test_the_header_rule_is_crc32_mod_11_within_the_types_eleven() -> None:
    name = make_name(5, "LTERMA")
    expected = PRIVATE_HEADERS + 4 * 11 + zlib.crc32(name) % 11
    assert Layout(Kind.MSGQ).header(name) == expected
    assert Layout(Kind.EMHQ).header(name) == PRIVATE_HEADERS + 11 + zlib.crc32(name) % 11
    # Stable: the value is fixed here, so a change of rule breaks this test.
    assert (
        Layout(Kind.MSGQ).header(make_name(1, "TRANA"))
        == 71 + zlib.crc32(b"\x01TRANA          ") % 11
    )
    assert Private.LOCK.header(name) == 23 + zlib.crc32(name) % 24


def test_every_type_gets_its_own_eleven() -> None:
    layout = Layout(Kind.MSGQ)
    for index, qtype in enumerate(Kind.MSGQ.types):
        for resource in ("A", "TRANB", "ZZZZZZZZ"):
            header = layout.header(make_name(qtype, resource))
            low = PRIVATE_HEADERS + index * HEADERS_PER_TYPE
            assert low <= header < low + HEADERS_PER_TYPE
