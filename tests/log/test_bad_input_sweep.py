"""A sweep of the log stream's public calls with arguments of the wrong kind.

Each used to escape as a raw ``TypeError``/``AttributeError``/``KeyError``/
``FileExistsError``, or to be taken for something it is not (``True`` for a size, a
truthy string for ``background_offload``, a seq past any record's for a retention
point, which would have deleted every record of the structure from then on).  Now
each is ``InvalidLogRequest`` naming the argument, and the records the stream held are
all still there, with no retention point moved.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sharedq.cf.types import BulkResult
from sharedq.log import InvalidLogRequest, LogConfig, LogFull, LogStream, RecordType
from sharedq.log.records import ChangeOp

from .helpers import MakeStream, eid, key, three_puts


def refused(stream: LogStream, call: Callable[[], object], reason: str, *words: str) -> None:
    """``call`` raises ``InvalidLogRequest`` for ``reason``; the records are all there."""
    points = stream.retention_points()
    with pytest.raises(InvalidLogRequest) as caught:
        call()
    assert caught.value.reason.name == reason, caught.value
    for word in words:
        assert word in str(caught.value), (word, str(caught.value))
    assert [r.data for r in stream.records()] == [b"kept"] * 3
    assert stream.retention_points() == points


@pytest.mark.parametrize(
    ("root", "words"),
    [
        (None, "directory is a path, not None"),
        (5, "directory is a path, not 5"),
        (b"/tmp/log", "directory is a path, not b'/tmp/log'"),
        ("{file}", "is not a directory"),
        ("{file}/log", "is not a directory"),
    ],
)
def test_a_directory_that_is_no_path_or_a_file_is_refused(
    tmp_path: Path, root: Any, words: str
) -> None:
    """A file used to escape as ``FileExistsError``, ``None`` or a number as
    ``TypeError``."""
    (tmp_path / "file").write_text("not a log\n")
    if isinstance(root, str):
        root = root.format(file=tmp_path / "file")
    tried: list[dict[str, Any]] = [{"root": root}]
    if root is not None:  # no copy_root: no copy
        tried.append({"root": tmp_path / "log", "copy_root": root})
    for options in tried:
        with pytest.raises(InvalidLogRequest) as caught:
            LogStream(name="S1.LOG", **options)
        assert caught.value.reason.name == "BAD_ARGUMENT", caught.value
        assert words.replace("directory", "") in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
    assert (tmp_path / "file").read_text() == "not a log\n"


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("background_offload", "no"),
        ("background_offload", None),
        ("background_offload", 1),
        ("high_offload", True),
        ("low_offload", True),
        ("row_group_rows", True),
        ("group_commit_window_us", True),
    ],
)
def test_config_refuses_a_bool_for_a_number_and_a_non_bool_for_a_switch(
    option: str, value: object
) -> None:
    """Each used to be accepted: ``"no"`` switched background offload on."""
    with pytest.raises(InvalidLogRequest) as caught:
        LogConfig(**{option: value})
    assert caught.value.reason.name == "BAD_CONFIG"
    assert option in str(caught.value) and repr(value) in str(caught.value)


@pytest.mark.parametrize(
    ("seq", "words"),
    [
        (2**63, "0 to 2**63 - 1"),
        (10**30, "0 to 2**63 - 1"),
        (True, "True"),
    ],
)
def test_delete_before_refuses_a_seq_no_record_can_carry(
    make_stream: MakeStream, seq: object, words: str
) -> None:
    """``10**30`` used to be taken as the structure's retention point: every record of
    the structure from then on would have been below it, and deleted."""
    stream = three_puts(make_stream)
    refused(stream, lambda: stream.delete_before("S1", seq), "BAD_ARGUMENT", words)  # type: ignore[arg-type]


@pytest.mark.parametrize("structure", [None, 5, ["S1"], "..", "S1\n"], ids=repr)
def test_delete_before_refuses_a_structure_that_is_no_name(
    make_stream: MakeStream, structure: object
) -> None:
    """``None`` or a number used to escape as ``TypeError`` (comparing names), a list
    as ``unhashable``; a malformed name was written into the retention state."""
    stream = three_puts(make_stream)
    refused(stream, lambda: stream.delete_before(structure, 1), "BAD_NAME", "structure name")  # type: ignore[arg-type]


def test_delete_before_zero_for_a_structure_without_a_point(make_stream: MakeStream) -> None:
    """It used to escape as ``KeyError``: no point, and nothing to raise it to."""
    stream = three_puts(make_stream)
    assert stream.delete_before("OTHER", 0).files == ()
    assert [r.data for r in stream.records()] == [b"kept"] * 3


@pytest.mark.parametrize("call", ["high_water", "last_seq"])
@pytest.mark.parametrize("structure", [["S1"], 5, ".."], ids=repr)
def test_high_water_and_last_seq_refuse_a_structure_that_is_no_name(
    make_stream: MakeStream, call: str, structure: object
) -> None:
    """A list used to escape as ``unhashable``; a number read as no structure (0)."""
    stream = three_puts(make_stream)
    refused(stream, lambda: getattr(stream, call)(structure), "BAD_NAME", "structure name")


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("structures", "S1"),
        ("structures", 5),
        ("structures", [5]),
        ("writers", b"QM1"),
        ("writers", 1.5),
        ("from_seq", "1"),
        ("from_seq", math.nan),
        ("from_seq", True),
        ("to_seq", [3]),
        ("until_time_us", "now"),
        ("start", 5),
    ],
    ids=repr,
)
def test_records_refuses_a_selection_of_the_wrong_kind(
    make_stream: MakeStream, option: str, value: object
) -> None:
    """Text bounds and numbers for names escaped as ``TypeError``, ``start=5`` as
    ``AttributeError``; ``nan`` silently selected nothing, and one name was read as
    the characters of names."""
    stream = three_puts(make_stream)
    refused(stream, lambda: list(stream.records(**{option: value})), "BAD_ARGUMENT", option)


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.plan("S1"),
        lambda s: s.check(starts="QM1"),
        lambda s: s.check(starts={"QM1": "1"}),
        lambda s: s.check(needed_seq=[1]),
    ],
    ids=["plan text", "starts text", "starts text lsn", "needed a list"],
)
def test_plan_and_check_refuse_arguments_of_the_wrong_kind(
    make_stream: MakeStream, call: Callable[[LogStream], object]
) -> None:
    """Each used to escape as ``AttributeError`` or ``TypeError`` (or was ignored)."""
    stream = three_puts(make_stream)
    refused(stream, lambda: call(stream), "BAD_ARGUMENT")


@pytest.mark.parametrize(
    ("record_type", "op"),
    [
        ("PUT", ChangeOp.WRITE),
        (None, ChangeOp.WRITE),
        (math.nan, ChangeOp.WRITE),
        ([7], ChangeOp.WRITE),
        (RecordType.PUT, "WRITE"),
        (RecordType.PUT, None),
    ],
    ids=repr,
)
def test_append_refuses_a_type_or_op_that_is_no_number(
    make_stream: MakeStream, record_type: Any, op: Any
) -> None:
    """Each used to escape from ``int()`` as ``ValueError`` or ``TypeError``."""
    stream = three_puts(make_stream)
    with stream.writer("QM2") as w:

        def append() -> object:
            return w.append(
                record_type, op=op, seq=4, entry_id=eid(4), list_number=0, key=key(4),
                data=b"never", commit=True,
            )  # fmt: skip

        refused(stream, append, "BAD_RECORD", "is no number")


@pytest.mark.parametrize("value", ["no", 0, 1, None, [], 1.0], ids=repr)
@pytest.mark.parametrize("helper", ["append", "log_event", "log_bulk_delete"])
def test_a_commit_that_is_no_bool_is_refused(
    make_stream: MakeStream, helper: str, value: Any
) -> None:
    """``commit="no"`` used to sync the record (a truthy string), ``0`` or ``None`` to
    pass for ``False``; either way the record was written."""
    stream = three_puts(make_stream)
    with stream.writer("QM2") as w:

        def append() -> object:
            return w.append(
                RecordType.PUT, op=ChangeOp.WRITE, seq=4, entry_id=eid(4), list_number=0,
                key=key(4), data=b"never", commit=value,
            )  # fmt: skip

        def log_event() -> object:
            return w.log_event(RecordType.SYSTEM_CHECKPOINT, payload={"n": 1}, commit=value)

        def log_bulk_delete() -> object:
            result = BulkResult(requested=1, processed=1, seqs=[4], missing=[])
            return w.log_bulk_delete([eid(4)], result, commit=value)

        calls = {"append": append, "log_event": log_event, "log_bulk_delete": log_bulk_delete}
        call = calls[helper]
        refused(stream, call, "BAD_ARGUMENT", f"commit must be True or False, not {value!r}")
        assert w.last_lsn == 0  # no lsn taken


@pytest.mark.parametrize("value", ["no", 0, 1, None, "strict"], ids=repr)
@pytest.mark.parametrize("call", ["records", "plan", "reader.records", "reader.batches"])
def test_a_strict_that_is_no_bool_is_refused(
    make_stream: MakeStream, call: str, value: Any
) -> None:
    """``strict="no"`` used to read strictly (a truthy string: the first damage raises),
    ``0`` or ``None`` to pass for ``False``."""
    stream = three_puts(make_stream)
    reader = stream.reader()
    calls: dict[str, Callable[[], object]] = {
        "records": lambda: list(stream.records(strict=value)),
        "plan": lambda: stream.plan(strict=value),
        "reader.records": lambda: list(reader.records(strict=value)),
        "reader.batches": lambda: list(reader.batches(strict=value)),
    }
    refused(stream, calls[call], "BAD_ARGUMENT", f"strict must be True or False, not {value!r}")


@pytest.mark.parametrize("handler", ["checkpoint", 5, [print], b"x"], ids=repr)
def test_a_log_full_handler_that_is_not_callable_is_refused(
    make_stream: MakeStream, handler: Any
) -> None:
    """It used to be kept and found out only when the log was full: the append that
    needed room failed with ``LogFull`` caused by ``'str' object is not callable``.
    Now it is refused, and the handler set before is the one that runs."""
    stream = make_stream(max_bytes=8192, staging_bytes=8192, segment_bytes=2048)
    calls: list[object] = []
    stream.set_full_handler(calls.append)  # frees nothing: the log stays full
    with pytest.raises(InvalidLogRequest) as caught:
        stream.set_full_handler(handler)
    assert caught.value.reason.name == "BAD_ARGUMENT"
    assert f"a function or None, not {type(handler).__name__}" in str(caught.value)
    with stream.writer("QM1") as w, pytest.raises(LogFull) as full:
        for seq in range(1, 1000):
            w.append(
                RecordType.PUT, op=ChangeOp.WRITE, seq=seq, entry_id=eid(seq), list_number=0,
                key=key(seq), data=b"r" * 60,
            )  # fmt: skip
    assert len(calls) == 1 and full.value.__cause__ is None
