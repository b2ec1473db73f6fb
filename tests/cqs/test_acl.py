"""On a shared Redis the fence is the ACL: a CQS whose Redis user may not touch a
structure's keys is refused at CQSCONN with the same NOT_AUTHORIZED as a profile's.

The users are those of docs/redis.md's "ACL and TLS" section: its administrator as
written, and its group user given the keys of this test's MSGQ structure instead.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from sharedq.cf import open_facility
from sharedq.cqs import CQS, CQSReason, NotAuthorized, structure_params
from sharedq.testing.redis_server import RedisServer

from .helpers import TRANA

DOCS = Path(__file__).resolve().parents[2] / "docs" / "redis.md"
OWN, OTHER = "IMSMSGQ01", "IMSMSGQ02"


def acl_lines() -> list[list[str]]:
    """The document's ``ACL SETUSER`` lines, the group user's keys made ``OWN``'s."""
    section = DOCS.read_text().split("## ACL and TLS", 1)[1].split("\n## ", 1)[0]
    lines = []
    for line in section.splitlines():
        if line.startswith("ACL SETUSER "):
            words = [w for w in shlex.split(line) if not w.startswith("~sq:{QSG1")]
            if words[2] == "qsg1" and "reset" in words:
                words.append(f"~sq:{{{OWN}}}:*")
            lines.append(words)
    return lines


def test_a_redis_user_without_the_structures_keys_is_not_authorized(
    redis_servers: Callable[..., RedisServer],
) -> None:
    server = redis_servers()
    for words in acl_lines():
        assert server.command(*words) == b"OK", words
    base = f"127.0.0.1:{server.port}/0"
    with open_facility(f"redis://sqadmin:admin-secret@{base}") as admin:
        for name in (OWN, OTHER):
            admin.create(structure_params(name, messages=100))
    with open_facility(f"redis://qsg1:qsg1-secret@{base}") as facility:
        with CQS(facility, "CQSIMSA", system="IMSA", msgq=OWN) as cqs:
            cqs.register(TRANA)
            cqs.put(TRANA, [b"allowed", b" here"])
            message = cqs.read(TRANA)
            assert message is not None and message.body == b"allowed here"
        with pytest.raises(NotAuthorized) as refused:
            CQS(facility, "CQSIMSA", system="IMSA", msgq=OTHER).connect()
        assert refused.value.reason is CQSReason.NOT_AUTHORIZED
        assert "no permissions to access one of the keys" in str(refused.value)
