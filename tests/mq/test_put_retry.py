"""A put the structure refuses as a duplicate entry id is made again with a new id.

A generated message id is kept in the entry's adjunct as "the entry id's" (the adjunct
holds only the manager name's four characters): a put retried with a new entry id must
write the adjunct for that id, or the message id read back from the adjunct (a get by
both ids, recovery) would not be the message's.
"""

from __future__ import annotations

import pytest

from sharedq.cf import CFReason, EntryExists
from sharedq.mq import IndexType
from tests.mq.conftest import APP, MakeManager
from tests.mq.hook_at import ANY, At


def _refuse() -> None:
    raise EntryExists(CFReason.ENTRY_EXISTS, "the entry id is in use (simulated)")


@pytest.mark.parametrize("in_unit", [False, True])
def test_put_retried_after_entry_exists_keeps_its_msg_id(
    make_qm: MakeManager, in_unit: bool
) -> None:
    hook = At()
    qm = make_qm(1, faults=hook)
    qm.define_queue("Q", structure=APP, index=IndexType.MSG_ID)
    queue = qm.open("Q")
    hook.arm(ANY, APP, True, _refuse)  # the put's first request is refused
    if in_unit:
        with qm.unit_of_work() as uow:
            put = queue.put(b"body", uow=uow, correl_id=b"C1")
    else:
        put = queue.put(b"body", correl_id=b"C1")
    assert hook.action is None  # the refusal happened
    # Both ids: the other id is checked against the adjunct's.
    got = queue.get(msg_id=put.msg_id, correl_id=put.correl_id)
    assert got.msg_id == put.msg_id
    assert got.body == b"body"
