"""Who may do what: access levels, resource classes, and the authorizer a server asks.

Modelled on RACF as the seeds use it (redbook §2.12, §5.15): a *resource class* holds
*profiles*; a profile names a resource (or, generically, many), and says which access
each user or group has to it, and what everyone else has (its universal access).  A
server asks, before it acts, whether its user has at least the access the action
needs to the resource; RACF answers "allowed", "refused" or "not protected" (no
profile covers the resource, return code 4), and the server decides what "not
protected" means: CQS lets a client connect to an unprotected structure (§5.15), MQ
refuses a queue no profile covers once queue security is on.  So the answer here has
three values too, and each resource class carries its rule for the third.

An :class:`Authorizer` gives the answer; :class:`~sharedq.security.FileProfiles` is the
default one (a TOML file the operator owns), and :data:`ALLOW_ALL` is security off.
A server holds a :class:`Security`: its authorizer and the user it acts for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Final, Protocol, runtime_checkable

from sharedq.security.errors import SecurityReason, security_error


class Access(IntEnum):
    """RACF's access levels; each includes those below it."""

    NONE = 0
    READ = 1
    UPDATE = 2
    CONTROL = 3
    ALTER = 4

    @classmethod
    def named(cls, text: object) -> Access:
        """The level named ``text`` (any case); ``BAD_ARGUMENT`` if there is none."""
        if isinstance(text, str) and text.upper() in cls.__members__:
            return cls[text.upper()]
        raise security_error(
            SecurityReason.BAD_ARGUMENT,
            f"unknown access level {text!r} (one of {', '.join(cls.__members__)})",
        )


@dataclass(frozen=True)
class ResourceClass:
    """A class of resources: its name, and whether a resource no profile covers may
    be used (RACF leaves that to the resource manager)."""

    name: str
    unprotected_allowed: bool
    #: What its profiles protect, for messages and docs.
    protects: str


#: A server connecting to a structure (UPDATE), copying or deleting it (ALTER); the
#: profile is ``CQSSTR.<structure>``.  No profile: the structure is not protected
#: (the seeds: "if a profile is not defined ... the structure is not protected").
CQSSTR: Final = ResourceClass("CQSSTR", True, "list structures")
#: Shared queues: browse (READ), put and get (UPDATE), define and alter (ALTER); the
#: profile is ``<qmgr>.<queue>`` or ``<qsg>.<queue>``.  No profile: refused, as MQ
#: refuses a queue no profile covers when queue security is on.
MQQUEUE: Final = ResourceClass("MQQUEUE", False, "shared queues")
#: A queue manager's operator actions (declare a peer failed, resolve in-doubt units,
#: the cold queue); the profile is ``<qmgr or qsg>.<ACTION>[.<name>]``.  No profile:
#: refused.
MQADMIN: Final = ResourceClass("MQADMIN", False, "queue-manager administration")

#: Every resource class a profiles file may hold, by name.
RESOURCE_CLASSES: Final[Mapping[str, ResourceClass]] = {
    c.name: c for c in (CQSSTR, MQQUEUE, MQADMIN)
}


class Outcome(Enum):
    """An authorizer's answer: RACF's return codes 0, 8 and 4."""

    ALLOWED = "allowed"
    REFUSED = "refused"
    #: No profile covers the resource; the resource class decides (its
    #: ``unprotected_allowed``).
    NOT_PROTECTED = "not protected"


@dataclass(frozen=True)
class Verdict:
    """An authorizer's answer, with what decided it (for the message of a refusal)."""

    outcome: Outcome
    #: The profile that decided (a generic one, say ``QSG1.**``); ``None`` if none did.
    profile: str | None = None
    #: The access the user holds under that profile.
    held: Access = Access.NONE


@runtime_checkable
class Authorizer(Protocol):
    """Decides whether ``user`` has at least ``access`` to ``resource`` of
    ``resource_class`` (a class name, ``"CQSSTR"``).  Must not raise for a refusal:
    refusing is the server's to report."""

    def check(self, user: str, resource_class: str, resource: str, access: Access) -> Verdict:
        """The verdict for one resource name (a profile name as RACF would check it)."""
        ...


class AllowAll:
    """Security off: everything is allowed (MQ's ``NOSEC``).  What a server uses when
    it is given no security settings."""

    _ALLOWED: Final = Verdict(Outcome.ALLOWED)

    def check(self, user: str, resource_class: str, resource: str, access: Access) -> Verdict:
        return self._ALLOWED

    def __repr__(self) -> str:
        return "ALLOW_ALL"


#: Security off (see :class:`AllowAll`).
ALLOW_ALL: Final = AllowAll()


@dataclass(frozen=True)
class Decision:
    """What a server's check came to, and the words to refuse with."""

    allowed: bool
    user: str
    resource_class: ResourceClass
    #: The resource names checked, in order (a queue manager's, then its group's).
    resources: tuple[str, ...]
    access: Access
    #: The verdict that decided; ``NOT_PROTECTED`` when no profile covered any name.
    verdict: Verdict
    #: The resource name the verdict is about (the last one checked when none covered).
    resource: str

    def explain(self) -> str:
        """Why, in a sentence naming the user, the class, the profile and the access."""
        needs = (
            f"user {self.user} needs {self.access.name} access to "
            f"{self.resource_class.name} {self.resource}"
        )
        verdict = self.verdict
        if verdict.outcome is Outcome.NOT_PROTECTED:
            names = " or ".join(self.resources)
            if self.allowed:
                return f"{needs}: no profile protects {names}"
            return (
                f"user {self.user} needs {self.access.name} access to "
                f"{self.resource_class.name} {names}, and no profile protects "
                f"{'it' if len(self.resources) == 1 else 'them'} "
                f"({self.resource_class.name} resources are refused unless a profile permits)"
            )
        return f"{needs}; profile {verdict.profile} gives {self.user} {verdict.held.name}"


class Security:
    """What a server checks with: an authorizer and the user the server acts for.

    One per server; the server asks before it acts and refuses in its own terms.
    """

    def __init__(self, authorizer: Authorizer, user: str) -> None:
        if not isinstance(authorizer, Authorizer):
            raise security_error(
                SecurityReason.BAD_ARGUMENT, f"{authorizer!r} has no check(user, class, ...)"
            )
        if not isinstance(user, str) or not user:
            raise security_error(SecurityReason.BAD_ARGUMENT, f"bad user name {user!r}")
        self.authorizer = authorizer
        self.user = user

    def __repr__(self) -> str:
        return f"<Security user={self.user} {self.authorizer!r}>"

    @property
    def off(self) -> bool:
        """Whether nothing is checked (``ALLOW_ALL``): servers skip their checks then."""
        return self.authorizer is ALLOW_ALL

    def decide(
        self, resource_class: ResourceClass, resources: Sequence[str], access: Access
    ) -> Decision:
        """Check ``resources`` in order; the first that a profile covers decides (MQ
        checks a queue manager's profile before its group's); if none is covered, the
        class's rule for unprotected resources does."""
        names = tuple(resources)
        if not names:
            raise security_error(SecurityReason.BAD_ARGUMENT, "no resource to check")
        for name in names:
            verdict = self.authorizer.check(self.user, resource_class.name, name, access)
            if verdict.outcome is not Outcome.NOT_PROTECTED:
                allowed = verdict.outcome is Outcome.ALLOWED
                return Decision(allowed, self.user, resource_class, names, access, verdict, name)
        return Decision(
            resource_class.unprotected_allowed,
            self.user,
            resource_class,
            names,
            access,
            Verdict(Outcome.NOT_PROTECTED),
            names[-1],
        )
