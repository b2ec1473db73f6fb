"""Test seams: what tests need of sharedq, for users' tests and for sharedq's own.

A seam here is public and kept stable like the rest of the API, so that a user's tests
and sharedq's own tests (and its benchmarks) use the same thing rather than copies:

* :func:`check_list_structure` (:mod:`sharedq.testing.conformance`): the
  list-structure conformance suite, run against any backend of ``sharedq.cf``, as
  sharedq runs it against its own;
* :mod:`sharedq.testing.redis_server`: a private ``redis-server`` (or Redis Cluster)
  started on free ports, which a test may kill and start again;
* :mod:`sharedq.testing.waits`: wait until another thread sleeps in ``wait_events``
  (so that a change made then can only reach it as an event);
* :class:`ManualClock` (from :mod:`sharedq.clock`): a clock that moves only when told
  to, and whose ``sleep_s`` moves it on instead of blocking.

Nothing else in sharedq imports this package: it sits beside the layers, on top of
them, and shipping code never depends on a test seam.
"""

from sharedq.clock import ManualClock
from sharedq.seam.access import FaultHook, SimulatedFailure
from sharedq.testing.conformance import check_list_structure

__all__ = ["FaultHook", "ManualClock", "SimulatedFailure", "check_list_structure"]
