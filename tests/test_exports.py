"""The public names of each package are importable and listed."""

from __future__ import annotations

import sharedq
import sharedq.cf


def test_cf_exports_what_it_lists() -> None:
    for name in sharedq.cf.__all__:
        assert hasattr(sharedq.cf, name), name
    for required in ("ListStructure", "CouplingFacility", "open_facility", "StructureParams"):
        assert required in sharedq.cf.__all__


def test_every_cf_error_is_a_sharedq_error() -> None:
    for name in sharedq.cf.__all__:
        obj = getattr(sharedq.cf, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, sharedq.SharedqError), name
