"""A sweep of the queue manager's public calls with arguments of the wrong kind.

Each used to escape as a raw ``TypeError`` or ``AttributeError``, or to be taken for
something it is not (a truthy string for ``True``, the letters of a name for a list
of names, a list for a description).  Now each is the manager's own error naming the
argument, and nothing stored changed: the structures' sequence numbers (every change
takes one) and the queue's messages are as they were.  The memory backend: the checks
come before any structure is reached.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from sharedq.cf import CouplingFacility, InvalidRequest
from sharedq.mq import (
    InvalidArgument,
    MQError,
    QueueManager,
    UnknownQueue,
    structure_params,
)
from tests.mq.conftest import ADMIN, APP, MakeManager
from tests.mq.helpers import refused_unchanged


@pytest.fixture
def backend() -> str:
    return "memory"


@pytest.fixture
def kept(qm: QueueManager) -> Any:
    """The queue ``Q`` in ``APP``, holding one message that must stay."""
    qm.define_queue("Q", structure=APP)
    queue = qm.open("Q")
    queue.put(b"kept")
    return queue


def _bodies(queue: Any) -> list[bytes]:
    browser = queue.browser()
    found = [browser.first().body]
    while True:
        try:
            found.append(browser.next().body)
        except MQError:
            return found


@pytest.mark.parametrize("structures", ["APP1", b"APP1", None, 5, 1.5, True])
def test_structures_that_are_no_collection_of_names_are_refused(
    facility: CouplingFacility, make_qm: MakeManager, structures: object
) -> None:
    """A single name used to be read letter by letter ("no structure 'A'"); ``None``
    or a number escaped as ``TypeError``."""
    refused_unchanged(
        facility,
        lambda: make_qm(2, structures=structures),
        InvalidArgument,
        2906,
        "structures",
        "collection of structure names",
    )


@pytest.mark.parametrize(
    ("option", "value", "words"),
    [
        ("recovery", "/tmp/recovery", "recovery must be a RecoverySettings or None, not str"),
        ("recovery", 1, "not int"),
        ("security", "ADMIN", "security must be a SecuritySettings or None, not str"),
        ("security", [], "not list"),
        ("clock", "now", "clock 'now' is not a Clock"),
        ("faults", 1, "faults 1 is not a function"),
    ],
)
def test_settings_of_the_wrong_kind_are_refused(
    facility: CouplingFacility, make_qm: MakeManager, option: str, value: object, words: str
) -> None:
    """Each used to be an ``AttributeError`` ('str' object has no attribute 'root') or,
    for ``faults``, a ``TypeError`` (not callable)."""
    refused_unchanged(facility, lambda: make_qm(2, **{option: value}), InvalidArgument, 2906, words)


@pytest.mark.parametrize("value", [None, "memory://", 5])
def test_a_facility_of_the_wrong_kind_is_refused(facility: CouplingFacility, value: object) -> None:
    def construct() -> QueueManager:
        return QueueManager(value, "QM2", 2, admin=ADMIN)  # type: ignore[arg-type]

    refused_unchanged(
        facility, construct, InvalidArgument, 2906, "facility must be a CouplingFacility"
    )


@pytest.mark.parametrize("name", [[1], bytearray(b"Q"), {"Q": 1}])
@pytest.mark.parametrize("call", ["open", "alter_queue", "queue_definition"])
def test_an_unhashable_queue_name_is_an_unknown_queue(
    facility: CouplingFacility, qm: QueueManager, kept: Any, call: str, name: object
) -> None:
    """It used to escape as ``TypeError: unhashable type``."""
    args: dict[str, Any] = {"max_depth": 10} if call == "alter_queue" else {}
    refused_unchanged(
        facility, lambda: getattr(qm, call)(name, **args), UnknownQueue, 2085, repr(name)
    )
    assert qm.queue_definition("Q").max_depth != 10


@pytest.mark.parametrize("structure", [1.5, 7, True, [APP], bytearray(b"APP1")])
def test_define_refuses_a_structure_that_is_no_name(
    facility: CouplingFacility, qm: QueueManager, structure: object
) -> None:
    """It used to escape as ``AttributeError: ... has no attribute 'startswith'``."""
    refused_unchanged(
        facility,
        lambda: qm.define_queue("NEW", structure=structure),  # type: ignore[arg-type]
        InvalidArgument,
        2906,
        "structure name must be a string",
    )
    assert "NEW" not in qm.queue_names()


@pytest.mark.parametrize("description", [None, 7, 10**30, math.nan, ["a"], b"bytes", "x" * 65])
def test_a_description_that_is_no_short_text_is_refused(
    facility: CouplingFacility, qm: QueueManager, kept: Any, description: object
) -> None:
    """Anything used to be stored (a list, ``None``); a huge int escaped as
    ``OverflowError`` from the encoder, and a long text needed a structure request to
    fail as ``UNEXPECTED_ERROR``."""
    qm.alter_queue("Q", description="before")
    words = ("description", "0..64 characters")
    refused_unchanged(
        facility,
        lambda: qm.define_queue("NEW", description=description),
        InvalidArgument,
        2906,
        *words,
    )
    refused_unchanged(
        facility,
        lambda: qm.alter_queue("Q", description=description),
        InvalidArgument,
        2906,
        *words,
    )
    assert "NEW" not in qm.queue_names()
    assert qm.queue_definition("Q").description == "before"
    qm.alter_queue("Q", description="x" * 64)  # MQ's longest DESCR


@pytest.mark.parametrize("value", ["no", 1, 0, None, [], 1.0])
@pytest.mark.parametrize("option", ["accept_truncated", "if_persistent"])
def test_a_get_flag_that_is_no_bool_is_refused(
    facility: CouplingFacility, qm: QueueManager, kept: Any, option: str, value: object
) -> None:
    """``accept_truncated="no"`` used to cut the message to ``max_length`` and lose the
    rest of it: any truthy value was taken for ``True``."""
    browser = kept.browser()
    browser.first()
    refused_unchanged(
        facility,
        lambda: kept.get(max_length=1, **{option: value}),
        InvalidArgument,
        2906,
        f"{option} must be True or False, not {value!r}",
    )
    if option == "accept_truncated":  # a browser's get takes it too
        refused_unchanged(
            facility,
            lambda: browser.get(max_length=1, accept_truncated=value),
            InvalidArgument,
            2906,
            f"{option} must be True or False",
        )
    assert _bodies(kept) == [b"kept"]


@pytest.mark.parametrize("element_size", ["256", None, [256], 256.5])
def test_structure_params_leaves_an_element_size_of_the_wrong_kind_to_the_structure_layer(
    element_size: object,
) -> None:
    """It used to escape as ``TypeError`` from the sizing sums before the check."""
    with pytest.raises(InvalidRequest) as caught:
        structure_params("QSG1", element_size=element_size)  # type: ignore[arg-type]
    assert f"element size {element_size!r}" in str(caught.value)
