"""CQSCONN's authorization: UPDATE on ``CQSSTR.<primary>``, the pair as one unit."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sharedq.cf import CouplingFacility
from sharedq.cqs import CQSReason, NotAuthorized, StructurePair
from sharedq.security import SecuritySettings

from .conftest import EMHQ, MSGQ, MakeCQS
from .helpers import TRANA, where

PROFILES = """
[groups]
IMSGRP = ["imsa", "imsb"]

[CQSSTR."CQSSTR.MSGQ01"]
uacc = "NONE"
permit = { IMSGRP = "UPDATE", auditor = "READ" }
"""


@pytest.fixture
def profiles(tmp_path: Path) -> Path:
    path = tmp_path / "profiles.toml"
    path.write_text(PROFILES)
    path.chmod(0o600)
    return path


def test_a_user_with_update_connects(make_cqs: MakeCQS, profiles: Path) -> None:
    cqs = make_cqs("IMSA", security=SecuritySettings(profiles, user="imsa"))
    cqs.put(TRANA, b"allowed")
    assert [m.body for m in cqs.browse(TRANA)] == [b"allowed"]


@pytest.mark.parametrize("user", ["auditor", "mallory"])
def test_less_than_update_is_refused_before_anything_is_touched(
    facility: CouplingFacility,
    make_cqs: MakeCQS,
    profiles: Path,
    user: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cqs = make_cqs("IMSA", security=SecuritySettings(profiles, user=user), connect=False)
    with caplog.at_level(logging.WARNING, logger="sharedq.cqs"), pytest.raises(NotAuthorized) as no:
        cqs.connect()
    assert no.value.reason is CQSReason.NOT_AUTHORIZED
    assert no.value.context == {"user": user, "profile": "CQSSTR.MSGQ01"}
    assert "CQSSTR.MSGQ01" in caplog.text
    with facility.connect(MSGQ, "INSPECT") as conn:
        assert [u.name for u in conn.users()] == ["INSPECT"]  # it never connected
    assert where(facility, MSGQ) == {}


def test_no_profile_means_unprotected(make_cqs: MakeCQS, profiles: Path) -> None:
    # EMHQ01 has no profile: anyone may connect to it.
    cqs = make_cqs(
        "IMSA",
        msgq=StructurePair(MSGQ),
        emhq=EMHQ,
        security=SecuritySettings(profiles, user="imsa"),
    )
    assert cqs.structures == [MSGQ, EMHQ]


def test_the_pair_is_one_unit_the_primarys_profile_covers_the_overflow(
    make_cqs: MakeCQS, profiles: Path
) -> None:
    pair = StructurePair(MSGQ, overflow="MSGQOFLW01")
    assert pair.profile == "CQSSTR.MSGQ01"
    with pytest.raises(NotAuthorized):
        make_cqs("IMSA", msgq=pair, security=SecuritySettings(profiles, user="mallory"))
    make_cqs("IMSB", msgq=pair, security=SecuritySettings(profiles, user="imsb"))
