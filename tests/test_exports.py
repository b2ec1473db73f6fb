"""The public names of each package are importable and listed."""

from __future__ import annotations

import sharedq
import sharedq.cf
import sharedq.testing
import sharedq.testing.conformance


def test_cf_exports_what_it_lists() -> None:
    for name in sharedq.cf.__all__:
        assert hasattr(sharedq.cf, name), name
    for required in ("ListStructure", "CouplingFacility", "open_facility", "StructureParams"):
        assert required in sharedq.cf.__all__


def test_the_root_and_the_test_seams_export_what_they_list() -> None:
    for package in (sharedq, sharedq.testing, sharedq.testing.conformance):
        for name in package.__all__:
            assert hasattr(package, name), (package.__name__, name)
    assert {"SharedqError", "InvalidArgument"} <= set(sharedq.__all__)
    assert "check_list_structure" in sharedq.testing.__all__
    for required in ("CHECKS", "Check", "run_check", "check_list_structure", "ConformanceFailure"):
        assert required in sharedq.testing.conformance.__all__
