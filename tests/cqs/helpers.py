"""What the CQS tests look at: a structure's lists as an inspector connection sees them."""

from __future__ import annotations

from sharedq.cf import CouplingFacility
from sharedq.cf.types import HIGHEST_KEY, LOWEST_KEY
from sharedq.cqs import LIST_COUNT, Kind, Layout, Private, make_name
from sharedq.cqs.client import recoverable_contents
from sharedq.cqs.messages import unpack
from sharedq.recovery import StructureContents, contents

TRANA = make_name(1, "TRANA")
TRANB = make_name(1, "TRANB")
SUSPEND_A = make_name(3, "TRANA")
LTERMA = make_name(5, "LTERMA")
MSGQ_LAYOUT = Layout(Kind.MSGQ)


def where(facility: CouplingFacility, structure: str) -> dict[str, list[tuple[bytes, bytes]]]:
    """Every message entry of the structure by the queue it is on: ``"ready"``,
    ``"staging"``, ``"lock"``, ``"move"``, ``"delete"``, with ``(key, body)`` in list
    order (lock entries: ``(key, owner)``)."""
    found: dict[str, list[tuple[bytes, bytes]]] = {}
    with facility.connect(structure, "INSPECT") as conn:
        for number in range(1, LIST_COUNT):
            for entry in conn.scan(number, LOWEST_KEY, HIGHEST_KEY):
                role = _role(number, entry.key)
                if role == "lock":
                    found.setdefault(role, []).append((entry.key, entry.secondary_key or b""))
                else:
                    found.setdefault(role, []).append((entry.key, unpack(entry.data)[1]))
    return found


def _role(number: int, key: bytes) -> str:
    for private in Private:
        if number in private.headers():
            return private.name.lower()
    return "staging" if key[0] in (2, 6) else "ready"


def snapshot(facility: CouplingFacility, structure: str = "MSGQ01") -> StructureContents:
    """The structure's recoverable messages: what structure recovery must bring back."""
    with facility.connect(structure, "AUDITOR") as auditor:
        return recoverable_contents(contents(auditor))
