"""A private ``redis-server`` for tests: the test seam :mod:`sharedq.testing.redis_server`.

Kept so that tests go on importing ``tests.redis_server``; the code is in sharedq, where
the benchmarks (which never import ``tests``) use it too.
"""

from sharedq.testing.redis_server import (
    MISSING,
    START_TIMEOUT,
    RedisCluster,
    RedisServer,
    free_port,
    make_certificates,
    redis_server_binary,
)

__all__ = [
    "MISSING",
    "START_TIMEOUT",
    "RedisCluster",
    "RedisServer",
    "free_port",
    "make_certificates",
    "redis_server_binary",
]
