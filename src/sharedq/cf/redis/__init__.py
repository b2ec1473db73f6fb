"""The Redis backend: list structures shared by processes on any number of hosts.

Open it with :func:`sharedq.cf.open_facility` and a ``redis://``, ``rediss://`` or
``unix://`` URL, or with :meth:`RedisFacility.from_url`.  See ``docs/redis.md``.
"""

from sharedq.cf.redis.connection import RedisListStructure
from sharedq.cf.redis.facility import RedisFacility

__all__ = ["RedisFacility", "RedisListStructure"]
