"""The list-structure errors themselves, with no backend involved.

What each backend raises for bad input is the conformance suite's
(``sharedq.testing.conformance.errors``, run by ``test_conformance.py``).
"""

from __future__ import annotations

import pickle

from sharedq.cf import CFReason
from sharedq.cf.errors import cf_error


def test_errors_survive_pickling() -> None:
    error = cf_error(CFReason.LIST_FULL, "list 3 is full", list_number=3)
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error)
    assert (again.reason, again.detail, again.context) == (
        CFReason.LIST_FULL,
        "list 3 is full",
        {"list_number": 3},
    )
