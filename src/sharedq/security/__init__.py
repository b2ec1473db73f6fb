"""Who may do what: the authorization hook every queue server asks before it acts.

In the spirit of the seeds' RACF profiles (``CQSSTR.<structure>``, redbook §2.12,
§5.15) and IBM MQ's queue and admin profiles: resource classes (``CQSSTR``,
``MQQUEUE``, ``MQADMIN``), access levels (``READ`` < ``UPDATE`` < ``CONTROL`` <
``ALTER``), an :class:`Authorizer` that answers "allowed", "refused" or "not
protected", the default one a TOML file the operator owns (:class:`FileProfiles`),
and :data:`ALLOW_ALL`, security off.  The queue manager (``sharedq.mq``) uses it now,
the Common Queue Server will for ``CQSSTR``.  See ``docs/security.md``.

The hook is enforced by the server process configured with it: a program that holds
the Redis credentials and runs its own server is not stopped by it.  Between users
sharing one Redis, the boundary is Redis's ACL (``docs/redis.md``).

::

    from sharedq.security import Access, SecuritySettings

    settings = SecuritySettings(profiles="/etc/sharedq/profiles.toml", user="alice")
"""

from sharedq.security.errors import (
    InvalidSecurityRequest,
    ProfilesUnusable,
    SecurityError,
    SecurityReason,
    security_error,
)
from sharedq.security.model import (
    ALLOW_ALL,
    CQSSTR,
    MQADMIN,
    MQQUEUE,
    RESOURCE_CLASSES,
    Access,
    AllowAll,
    Authorizer,
    Decision,
    Outcome,
    ResourceClass,
    Security,
    Verdict,
)
from sharedq.security.profiles import FileProfiles, Profile
from sharedq.security.settings import SECURITY_OFF, SecuritySettings, os_user

__all__ = [
    "ALLOW_ALL",
    "CQSSTR",
    "MQADMIN",
    "MQQUEUE",
    "RESOURCE_CLASSES",
    "SECURITY_OFF",
    "Access",
    "AllowAll",
    "Authorizer",
    "Decision",
    "FileProfiles",
    "InvalidSecurityRequest",
    "Outcome",
    "Profile",
    "ProfilesUnusable",
    "ResourceClass",
    "Security",
    "SecurityError",
    "SecurityReason",
    "SecuritySettings",
    "Verdict",
    "os_user",
    "security_error",
]
