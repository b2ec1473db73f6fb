"""The ``sharedq`` command's exit codes, named so that scripts can branch on them.

Every command (and the ``spark-submit`` entry) exits with one of these.
"""

#: Success.
RET_OK = 0
#: A sharedq request failed; the message names the reason.
RET_FAILED = 1
#: The command line itself was wrong (click's own code).
RET_USAGE = 2

__all__ = ["RET_FAILED", "RET_OK", "RET_USAGE"]
