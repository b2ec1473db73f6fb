"""The default authorizer: profiles in a TOML file the operator owns.

RACF's definitions, written as TOML.  The seeds' example (redbook Figure 52)::

    RDEFINE FACILITY CQSSTR.STRMSGQ01 UACC(NONE)
    PERMIT CQSSTR.STRMSGQ01 CLASS(FACILITY) ID(IMSGRP) ACCESS(UPDATE)

is, in a profiles file::

    [groups]
    IMSGRP = ["ims1", "ims2"]

    [CQSSTR."CQSSTR.STRMSGQ01"]
    uacc = "NONE"
    permit = { IMSGRP = "UPDATE" }

A top-level table per resource class (``CQSSTR``, ``MQQUEUE``, ``MQADMIN``), a table
per profile in it, with ``uacc`` (universal access: what anyone has; ``NONE`` if
absent) and ``permit`` (user or group -> access); ``[groups]`` lists each group's
users.  A user listed in ``permit`` has exactly that access; otherwise the highest a
group of theirs is given; otherwise ``uacc``.

Profile names are matched as RACF's generic profiles: ``*`` matches any characters
within one qualifier (between dots), ``**`` (a whole qualifier) any number of
qualifiers, none included: ``QSG1.**`` covers ``QSG1`` and ``QSG1.A.B``.  The most
specific profile that covers a name decides: a profile without ``*`` first, then,
reading the names from the left, a literal character before a ``*`` before a ``**``
(``QSG1.ORDERS.*`` before ``QSG1.*.*``, before ``QSG1.**``).

The file is read once (``refresh()`` reads it again, RACF's ``SETROPTS RACLIST
REFRESH``) and refused, with nothing loaded, if its group or others may write it:
whoever can change it can grant themselves anything.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sharedq.security.errors import SecurityError, SecurityReason, security_error
from sharedq.security.model import RESOURCE_CLASSES, Access, Outcome, Verdict

#: The top-level table of group definitions.
GROUPS = "groups"
#: The keys a profile's table may have.
PROFILE_KEYS = frozenset({"uacc", "permit"})
#: Characters a profile name may hold besides ``*``: those of queue, manager and
#: structure names (``sharedq.names``), dots included; a queue name may start with a
#: dot, so a qualifier may be empty.
_NAME_CHARS = re.compile(r"[A-Za-z0-9._/%@#$-]+")
#: A user or group id.
_ID = re.compile(r"[A-Za-z0-9._@$#-]{1,64}")
#: How a character of a generic name ranks: a literal over ``*`` over ``**``.
_LITERAL, _STAR, _STARS = 2, 1, 0


@dataclass(frozen=True)
class Profile:
    """One profile: who has which access to the resources its name covers."""

    name: str
    uacc: Access
    permit: Mapping[str, Access]

    @property
    def generic(self) -> bool:
        return "*" in self.name

    def access_of(self, user: str, groups: Iterable[str]) -> Access:
        """RACF's rule: the user's own entry, else their groups' best, else ``uacc``."""
        own = self.permit.get(user)
        if own is not None:
            return own
        given = [self.permit[g] for g in groups if g in self.permit]
        return max(given) if given else self.uacc


@dataclass(frozen=True)
class _Generic:
    profile: Profile
    pattern: re.Pattern[str]
    rank: tuple[int, ...]


@dataclass(frozen=True)
class _Table:
    """A loaded file: per class, its discrete profiles and its generic ones (most
    specific first); each user's groups."""

    discrete: Mapping[str, Mapping[str, Profile]]
    generic: Mapping[str, tuple[_Generic, ...]]
    groups: Mapping[str, frozenset[str]]

    def covering(self, resource_class: str, resource: str) -> Profile | None:
        found = self.discrete.get(resource_class, {}).get(resource)
        if found is not None:
            return found
        for generic in self.generic.get(resource_class, ()):
            if generic.pattern.fullmatch(resource):
                return generic.profile
        return None


class FileProfiles:
    """Profiles read from a TOML file (see the module): the default :class:`Authorizer`.

    Raises ``BAD_PROFILES`` (an :class:`InvalidSecurityRequest`) for a file that is
    not valid, ``UNSAFE_PROFILES`` for one its group or others may write, and
    ``PROFILES_UNREADABLE`` for one that cannot be read (both
    :class:`ProfilesUnusable`), each naming the file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise security_error(SecurityReason.BAD_ARGUMENT, f"bad profiles path {path!r}")
        self.path = Path(os.fspath(path))
        self._table = _load(self.path)

    def __repr__(self) -> str:
        return f"<FileProfiles {self.path}>"

    def refresh(self) -> None:
        """Read the file again; on any error the profiles in force stay as they were.

        The new profiles replace the old in one assignment: a check running meanwhile
        answers from one or the other, whole.
        """
        self._table = _load(self.path)

    def profile_for(self, resource_class: str, resource: str) -> Profile | None:
        """The profile that covers ``resource`` (the most specific), if one does."""
        return self._table.covering(resource_class, resource)

    def groups_of(self, user: str) -> frozenset[str]:
        return self._table.groups.get(user, frozenset())

    def check(self, user: str, resource_class: str, resource: str, access: Access) -> Verdict:
        table = self._table  # one table for the whole answer, whatever a refresh does
        profile = table.covering(resource_class, resource)
        if profile is None:
            return Verdict(Outcome.NOT_PROTECTED)
        held = profile.access_of(user, table.groups.get(user, frozenset()))
        return Verdict(Outcome.ALLOWED if held >= access else Outcome.REFUSED, profile.name, held)


# -- reading the file --------------------------------------------------------------------


def _load(path: Path) -> _Table:
    """Read, check and index a profiles file (see :class:`FileProfiles` for errors)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise security_error(
            SecurityReason.PROFILES_UNREADABLE,
            f"cannot open the profiles file {path}: {exc.strerror or exc}",
            path=str(path),
        ) from None
    try:
        # Checked on the file opened, so that what is checked is what is read.
        _check_safe(os.fstat(fd), path)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as handle:
        try:
            document = tomllib.load(handle)
        except tomllib.TOMLDecodeError as exc:
            raise _bad(path, f"not valid TOML: {exc}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise security_error(
                SecurityReason.PROFILES_UNREADABLE,
                f"cannot read the profiles file {path}: {exc}",
                path=str(path),
            ) from None
    return _index(document, path)


def _check_safe(info: os.stat_result, path: Path) -> None:
    """Refuse a file that is not regular, or that its group or others may write."""
    if not stat.S_ISREG(info.st_mode):
        raise security_error(
            SecurityReason.UNSAFE_PROFILES,
            f"the profiles file {path} is not a regular file",
            path=str(path),
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        mode = stat.S_IMODE(info.st_mode)
        raise security_error(
            SecurityReason.UNSAFE_PROFILES,
            f"the profiles file {path} is writable by its group or by others (mode "
            f"{mode:04o}): anyone who can write it can grant themselves access; "
            f"make it writable by its owner only (chmod go-w {path})",
            path=str(path),
        )


def _index(document: dict[str, Any], path: Path) -> _Table:
    groups = _groups(document.get(GROUPS, {}), path)
    discrete: dict[str, dict[str, Profile]] = {}
    generic: dict[str, tuple[_Generic, ...]] = {}
    for class_name, profiles in document.items():
        if class_name == GROUPS:
            continue
        if class_name not in RESOURCE_CLASSES:
            known = ", ".join(sorted(RESOURCE_CLASSES))
            raise _bad(path, f"[{class_name}]: unknown resource class (one of {known})")
        if not isinstance(profiles, dict):
            raise _bad(path, f"{class_name}: a table of profiles, not {_kind(profiles)}")
        found = [_profile(class_name, name, value, path) for name, value in profiles.items()]
        discrete[class_name] = {p.name: p for p in found if not p.generic}
        generic[class_name] = tuple(
            sorted(
                (_Generic(p, _pattern(p.name), _rank(p.name)) for p in found if p.generic),
                key=lambda g: (g.rank, g.profile.name),
                reverse=True,
            )
        )
    return _Table(discrete, generic, groups)


def _groups(value: object, path: Path) -> dict[str, frozenset[str]]:
    if not isinstance(value, dict):
        raise _bad(path, f"[{GROUPS}]: a table of group = [users], not {_kind(value)}")
    of_user: dict[str, set[str]] = {}
    for group, members in value.items():
        where = f"[{GROUPS}] {group}"
        _check_id(group, where, path)
        if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
            raise _bad(path, f"{where}: a list of user names, not {_kind(members)}")
        for member in members:
            _check_id(member, f"{where}: member", path)
            of_user.setdefault(member, set()).add(group)
    clash = sorted(set(of_user) & set(value))
    if clash:
        raise _bad(path, f"[{GROUPS}]: {clash[0]} is both a group and a member of one")
    return {user: frozenset(names) for user, names in of_user.items()}


def _profile(class_name: str, name: str, value: object, path: Path) -> Profile:
    where = f'[{class_name}."{name}"]'
    _check_name(name, where, path)
    if not isinstance(value, dict):
        raise _bad(path, f"{where}: a table with uacc and permit, not {_kind(value)}")
    unknown = sorted(set(value) - PROFILE_KEYS)
    if unknown:
        raise _bad(path, f"{where}: unknown key {unknown[0]!r} (a profile has uacc and permit)")
    uacc = _access(value.get("uacc", "NONE"), f"{where} uacc", path)
    permits = value.get("permit", {})
    if not isinstance(permits, dict):
        raise _bad(path, f"{where} permit: a table of user or group = access, not {_kind(permits)}")
    permit = {}
    for who, level in permits.items():
        _check_id(who, f"{where} permit", path)
        permit[who] = _access(level, f"{where} permit.{who}", path)
    return Profile(name, uacc, permit)


def _access(value: object, where: str, path: Path) -> Access:
    try:
        return Access.named(value)
    except SecurityError as exc:
        raise _bad(path, f"{where}: {exc.detail}") from None


def _check_id(value: object, where: str, path: Path) -> None:
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise _bad(path, f"{where}: bad user or group name {value!r}")


def _check_name(name: str, where: str, path: Path) -> None:
    if not name:
        raise _bad(path, f"{where}: an empty profile name")
    for qualifier in name.split("."):
        plain = qualifier.replace("*", "")
        if plain and not _NAME_CHARS.fullmatch(plain):
            raise _bad(path, f"{where}: bad character in profile name")
        if "**" in qualifier and qualifier != "**":
            raise _bad(path, f"{where}: ** must be a whole qualifier (A.** or A.**.B)")
    if "**.**" in name:
        raise _bad(path, f"{where}: ** twice in a row")


def _pattern(name: str) -> re.Pattern[str]:
    """The regular expression of a generic profile name (see the module)."""
    qualifiers = name.split(".")
    if qualifiers == ["**"]:
        return re.compile(".*", re.S)
    out = ""
    last = len(qualifiers) - 1
    for n, qualifier in enumerate(qualifiers):
        if qualifier == "**":
            # Zero or more whole qualifiers, with the dots around them.
            out += r"(?:.*\.)?" if n == 0 else r"(?:\..*)?" if n == last else r"\.(?:.*\.)?"
            continue
        if n > 0 and qualifiers[n - 1] != "**":
            out += r"\."
        out += "[^.]*".join(re.escape(part) for part in qualifier.split("*"))
    return re.compile(out, re.S)


def _rank(name: str) -> tuple[int, ...]:
    """How specific a generic name is, compared from the left (greater: more)."""
    ranks: list[int] = []
    n = 0
    while n < len(name):
        if name.startswith("**", n):
            ranks.append(_STARS)
            n += 2
        else:
            ranks.append(_STAR if name[n] == "*" else _LITERAL)
            n += 1
    return tuple(ranks)


def _kind(value: object) -> str:
    return f"{type(value).__name__} {value!r}"[:80]


def _bad(path: Path, detail: str) -> SecurityError:
    return security_error(
        SecurityReason.BAD_PROFILES, f"profiles file {path}: {detail}", path=str(path)
    )
