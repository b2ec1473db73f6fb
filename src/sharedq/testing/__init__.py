"""Test seams: what tests need of sharedq, for users' tests and for sharedq's own.

A seam here is public and kept stable like the rest of the API, so that a user's tests
and sharedq's own tests (and its benchmarks) use the same thing rather than copies:

* :mod:`sharedq.testing.redis_server`: a private ``redis-server`` (or Redis Cluster)
  started on free ports, which a test may kill and start again.

Nothing else in sharedq imports this package: it sits beside the layers, on top of
them, and shipping code never depends on a test seam.
"""

from sharedq.mq.clock import ManualClock
from sharedq.seam.access import FaultHook, SimulatedFailure

__all__ = ["FaultHook", "ManualClock", "SimulatedFailure"]
