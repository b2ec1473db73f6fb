"""Open a coupling facility by URL: ``memory`` (the default) or a Redis URL.

A Redis URL may carry a password; every message of this layer shows a URL through
:func:`sharedq.cf.urls.redact_url`, so none shows it.
"""

from __future__ import annotations

import importlib

from sharedq.cf.api import CouplingFacility
from sharedq.cf.errors import CFReason, cf_error
from sharedq.cf.urls import REDIS_SCHEMES, redact_url, scheme_of

#: The facility used when none is named: structures in this process's memory.
DEFAULT_FACILITY_URL = "memory://"


def open_facility(url: str = DEFAULT_FACILITY_URL) -> CouplingFacility:
    """A facility for ``url``.

    ``memory://`` (or ``memory``) gives a new, empty in-process facility: callers that
    want several users on the same structures must share the returned object.
    ``redis://``, ``rediss://`` and ``unix://`` URLs give the Redis backend, which
    needs the ``redis`` extra (``pip install 'sharedq[redis]'``).

    Any malformed URL is ``InvalidRequest`` with reason ``BAD_URL`` (a port that is no
    number or out of range, a broken IPv6 literal, a database that is no number or
    that the server does not have, an option out of its range, no URL at all), shown
    without its password.
    """
    if not isinstance(url, str):
        raise cf_error(
            CFReason.BAD_URL,
            f"a facility URL is a string such as memory:// or redis://host:6379/0, "
            f"not {type(url).__name__}",
        )
    scheme = scheme_of(url)
    if scheme == "memory":
        if url.lower() not in ("memory", "memory:", "memory://"):
            raise cf_error(
                CFReason.BAD_URL,
                f"{redact_url(url)}: memory:// takes no host, path or options",
            )
        from sharedq.cf.memory import MemoryFacility

        return MemoryFacility()
    if scheme in REDIS_SCHEMES:
        try:
            backend = importlib.import_module("sharedq.cf.redis")
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise cf_error(
                CFReason.BAD_URL,
                f"the Redis backend needs the redis extra: pip install 'sharedq[redis]' ({exc})",
            ) from None
        facility: CouplingFacility = backend.RedisFacility.from_url(url)
        return facility
    raise cf_error(
        CFReason.BAD_URL,
        f"unknown facility URL {redact_url(url)!r}: use memory://, redis://, rediss:// or unix://",
    )
