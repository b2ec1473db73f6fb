"""The profiles file: how it is read, what it refuses to load, and how it decides.

Every file is a real file on disk, written with the mode the test names; a refused
file is an error with a reason code and the file's name, and nothing is loaded.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest

from sharedq.security import (
    ALLOW_ALL,
    CQSSTR,
    MQADMIN,
    MQQUEUE,
    Access,
    FileProfiles,
    InvalidSecurityRequest,
    Outcome,
    ProfilesUnusable,
    Security,
    SecurityReason,
    SecuritySettings,
    Verdict,
    os_user,
)

#: The seeds' Figure 52, and an MQ setup around it.
PROFILES = """
[groups]
IMSGRP = ["ims1", "ims2"]
MQAPPS = ["alice", "bob"]
MQADMINS = ["carol"]

# RDEFINE FACILITY CQSSTR.STRMSGQ01 UACC(NONE)
# PERMIT CQSSTR.STRMSGQ01 CLASS(FACILITY) ID(IMSGRP) ACCESS(UPDATE)
[CQSSTR."CQSSTR.STRMSGQ01"]
uacc = "NONE"
permit = { IMSGRP = "UPDATE", carol = "ALTER" }

[MQQUEUE."QSG1.**"]
permit = { MQADMINS = "ALTER" }

[MQQUEUE."QSG1.ORDERS.*"]
uacc = "READ"
permit = { MQAPPS = "update", bob = "NONE" }

[MQQUEUE."QSG1.*.IN"]
permit = { alice = "READ" }

[MQQUEUE."QSG1.PAY*"]
permit = { dave = "UPDATE" }

[MQQUEUE."QSG1.ORDERS.EU"]
permit = { MQAPPS = "READ" }

[MQADMIN."QSG1.**"]
permit = { MQADMINS = "CONTROL" }
"""


def write(tmp_path: Path, text: str, mode: int = 0o600, name: str = "profiles.toml") -> Path:
    path = tmp_path / name
    path.write_text(dedent(text))
    path.chmod(mode)
    return path


@pytest.fixture
def profiles(tmp_path: Path) -> FileProfiles:
    return FileProfiles(write(tmp_path, PROFILES))


def outcome(profiles: FileProfiles, user: str, cls: str, resource: str, access: Access) -> str:
    verdict = profiles.check(user, cls, resource, access)
    return f"{verdict.outcome.value} {verdict.profile} {verdict.held.name}"


def test_the_seeds_example_lets_the_ims_group_connect_and_no_one_else(
    profiles: FileProfiles,
) -> None:
    resource = "CQSSTR.STRMSGQ01"
    assert outcome(profiles, "ims1", "CQSSTR", resource, Access.UPDATE) == (
        f"allowed {resource} UPDATE"
    )
    assert outcome(profiles, "ims2", "CQSSTR", resource, Access.ALTER) == (
        f"refused {resource} UPDATE"
    )
    assert outcome(profiles, "mallory", "CQSSTR", resource, Access.READ) == (
        f"refused {resource} NONE"
    )
    assert outcome(profiles, "carol", "CQSSTR", resource, Access.ALTER) == (
        f"allowed {resource} ALTER"
    )
    # No profile: the structure is not protected (the class decides what that means).
    assert profiles.check("mallory", "CQSSTR", "CQSSTR.OTHER", Access.ALTER) == Verdict(
        Outcome.NOT_PROTECTED
    )


def test_the_most_specific_profile_decides_and_a_users_own_entry_beats_their_groups(
    profiles: FileProfiles,
) -> None:
    check = "MQQUEUE"
    # discrete beats every generic one
    assert outcome(profiles, "alice", check, "QSG1.ORDERS.EU", Access.UPDATE) == (
        "refused QSG1.ORDERS.EU READ"
    )
    # QSG1.ORDERS.* beats QSG1.*.IN (a literal before a *, reading from the left)
    assert outcome(profiles, "alice", check, "QSG1.ORDERS.IN", Access.UPDATE) == (
        "allowed QSG1.ORDERS.* UPDATE"
    )
    assert outcome(profiles, "alice", check, "QSG1.RETURNS.IN", Access.UPDATE) == (
        "refused QSG1.*.IN READ"
    )
    # bob's own entry (NONE) beats his group's UPDATE; others get the UACC
    assert outcome(profiles, "bob", check, "QSG1.ORDERS.US", Access.READ) == (
        "refused QSG1.ORDERS.* NONE"
    )
    assert outcome(profiles, "erin", check, "QSG1.ORDERS.US", Access.READ) == (
        "allowed QSG1.ORDERS.* READ"
    )
    # * stays within one qualifier; ** spans any number, none included
    assert outcome(profiles, "dave", check, "QSG1.PAYROLL", Access.UPDATE) == (
        "allowed QSG1.PAY* UPDATE"
    )
    assert outcome(profiles, "dave", check, "QSG1.PAYROLL.X", Access.UPDATE) == (
        "refused QSG1.** NONE"
    )
    assert outcome(profiles, "carol", check, "QSG1", Access.ALTER) == "allowed QSG1.** ALTER"
    assert outcome(profiles, "carol", check, "QSG1.A.B.C", Access.ALTER) == (
        "allowed QSG1.** ALTER"
    )
    assert profiles.check("carol", check, "QSG2.ORDERS", Access.READ).outcome is (
        Outcome.NOT_PROTECTED
    )


@pytest.mark.parametrize(
    ("profile", "covered", "not_covered"),
    [
        ("**", ["A", "A.B.C"], []),
        ("A.**", ["A", "A.B", "A.B.C", "A..B"], ["AB", "B.A"]),  # (a queue may be ".B")
        ("A..B", ["A..B"], ["A.B", "A.X.B"]),
        ("**.Z", ["Z", "A.Z", "A.B.Z"], ["AZ", "Z.A"]),
        ("A.**.Z", ["A.Z", "A.B.Z", "A.B.C.Z"], ["A.BZ", "AZ", "A.Z.B"]),
        ("A.*", ["A.B", "A.BC"], ["A", "A.B.C"]),
        ("A*.B", ["A.B", "AX.B"], ["A.X.B", "XA.B"]),
        ("*.*", ["A.B"], ["A", "A.B.C"]),
    ],
)
def test_generic_names_match_as_racf_generic_profiles(
    tmp_path: Path, profile: str, covered: list[str], not_covered: list[str]
) -> None:
    found = FileProfiles(write(tmp_path, f'[MQQUEUE."{profile}"]\nuacc = "READ"\n'))
    assert found.profile_for("MQQUEUE", profile) is not None
    for name in covered:
        assert found.profile_for("MQQUEUE", name) is not None, name
    for name in not_covered:
        assert found.profile_for("MQQUEUE", name) is None, name


def test_security_checks_names_in_order_and_applies_the_class_rule_when_none_is_covered(
    profiles: FileProfiles,
) -> None:
    alice = Security(profiles, "alice")
    # The first name a profile covers decides (MQ: the manager's, then the group's).
    decision = alice.decide(MQQUEUE, ["QM1.ORDERS.US", "QSG1.ORDERS.US"], Access.UPDATE)
    assert decision.allowed and decision.resource == "QSG1.ORDERS.US"
    assert decision.verdict.profile == "QSG1.ORDERS.*"
    # No profile covers either: MQQUEUE refuses, CQSSTR allows (the seeds).
    refused = alice.decide(MQQUEUE, ["QM1.X", "QSG2.X"], Access.READ)
    assert not refused.allowed and refused.verdict.outcome is Outcome.NOT_PROTECTED
    assert "QM1.X or QSG2.X" in refused.explain() and "no profile protects them" in (
        refused.explain()
    )
    assert alice.decide(CQSSTR, ["CQSSTR.OTHER"], Access.ALTER).allowed
    assert not alice.decide(MQADMIN, ["QM1.DECLARE.QM2"], Access.CONTROL).allowed
    # A refusal names the user, the class, the name, the access and the profile.
    text = alice.decide(MQQUEUE, ["QSG1.ORDERS.EU"], Access.UPDATE).explain()
    assert text == (
        "user alice needs UPDATE access to MQQUEUE QSG1.ORDERS.EU; "
        "profile QSG1.ORDERS.EU gives alice READ"
    )


def test_allow_all_is_security_off() -> None:
    off = Security(ALLOW_ALL, "anyone")
    assert off.off
    assert off.decide(MQADMIN, ["X.DECLARE.Y"], Access.ALTER).allowed
    assert repr(ALLOW_ALL) == "ALLOW_ALL"


def test_settings_load_the_file_and_default_to_the_os_user(tmp_path: Path) -> None:
    path = write(tmp_path, PROFILES)
    settings = SecuritySettings(profiles=path)
    assert isinstance(settings.authorizer, FileProfiles)
    assert settings.user == os_user() and settings.security().user == os_user()
    assert SecuritySettings(str(path), user="alice", qsg="QSG1").security().user == "alice"
    # Any Authorizer will do.
    assert SecuritySettings(ALLOW_ALL).authorizer is ALLOW_ALL
    not_profiles: Any = 42
    with pytest.raises(InvalidSecurityRequest) as info:
        SecuritySettings(profiles=not_profiles)
    assert info.value.reason is SecurityReason.BAD_ARGUMENT
    with pytest.raises(InvalidSecurityRequest):
        SecuritySettings(path, user="")


def test_refresh_reads_the_file_again_and_keeps_the_old_profiles_on_an_error(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, '[MQQUEUE."Q.A"]\nuacc = "READ"\n')
    found = FileProfiles(path)
    assert found.check("x", "MQQUEUE", "Q.A", Access.UPDATE).outcome is Outcome.REFUSED
    write(tmp_path, '[MQQUEUE."Q.A"]\nuacc = "UPDATE"\n')
    found.refresh()
    assert found.check("x", "MQQUEUE", "Q.A", Access.UPDATE).outcome is Outcome.ALLOWED
    write(tmp_path, '[MQQUEUE."Q.A"]\nuacc = "WRITE"\n')
    with pytest.raises(InvalidSecurityRequest):
        found.refresh()
    assert found.check("x", "MQQUEUE", "Q.A", Access.UPDATE).outcome is Outcome.ALLOWED


# -- files it refuses ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[MQQUEUE."Q.A"\nuacc = "READ"\n', "not valid TOML"),
        ('[MQQUEUE."Q.A"]\nuacc = "WRITE"\n', "unknown access level 'WRITE'"),
        ('[MQQUEUE."Q.A"]\npermit = { alice = "ALL" }\n', "permit.alice: unknown access level"),
        ('[MQQUEUEX."Q.A"]\nuacc = "READ"\n', "unknown resource class"),
        ('[MQQUEUE."Q.A"]\nuac = "READ"\n', "unknown key 'uac'"),
        ('[MQQUEUE.""]\nuacc = "READ"\n', "an empty profile name"),
        ('[MQQUEUE."Q.A**"]\nuacc = "READ"\n', "whole qualifier"),
        ('[MQQUEUE."Q A"]\nuacc = "READ"\n', "bad character"),
        ('[MQQUEUE."Q.A"]\nuacc = 3\n', "unknown access level 3"),
        ('[groups]\nG = "alice"\n', "a list of user names"),
        ('[groups]\nG = ["H"]\nH = ["alice"]\n', "H is both a group and a member"),
        ('MQQUEUE = "everything"\n', "a table of profiles"),
    ],
)
def test_a_file_that_is_not_valid_is_refused_naming_the_file_and_the_fault(
    tmp_path: Path, text: str, says: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InvalidSecurityRequest) as info:
        FileProfiles(path)
    error = info.value
    assert error.reason is SecurityReason.BAD_PROFILES and error.reason_code == 3602
    assert str(path) in str(error) and says in str(error), str(error)
    assert isinstance(error, ValueError)


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666, 0o660])
def test_a_file_its_group_or_others_may_write_is_refused(tmp_path: Path, mode: int) -> None:
    path = write(tmp_path, PROFILES, mode)
    with pytest.raises(ProfilesUnusable) as info:
        FileProfiles(path)
    error = info.value
    assert error.reason is SecurityReason.UNSAFE_PROFILES and error.reason_code == 3603
    assert f"mode {mode:04o}" in str(error) and f"chmod go-w {path}" in str(error)
    # Readable by all is fine: the operator owns it, the servers read it.
    path.chmod(0o644)
    FileProfiles(path)


def test_a_missing_file_or_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ProfilesUnusable) as info:
        FileProfiles(tmp_path / "nope.toml")
    assert info.value.reason is SecurityReason.PROFILES_UNREADABLE
    assert "nope.toml" in str(info.value)
    directory = tmp_path / "dir.toml"
    directory.mkdir(mode=0o700)
    with pytest.raises(ProfilesUnusable) as info:
        FileProfiles(directory)
    assert info.value.reason is SecurityReason.UNSAFE_PROFILES
    assert "not a regular file" in str(info.value)


def test_errors_survive_pickling_with_their_context(tmp_path: Path) -> None:
    path = write(tmp_path, PROFILES, 0o666)
    with pytest.raises(ProfilesUnusable) as info:
        FileProfiles(path)
    copy = pickle.loads(pickle.dumps(info.value))
    assert copy.reason is SecurityReason.UNSAFE_PROFILES and copy.context == {"path": str(path)}


def test_the_check_reads_what_was_loaded_not_the_file_now(tmp_path: Path) -> None:
    """A file changed (or made unsafe) after loading changes nothing until ``refresh``."""
    path = write(tmp_path, '[MQQUEUE."Q.A"]\nuacc = "READ"\n')
    found = FileProfiles(path)
    path.write_text('[MQQUEUE."Q.A"]\nuacc = "ALTER"\n')
    os.chmod(path, 0o666)
    assert found.check("x", "MQQUEUE", "Q.A", Access.UPDATE).outcome is Outcome.REFUSED
    with pytest.raises(ProfilesUnusable):
        found.refresh()
    assert found.check("x", "MQQUEUE", "Q.A", Access.UPDATE).outcome is Outcome.REFUSED
