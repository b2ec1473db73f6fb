"""A server's security settings: whose profiles, and which user it acts for.

Given to a server (``QueueManager(..., security=SecuritySettings(...))``); without
them a server checks nothing (:data:`~sharedq.security.ALLOW_ALL`, "security off").
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass, field

from sharedq.security.errors import SecurityReason, security_error
from sharedq.security.model import ALLOW_ALL, Authorizer, Security
from sharedq.security.profiles import FileProfiles


def os_user() -> str:
    """The name of the process's effective user (its uid when it has no name).

    From the password database, not ``$USER`` or ``$LOGNAME``, which any caller sets.
    """
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@dataclass(frozen=True)
class SecuritySettings:
    """Who a server is, for its authorization checks, and who says what it may do.

    Attributes:
        profiles: the path of a profiles file (read at once into a
            :class:`~sharedq.security.FileProfiles`: its errors are raised here), or
            any :class:`~sharedq.security.Authorizer`.
        user: the user the server acts for; by default the process's OS user
            (:func:`os_user`).
        qsg: the name a queue manager's ``MQQUEUE`` and ``MQADMIN`` profiles start
            with for the whole group (MQ's queue-sharing group name); by default the
            name of the group's administrative structure.  Not used by ``CQSSTR``.
    """

    profiles: Authorizer | str | os.PathLike[str]
    user: str | None = None
    qsg: str | None = None
    #: The authorizer ``profiles`` gives (the file, loaded).
    authorizer: Authorizer = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        profiles = self.profiles
        if isinstance(profiles, (str, os.PathLike)):
            authorizer: Authorizer = FileProfiles(profiles)
        elif isinstance(profiles, Authorizer):
            authorizer = profiles
        else:
            raise security_error(
                SecurityReason.BAD_ARGUMENT,
                f"profiles {profiles!r}: a profiles file's path or an Authorizer",
            )
        object.__setattr__(self, "authorizer", authorizer)
        if self.user is None:
            object.__setattr__(self, "user", os_user())
        elif not isinstance(self.user, str) or not self.user:
            raise security_error(SecurityReason.BAD_ARGUMENT, f"bad user name {self.user!r}")
        if self.qsg is not None and (not isinstance(self.qsg, str) or not self.qsg):
            raise security_error(SecurityReason.BAD_ARGUMENT, f"bad qsg name {self.qsg!r}")

    def security(self) -> Security:
        """The server's checker: the authorizer and the user."""
        assert self.user is not None  # (set by __post_init__)
        return Security(self.authorizer, self.user)


#: The checker of a server given no security settings: nothing is checked.
SECURITY_OFF = Security(ALLOW_ALL, "-")
