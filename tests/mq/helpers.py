"""Helpers for looking at what a queue's lists hold, straight from the structure."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sharedq.cf import CouplingFacility
from sharedq.mq import Message, MQError, NoMessageAvailable, QueueManager, keys
from sharedq.mq.messages import Decoded


def _body(data: bytes) -> bytes:
    return data[Decoded(data).body_offset :]


def put_list(qm: QueueManager, queue: str) -> list[tuple[str, bytes]]:
    """The put list, head to tail: ("C", body) committed, ("U", body) uncommitted."""
    view = qm.view()
    where = view.queue(queue)
    found = []
    for entry in view.entries(where.structure, where.put_list):
        if entry.key == keys.LHQC_KEY:
            continue
        found.append(("C" if keys.is_committed(entry.key) else "U", _body(entry.data)))
    return found


def committed(qm: QueueManager, queue: str) -> list[bytes]:
    return [body for kind, body in put_list(qm, queue) if kind == "C"]


def versions(qm: QueueManager, queue: str) -> dict[bytes, int]:
    """Body -> entry version, for the committed messages of a put list."""
    view = qm.view()
    where = view.queue(queue)
    return {
        _body(e.data): e.version
        for e in view.entries(
            where.structure, where.put_list, keys.COMMITTED_LOW, keys.COMMITTED_HIGH
        )
    }


def get_list(qm: QueueManager, structure: str, of: QueueManager | None = None) -> list[bytes]:
    """The bodies on a manager's get list (``of``'s, read through ``qm``)."""
    view = qm.view()
    lists = view.manager_lists(structure, None if of is None else of.qm_id)
    return [_body(e.data) for e in view.entries(structure, lists.get_list)]


def expiry_list(qm: QueueManager, structure: str) -> list[bytes]:
    view = qm.view()
    return [
        _body(e.data) for e in view.entries(structure, view.manager_lists(structure).expiry_list)
    ]


def descriptor_count(qm: QueueManager) -> int:
    return len(qm.view().descriptors())


def drain(qm: QueueManager, queue: str) -> list[Message]:
    """Get every message a queue holds now, out of syncpoint."""
    q = qm.open(queue)
    got = []
    while True:
        try:
            got.append(q.get())
        except NoMessageAvailable:
            return got


def structure_seqs(facility: CouplingFacility) -> dict[str, int]:
    """Each structure's seq, read through a connection of its own (a connect and a
    disconnect take two numbers per structure): whether a refused request changed any."""
    found = {}
    for name in facility.structure_names():
        with facility.connect(name, "WATCHER") as watcher:
            found[name] = watcher.statistics().seq
    return found


def refused_unchanged(
    facility: CouplingFacility,
    call: Callable[[], object],
    cls: type[MQError],
    code: int,
    *words: str,
) -> MQError:
    """``call`` raises ``cls`` with ``code``, naming ``words``, and no structure changed
    (each structure's seq moved only by the two numbers reading it takes)."""
    before = structure_seqs(facility)
    with pytest.raises(cls) as caught:
        call()
    after = structure_seqs(facility)
    assert {n: after[n] - before[n] for n in after} == {n: 2 for n in after}
    error = caught.value
    assert error.reason_code == code, error
    for word in words:
        assert word in str(error), (word, str(error))
    return error
