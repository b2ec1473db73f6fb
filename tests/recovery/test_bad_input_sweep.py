"""A sweep of the recovery entry points with arguments of the wrong kind.

Each used to be accepted as something it is not (``cold_start="no"``, a truthy string,
would start the pair cold; slot ``True`` named a file ``SRDSTrue.parquet``) or to
escape as a raw ``TypeError``.  Now each is ``InvalidRecoveryRequest`` with
``BAD_ARGUMENT`` (3501) naming the argument, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sharedq.recovery import (
    InvalidRecoveryRequest,
    RecoverySettings,
    newest_readable,
    read_srds,
    slot_status,
    srds_path,
)


def refused(tmp_path: Path, call: Callable[[], object], *words: str) -> None:
    with pytest.raises(InvalidRecoveryRequest) as caught:
        call()
    assert caught.value.reason.name == "BAD_ARGUMENT" and caught.value.reason_code == 3501
    for word in words:
        assert word in str(caught.value), (word, str(caught.value))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("option", "value", "words"),
    [
        ("cold_start", "no", "cold_start 'no' must be True or False"),
        ("cold_start", 1, "cold_start 1"),
        ("chknearfull", "off", "chknearfull 'off' must be True or False"),
        ("chknearfull", None, "chknearfull None"),
        ("log_config", 5, "log_config must be a LogConfig, not int"),
        ("log_config", {"staging_bytes": 1}, "not dict"),
    ],
)
def test_settings_refuse_a_switch_or_log_config_of_the_wrong_kind(
    tmp_path: Path, option: str, value: object, words: str
) -> None:
    refused(tmp_path, lambda: RecoverySettings(root=tmp_path / "root", **{option: value}), words)


@pytest.mark.parametrize("slot", [True, "1", 1.0], ids=repr)
def test_an_srds_slot_is_the_int_1_or_2(tmp_path: Path, slot: Any) -> None:
    refused(tmp_path, lambda: srds_path(tmp_path, slot), f"SRDS slot {slot!r} is not 1 or 2")


@pytest.mark.parametrize("where", [None, 5, ["srds"]], ids=repr)
@pytest.mark.parametrize(
    "call",
    [read_srds, newest_readable, slot_status, lambda d: srds_path(d, 1)],
    ids=["read_srds", "newest_readable", "slot_status", "srds_path"],
)
def test_an_srds_path_that_is_no_path_is_refused(
    tmp_path: Path, call: Callable[[Any], object], where: Any
) -> None:
    """Each used to escape as ``TypeError: expected str, bytes or os.PathLike``."""
    refused(tmp_path, lambda: call(where), "must be a path, not", type(where).__name__)


@pytest.mark.parametrize("where", ["{file}", "{file}/root"])
@pytest.mark.parametrize("option", ["root", "dual_log_root"])
def test_settings_refuse_a_root_that_is_a_file_or_under_one(
    tmp_path: Path, option: str, where: str
) -> None:
    """They used to be taken: the server failed only when it made the pair's
    directories there, with ``FileExistsError`` or ``NotADirectoryError``."""
    (tmp_path / "file").write_text("not a root\n")
    path = Path(where.format(file=tmp_path / "file"))
    roots = {"root": tmp_path / "root", option: path}
    with pytest.raises(InvalidRecoveryRequest) as caught:
        RecoverySettings(**roots)
    assert caught.value.reason.name == "BAD_ARGUMENT" and caught.value.reason_code == 3501
    what = "the recovery root" if option == "root" else "dual_log_root"
    assert f"{what} {path}: {tmp_path / 'file'} is not a directory" in str(caught.value)
    assert [p.name for p in tmp_path.iterdir()] == ["file"]
    assert (tmp_path / "file").read_text() == "not a root\n"
