"""Random sequences of requests, each checked against a naive reference model.

The machine (``_machine``) drives one structure through the backend and the model in
``reference_model`` in lockstep: every request's outcome (the entry it returns, or
the reason it fails with) and, after every step, every list and count must agree.
Monitoring is checked too: each change's events must be exactly the transitions the
model's lists went through.  This check needs hypothesis (``pip install
sharedq[testing]``); it runs as many examples as hypothesis's current settings
profile says, without a deadline.
"""

from __future__ import annotations

from sharedq.cf import CouplingFacility
from sharedq.testing.conformance._registry import check


@check(slow=True)
def backend_matches_the_reference_model(facility: CouplingFacility) -> None:
    from hypothesis import HealthCheck, settings
    from hypothesis.stateful import run_state_machine_as_test

    from sharedq.testing.conformance._machine import StructureMachine

    machine = type("Machine", (StructureMachine,), {"facility": facility})
    # The current profile's settings (sharedq's tests load theirs), with no deadline:
    # a request to a remote store may take longer than hypothesis's default allows.
    run_state_machine_as_test(
        machine, settings=settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
    )
