"""docs/security.md says what the code does: its example prints what the page shows,
its profiles file decides as the page says, and its ACL lines are docs/redis.md's
(which ``tests/cf_redis/test_acl.py`` runs on a server)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sharedq.security import RESOURCE_CLASSES, Access, FileProfiles, Security

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGE = (DOCS / "security.md").read_text()


def blocks(language: str, *, excerpt: bool) -> list[str]:
    """The page's code blocks in ``language``, marked ``<!-- excerpt -->`` or not."""
    found = re.findall(rf"(<!-- excerpt -->\n)?```{language}\n(.*?)```", PAGE, flags=re.S)
    return [text for mark, text in found if bool(mark) == excerpt]


def test_the_example_prints_what_the_page_shows(capsys: pytest.CaptureFixture[str]) -> None:
    (example,) = blocks("python", excerpt=False)
    exec(compile(example, "<security.md>", "exec"), {})
    shown = re.search(r"prints\n\n<!-- excerpt -->\n```\n(.*?)```", PAGE.split(example)[1], re.S)
    assert shown is not None and capsys.readouterr().out == shown.group(1)


def test_the_profiles_file_decides_as_the_page_says(tmp_path: Path) -> None:
    (text,) = blocks("toml", excerpt=True)
    path = tmp_path / "profiles.toml"
    path.write_text(text)
    path.chmod(0o600)
    profiles = FileProfiles(path)

    def may(user: str, cls: str, resource: str, access: Access) -> bool:
        decision = Security(profiles, user).decide(RESOURCE_CLASSES[cls], [resource], access)
        return decision.allowed

    assert may("mallory", "CQSSTR", "CQSSTR.QSGADMIN", Access.UPDATE)
    assert not may("alice", "CQSSTR", "CQSSTR.QSGADMIN", Access.ALTER)
    assert may("carol", "CQSSTR", "CQSSTR.QSGADMIN", Access.ALTER)
    assert may("alice", "MQQUEUE", "QSGADMIN.ORDERS", Access.UPDATE)
    assert not may("alice", "MQQUEUE", "QSGADMIN.ORDERS", Access.ALTER)
    assert may("carol", "MQQUEUE", "QSGADMIN.NEW", Access.ALTER)
    assert not may("bob", "MQQUEUE", "QSGADMIN.AUDIT.EU", Access.UPDATE)  # his own entry
    assert may("bob", "MQQUEUE", "QSGADMIN.AUDIT.EU", Access.READ)
    assert may("alice", "MQQUEUE", "QSGADMIN.AUDIT.EU", Access.UPDATE)
    assert not may("mallory", "MQQUEUE", "QSGADMIN.ORDERS", Access.READ)
    assert not may("alice", "MQQUEUE", "OTHER.ORDERS", Access.READ)  # not protected
    assert may("carol", "MQADMIN", "QSGADMIN.DECLARE.QM2", Access.CONTROL)
    assert not may("alice", "MQADMIN", "QSGADMIN.COLDQ", Access.READ)


def test_the_acl_lines_are_those_of_redis_md() -> None:
    here = [line for line in PAGE.splitlines() if line.startswith("ACL SETUSER")]
    there = (DOCS / "redis.md").read_text().splitlines()
    assert here and all(line in there for line in here)
