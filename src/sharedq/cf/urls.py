"""Facility URLs as they may be shown, and credentials put into them.

A facility URL may carry a password (``redis://user:password@host:port/db``), so no
message shows one as given: :func:`redact_url` is how a URL is shown, in every error
of this layer.  :func:`url_with_credentials` puts a user name and password that came
from elsewhere (an environment variable, a file: ``sharedq walk --password-file``)
into a URL, so that they never need to be typed on a command line.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

from sharedq.cf.errors import CFReason, cf_error

#: What a password is shown as.
MASK = "***"
#: The URL schemes of the Redis backend.
REDIS_SCHEMES = ("redis", "rediss", "unix")
#: The part of a URL between ``scheme://`` and the path or query: [userinfo@]host[:port].
_AUTHORITY = re.compile(r"(?P<head>[^:/?#]*://)(?P<authority>[^/?#]*)(?P<tail>.*)", re.DOTALL)
#: A ``password=`` in a URL's query (redis-py takes one there too).
_QUERY_PASSWORD = re.compile(r"(?P<name>[?&]password=)(?P<value>[^&#]*)", re.IGNORECASE)


def redact_url(url: object) -> str:
    """``url`` as it may be shown in a message or a log: its password is ``***``.

    Works on malformed URLs too (they are the ones shown in errors), so it masks more
    rather than less: everything between ``scheme://`` and the last ``@``, whatever it
    holds (a password may hold a ``/``, ``?`` or ``#`` its writer did not escape; an
    ``@`` in a path or query masks the start of it too), and a ``password=`` in the
    query.  A user name without a password is masked as
    well: ``redis://secret@host`` is a common slip for ``redis://:secret@host``.
    """
    text = url if isinstance(url, str) else repr(url)
    head, sep, rest = text.partition("://")
    if sep:
        at = rest.rfind("@")
        if at >= 0:
            user, colon, _ = rest[:at].partition(":")
            shown = f"{user}:{MASK}" if colon and "/" not in user else MASK
            text = f"{head}://{shown}{rest[at:]}"
    return _QUERY_PASSWORD.sub(lambda m: m["name"] + MASK, text)


def scrub(text: str, url: str) -> str:
    """``text`` (a message about ``url``, such as a library's exception) with every
    secret ``url`` may hold masked: its password (or user information without a
    colon, as :func:`redact_url` masks it), a query ``password=``, each piece of them
    a parser may have split off, each also percent-decoded.  For text sharedq did not
    write, which may quote any of them."""
    secrets: set[str] = set()
    _, sep, rest = url.partition("://")
    at = rest.rfind("@") if sep else -1
    if at >= 0:  # the password, or the whole user information when it has no colon
        user, colon, password = rest[:at].partition(":")
        secrets.add(password if colon else user)
    secrets |= {m["value"] for m in _QUERY_PASSWORD.finditer(url)}
    # A URL parser splits a malformed one at / : @ ? #, and may quote any piece.
    secrets |= {piece for secret in secrets for piece in re.split(r"[/:@?#]", secret)}
    for secret in sorted(secrets | {unquote(x) for x in secrets}, key=len, reverse=True):
        if secret:
            text = text.replace(secret, MASK)
    return text


def has_credentials(url: str) -> bool:
    """Whether ``url`` carries a user name or password (anything :func:`redact_url` masks)."""
    return redact_url(url) != url


def url_with_credentials(
    url: str, *, username: str | None = None, password: str | None = None
) -> str:
    """``url`` with ``username`` and ``password`` in it (percent-encoded), for ``open_facility``.

    Only Redis URLs take credentials; a ``memory://`` URL is returned as it is.
    ``BAD_URL`` if the URL carries a user name or password of its own already: two
    sources of one secret would leave the reader guessing which is used.
    """
    if not isinstance(url, str):
        raise cf_error(CFReason.BAD_URL, f"a facility URL is a string, not {type(url).__name__}")
    if (username is None and password is None) or scheme_of(url) not in REDIS_SCHEMES:
        return url
    found = _AUTHORITY.fullmatch(url)
    if found is None:
        raise cf_error(CFReason.BAD_URL, f"bad facility URL {redact_url(url)}: no scheme://")
    if has_credentials(url):
        raise cf_error(
            CFReason.BAD_URL,
            f"{redact_url(url)} has credentials of its own; give them in the URL or "
            "separately, not both",
        )
    user = quote(username or "", safe="")
    secret = "" if password is None else ":" + quote(password, safe="")
    return f"{found['head']}{user}{secret}@{found['authority']}{found['tail']}"


def scheme_of(url: str) -> str:
    """The URL's scheme, in lower case (``memory`` for a bare ``memory``)."""
    return url.split(":", 1)[0].lower() if ":" in url else url.lower()
