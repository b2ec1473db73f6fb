"""A structure that is not there is named the same way by every backend.

The memory backend said ``no structure 'X'`` and Redis ``no structure X`` for a
connect (both quoted it for a delete): a message matched on one backend did not match
on the other.  Each now quotes the name as ``repr`` does.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sharedq.cf import CouplingFacility, NoSuchStructure


@pytest.mark.parametrize(
    "request_",
    [lambda f: f.connect("NOSUCH", "U1"), lambda f: f.delete("NOSUCH")],
    ids=["connect", "delete"],
)
def test_a_missing_structure_is_named_quoted(
    facility: CouplingFacility, request_: Callable[[CouplingFacility], object]
) -> None:
    with pytest.raises(NoSuchStructure) as caught:
        request_(facility)
    assert caught.value.reason_name == "NO_SUCH_STRUCTURE"
    assert caught.value.detail == "no structure 'NOSUCH'", str(caught.value)
    assert not facility.exists("NOSUCH")
