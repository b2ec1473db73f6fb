"""sharedq: shared, recoverable, transactional message queues kept in list structures.

Layers, each using only those below it: ``sharedq.cf`` (list structures),
``sharedq.log`` (the recovery log), ``sharedq.mq`` (queue managers with units of
work), ``sharedq.pipeline`` (PySpark jobs over the log) and ``sharedq.cli``.
"""

from sharedq.errors import InvalidArgument, SharedqError

__version__ = "0.1.0"

__all__ = ["InvalidArgument", "SharedqError", "__version__"]
