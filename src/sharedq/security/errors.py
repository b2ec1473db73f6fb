"""Reasons and exceptions of the security layer: 3600-3699.

Only what goes wrong with security itself has a reason here: a profiles file that
cannot be read, is not valid, or is not safe to trust, and a bad argument.  A request
that the profiles *refuse* is not an error of this layer: the server that asked says
so in its own terms (the queue manager raises MQ's ``NOT_AUTHORIZED``, 2035), because
its callers catch its errors, not ours.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import sharedq.errors
from sharedq.errors import SharedqError


class SecurityReason(IntEnum):
    """Why the security layer refused an argument or a profiles file.  Codes 3600-3699."""

    BAD_ARGUMENT = 3601
    #: The profiles file is not valid: not TOML, an unknown resource class or access
    #: level, a malformed profile name, a value of the wrong type.
    BAD_PROFILES = 3602
    #: The profiles file may have been changed by someone other than its owner: it is
    #: writable by its group or by others, or it is not a regular file.
    UNSAFE_PROFILES = 3603
    #: The profiles file cannot be opened or read (missing, no permission, I/O error).
    PROFILES_UNREADABLE = 3604


class SecurityError(SharedqError):
    """Any failure of the security layer."""

    reason: SecurityReason


class InvalidSecurityRequest(SecurityError, sharedq.errors.InvalidArgument):
    """A bad argument, or a profiles file that is not valid (``BAD_ARGUMENT``,
    ``BAD_PROFILES``): bad input, fixed by changing it.  A ``ValueError``."""


class ProfilesUnusable(SecurityError):
    """The profiles file cannot be read, or is not safe to trust (``UNSAFE_PROFILES``,
    ``PROFILES_UNREADABLE``): nothing is loaded, so nothing is allowed by it."""


_CLASS_OF: dict[SecurityReason, type[SecurityError]] = {
    SecurityReason.BAD_ARGUMENT: InvalidSecurityRequest,
    SecurityReason.BAD_PROFILES: InvalidSecurityRequest,
    SecurityReason.UNSAFE_PROFILES: ProfilesUnusable,
    SecurityReason.PROFILES_UNREADABLE: ProfilesUnusable,
}


def security_error(reason: SecurityReason, detail: str = "", **context: Any) -> SecurityError:
    """Build the exception of the right class for ``reason``."""
    return _CLASS_OF.get(reason, SecurityError)(reason, detail, **context)
